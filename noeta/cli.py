"""``noeta``: run agents, workers and the embedded server; inspect tasks.

    noeta run "goal" [--registry pkg.mod:registry] [--provider NAME] [--model M] [--no-progress]
    noeta worker [--registry pkg.mod:registry] [--task-queue Q] [--shutdown-grace-seconds S] [--health-port P]
        (both serve the safe built-in tools unless --no-builtins; with --registry only if --builtins)
    noeta doctor                      # what this installation has: server, models, providers, store
    noeta server                      # the embedded dev server in the foreground (UI included)
    noeta serve [--host H --port P]   # the HTTP API with Server-Sent Events
    noeta codec-server [--port P]     # decodes encrypted payloads for the Temporal UI
    noeta start "goal" [--keep-open]  # start a task for a worker, print its id
    noeta send TASK "goal"            # next goal of a keep-open task
    noeta result TASK | events TASK [--follow] | messages TASK | cancel TASK | close TASK
    noeta tasks [--status running]    # searchable through NoetaStatus and friends
    noeta setup                       # register those search attributes on a real cluster
    noeta retention --days N [--dry-run]  # delete content of tasks closed more than N days ago
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, NoReturn

from noeta.client.client import (
    DEFAULT_PROVIDER,
    AsyncClient,
    register_search_attributes,
)
from noeta.client.config import Settings
from noeta.client.embedded import ensure_server
from noeta.client.messages import (
    AssistantMessage,
    InjectedMessage,
    Result,
    ToolResultView,
    ToolUse,
    UserMessage,
    ViewItem,
)
from noeta.client.options import HostConfig, Options
from noeta.client.wire import envelope_to_dict
from noeta.errors import ConfigurationError, NoetaError
from noeta.lifecycle import serve_until_signal
from noeta.protocols.budget import UsageLimits
from noeta.protocols.event_log import EventEnvelope
from noeta.tuning import SETTINGS as TUNING_SETTINGS
from noeta.tuning import WorkerTuning
from noeta.worker import Registry, build_worker, load_registry


def worker_registry(
    path: str | None, provider: str | None, settings: Settings, builtins: bool | None = None
) -> Registry:
    """The registry a CLI worker serves: the user's (if any), a provider named "default", and the
    built-in providers the environment configures, by name ("anthropic", "openai", "local"), so
    ``Options(provider="anthropic")`` finds one. ``builtins`` adds the safe built-in tools and the
    memory tool (default: only when there is no user registry); a user's tool of the same name
    wins. Tasks still name each tool they use (the memory tool: ``allowed_tools=["memory"]``)."""
    from noeta.builtins.tools import BUILTIN_TOOLS
    from noeta.providers.defaults import KNOWN_PROVIDERS, default_provider
    from noeta.sdk.query import add_memory

    registry = load_registry(path) if path else Registry()
    if builtins if builtins is not None else path is None:
        for builtin in BUILTIN_TOOLS:
            if builtin.name not in registry.tools:
                registry.add_tool(builtin)
        add_memory(registry, settings)  # its store: NOETA_MEMORY_DIR, shared with the host
    if registry.content_store is None:
        registry.content_store = settings.content_store()
    if registry.mcp_commands is None:
        registry.mcp_commands = settings.mcp_commands  # NOETA_MCP_COMMANDS: none unless listed
    if registry.prices is None:  # a malformed NOETA_PRICES stops the worker here, not a model call
        from noeta.pricing import PriceTable

        registry.prices = PriceTable.from_env()
    if DEFAULT_PROVIDER not in registry.providers:
        try:
            registry.add_provider(default_provider(provider), name=DEFAULT_PROVIDER)
        except ConfigurationError:
            if path is None:  # nothing else to serve: the user must configure a provider
                raise
    for name in KNOWN_PROVIDERS:
        if name not in registry.providers:
            try:
                registry.add_provider(default_provider(name), name=name)
            except ConfigurationError:
                pass  # not configured here (no key, or the local model is not installed)
    return registry


def add_tuning_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per WorkerTuning field; unset flags fall back to the NOETA_* variables."""
    for name, setting in TUNING_SETTINGS.items():
        parser.add_argument(
            f"--{name.replace('_', '-')}", type=int, metavar="N",
            help=f"{setting.help} (default ${setting.variable} or {setting.default})",
        )


def tuning_from_args(args: argparse.Namespace) -> WorkerTuning:
    given = {name: getattr(args, name) for name in TUNING_SETTINGS if getattr(args, name) is not None}
    return WorkerTuning(**given)


async def cmd_worker(args: argparse.Namespace) -> int:
    settings = Settings()
    grace = settings.shutdown_grace_seconds if args.shutdown_grace_seconds is None else args.shutdown_grace_seconds
    health_port = settings.health_port if args.health_port is None else args.health_port
    registry = worker_registry(args.registry, args.provider, settings, args.builtins)
    # Metrics: Prometheus on --metrics-port, else OTLP when OTEL_* names an endpoint (docs/observability.md).
    from noeta.telemetry.metrics import runtime_for

    metrics_address = f"{args.metrics_host}:{args.metrics_port}" if args.metrics_port else None
    runtime = runtime_for(metrics_address)
    client = await AsyncClient.connect(
        HostConfig(settings=settings, content_store=registry.content_store, runtime=runtime)
    )
    queue = args.task_queue or settings.task_queue
    where = settings.temporal_address or f"embedded server {client.server.address if client.server else ''}"
    worker = build_worker(
        client.temporal, registry, queue, tuning=tuning_from_args(args),
        graceful_shutdown_timeout=timedelta(seconds=grace),
    )
    print(
        f"noeta worker on {where}, task queue {queue!r}: "
        f"tools {sorted(registry.tools) or 'none'}, providers {sorted(registry.providers)}",
        flush=True,
    )
    if metrics_address:
        print(f"metrics on http://{metrics_address}/metrics", flush=True)
    if runtime is not None:  # open tasks by status (approvals waiting), from visibility
        from noeta.telemetry.metrics import poll_open_tasks

        gauges = asyncio.ensure_future(poll_open_tasks(client.temporal, runtime.metric_meter))
    await serve_until_signal(worker, health_port=health_port)
    if runtime is not None:
        gauges.cancel()
    return 0


async def cmd_run(args: argparse.Namespace) -> int:
    settings = Settings()
    registry = worker_registry(args.registry, args.provider, settings, args.builtins)
    client = await AsyncClient.connect(HostConfig(settings=settings, content_store=registry.content_store))
    options = Options(
        system_prompt=args.system,
        model=args.model,
        allowed_tools=list(registry.tools),
        max_turns=args.max_turns,
        max_tokens=args.max_tokens,
        limits=UsageLimits(
            max_cost_usd=args.max_cost_usd, max_total_tokens=args.max_total_tokens, max_tool_calls=args.max_tool_calls
        ),
    )
    if client.server is not None and client.server.ui_url:
        print(f"Temporal UI: {client.server.ui_url}", file=sys.stderr)
    worker = build_worker(client.temporal, registry, settings.task_queue)
    # The working directory is the built-in read_file tool's workspace, whichever worker runs it.
    task_id = await client.start(args.goal, options, task_id=args.task_id, workspace_dir=os.getcwd())
    print(f"task {task_id} started", file=sys.stderr, flush=True)
    follower = asyncio.ensure_future(_print_progress(client, task_id)) if args.progress else None
    result_future = asyncio.ensure_future(client.result(task_id))
    await serve_until_signal(worker, result_future)
    if follower is not None:
        if result_future.done():  # let the last steps print before the answer
            await asyncio.wait([follower], timeout=5)
        follower.cancel()
    if not result_future.done():
        result_future.cancel()
        print(
            f"stopped; task {task_id} is durable: `noeta worker` resumes it, `noeta result {task_id}` "
            "waits for it",
            file=sys.stderr,
        )
        return 130
    result = result_future.result()
    print(result.answer)
    print(
        f"[{result.status}] task {task_id} · {result.turns} model call(s) · "
        f"{result.usage.input} in / {result.usage.output} out tokens · {cost_text(result.usage.cost_usd)}",
        file=sys.stderr,
    )
    return 0 if result.status == "completed" else 1


def cost_text(usd: float) -> str:
    """A task's cost for terminals (0 means no price was known for its model)."""
    return f"${usd:.6f}" if usd else "cost unknown (no price for the model)"


async def _print_progress(client: AsyncClient, task_id: str) -> None:
    """Each model and tool step on stderr as it happens (the task's event log, followed)."""
    from noeta.progress import Progress

    progress = Progress()
    async for env in client.events(task_id, follow=True):
        for line in progress.lines(env):
            print(line, file=sys.stderr, flush=True)


async def cmd_doctor(args: argparse.Namespace) -> int:
    from noeta.doctor import diagnose, render

    checks = await diagnose()
    for check in checks:
        print(render(check), flush=True)
    return 1 if any(c.status == "failed" for c in checks) else 0


def render(item: ViewItem) -> str:
    if isinstance(item, UserMessage):
        return f"user      │ {item.text}"
    if isinstance(item, InjectedMessage):
        return f"{item.origin:<9} │ {item.text}"
    if isinstance(item, AssistantMessage):
        return f"assistant │ {item.text}"
    if isinstance(item, ToolUse):
        return f"tool call │ {item.tool_name}({json.dumps(item.arguments, ensure_ascii=False)}) [{item.call_id}]"
    if isinstance(item, ToolResultView):
        mark = "ok" if item.success else "FAILED"
        return f"tool {mark:<4} │ {item.tool_name}: {item.output or ''}"
    if isinstance(item, Result):
        return f"result    │ [{item.status}] {item.answer}"
    return repr(item)


def render_envelope(env: EventEnvelope) -> str:
    cause = f"← {env.causation_id}" if env.causation_id else ""
    return f"{env.seq:>4} {env.type:<22} {env.actor:<24} {cause:<6} {describe(env)}".rstrip()


def describe(env: EventEnvelope) -> str:
    """One short line about the payload, for terminals."""
    p: Any = env.payload
    if env.type == "MessagesAppended":
        texts = []
        for m in p.messages:
            text = m.text or ", ".join(f"{u.tool_name}(…)" for u in m.tool_uses)
            texts.append(f"{m.role}: {text}")
        line = " | ".join(texts)
    elif env.type in ("ToolCallStarted", "ToolCallCompleted", "ToolCallFailed", "ToolCallRetried"):
        line = f"{p.tool_name} [{p.call_id}]" + (f" attempt {p.attempt}" if hasattr(p, "attempt") else "")
    elif env.type == "ProviderCallCompleted":
        line = f"{p.stop_reason} · {p.usage.input} in / {p.usage.output} out · attempt {p.attempt}"
        if p.usage.cost_usd:
            line += f" · ${p.usage.cost_usd:.6f}"
    elif env.type in ("BudgetWarning", "BudgetExceeded"):
        line = f"{p.limit}: {p.used:g} of {p.allowed:g}"
    elif env.type in ("TaskCompleted",):
        line = f"[{p.status}] {p.answer}"
    elif env.type in ("TaskFailed",):
        line = f"{p.error_type}: {p.reason}"
    elif hasattr(p, "error"):
        line = str(p.error)
    else:
        line = ""
    line = line.replace("\n", " ")
    return line if len(line) <= 100 else line[:99] + "…"


async def cmd_inspect(args: argparse.Namespace) -> int:
    client = await AsyncClient.connect()
    if args.command == "events":
        async for env in client.events(args.task, follow=args.follow):
            if args.json:
                print(json.dumps(envelope_to_dict(env), ensure_ascii=False), flush=True)
            else:
                print(render_envelope(env), flush=True)
    elif args.command == "tasks":
        tasks = await client.list_tasks(args.status, args.limit)
        for t in tasks:
            started = t.started.strftime("%Y-%m-%d %H:%M:%S") if t.started else "?"
            cost = f"${t.cost_usd:.6f}" if t.cost_usd else "-"
            print(
                f"{t.task_id:<28} {t.status:<18} {started}  turns {t.turns:<4} tokens {t.tokens_in}/{t.tokens_out}"
                f"  cost {cost}"
            )
        if not tasks:
            print("no tasks" + (f" with status {args.status!r}" if args.status else ""), file=sys.stderr)
    elif args.command == "setup":
        added = await register_search_attributes(client.temporal)
        print(f"registered search attributes: {', '.join(added)}" if added else "search attributes already registered")
    elif args.command == "messages":
        for item in await client.messages(args.task):
            print(render(item))
    elif args.command == "result":
        result = await client.result(args.task)
        print(result.answer)
        return 0 if result.status == "completed" else 1
    elif args.command == "cancel":
        await client.cancel(args.task)
    elif args.command == "close":
        await client.close_task(args.task)
    elif args.command == "send":
        result = await client.send_goal(args.task, args.goal)
        print(result.answer)
    elif args.command == "start":
        print(await client.start(args.goal, Options(model=args.model), keep_open=args.keep_open))
    return 0


async def cmd_retention(args: argparse.Namespace) -> int:
    from noeta.client.retention import apply_retention

    if args.days < 0:
        raise ConfigurationError("--days must not be negative")
    client = await AsyncClient.connect()
    report = await apply_retention(
        client.temporal, client.content_store, timedelta(days=args.days), dry_run=args.dry_run
    )
    verb = "would release" if args.dry_run else "released"
    print(
        f"{verb} {len(report.released)} task(s) closed more than {args.days:g} day(s) ago; kept {report.kept}; "
        f"deleted {report.bodies_deleted} bodies ({report.bytes_deleted} bytes)"
    )
    for task_id in report.released if args.verbose else ():
        print(task_id)
    return 0


async def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from noeta.http.app import serve
    except ImportError as err:  # starlette / uvicorn are the [serve] extra
        raise ConfigurationError(f"noeta serve needs the HTTP extra: pip install 'noeta[serve]' ({err})") from err
    client = await AsyncClient.connect()
    keys = "API keys required" if os.environ.get("NOETA_API_KEYS") or os.environ.get("NOETA_API_KEYS_FILE") else "no API keys"
    print(f"Noeta HTTP API on http://{args.host}:{args.port} ({keys}; see docs/security.md)", flush=True)
    await serve(client, args.host, args.port)
    return 0


async def cmd_codec_server(args: argparse.Namespace) -> int:
    try:
        from noeta.security.codec_server import serve_codec
    except ImportError as err:  # starlette / uvicorn are the [serve] extra
        raise ConfigurationError(f"noeta codec-server needs the HTTP extra: pip install 'noeta[serve]' ({err})") from err
    print(f"Noeta codec server on http://{args.host}:{args.port} (/encode, /decode)", flush=True)
    await serve_codec(args.host, args.port, ui_origins=tuple(args.ui_origin), expand_refs=args.expand_refs)
    return 0


def cmd_server(args: argparse.Namespace) -> int:
    settings = Settings()
    server = ensure_server(settings.home / "temporal")
    print(f"Temporal dev server at {server.address}" + (f", UI {server.ui_url}" if server.ui_url else ""))
    if not server.owned:
        print("(already running, started by another process)")
        return 0
    print("Ctrl-C stops it.", flush=True)
    try:
        assert server.process is not None
        server.process.wait()
    except KeyboardInterrupt:
        server.stop()
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="noeta", description="LLM agents as durable Temporal workflows")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a goal to its end with an in-process worker")
    run.add_argument("goal")
    run.add_argument("--registry", help="tools/providers to serve, as package.module:attribute")
    run.add_argument("--provider", help="provider name (default: from the environment, else the local model)")
    run.add_argument("--model")
    run.add_argument("--system", help="system prompt")
    run.add_argument("--max-turns", type=int, default=20)
    run.add_argument("--max-tokens", type=int, default=None)
    run.add_argument("--max-cost-usd", type=float, help="stop the task before a call once it has cost this much")
    run.add_argument("--max-total-tokens", type=int, help="stop the task before a call once it has used this many tokens")
    run.add_argument("--max-tool-calls", type=int, help="stop the task before a tool call beyond this many")
    run.add_argument("--task-id")
    run.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                     help="print each model and tool step on stderr (default: on)")
    worker = sub.add_parser("worker", help="serve tasks from the task queue")
    worker.add_argument("--registry")
    worker.add_argument("--provider")
    worker.add_argument("--task-queue")
    add_tuning_arguments(worker)
    worker.add_argument(
        "--shutdown-grace-seconds",
        type=float,
        help="on SIGTERM, how long running tools may finish (default: NOETA_SHUTDOWN_GRACE_SECONDS or 60)",
    )
    worker.add_argument("--health-port", type=int, help="serve /healthz and /readyz here (default: NOETA_HEALTH_PORT)")
    for cmd in (run, worker):
        cmd.add_argument("--builtins", action=argparse.BooleanOptionalAction, default=None,
                         help="serve the built-in tools calculator, word_count, read_file, current_time, wait "
                              "(default: on without --registry)")
    sub.add_parser("doctor", help="what this installation has: server, local model, providers, content store")
    worker.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port (/metrics)")
    worker.add_argument("--metrics-host", default="127.0.0.1", help="address of the metrics endpoint (0.0.0.0 in containers)")
    sub.add_parser("server", help="run the embedded Temporal dev server in the foreground")
    serve = sub.add_parser("serve", help="the HTTP API: tasks, goals, approvals, SSE events")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    codec = sub.add_parser("codec-server", help="decode encrypted payloads for the Temporal UI (docs/security.md)")
    codec.add_argument("--host", default="127.0.0.1")
    codec.add_argument("--port", type=int, default=8089)
    codec.add_argument("--ui-origin", action="append", default=[], help="the Temporal UI's origin, for CORS (repeatable)")
    codec.add_argument("--expand-refs", action="store_true", help="show whole tool outputs from the content store")
    start = sub.add_parser("start", help="start a task for the workers; prints its id")
    start.add_argument("goal")
    start.add_argument("--model")
    start.add_argument("--keep-open", action="store_true")
    for name in ("events", "messages", "result", "cancel", "close"):
        cmd = sub.add_parser(name)
        cmd.add_argument("task")
        if name == "events":
            cmd.add_argument("--json", action="store_true", help="one envelope_to_dict JSON per line")
            cmd.add_argument("--follow", "-f", action="store_true", help="keep printing until the task ends")
    tasks = sub.add_parser("tasks", help="list tasks, newest first")
    tasks.add_argument("--status", help="running, idle, awaiting_approval, completed, failed, cancelled")
    tasks.add_argument("--limit", type=int, default=50)
    sub.add_parser("setup", help="register Noeta's search attributes on the cluster (TEMPORAL_ADDRESS)")
    retention = sub.add_parser(
        "retention", help="delete content-store bodies of tasks closed more than --days ago (never running ones)"
    )
    retention.add_argument("--days", type=float, required=True, help="retention period in days")
    retention.add_argument("--dry-run", action="store_true", help="only report which tasks would be released")
    retention.add_argument("--verbose", "-v", action="store_true", help="list the released task ids")
    send = sub.add_parser("send", help="send the next goal to a keep-open task")
    send.add_argument("task")
    send.add_argument("goal")
    return p


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The console entry: run the command, then leave without interpreter finalization.

    temporalio's native runtime keeps threads that may call into Python while the interpreter
    finalizes, which can abort an otherwise finished process ("PyGILState_Release ... finalizing").
    So: flush, run the exit handlers (they stop an embedded server we started), and ``os._exit``.
    """
    code = run(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    os._exit(code)


#: Commands that run until stopped: they get Noeta's logging and tracing setup.
_LONG_RUNNING = ("run", "worker", "serve", "codec-server")


def run(argv: Sequence[str] | None = None) -> int:
    """Run one ``noeta`` command and return its exit code."""
    args = parser().parse_args(argv)
    if args.command in _LONG_RUNNING:
        from noeta.telemetry.logs import configure_logging
        from noeta.telemetry.tracing import configure_tracing

        configure_logging()  # NOETA_LOG_LEVEL, NOETA_LOG_FORMAT=json
        configure_tracing()  # OTEL_* (off when unset)
    try:
        if args.command == "server":
            return cmd_server(args)
        handler = {
            "run": cmd_run,
            "worker": cmd_worker,
            "serve": cmd_serve,
            "doctor": cmd_doctor,
            "retention": cmd_retention,
            "codec-server": cmd_codec_server,
        }.get(args.command, cmd_inspect)
        return asyncio.run(handler(args))
    except KeyboardInterrupt:  # uvicorn re-raises SIGINT after a graceful stop
        return 130
    except NoetaError as err:
        print(f"noeta: {type(err).__name__}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    main()
