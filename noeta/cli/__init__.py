"""``noeta``: run agents, workers, the embedded server and the HTTP API; inspect and steer tasks.

    noeta run "goal" [--registry pkg.mod:registry] [--provider NAME] [--model M] [--guard G]... [--no-progress]
    noeta worker [--registry pkg.mod:registry] [--task-queue Q] [--shutdown-grace-seconds S] [--health-port P]
    noeta doctor | server | serve [--host H --port P] | codec-server [--port P]
    noeta start "goal" [--tool T]... [--provider P] [--system S] [--queue Q] [--guard G]... [--keep-open]
    noeta send TASK "goal" | result TASK | events TASK [--follow] | messages TASK | cancel TASK | close TASK
    noeta inject TASK "text" | approvals [TASK] | approve TASK CALL [--reason R] | deny TASK CALL [--reason R]
    noeta tasks [--status S] [--search WORDS] [--model M] [--metadata K=V] | setup | retention --days N
    noeta export TASK > task.json | replay TASK|FILE... [--provider P] [--model M] [--system-prompt TEXT|@FILE]
    noeta fork TASK|FILE --at-turn N [--model M] [--provider P] [--system-prompt TEXT|@FILE] [--goal G]
    noeta run|start "goal" --agent NAME[@N] | versions | replay --agent NAME@A --under NAME@B [--last N]

Every user error is one line on stderr and exit code 2 (a failed goal: 1; interrupted: 130); no
traceback. ``noeta COMMAND --help`` explains each command (docs/cli.md).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from temporalio.service import RPCError

from noeta.cli.parser import add_tuning_arguments
from noeta.cli.parser import build as parser
from noeta.cli.processes import ASYNC_COMMANDS, cmd_server, tuning_from_args, worker_registry
from noeta.errors import NoetaError

__all__ = [
    "add_tuning_arguments", "describe", "main", "parser", "render", "render_envelope", "run", "tuning_from_args",
    "worker_registry",
]

def __getattr__(name: str) -> Any:
    # The renderers load the client side: only the commands that print tasks need them.
    if name in ("describe", "render", "render_envelope"):
        from noeta.cli import render as renderers

        return getattr(renderers, name)
    raise AttributeError(f"module 'noeta.cli' has no attribute {name!r}")


#: Commands that run until stopped: they get Noeta's logging and tracing setup.
_LONG_RUNNING = ("run", "worker", "serve", "codec-server")
EXIT_USER_ERROR = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


async def _client_command(args: argparse.Namespace) -> int:
    from noeta.cli.commands import COMMANDS
    from noeta.client.client import AsyncClient

    client = await AsyncClient.connect()
    return await COMMANDS[args.command](client, args)


async def _doctor(args: argparse.Namespace) -> int:
    from noeta.cli.doctor import diagnose
    from noeta.cli.doctor import render as render_check

    checks = await diagnose()
    for check in checks:
        print(render_check(check), flush=True)
    return 1 if any(c.status == "failed" for c in checks) else 0


def only_noeta_below_warning(record: logging.LogRecord) -> bool:
    """A log filter: other libraries' records only from WARNING up (``noeta run`` without -v)."""
    return record.levelno >= logging.WARNING or record.name == "noeta" or record.name.startswith("noeta.")


def _fail(text: str) -> None:
    from noeta.telemetry.logs import json_logging

    if json_logging():  # a long-running command with JSON logs: its last line is JSON too
        logging.getLogger("noeta.cli").error(text)
        return
    print(f"noeta: {text}".replace("\n", " "), file=sys.stderr, flush=True)


def run(argv: Sequence[str] | None = None) -> int:
    """Run one ``noeta`` command and return its exit code."""
    args = parser().parse_args(argv)  # a bad flag: usage and exit code 2
    if args.command in _LONG_RUNNING:
        from noeta.telemetry.logs import configure_logging
        from noeta.telemetry.tracing import configure_tracing

        log_handler = configure_logging()  # NOETA_LOG_LEVEL, NOETA_LOG_FORMAT=json
        if args.command == "run" and not args.verbose:
            from noeta.cli.live import not_in_progress

            log_handler.addFilter(only_noeta_below_warning)  # Noeta's progress lines, not httpx's
            log_handler.addFilter(not_in_progress)  # failed attempts: the progress lines say them
        configure_tracing()  # OTEL_* (off when unset)
    try:
        if args.command == "server":
            return cmd_server(args)
        handler = ASYNC_COMMANDS.get(args.command) or (_doctor if args.command == "doctor" else _client_command)
        return asyncio.run(handler(args))
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM (see main), uvicorn re-raising SIGINT after a graceful stop
        return EXIT_INTERRUPTED
    except NoetaError as err:
        _fail(f"{type(err).__name__}: {err}")
        return EXIT_USER_ERROR
    except RPCError as err:  # the cluster refused the call (permissions, a malformed query...)
        _fail(f"Temporal refused the call ({err.status.name if err.status else 'error'}): {err.message}")
        return EXIT_FAILED
    except BrokenPipeError:  # `noeta events T | head`: the reader left, nothing more to say
        _silence_stdout()
        return EXIT_FAILED


def _silence_stdout() -> None:
    """Point stdout at /dev/null so flushing at exit cannot raise again on the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The console entry: run the command, then leave without interpreter finalization.

    temporalio's native runtime keeps threads that may call into Python while the interpreter
    finalizes, which can abort an otherwise finished process ("PyGILState_Release ... finalizing").
    So: flush, run the exit handlers (they stop an embedded server we started), and ``os._exit``.
    SIGTERM is handled like Ctrl-C (commands that serve install their own graceful handlers), so
    the exit handlers run and a dev server this process started never outlives it.
    """
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    code = run(argv)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):
            _silence_stdout()
    atexit._run_exitfuncs()
    os._exit(code)


if __name__ == "__main__":
    main()
