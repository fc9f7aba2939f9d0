"""``GET /agents``: the agent catalog the server starts agents from (NOETA_AGENTS), each agent with
its versions, the one new tasks start on and a ramp; what the console's start form offers. Empty
when the server has no catalog."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import Field

from noeta.http import models
from noeta.http.bodies import BoundedRoute
from noeta.http.openapi import AUTHENTICATED, answers
from noeta.http.routes import State
from noeta.http.tenancy import Reader

agents_router = APIRouter(dependencies=AUTHENTICATED, route_class=BoundedRoute)


class AgentOut(models.Response):
    """One agent of the catalog."""
    name: str
    versions: list[int]
    current: int = Field(description="the version new tasks started by name run (outside a ramp)")
    ramping: int | None = Field(default=None, description="the version a ramp sends a share of new tasks to")
    ramp_percent: float | None = Field(default=None, description="that share, in percent")


@agents_router.get("/agents", tags=["tasks"], summary="The agents tasks can be started as", responses=answers(401))
async def list_agents(state: State, who: Reader) -> list[AgentOut]:
    """Each agent of the server's catalog (NOETA_AGENTS) with its versions; none without one."""
    catalog = state.client.agents
    if catalog is None:
        return []
    found = []
    for name, versions in catalog.names().items():
        ramp = catalog.ramping(name)
        found.append(AgentOut(name=name, versions=versions, current=catalog.current(name),
                              ramping=ramp[0] if ramp else None, ramp_percent=ramp[1] if ramp else None))
    return found
