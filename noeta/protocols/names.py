"""Names that the client, the workflow, the worker and the projection must agree on, defined once.

Workflow, activity and handler names are part of every recorded history: renaming one breaks
running tasks and the replay of their histories.
"""

from __future__ import annotations

#: Tasks whose policy is user code: the workflow runs in Temporal's sandbox, which re-checks the
#: policy's determinism at run time and isolates its module state per run.
WORKFLOW_NAME = "AgentWorkflow"
#: Tasks on the built-in LLM policy: the same workflow outside the sandbox (only Noeta's own code
#: runs in it, proven deterministic by replay), which costs a quarter less worker CPU per step.
BUILTIN_POLICY_WORKFLOW_NAME = "AgentWorkflow.builtin"
#: Every workflow type a Noeta task can have (visibility queries list tasks of both).
WORKFLOW_NAMES = (WORKFLOW_NAME, BUILTIN_POLICY_WORKFLOW_NAME)
#: The visibility filter for Noeta tasks.
WORKFLOW_TYPES_QUERY = "WorkflowType IN ({})".format(", ".join(f"'{name}'" for name in WORKFLOW_NAMES))


def workflow_name_for(policy: object | None) -> str:
    """The workflow type a task runs as: sandboxed when it has a policy of its own (user code)."""
    return WORKFLOW_NAME if policy is not None else BUILTIN_POLICY_WORKFLOW_NAME

#: The registry name of the provider a task uses when it names none (workers register their
#: configured provider under it).
DEFAULT_PROVIDER = "default"

#: Activities, scheduled by name from the workflow and registered by the worker.
PREPARE_TASK = "noeta.prepare_task"
CALL_MODEL = "noeta.call_model"
INVOKE_TOOL = "noeta.invoke_tool"
VALIDATE_OUTPUT = "noeta.validate_output"
CHECK_GUARDS = "noeta.check_guards"
LOAD_TRANSCRIPT = "noeta.load_transcript"
RELEASE_RESOURCES = "noeta.release_resources"
COMPACT_CONTEXT = "noeta.compact_context"
SCORE_TASK = "noeta.score_task"

#: Workflow handlers.
UPDATE_SEND_GOAL = "send_goal"
UPDATE_APPROVE = "approve"
#: A human's refusal of an action (the same input as UPDATE_APPROVE, ``approved`` false): its own
#: name so that the Temporal UI's timeline tells approvals from refusals at a glance. Workers
#: answer both; a refusal sent as UPDATE_APPROVE with ``approved`` false (older clients) is one too.
UPDATE_REFUSE = "refuse"
SIGNAL_INJECT = "inject"
SIGNAL_CLOSE = "close"
#: Sent by a worker's step to its own task while the content store fails under it (a text for the
#: task's Current Details); only during an outage, so ordinary tasks never see it.
SIGNAL_STORE_OUTAGE = "noeta.store_outage"
QUERY_PENDING_APPROVALS = "pending_approvals"
#: Sent by a worker's remote MCP tool call to its own task when the server asks a person and the
#: worker holds the request open for the answer (a HeldQuestion: the task lists it at once), and
#: what that call asks for the answer meanwhile (noeta.protocols.held_questions). Only tasks whose
#: server asks see them.
UPDATE_ELICITATION_HELD = "noeta.elicitation_held"
QUERY_ELICITATION_ANSWER = "noeta.elicitation_answer"

#: The histogram the workflow records each approval's wait in (seconds, by decision); its
#: Prometheus buckets are set with the other metrics in noeta.telemetry.metrics.
METRIC_APPROVAL_WAIT = "noeta_approval_wait"

#: Temporal header naming a span (trace id, span id, flags: noeta.protocols.trace_context): on a task's
#: start, the caller's span; on its activities and sub-agents, the task run's invoke_agent span; on
#: continue-as-new, the caller's span again. Headers are not part of a workflow's commands, so
#: histories with and without them replay alike.
HEADER_TRACE = "noeta-trace"
#: The header temporalio's own TracingInterceptor writes (a JSON carrier with a ``traceparent``):
#: read as the caller's context when a plain Temporal client with tracing starts a task.
HEADER_TEMPORAL_TRACER = "_tracer-data"
QUERY_PROGRESS = "progress"

#: Memo key under which the workflow records each goal's TaskResult (a history event of its own,
#: so the projection sees every goal's outcome without an extra activity).
RESULT_MEMO_KEY = "noeta.result"
#: Memo key under which the workflow records injected messages at the step they enter the transcript.
INJECTED_MEMO_KEY = "noeta.injected"
#: Messages sent with ``if_busy="steer"`` that entered the running goal (a list of Message), at the
#: step they entered at.
STEERED_MEMO_KEY = "noeta.steered"
#: Memo key under which the workflow records a limit reaching its warning fraction.
BUDGET_WARNING_MEMO_KEY = "noeta.budget_warning"
#: Memo key under which the workflow records a tool call it refused (a guard's denial, a human's
#: refusal, an unknown tool) instead of scheduling a tool activity for it (PATCH_REFUSALS_RECORDED).
REFUSED_MEMO_KEY = "noeta.refused"

#: Memo key of a schedule (not of a task): how its timing was asked for (the server keeps a cron
#: expression only as the calendar it translates it into) and the goal of its runs.
SCHEDULE_MEMO_KEY = "noeta.schedule"

#: Memo key under which the workflow records a switch to the next of its fallback providers.
PROVIDER_FALLBACK_MEMO_KEY = "noeta.provider_fallback"

#: Redis pub/sub channels of streamed deltas: ``{prefix}{namespace}:{task_id}``.
DELTA_CHANNEL_PREFIX = "noeta:deltas:"
#: Signal a delta subscriber sends to a task it reads the stream of (seconds it will listen): the
#: model-call activity publishes to the task's workflow stream only while someone listens.
SIGNAL_STREAM_LISTEN = "noeta.stream_listen"
#: Query: until when (epoch seconds, workflow time) someone listens to the task's stream.
QUERY_STREAM_LISTENING = "noeta.stream_listening"
#: Signal carrying one batch of a model call's streamed pieces to the task's workflow stream
#: (noeta.protocols.stream_batches: compact JSON, the text as is).
SIGNAL_STREAM_BATCH = "noeta.stream_batch"
#: Temporal's Workflow Streams handlers (temporalio.contrib.workflow_streams; its wire names). Its
#: publish signal is what activities sent before SIGNAL_STREAM_BATCH: still handled, for the tasks
#: that recorded it.
WORKFLOW_STREAM_PUBLISH = "__temporal_workflow_stream_publish"
WORKFLOW_STREAM_POLL = "__temporal_workflow_stream_poll"

#: Key of the worker's MemoryStore in its resources (the built-in memory tool reads it there).
MEMORY_RESOURCE = "noeta.memory"

#: Prefix of the summary of an approval's timeout timer (the projection recognises it).
APPROVAL_TIMER_PREFIX = "approval timeout "

#: Custom search attributes that make tasks findable in the UI and CLI.
SA_STATUS = "NoetaStatus"
"""running, idle, awaiting_approval, completed, failed, cancelled"""
SA_MODEL = "NoetaModel"
SA_TURNS = "NoetaTurns"
SA_TOKENS_IN = "NoetaTokensIn"
SA_TOKENS_OUT = "NoetaTokensOut"
SA_COST_USD = "NoetaCostUSD"
"""The task's cost so far in US dollars (sub-agents included once they end)."""
SA_API_KEY = "NoetaApiKey"
"""Id of the ``noeta serve`` API key that started the task (a hash prefix, never the key)."""
SA_GOAL = "NoetaGoal"
"""The task's first goal (its first GOAL_ATTRIBUTE_CHARS characters), set when the task starts."""
SA_METADATA = "NoetaMetadata"
"""``key=value`` for the ``Options.metadata`` keys the starter chose to index (NOETA_INDEXED_METADATA)."""
SA_FORKED_FROM = "NoetaForkedFrom"
"""The task a forked task was taken from (``Client.fork``); unset on other tasks."""
SA_TENANT = "NoetaTenant"
"""The tenant of the ``noeta serve`` key that started the task; unset on tasks started otherwise
(they belong to the tenant ``default``). Another tenant's key cannot see the task."""
SA_EVAL = "NoetaEval"
"""The eval run a task belongs to (``noeta eval``, ``noeta.sdk.testing.evaluate``); unset on other tasks."""
SA_SCORE = "NoetaScore"
"""The mean of the scores the task's online scorers gave it when it ended; unset when not scored."""
SA_SCHEDULED_BY = "TemporalScheduledById"
"""The schedule that started a task (``Client.create_schedule``): Temporal's own attribute, which
the server sets on every workflow a schedule starts, so it needs no registering."""
#: Between a task's id and its sub-agent's call id in the sub-agent's task id (``task/sub/call``).
SUBTASK_SEPARATOR = "/sub/"
#: The tenant of tasks without NoetaTenant and of API keys that name none.
DEFAULT_TENANT = "default"
#: name -> Temporal type, for registering them on a cluster.
SEARCH_ATTRIBUTES = {
    SA_STATUS: "Keyword",
    SA_MODEL: "Keyword",
    SA_TURNS: "Int",
    SA_TOKENS_IN: "Int",
    SA_TOKENS_OUT: "Int",
    SA_COST_USD: "Double",
    SA_API_KEY: "Keyword",
    SA_GOAL: "Text",
    SA_METADATA: "KeywordList",
    SA_FORKED_FROM: "Keyword",
    SA_TENANT: "Keyword",
    SA_EVAL: "Keyword",
    SA_SCORE: "Double",
}
#: The attributes a task is indexed with at all; the rest came later and are used where registered.
BASE_SEARCH_ATTRIBUTES = (SA_STATUS, SA_MODEL, SA_TURNS, SA_TOKENS_IN, SA_TOKENS_OUT)
GOAL_ATTRIBUTE_CHARS = 200

#: ``workflow.patched`` ids, one per change to AgentWorkflow's command sequence; histories recorded
#: before a change replay along the old path (tests/histories/). Never rename or reuse one.
#: Each patch id costs every new task a marker and a TemporalChangeVersion upsert (two events), so
#: the changes of one release share one id.
PATCH_LEAN_STEPS = "lean-steps"
"""prepare_task runs as a local activity (one marker event instead of an activity and a workflow
task); turn and token search attributes are upserted at most every INDEX_INTERVAL_SECONDS and with
every status change, instead of after every model call."""
PATCH_BUDGETS = "budgets"
"""Tasks with usage limits record a memo (BUDGET_WARNING_MEMO_KEY) when a limit reaches its warning
fraction. Called only on that path: tasks without limits never record this patch."""
INDEX_INTERVAL_SECONDS = 10.0
"""The refresh interval of tasks started before ``index_interval_seconds`` was an option (their
TaskInput lacks it): they replay with this value."""
DEFAULT_INDEX_INTERVAL_SECONDS = 300.0
"""``Options.index_interval_seconds``'s default: each refresh is a history event and a write to the
cluster's visibility store (a whole row, with its indexes), so a fleet of agents refreshes at most
once in five minutes each. At once a minute, 1,000 agents of a few minutes each cost the embedded
server 10-15 % more CPU per step than the same loop without them (bench/RESULTS.md)."""
PATCH_TASK_RESOURCES = "task-resources"
"""A task that owns task-scoped resources ends with a release_resources local activity (also when
it fails or is cancelled). Asked only by such tasks, so others pay nothing."""
PATCH_REFUSALS_RECORDED = "refusals-recorded"
PATCH_LOCAL_TOOLS = "local-tools"
"""A call of a tool declared ``local=True`` (calculator, word_count and current_time among them)
runs as an invoke_tool local activity (a marker) instead of an activity. Asked at a task's first
local tool call, and only by tasks prepared before SHAPE_LOCAL_TOOLS_BY_DATA."""
#: A task's shape: recorded by prepare_task (PrepareOutput.shape, carried across continue-as-new)
#: from the code of the worker that prepares it. A change of command sequence that only tasks
#: prepared after it may take is gated on this recorded number instead of a patch id: a patch
#: costs every task that asks it a marker and a TemporalChangeVersion upsert (two events and a
#: visibility write), the shape nothing. A history recorded before a shape has a lower number,
#: so it replays along the old path. Raise PREPARED_SHAPE with each such change; never lower it.
SHAPE_LOCAL_TOOLS_BY_DATA = 1
"""Local tool calls no longer ask PATCH_LOCAL_TOOLS: a tool's ``local`` flag is itself recorded
data (prepare's ToolSpecs, the task's MCP servers) that no history from before local tools holds.
Tasks of a lower shape still ask it: Temporal fails the replay of a history that holds a patch
marker which the code no longer asks (tests/histories/local-tools)."""
SHAPE_LOCAL_MODEL_CALLS_BY_DATA = 2
"""Model calls of a task with ``model_local_activity`` no longer ask PATCH_LOCAL_MODEL_CALLS at the
task's first call, nor PATCH_LOCAL_REPORTS at its 20th (two events and a visibility write each):
the flag in the task's input decides, and a long chain reports every
LOCAL_MODEL_CALLS_PER_WORKFLOW_TASK-th call. Tasks of a lower shape still ask both patches; newer
ones ask them only while replaying, which matches the marker of a worker of the previous release
that ran such a call during a rollout (noeta.workflows.patches.by_shape)."""
PREPARED_SHAPE = SHAPE_LOCAL_MODEL_CALLS_BY_DATA
"""The shape prepare_task records for a new task: the highest SHAPE_* constant."""
#: A sub-agent on the built-in policy runs as BUILTIN_POLICY_WORKFLOW_NAME (before: WORKFLOW_NAME).
PATCH_BUILTIN_POLICY_CHILDREN = "builtin-policy-children"
"""A tool call that a guard denied, a human refused (or let time out) or that names an unknown tool
is recorded in the memo (REFUSED_MEMO_KEY) instead of being scheduled as an invoke_tool activity
that only returned the refusal: the UI no longer shows a refused call as a completed tool call.
Patched only on that path, so tasks without refusals pay nothing."""
PATCH_EDITED_APPROVALS = "edited-approvals"
"""An approval that replaces a tool call's arguments: the guards check the edited call again (a
check_guards activity) before it runs. Asked only when such an approval arrives."""
PATCH_COMPACTION = "compaction"
"""The task's context is compacted (a compact_context activity) before a model call that would pass
its window's threshold, or after a call refused as too long. Asked only when a compaction is about
to be scheduled, so a task that never reaches the threshold pays nothing."""
PATCH_LOCAL_MODEL_CALLS = "local-model-calls"
"""A task with ``model_local_activity`` runs its model calls as local activities. The flag alone
(recorded in the task's input) cannot gate it: a worker of an earlier release ignores the field and
schedules ordinary call_model activities, also for a task a newer worker prepared whose first call
was still running when that worker was lost; a newer worker replaying such a history must take the
same path. Asked at each such task's first model call (memoized for the run) by tasks prepared
before SHAPE_LOCAL_MODEL_CALLS_BY_DATA; a history without the marker replays along the ordinary path."""
PATCH_LOCAL_RECOVERY = "local-recovery"
"""A task with ``model_local_activity`` whose call returned a finished step's record (its earlier
run was lost with a workflow task: a killed worker) makes its next model call an ordinary activity,
which ends the workflow task: the recovered chain reaches the server at once. Without it a kill loop
lost every workflow task of a long chain, and Temporal lengthens the timeout of each retried
workflow task, so recovery slowed down kill after kill (minutes). Asked only when a call comes back
from a record, so other tasks record nothing."""
PATCH_LOCAL_REPORTS = "local-reports-100"
"""A task with ``model_local_activity`` reports its chain of local calls to the server every
LOCAL_MODEL_CALLS_PER_WORKFLOW_TASK-th model call (an ordinary activity), where it did every
EARLIER_LOCAL_MODEL_CALLS_PER_WORKFLOW_TASK-th. Asked only at such an earlier report's turn (20,
40, ...), and only by tasks prepared before SHAPE_LOCAL_MODEL_CALLS_BY_DATA, so a task with fewer
model calls records nothing; a history without the marker replays with a report at each of those
turns."""
PATCH_PROVIDER_FALLBACK = "provider-fallback"
"""A model call that failed on the task's current provider in a way another provider may not share
(noeta.protocols.fallback.falls_back) is made again on the next of ``Options.fallback_providers``,
after a memo (PROVIDER_FALLBACK_MEMO_KEY) records the switch. Asked only when a switch happens, so
tasks without fallback providers, or whose provider never fails, pay nothing."""
PATCH_TASK_SCORED = "task-scored"
"""A task with online scoring (``Options.scoring``) that the sample picks ends with a score_task
activity. Asked only by such tasks, so others pay nothing."""
PATCH_LEARNED_WINDOW = "learned-window"
"""A request refused as too long teaches the task its model's window (noeta.protocols.window_refusals):
the refused size is the compaction's ``tokens_before`` and later compactions come by the threshold of
the learned window. Asked only when a refusal is about to be compacted, so tasks whose provider never
refuses pay nothing; a history without the marker compacts as before (the configured window's size)."""
PATCH_MCP_ELICITATION = "mcp-elicitation"
"""An MCP server asked a person during a tool call: the task waits for the answer (an approval of
kind ``elicitation``) and makes the call again with it (noeta.workflows.elicitations). Asked only
when a server asks, so other tasks pay nothing."""
PATCH_MCP_ELICITATION_HELD = "mcp-elicitation-held"
"""An MCP server asked a person during a tool call whose worker holds the request open for the
answer: the task lists the question while the call runs (the UPDATE_ELICITATION_HELD update), and
the call completes with an answer given in time, or stops and waits as for PATCH_MCP_ELICITATION
(noeta.workflows.held_questions). Asked only when such an update arrives, so other tasks pay nothing."""
PATCH_MCP_LOGIN_WAIT = "mcp-login-wait"
"""A user's MCP login lacked a scope a tool call needs: the task waits for the operator to log in
again (an approval of kind ``login``) and makes the call again (noeta.workflows.login_wait). Asked
only when a call stops for it, so other tasks pay nothing."""
PATCH_MCP_SAMPLING = "mcp-sampling"
"""An MCP server asked the task's model during a tool call: its request goes to the task's guards,
then a model call of the task answers it, and the call is made again with the answer
(noeta.workflows.sampling). Asked only when a server samples, so other tasks pay nothing."""
PATCH_VERSION_UPGRADE = "version-upgrade"
"""A task run by a versioned worker (Worker Deployment Versioning) wakes while idle between goals
every NOETA_UPGRADE_CHECK_SECONDS (a timer) and continues as new onto its deployment's target
version once that changed (noeta.workflows.upgrades). Asked only by versioned tasks at their first
idle wait, so unversioned tasks pay nothing."""
#: ``Options.metadata`` key of a task started from a named agent version (``triage@2``,
#: noeta.client.agents): recorded in the task's input for its whole life (continue-as-new, forks)
#: and always indexed in NoetaMetadata (``agent=triage@2``).
AGENT_METADATA_KEY = "agent"
