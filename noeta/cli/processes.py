"""The CLI commands that run until stopped: run, worker, serve, codec-server, server."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING

from noeta.client.config import Settings
from noeta.client.embedded import ensure_server
from noeta.errors import ConfigurationError
from noeta.cli.lifecycle import EXIT_INTERRUPTED, announce, serve_until_signal
from noeta.cli.mcp_login import cmd_mcp
from noeta.protocols.names import DEFAULT_PROVIDER
from noeta.config.tuning import SETTINGS as TUNING_SETTINGS
from noeta.config.tuning import WorkerTuning
from noeta.config.deployment import DeploymentSettings

if TYPE_CHECKING:
    from noeta.worker import Registry

# Each command imports what it needs when it runs: `noeta worker` never loads the client side
# (task operations, projection), and client commands never load the worker's activities.

#: Prefix of the task queue a ``noeta run`` serves alone (one per run: no other worker polls it).
RUN_QUEUE_PREFIX = "noeta-run-"


def worker_registry(
    path: str | None, provider: str | None, settings: Settings, builtins: bool | None = None,
    provider_required: bool = True,
) -> Registry:
    """The registry a CLI worker serves: the user's (if any), a provider named "default", and the
    built-in providers the environment configures, by name ("anthropic", "openai", "local"), so
    ``Options(provider="anthropic")`` finds one. ``builtins`` adds the safe built-in tools and the
    memory tool (default: only when there is no user registry); a user's tool of the same name
    wins. Tasks still name each tool they use (the memory tool: ``allowed_tools=["memory"]``).
    ``provider_required=False``: no "default" provider is no error (an agent version brings its own)."""
    from noeta.builtins.memory.tool import add_memory
    from noeta.builtins.tools import BUILTIN_TOOLS
    from noeta.providers.defaults import KNOWN_PROVIDERS, default_provider
    from noeta.worker import Registry, load_registry

    registry = load_registry(path) if path else Registry()
    if builtins if builtins is not None else path is None:
        for builtin in BUILTIN_TOOLS:
            if builtin.name not in registry.tools:
                registry.add_tool(builtin)
        add_memory(registry, settings.memory_store())  # NOETA_MEMORY_DIR, shared with the host
    if registry.content_store is None:
        registry.content_store = settings.content_store()
    if registry.mcp_commands is None:
        registry.mcp_commands = settings.mcp_commands  # NOETA_MCP_COMMANDS: none unless listed
    if registry.prices is None:  # a malformed NOETA_PRICES stops the worker here, not a model call
        from noeta.providers.pricing import PriceTable

        registry.prices = PriceTable.from_env()
    if DEFAULT_PROVIDER not in registry.providers:
        try:
            registry.add_provider(default_provider(provider), name=DEFAULT_PROVIDER)
        except ConfigurationError:
            if path is None and provider_required:  # nothing else to serve: the user must configure one
                raise
    for name in KNOWN_PROVIDERS:
        if name not in registry.providers:
            try:
                registry.add_provider(default_provider(name), name=name)
            except ConfigurationError:
                pass  # not configured here (no key, or the local model is not installed)
    return registry


def tuning_from_args(args: argparse.Namespace) -> WorkerTuning:
    """The WorkerTuning of the command-line flags given (the others come from the environment or defaults)."""
    given = {name: getattr(args, name) for name in TUNING_SETTINGS if getattr(args, name) is not None}
    return WorkerTuning(**given)


def deployment_from_args(args: argparse.Namespace) -> DeploymentSettings:
    """The worker's deployment version: its flags over NOETA_DEPLOYMENT, NOETA_BUILD_ID, NOETA_UPGRADE_CHECK_SECONDS."""
    flags = {"deployment": args.deployment, "build_id": args.build_id, "upgrade_check_seconds": args.upgrade_check_seconds}
    return DeploymentSettings(**{k: v for k, v in flags.items() if v is not None})


async def cmd_worker(args: argparse.Namespace) -> int:
    """``noeta worker``: run a worker on the task queue until SIGINT or SIGTERM, with its health endpoint and
    metrics when they are configured."""
    from noeta.client.connect import connect_temporal
    from noeta.worker import build_worker

    settings = Settings()
    grace = settings.shutdown_grace_seconds if args.shutdown_grace_seconds is None else args.shutdown_grace_seconds
    health_port = settings.health_port if args.health_port is None else args.health_port
    registry = worker_registry(args.registry, args.provider, settings, args.builtins)
    # Metrics: Prometheus on --metrics-port, else OTLP when OTEL_* names an endpoint (docs/observability.md).
    from noeta.telemetry.metrics import runtime_for

    metrics_address = f"{args.metrics_host}:{args.metrics_port}" if args.metrics_port else None
    runtime = runtime_for(metrics_address)
    temporal, server = await connect_temporal(settings, runtime=runtime)
    queue = args.task_queue or settings.task_queue
    where = settings.temporal_address or f"embedded server {server.address if server else ''}"
    deployment = deployment_from_args(args)
    worker = build_worker(
        temporal, registry, queue, tuning=tuning_from_args(args), deployment=deployment,
        graceful_shutdown_timeout=timedelta(seconds=grace),
    )
    announce(
        f"noeta worker on {where}, task queue {queue!r}: "
        f"tools {sorted(registry.tools) or 'none'}, providers {sorted(registry.providers)}"
        + (f", version {deployment.version}" if deployment.versioned else ""),
        stdout=True,
    )
    from noeta.client.dispatch import dispatch_note

    note = await dispatch_note(temporal, server)  # once: tasks run as they would without the feature
    if note:
        announce(note)
    if metrics_address:
        announce(f"metrics on http://{metrics_address}/metrics", stdout=True)
    if runtime is not None:  # open tasks by status (approvals waiting), from visibility
        from noeta.telemetry.metrics import poll_open_tasks

        gauges = asyncio.ensure_future(poll_open_tasks(temporal, runtime.metric_meter))
    await serve_until_signal(worker, health_port=health_port)
    if runtime is not None:
        gauges.cancel()
    return 0


_say = announce


async def cmd_run(args: argparse.Namespace) -> int:
    """``noeta run``: start one task on a task queue of its own, run a worker for it in this process, and
    print its progress and answer; exit status 1 unless it completed, EXIT_INTERRUPTED when stopped before."""
    from noeta.cli.task_flags import task_options
    from noeta.cli.live import StreamPrinter, print_progress
    from noeta.cli.render import cost_text
    from noeta.client.client import AsyncClient
    from noeta.client.options import HostConfig
    from noeta.worker import build_worker

    settings = Settings()
    registry = worker_registry(args.registry, args.provider, settings, args.builtins, provider_required=args.agent is None)
    stream = args.stream if args.stream is not None else sys.stdout.isatty()
    printer = StreamPrinter(sys.stdout) if stream else None
    if printer is not None:
        registry.delta_sink = printer.on_delta
    client = await AsyncClient.connect(HostConfig(settings=settings, content_store=registry.content_store))
    task_id = args.task_id
    if args.agent is None:
        options = task_options(args, allowed_tools=list(registry.tools))
    else:  # the agent version's settings, the flags given over them; its objects served here
        from noeta.cli.version_commands import catalog, serve_agent

        catalog(client, args)
        task_id, options = client.agent_options(args.agent, task_options(args), task_id)
        serve_agent(registry, options)
    # A queue of its own: a `noeta worker` on the shared queue must never take this task (it would
    # answer with its own provider and tools).
    queue = f"{RUN_QUEUE_PREFIX}{uuid.uuid4().hex[:12]}"
    worker = build_worker(client.temporal, registry, queue)
    # The working directory is the built-in read_file tool's workspace.
    task_id = await client.start(args.goal, options, task_id=task_id, workspace_dir=os.getcwd(), task_queue=queue)
    _say(f"task {task_id} started (task queue {queue})")
    link = client.task_url(task_id)
    # A dev server this run started stops with it, and the next one listens elsewhere: say so.
    ours = client.server is not None and client.server.owned
    if link:
        _say(f"Temporal UI: {link}" + (" (while this run lasts)" if ours else ""))
    follower = asyncio.ensure_future(print_progress(client, task_id, printer)) if args.progress else None
    result_future = asyncio.ensure_future(client.result(task_id))
    await serve_until_signal(worker, result_future)
    if follower is not None:
        if result_future.done():  # let the last steps print before the answer
            await asyncio.wait([follower], timeout=5)
        follower.cancel()
    if not result_future.done():
        result_future.cancel()
        _say(
            f"stopped; task {task_id} is durable: `noeta worker --task-queue {queue}` resumes it (with the same "
            f"tools and providers), `noeta result {task_id}` waits for it"
        )
        return EXIT_INTERRUPTED
    result = result_future.result()
    if printer is not None and printer.text.strip() and printer.text.strip() == result.answer.strip():
        printer.end_line()  # the answer is on the screen already
    else:
        if printer is not None:
            printer.end_line()
        print(result.answer)
    _say(
        f"[{result.status}] task {task_id} · {result.turns} model call(s) · "
        f"{result.usage.input} in / {result.usage.output} out tokens · {cost_text(result.usage.cost_usd)}"
    )
    if len(result.usage_by_provider) > 1:  # it fell back: what each provider's calls used
        for spent in result.usage_by_provider:
            _say(
                f"  {spent.provider}{f' ({spent.model})' if spent.model else ''}: {spent.model_calls} call(s) · "
                f"{spent.usage.input} in / {spent.usage.output} out tokens · {cost_text(spent.usage.cost_usd)}"
            )
    if link and ours:
        _say(f"the Temporal UI stops with this run: `noeta server` serves it again (with this task, {task_id}); "
             f"`noeta events {task_id}` shows its steps")
    return 0 if result.status == "completed" else 1


async def cmd_serve(args: argparse.Namespace) -> int:
    """``noeta serve``: the HTTP API and the console; ConfigurationError without the [serve] extra."""
    try:
        from noeta.http.app import serve
    except ImportError as err:  # starlette / uvicorn are the [serve] extra
        raise ConfigurationError(f"noeta serve needs the HTTP extra: pip install 'noeta[serve]' ({err})") from err
    from noeta.client.client import AsyncClient
    from noeta.security.http_guard import ServerSettings

    client = await AsyncClient.connect()
    server = ServerSettings()
    keys = "API keys required" if server.api_keys or server.api_keys_file or server.api_keys_dsn else "no API keys"
    announce(f"Noeta HTTP API and console on http://{args.host}:{args.port} ({keys}; see docs/security.md)", stdout=True)
    await serve(client, args.host, args.port)
    return 0


async def cmd_codec_server(args: argparse.Namespace) -> int:
    """``noeta codec-server``: serve the payload codec (/encode, /decode) for the Temporal UI;
    ConfigurationError without the [serve] extra."""
    try:
        from noeta.security.codec_server import serve_codec
    except ImportError as err:  # starlette / uvicorn are the [serve] extra
        raise ConfigurationError(f"noeta codec-server needs the HTTP extra: pip install 'noeta[serve]' ({err})") from err
    announce(f"Noeta codec server on http://{args.host}:{args.port} (/encode, /decode)", stdout=True)
    await serve_codec(
        args.host, args.port, ui_origins=tuple(args.ui_origin), expand_refs=args.expand_refs,
        open_store=Settings().content_store,
    )
    return 0


def cmd_server(args: argparse.Namespace) -> int:
    """``noeta server``: run the embedded Temporal dev server until Ctrl-C or SIGTERM (or say where one
    already runs)."""
    settings = Settings()
    # SIGTERM stops the server as Ctrl-C does (by default it would end this process and leave
    # the server, in its own session, running). ``main`` turns SIGTERM into KeyboardInterrupt.
    codec = ("--ui-codec-endpoint", args.ui_codec_endpoint) if args.ui_codec_endpoint else ()
    server = ensure_server(settings.home / "temporal", port=args.port, ui_port=args.ui_port, extra_args=codec)
    try:
        print(f"Temporal dev server at {server.address}" + (f", UI {server.ui_url}" if server.ui_url else ""), flush=True)
        if not server.owned:
            flags = (("--port", args.port), ("--ui-port", args.ui_port), ("--ui-codec-endpoint", args.ui_codec_endpoint))
            asked = [flag for flag, value in flags if value]
            print("(already running, started by another process" + (
                f"; {', '.join(asked)} apply only to a server this command starts: stop that one first)" if asked else ")"
            ))
            return 0
        print("Ctrl-C (or SIGTERM) stops it.", flush=True)
        assert server.process is not None
        server.process.wait()
    except KeyboardInterrupt:
        pass  # asked to stop: a normal end
    finally:
        server.stop()  # ours only: stop() does nothing for a server another process started
    return 0


async def cmd_replay(args: argparse.Namespace) -> int:
    """``noeta replay``: recorded turns asked again (noeta.cli.recorded; it reads exports without a
    cluster, so it connects only for task ids)."""
    from noeta.cli.recorded import cmd_replay as replay

    return await replay(args)


async def cmd_eval(args: argparse.Namespace) -> int:
    """``noeta eval``: a dataset scored (noeta.cli.eval_command; it runs its own in-process worker)."""
    from noeta.cli.eval_command import cmd_eval as evaluate

    return await evaluate(args)


ASYNC_COMMANDS = {
    "run": cmd_run, "worker": cmd_worker, "serve": cmd_serve, "codec-server": cmd_codec_server, "replay": cmd_replay,
    "mcp": cmd_mcp, "eval": cmd_eval,
}
