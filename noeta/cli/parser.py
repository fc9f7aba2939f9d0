"""The ``noeta`` command line: every subcommand with its help, and a checked type for every flag
(argparse refuses a bad value with one usage line and exit code 2 before anything connects)."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from importlib import metadata

from noeta.cli import mcp_login, queue_limits, schedule_parser, version_commands
from noeta.cli.eval_command import add_arguments as add_eval_arguments
from noeta.cli.setting_flags import add_setting_flags
from noeta.protocols.bounds import BOUNDS, bound_problem
from noeta.protocols.statuses import IF_BUSY, TASK_STATUSES
from noeta.config.tuning import SETTINGS as TUNING_SETTINGS

MAX_LIST_LIMIT = 1000


def _version() -> str:
    try:
        return metadata.version("noeta")
    except metadata.PackageNotFoundError:  # running from a source tree
        from noeta import __version__

        return __version__


# -- flag types: each raises ArgumentTypeError with what is expected ------------------------------


def _int_between(low: int, high: int | None, what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what}: expected a whole number, got {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"{what}: must be {bound}, got {value}")
        return value

    parse.__name__ = what  # argparse names the type in its messages
    return parse


positive_int = _int_between(1, None, "a positive whole number")
non_negative_int = _int_between(0, None, "a whole number >= 0")
port = _int_between(1, 65535, "a TCP port")
list_limit = _int_between(1, MAX_LIST_LIMIT, "a limit")


def _number_at_least_zero(what: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(value) or value < 0:
            raise argparse.ArgumentTypeError(f"{what} must be a finite number >= 0, got {text!r}")
        return value

    parse.__name__ = what
    return parse


seconds = _number_at_least_zero("a number of seconds")
days = _number_at_least_zero("a number of days")


def option_value(option: str) -> Callable[[str], float]:
    """A flag for the Options field ``option``: the range check Options and the HTTP API use
    (noeta.protocols.bounds), so the CLI refuses the same values with the same message."""
    bound = BOUNDS[option]

    def parse(text: str) -> float:
        try:
            value: float = int(text) if bound.whole else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option} must be {bound.describe()}, got {text!r}") from None
        problem = bound_problem(option, value)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return value

    parse.__name__ = option
    return parse


def text(value: str) -> str:
    """A non-empty string (names, ids, goals)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def http_url(value: str) -> str:
    """An http(s) URL with a host (the codec endpoint a browser will call)."""
    scheme, sep, rest = value.partition("://")
    if scheme not in ("http", "https") or not sep or not rest.split("/")[0]:
        raise argparse.ArgumentTypeError(f"expected an http:// or https:// URL, got {value!r}")
    return value.rstrip("/")


def name(value: str) -> str:
    """A registry name: non-empty, no surrounding spaces, no commas."""
    if not value.strip() or value != value.strip() or "," in value:
        raise argparse.ArgumentTypeError(f"not a name: {value!r} (repeat the flag for several)")
    return value


def json_object(value: str) -> dict[str, object]:
    """A JSON object given on the command line (``--arguments '{"amount": 900}'``)."""
    try:
        parsed = json.loads(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not JSON: {err}") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return parsed


def key_value(value: str) -> tuple[str, str]:
    """An argparse type: ``key=value`` as a ``(key, value)`` pair (the key stripped)."""
    key, sep, val = value.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {value!r}")
    return key.strip(), val


def output_schema(value: str) -> dict[str, object] | str:
    """A JSON Schema (inline JSON, or a ``.json`` file), or a registered output model's name."""
    import json
    from pathlib import Path

    try:
        if value.lstrip().startswith("{"):
            schema = json.loads(value)
        elif value.endswith(".json"):
            schema = json.loads(Path(value).read_text())
        elif ":" in value and value.strip() == value:
            return value
        else:
            raise argparse.ArgumentTypeError(
                f"expected a JSON Schema ({{...}} or a .json file) or a registered output model 'module:QualName', got {value!r}"
            )
    except (OSError, ValueError) as err:
        raise argparse.ArgumentTypeError(f"cannot read the output schema {value!r}: {err}") from None
    if not isinstance(schema, dict):
        raise argparse.ArgumentTypeError("an output schema must be a JSON object")
    return schema


def registry_path(value: str) -> str:
    """An argparse type: a ``package.module:attribute`` path, returned as given."""
    module, sep, attr = value.partition(":")
    if not sep or not module or not attr:
        raise argparse.ArgumentTypeError(f"expected package.module:attribute, got {value!r}")
    return value


# -- the parser -------------------------------------------------------------------------------------


def _task(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("task", type=text, help="the task id (printed by run/start, listed by `noeta tasks`)")


def _options(cmd: argparse.ArgumentParser, task_id: bool = True) -> None:
    """Flags that configure a task (run, start, and a schedule's runs: without ``--task-id``): one
    per task setting (noeta.cli.setting_flags), and the ones that name what the worker registered."""
    cmd.add_argument("--provider", type=name, help="provider name on the worker (default: 'default')")
    add_setting_flags(cmd, option_value, text)
    if task_id:
        cmd.add_argument("--task-id", type=text, help="the task's id (default: a new random one)")
    cmd.add_argument("--guard", action="append", type=name, default=[], metavar="NAME",
                     help="a guard registered on the worker, consulted before every tool call (repeatable)")
    cmd.add_argument("--validator", action="append", type=name, default=[], metavar="NAME",
                     help="a validator registered on the worker, run on the final answer (repeatable)")
    cmd.add_argument("--metadata", action="append", type=key_value, default=[], metavar="KEY=VALUE",
                     help="task metadata (repeatable); keys in NOETA_INDEXED_METADATA become searchable")
    cmd.add_argument("--max-cost-usd", type=_number_at_least_zero("US dollars"), metavar="USD",
                     help="stop the task before a call once it has cost this much (docs/budgets.md)")
    cmd.add_argument("--max-total-tokens", type=positive_int, metavar="N",
                     help="stop the task before a call once it has used this many tokens")
    cmd.add_argument("--max-tool-calls", type=non_negative_int, metavar="N",
                     help="stop the task before a tool call beyond this many")
    cmd.add_argument("--output-schema", type=output_schema, metavar="SCHEMA",
                     help="the answer must be JSON matching this: a JSON Schema ({...} or a .json file) or the "
                          "module:QualName of an output model registered on the worker")


def add_tuning_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per WorkerTuning field; unset flags fall back to the NOETA_* variables."""
    for setting_name, setting in TUNING_SETTINGS.items():
        parser.add_argument(
            f"--{setting_name.replace('_', '-')}", type=positive_int, metavar=setting.unit,
            help=f"{setting.help} (default ${setting.variable} or {setting.default})",
        )


def build() -> argparse.ArgumentParser:
    """The ``noeta`` argument parser with every subcommand and its options."""
    p = argparse.ArgumentParser(
        prog="noeta",
        description="LLM agents as durable Temporal workflows. `noeta COMMAND --help` explains a command.",
    )
    p.add_argument("--version", action="version", version=f"noeta {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=description or help)

    run = command(
        "run", "run a goal to its end with an in-process worker",
        "Start a task on a task queue of its own and serve it in this process until it ends (no other worker "
        "can take it); prints the answer on stdout, the task's UI link and each step on stderr.",
    )
    run.add_argument("goal", type=text, help="what the agent should do")
    run.add_argument("--registry", type=registry_path, help="tools/providers to serve, as package.module:attribute")
    _options(run)
    run.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                     help="print each model and tool step on stderr (default: on)")
    run.add_argument("--stream", action=argparse.BooleanOptionalAction, default=None,
                     help="print the model's text as it is generated (default: when stdout is a terminal)")
    run.add_argument("--verbose", "-v", action="store_true",
                     help="also print other libraries' log lines (httpx, temporalio) below WARNING")
    version_commands.add_agent_flags(run)

    worker = command("worker", "serve tasks from a task queue")
    worker.add_argument("--registry", type=registry_path, help="tools/providers to serve, as package.module:attribute")
    worker.add_argument("--provider", type=name, help="the provider served as 'default' (default: from the environment)")
    worker.add_argument("--task-queue", type=name, help="the queue to serve (default: NOETA_TASK_QUEUE or 'noeta')")
    add_tuning_arguments(worker)
    worker.add_argument("--shutdown-grace-seconds", type=seconds, metavar="S",
                        help="on SIGTERM, how long running tools may finish (default: NOETA_SHUTDOWN_GRACE_SECONDS or 60)")
    worker.add_argument("--health-port", type=port, help="serve /healthz and /readyz here (default: NOETA_HEALTH_PORT)")
    worker.add_argument("--metrics-port", type=port, help="serve Prometheus metrics on this port (/metrics)")
    worker.add_argument("--metrics-host", type=text, default="127.0.0.1", help="address of the metrics endpoint (0.0.0.0 in containers)")
    worker.add_argument("--deployment", type=name, help="the Worker Deployment this worker is a version of "
                        "(default: NOETA_DEPLOYMENT; with --build-id: tasks are pinned to their version)")
    worker.add_argument("--build-id", type=name, help="this worker's build in the deployment (default: NOETA_BUILD_ID)")
    worker.add_argument("--upgrade-check-seconds", type=seconds, metavar="S",
                        help="how often an idle versioned task looks for a new current version "
                             "(default: NOETA_UPGRADE_CHECK_SECONDS or 60)")
    for cmd in (run, worker):
        cmd.add_argument("--builtins", action=argparse.BooleanOptionalAction, default=None,
                         help="serve the built-in tools calculator, word_count, read_file, current_time, wait "
                              "(default: on without --registry)")

    command("doctor", "what this installation has: server, local model, providers, content store")
    server = command("server", "run the embedded Temporal dev server (with its UI) in the foreground until Ctrl-C or SIGTERM")
    server.add_argument("--port", type=port, help="the server's gRPC port (default: a free one)")
    server.add_argument("--ui-port", type=port, help="the Temporal UI's port (default: a free one)")
    server.add_argument("--ui-codec-endpoint", type=http_url, metavar="URL",
                        help="the codec server the UI decodes payloads with (noeta codec-server; docs/inspection.md)")
    serve = command("serve", "the HTTP API and web console: tasks, goals, approvals, SSE events")
    serve.add_argument("--host", type=text, default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=port, default=8080, help="port (default 8080)")
    codec = command("codec-server", "decode encrypted payloads for the Temporal UI (docs/security.md)")
    codec.add_argument("--host", type=text, default="127.0.0.1", help="address to listen on")
    codec.add_argument("--port", type=port, default=8089, help="port (default 8089)")
    codec.add_argument("--ui-origin", action="append", type=text, default=[], help="the Temporal UI's origin, for CORS (repeatable)")
    codec.add_argument("--expand-refs", action="store_true", help="show whole tool outputs from the content store")

    start = command("start", "start a task for the workers; prints its id",
                    "Start a task on a task queue that `noeta worker` serves, and print its id.")
    start.add_argument("goal", type=text, help="what the agent should do")
    _options(start)
    start.add_argument("--tool", action="append", type=name, default=[], metavar="NAME",
                       help="a tool registered on the worker that the agent may call (repeatable)")
    start.add_argument("--queue", type=name, help="the workers' task queue (default: NOETA_TASK_QUEUE or 'noeta')")
    start.add_argument("--keep-open", action="store_true", help="stay open for further goals (`noeta send`)")
    version_commands.add_agent_flags(start)

    send = command("send", "send the next goal to a keep-open task; prints the answer")
    _task(send)
    send.add_argument("goal", type=text, help="the next goal")
    send.add_argument("--if-busy", choices=IF_BUSY, default="enqueue",
                      help="while another goal runs: enqueue (after it, the default), reject (exit 2, nothing "
                      "sent), interrupt (it ends at once) or steer (joins it before its next model call)")
    result = command("result", "wait for a task's answer and print it (exit code 1 if the goal failed)")
    _task(result)
    events = command("events", "the task's event log: seq, type, actor, cause")
    _task(events)
    events.add_argument("--json", action="store_true", help="one envelope_to_dict JSON per line")
    events.add_argument("--follow", "-f", action="store_true", help="keep printing until the task ends")
    messages = command("messages", "the task's conversation, one line per item")
    _task(messages)
    cancel = command("cancel", "cancel a running task")
    _task(cancel)
    close = command("close", "let a keep-open task end after its queued goals")
    _task(close)
    inject = command("inject", "give a running task's model context at its next step (never as the user's words)")
    _task(inject)
    inject.add_argument("text", type=text, help="the context")
    inject.add_argument("--origin", choices=("system", "memory"), default="system", help="where it comes from (default system)")

    approvals = command("approvals", "actions waiting for a human: of one task, or of every task")
    approvals.add_argument("task", nargs="?", type=text, help="only this task's")
    approvals.add_argument("--limit", type=list_limit, default=100, help="most tasks to look at (default 100)")
    approvals.add_argument("--tenant", type=text, help="only this tenant's tasks (NoetaTenant; default: every tenant's)")
    for verb, helptext in (("approve", "approve an action waiting for approval"), ("deny", "refuse an action waiting for approval")):
        cmd = command(verb, helptext)
        _task(cmd)
        cmd.add_argument("call", type=text, help="the action's call id (see `noeta approvals`)")
        cmd.add_argument("--reason", type=text, help="why (shown to the model and in the event log)")
        cmd.add_argument("--as", "--approver", dest="acting_as", type=text, metavar="NAME",
                         help="who answers, recorded as the approver (default: the OS user)")
        if verb == "approve":
            cmd.add_argument("--arguments", type=json_object, metavar="JSON",
                             help="approve the tool call with these arguments instead of the proposed ones")
    audit = command("audit", "who started, approved, edited, denied, injected, cancelled the task, and when")
    _task(audit)
    audit.add_argument("--json", action="store_true", help="one JSON object per line")

    tasks = command("tasks", "list tasks, newest first: status, goal, model, turns, tokens")
    tasks.add_argument("--status", choices=TASK_STATUSES, help="only tasks with this NoetaStatus")
    tasks.add_argument("--search", type=text, help="words of the goal")
    tasks.add_argument("--model", type=text, help="only tasks of this model")
    tasks.add_argument("--metadata", action="append", type=key_value, default=[], metavar="KEY=VALUE",
                       help="only tasks with this indexed metadata (repeatable)")
    tasks.add_argument("--limit", type=list_limit, default=50, help="most tasks listed (default 50)")
    tasks.add_argument("--tenant", type=text, help="only this tenant's tasks (NoetaTenant; default: every tenant's)")
    tasks.add_argument("--json", action="store_true", help="one JSON object per line")
    command("setup", "register Noeta's search attributes on the cluster (TEMPORAL_ADDRESS)")
    export = command("export", "a task's history and stored bodies as one JSON document (`noeta export T > task.json`)")
    _task(export)
    replay = command(
        "replay", "ask recorded tasks' model turns again under a change; exit 1 when a decision changed",
        "For each recorded model turn of each task, rebuild its request from the record (with the changes "
        "given), ask the provider and compare its decision (tool calls, or the answer) with the recorded one. "
        "No tool runs. Prints the changed decisions; exit code 1 when there is one. With --agent A --under B: the "
        "last recorded tasks of agent version A under version B (the deploy gate, docs/versions.md).",
    )
    replay.add_argument("tasks", nargs="*", type=text, metavar="TASK|FILE",
                        help="a task id, or an export written by `noeta export` (repeatable; or --agent)")
    replay.add_argument("--provider", type=text, help="who answers: anthropic, openai, local, or package.module:attribute "
                                                      "(default: the environment's provider)")
    replay.add_argument("--model", type=text, help="the model to ask (default: each turn's recorded model)")
    replay.add_argument("--system-prompt", type=text, metavar="TEXT|@FILE",
                        help="the system prompt to ask with (default: the recorded one)")
    replay.add_argument("--policy", type=text, metavar="package.module:Class",
                        help="a policy that decides each turn first, from the view the task had before it; its model "
                             "calls are answered by --provider, or without one by the record when the request is the "
                             "recorded one")
    version_commands.add_replay_flags(replay)
    add_eval_arguments(command(
        "eval", "score an agent on a dataset of cases (each a real task) or recorded tasks; exit 1 below --min-score",
        "Run each case of DATASET as a task (tagged NoetaEval), score it, print the table (case x scorer, totals, "
        "cost, p50/p95 time) or its JSON; --compare runs a second setup on the same cases side by side.",
    ))
    fork = command(
        "fork", "start a new task from a task's model turn N, decided anew with other settings; prints its id",
        "The fork's transcript is the task's up to turn N (the tool results before it come from the record: no "
        "tool runs again); settings not given are the task's recorded ones. The task itself is not changed.",
    )
    fork.add_argument("task", type=text, metavar="TASK|FILE",
                      help="the task id, or an export written by `noeta export` (a task of another cluster)")
    fork.add_argument("--at-turn", type=int, required=True, metavar="N", help="the model turn to decide anew (from 1)")
    fork.add_argument("--provider", type=name, help="provider name on the worker (default: the task's)")
    fork.add_argument("--model", type=text, help="the model (default: the task's)")
    fork.add_argument("--system-prompt", type=text, metavar="TEXT|@FILE", help="the system prompt (default: the task's)")
    fork.add_argument("--goal", type=text, help="a message of yours added at the fork point (default: none)")
    fork.add_argument("--task-id", type=text, help="the fork's id (default: a new one)")
    fork.add_argument("--queue", type=name, help="the workers' task queue (default: the one the task was started on)")
    imported = command(
        "import", "make an export (`noeta export`) a task of this installation, addressable by id; prints its id",
        "The export's bodies go into this installation's content store (each checked against its hash), and the "
        "task is recorded here under its id as an imported task, finished as it finished: `noeta export`, "
        "`noeta replay` and `noeta fork` take its id. Nothing of the task runs again.",
    )
    imported.add_argument("file", type=text, metavar="FILE", help="an export written by `noeta export`")
    imported.add_argument("--task-id", type=text, help="the id here (default: the exported task's)")
    mcp_login.add_parser(command)
    queue_limits.add_parser(command)
    version_commands.add_parser(command)
    schedule_parser.add_parser(command, lambda cmd: _options(cmd, task_id=False), text)
    retention = command("retention", "delete content-store bodies of tasks closed more than --days ago (never running ones)")
    retention.add_argument("--days", type=days, required=True, help="retention period in days")
    retention.add_argument("--dry-run", action="store_true", help="only report which tasks would be released")
    retention.add_argument("--verbose", "-v", action="store_true", help="list the released task ids")
    return p
