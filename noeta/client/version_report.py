"""Which versions still have running tasks (``noeta versions``): each agent version of a catalog
and each Worker Deployment version of the namespace, with its running tasks counted from
visibility and whether it may be retired (docs/versions.md).

A version may be retired when no task runs on it and nothing routes new tasks to it (it is neither
current nor ramping). Counts come from the visibility store, which lags a task's start or end by a
moment: look again before retiring a version that has just drained.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.api.workflowservice.v1 import DescribeWorkerDeploymentRequest, ListWorkerDeploymentsRequest
from temporalio.client import Client as TemporalClient
from temporalio.service import RPCError, RPCStatusCode

from noeta.client.agents import Agents
from noeta.client.visibility import WORKER_VERSION_ATTRIBUTE
from noeta.protocols.names import AGENT_METADATA_KEY, SA_METADATA, WORKFLOW_TYPES_QUERY

_RUNNING = "ExecutionStatus = 'Running'"


@dataclass(frozen=True)
class VersionUse:
    """One version and its running tasks."""

    kind: str
    """``agent`` (a catalog's ``name@version``) or ``worker`` (a deployment's ``deployment:build``)."""
    version: str
    running: int
    """Running tasks on it (of Noeta's workflow types), from visibility."""
    routing: str = ""
    """``current``, ``ramping N%`` or empty: whether new tasks start on it."""

    @property
    def retirable(self) -> bool:
        """No task runs on it and no new task is routed to it."""
        return self.running == 0 and not self.routing


async def _running(temporal: TemporalClient, clause: str) -> int:
    return (await temporal.count_workflows(f"{WORKFLOW_TYPES_QUERY} AND {clause} AND {_RUNNING}")).count


async def agent_versions(temporal: TemporalClient, agents: Agents) -> list[VersionUse]:
    """Every version of every agent of ``agents``, with its running tasks and its routing."""
    found = []
    for name, versions in agents.names().items():
        ramp = agents.ramping(name)
        for version in versions:
            ref = f"{name}@{version}"
            routing = "current" if agents.current(name) == version else ""
            if ramp is not None and ramp[0] == version:
                routing = f"ramping {ramp[1]:g}%"
            running = await _running(temporal, f"{SA_METADATA} = '{AGENT_METADATA_KEY}={ref}'")
            found.append(VersionUse("agent", ref, running, routing))
    return found


async def worker_versions(temporal: TemporalClient) -> list[VersionUse]:
    """Every version of every Worker Deployment of the namespace, with its running tasks (pinned
    to it) and its routing; none when the cluster has no deployments."""
    service, namespace = temporal.workflow_service, temporal.namespace
    found: list[VersionUse] = []
    token = b""
    while True:
        try:
            page = await service.list_worker_deployments(
                ListWorkerDeploymentsRequest(namespace=namespace, next_page_token=token)
            )
        except RPCError as err:
            if err.status == RPCStatusCode.UNIMPLEMENTED:  # a cluster older than Worker Deployments
                return found
            raise
        for summary in page.worker_deployments:
            described = await service.describe_worker_deployment(
                DescribeWorkerDeploymentRequest(namespace=namespace, deployment_name=summary.name)
            )
            info = described.worker_deployment_info
            routing = info.routing_config
            for item in info.version_summaries:
                build = item.deployment_version.build_id
                version = f"{summary.name}:{build}"
                state = ""
                if routing.current_deployment_version.build_id == build:
                    state = "current"
                elif routing.ramping_deployment_version.build_id == build and routing.ramping_version_percentage > 0:
                    state = f"ramping {routing.ramping_version_percentage:g}%"
                running = await _running(temporal, f"{WORKER_VERSION_ATTRIBUTE} = '{version}'")
                found.append(VersionUse("worker", version, running, state))
        token = page.next_page_token
        if not token:
            return found


__all__ = ["VersionUse", "agent_versions", "worker_versions"]
