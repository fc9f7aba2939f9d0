"""Metrics: Temporal's SDK metrics plus Noeta's own, through one Temporal ``Runtime``.

Noeta records its instruments on Temporal's metric meter (``activity.metric_meter()``,
``workflow.metric_meter()``), so they leave the process the same way as the SDK's: on the
worker's Prometheus endpoint (``noeta worker --metrics-port``) or pushed over OTLP when
``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set. Without either
the meter is a no-op. Names (Prometheus adds ``_total`` to counters):

======================================  =======================================================
``noeta_model_calls``                   model-call attempts by provider, model, outcome
``noeta_model_tokens``                  tokens by provider, model and kind (input, output...)
``noeta_cost_usd_total``                cost in US dollars by provider and model (a float gauge:
                                        the process's running total, see :func:`add_cost`)
``noeta_model_call_duration``           seconds per model-call attempt (histogram)
``noeta_tool_calls``                    tool-call attempts by tool and outcome
``noeta_tool_call_duration``            seconds per tool-call attempt, by tool (histogram)
``noeta_retries``                       attempts after the first, by kind (model, tool)
``noeta_approvals_requested``           actions a guard sent to a human
``noeta_approvals_decided``             approvals answered, by decision
``noeta_approval_wait``                 seconds an approval waited, by decision (histogram)
``noeta_tasks_finished``                task runs that ended, by status
``noeta_task_score``                    online scores of ended tasks (0..1), by scorer and passed
                                        (histogram: its count is the tasks scored)
``noeta_tasks_open``                    open tasks by NoetaStatus (running, idle,
                                        awaiting_approval...), polled from visibility
======================================  =======================================================
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import temporalio.client
from temporalio import workflow
from temporalio.client import Client as TemporalClient
from temporalio.common import MetricMeter
from temporalio.exceptions import CancelledError, FailureError, TemporalError
from temporalio.runtime import OpenTelemetryConfig, PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import (
    ExecuteWorkflowInput,
    HandleUpdateInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from noeta.protocols.names import METRIC_APPROVAL_WAIT, UPDATE_APPROVE, UPDATE_REFUSE
from noeta.protocols.statuses import OPEN_TASK_STATUSES, ApprovalDecision, RunEnd, TaskStatus, ended_as
from noeta.protocols.task import TaskResult
from noeta.telemetry.settings import OtelSettings

logger = logging.getLogger(__name__)

DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
MODEL_CALLS = "noeta_model_calls"
TASK_SCORE = "noeta_task_score"
MODEL_TOKENS = "noeta_model_tokens"
MODEL_DURATION = "noeta_model_call_duration"
TOOL_CALLS = "noeta_tool_calls"
TOOL_DURATION = "noeta_tool_call_duration"
RETRIES = "noeta_retries"
APPROVALS_REQUESTED = "noeta_approvals_requested"
APPROVALS_DECIDED = "noeta_approvals_decided"
TASKS_FINISHED = "noeta_tasks_finished"
TASKS_OPEN = "noeta_tasks_open"
COST = "noeta_cost_usd_total"
APPROVAL_WAIT = METRIC_APPROVAL_WAIT
APPROVAL_WAIT_BUCKETS = (1.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 4 * 3600.0, 24 * 3600.0)
#: NoetaStatus values of tasks that are still open.
OPEN_STATUSES = OPEN_TASK_STATUSES


def telemetry_config(metrics_address: str | None, env: Mapping[str, str] | None = None) -> TelemetryConfig | None:
    """Prometheus on ``metrics_address`` (``host:port``), else OTLP metrics when the ``OTEL_*``
    variables name an endpoint, else None (no metrics)."""
    otel = OtelSettings.from_env(env)
    # The configured service names the metrics, not the SDK core ("temporal-core-sdk" otherwise):
    # a label on each Prometheus sample, the resource's service.name over OTLP.
    if metrics_address:
        return TelemetryConfig(
            global_tags={"service_name": otel.otel_service_name},
            attach_service_name=False,
            metrics=PrometheusConfig(
                bind_address=metrics_address,
                counters_total_suffix=True,
                durations_as_seconds=True,
                histogram_bucket_overrides={
                    MODEL_DURATION: DURATION_BUCKETS, TOOL_DURATION: DURATION_BUCKETS, APPROVAL_WAIT: APPROVAL_WAIT_BUCKETS
                },
            )
        )
    endpoint = otel.otel_exporter_otlp_metrics_endpoint or otel.otel_exporter_otlp_endpoint
    if endpoint and otel.otel_metrics_exporter != "none":
        protocol = otel.otel_exporter_otlp_metrics_protocol or otel.otel_exporter_otlp_protocol or "grpc"
        return TelemetryConfig(
            global_tags={"service.name": otel.otel_service_name},
            attach_service_name=False,
            metrics=OpenTelemetryConfig(
                url=endpoint,
                headers=_otel_headers(otel.otel_exporter_otlp_metrics_headers or otel.otel_exporter_otlp_headers),
                metric_periodicity=timedelta(milliseconds=otel.otel_metric_export_interval),
                durations_as_seconds=True,
                http=protocol.startswith("http"),
            )
        )
    return None


def _otel_headers(raw: str | None) -> Mapping[str, str] | None:
    if not raw:
        return None
    pairs = (item.partition("=") for item in raw.split(","))
    return {k.strip(): v.strip() for k, _, v in pairs if k.strip()}


def runtime_for(metrics_address: str | None = None) -> Runtime | None:
    """A Temporal Runtime exporting metrics as :func:`telemetry_config` says, or None (the default
    runtime, no metrics). One per process: create it before connecting."""
    config = telemetry_config(metrics_address)
    return Runtime(telemetry=config) if config is not None else None


# -- recording (activities and workflows) --------------------------------------------------------


def add(meter: MetricMeter, name: str, value: int, attributes: Mapping[str, str | int | float | bool], description: str) -> None:
    """Add ``value`` to counter ``name`` with ``attributes`` (nothing for 0)."""
    if value:
        meter.create_counter(name, description).add(value, dict(attributes))


def observe_seconds(meter: MetricMeter, name: str, seconds: float, attributes: Mapping[str, str], description: str) -> None:
    """Record ``seconds`` in histogram ``name`` with ``attributes``."""
    meter.create_histogram_float(name, description, "s").record(seconds, dict(attributes))


def observe_score(meter: MetricMeter, scorer: str, value: float, passed: bool) -> None:
    """Record one online score (0..1) of an ended task in ``noeta_task_score{scorer, passed}``."""
    meter.create_histogram_float(TASK_SCORE, "online scores of ended tasks (0..1), by scorer", "1").record(
        value, {"scorer": scorer, "passed": str(passed).lower()}
    )


_cost_lock = threading.Lock()
_cost_totals: dict[tuple[str, ...], float] = {}


def add_cost(meter: MetricMeter, where: tuple[str, str], provider: str, model: str, usd: float) -> None:
    """Add ``usd`` to ``noeta_cost_usd_total{provider, model}`` of this process (``where``: the
    meter's namespace and task queue, which it labels every series with).

    Temporal's meter has integer counters only, so the cost is a float gauge holding the running
    total since the process started: monotonic like a counter, and read like one (``rate``,
    ``increase`` and ``sum`` over workers all apply; a restart starts it again at 0)."""
    key = (*where, provider, model)
    with _cost_lock:
        total = _cost_totals[key] = _cost_totals.get(key, 0.0) + usd
        meter.create_gauge_float(COST, "model-call cost in US dollars since the worker started, by provider and model", "USD").set(
            total, {"provider": provider, "model": model}
        )


# -- the workflow side: task ends and approvals --------------------------------------------------


class WorkflowMetricsInterceptor(temporalio.client.Interceptor, Interceptor):
    """Counts finished task runs by status and answered approvals, on ``workflow.metric_meter()``
    (which records nothing while a workflow replays). A client interceptor too (it passes client
    calls through) so that workers built on the client inherit it."""

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        """The workflow-side interceptor that counts task ends and approvals."""
        return _WorkflowMetrics


class _WorkflowMetrics(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        try:
            result = await self.next.execute_workflow(input)
        except workflow.ContinueAsNewError:
            _count_task("continued_as_new")
            raise
        except (CancelledError, asyncio.CancelledError):
            _count_task("cancelled")
            raise
        except FailureError:  # fails the workflow (other exceptions fail only the workflow task)
            _count_task("failed")
            raise
        _count_task(ended_as(result.status) if isinstance(result, TaskResult) else "completed")
        return result

    async def handle_update_handler(self, input: HandleUpdateInput) -> Any:
        result = await self.next.handle_update_handler(input)
        if input.update in (UPDATE_APPROVE, UPDATE_REFUSE) and input.args:
            approved = input.update == UPDATE_APPROVE and getattr(input.args[0], "approved", None)
            decision: ApprovalDecision = "approved" if approved else "refused"
            workflow.metric_meter().create_counter(APPROVALS_DECIDED, "approvals answered").add(1, {"decision": decision})
        return result


def _count_task(status: RunEnd) -> None:
    try:
        meter = workflow.metric_meter()
    except TemporalError:  # a workflow being torn down (evicted) outside its event loop
        return
    meter.create_counter(TASKS_FINISHED, "task runs that ended, by status").add(1, {"status": status})


# -- open tasks, from visibility ----------------------------------------------------------------


async def poll_open_tasks(
    client: TemporalClient, meter: MetricMeter, interval: float = 15.0, statuses: Sequence[TaskStatus] = OPEN_STATUSES
) -> None:
    """Set ``noeta_tasks_open{status}`` from the cluster's visibility every ``interval`` seconds
    until cancelled (a cluster-wide figure: every worker reports the same; aggregate with max).
    Needs Noeta's search attributes (``noeta setup``); without them it logs once and stops."""
    gauge = meter.create_gauge(TASKS_OPEN, "open tasks by NoetaStatus (awaiting_approval = approvals waiting)")
    while True:
        try:
            for status in statuses:
                count = await client.count_workflows(f"NoetaStatus = '{status}' AND ExecutionStatus = 'Running'")
                gauge.set(count.count, {"status": status})
        except Exception as err:  # e.g. the search attributes are not registered
            logger.warning("noeta_tasks_open is not reported: %s", err)
            return
        await asyncio.sleep(interval)
