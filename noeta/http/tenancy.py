"""Who a request acts as, what it may do, and which tasks it may see (docs/security.md).

The request guard (:mod:`noeta.security.http_guard`) leaves the request's :class:`Principal` (its
key's name, tenant and roles) in ``request.state``. An endpoint declares the role it needs
(``Annotated[Principal, Depends(needs("approve"))]``): a key without it gets 403 ``Forbidden``.
A task belongs to the tenant of the key that started it (NoetaTenant); for any other tenant it
answers 404 exactly as a task that does not exist (:func:`own_task`), before anything is done.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request

from noeta.client.client import AsyncClient
from noeta.client.connection import Connection
from noeta.errors import ConfigurationError, TaskAlreadyExistsError, TaskNotFoundError
from noeta.http.errors import HTTPError
from noeta.protocols.identity import key_identity
from noeta.protocols.names import DEFAULT_TENANT, SA_TENANT
from noeta.security.api_keys import ANONYMOUS, Principal, Role, read_key_file
from noeta.security.http_guard import PRINCIPAL_STATE, GuardConfig


def principal(request: Request) -> Principal:
    """Who the request acts as (every role and the tenant ``default`` on a server without keys)."""
    found = getattr(request.state, PRINCIPAL_STATE, ANONYMOUS)
    return found if isinstance(found, Principal) else ANONYMOUS


def needs(role: Role) -> Callable[[Request], Principal]:
    """A dependency: the request's Principal, or 403 Forbidden when its key lacks ``role``."""

    def check(request: Request) -> Principal:
        who = principal(request)
        if not who.may(role):
            raise HTTPError(403, "Forbidden", f"the API key {who.name!r} does not have the {role!r} role")
        return who

    check.__name__ = f"needs_{role}"
    return check


Reader = Annotated[Principal, Depends(needs("read"))]
Starter = Annotated[Principal, Depends(needs("start"))]
Approver = Annotated[Principal, Depends(needs("approve"))]
Injector = Annotated[Principal, Depends(needs("inject"))]


def identity(who: Principal) -> str:
    """The caller identity Temporal records for what ``who`` does (:mod:`noeta.protocols.identity`)."""
    return key_identity(who.name)


async def own_task(client: AsyncClient, who: Principal, task_id: str) -> None:
    """TaskNotFoundError, worded as for a task that does not exist, unless ``task_id`` is a task of
    ``who``'s tenant."""
    if await Connection(client.temporal).tenant_of(task_id) != who.tenant:
        raise TaskNotFoundError(f"no task {task_id!r}")


async def started_here(client: AsyncClient, who: Principal, task_id: str) -> None:
    """After a start with a caller-chosen id: TaskAlreadyExistsError when that id names another
    tenant's task (a start with the same input returns the existing task; it must not hand another
    tenant's task over). Task ids are one namespace for every tenant."""
    if await Connection(client.temporal).tenant_of(task_id) != who.tenant:
        raise TaskAlreadyExistsError(f"a task with id {task_id!r} exists; choose another task_id", task_id)


async def check_cluster(client: AsyncClient, guard: GuardConfig) -> None:
    """ConfigurationError when a key names a tenant other than ``default`` and the cluster lacks
    the NoetaTenant search attribute (its tasks could not be told apart): run ``noeta setup``."""
    keys = guard.fixed_keys() + (read_key_file(guard.keys_file) if guard.keys_file is not None else ())
    if any(k.tenant != DEFAULT_TENANT for k in keys) and not await client.has_attribute(SA_TENANT):
        raise ConfigurationError(
            f"API keys name tenants, and the cluster lacks the {SA_TENANT} search attribute: run `noeta setup`"
        )
