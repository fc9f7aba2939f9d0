"""The CLI commands that talk to tasks through the client: start, send, result, events, messages,
cancel, close, inject, approvals, approve, deny, audit, tasks, setup, retention, versions, doctor."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import timedelta

from pydantic_core import to_jsonable_python

from noeta.cli.queue_limits import cmd_queue_limits
from noeta.cli.recorded import cmd_export, cmd_fork, cmd_import
from noeta.cli.schedule_commands import cmd_schedule
from noeta.cli.version_commands import catalog, cmd_versions
from noeta.cli.task_flags import identity_of as _identity
from noeta.cli.task_flags import task_options
from noeta.cli.render import approval_line, audit_line, render, render_envelope, task_line
from noeta.client.client import AsyncClient, PendingApproval
from noeta.client.inspection import ApprovalsInbox
from noeta.client.visibility import register_search_attributes
from noeta.client.wire import envelope_to_dict


async def cmd_start(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta start``: start a task on the shared task queue and print its id (a worker runs it)."""
    options = task_options(args, provider=args.provider, allowed_tools=list(args.tool) or None)
    if args.agent is not None:
        catalog(client, args)  # --agents, else NOETA_AGENTS
    print(await client.start(
        args.goal, options, task_id=args.task_id, keep_open=args.keep_open, task_queue=args.queue, identity=_identity(args),
        agent=args.agent,
    ))
    return 0


async def cmd_send(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta send``: give a keep-open task its next goal and print the answer; exit status 1 unless it
    completed."""
    result = await client.send_goal(args.task, args.goal, if_busy=args.if_busy)
    print(result.answer)
    return 0 if result.status == "completed" else 1


async def cmd_result(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta result``: wait for the task's result and print its answer; exit status 1 unless it completed.
    """
    result = await client.result(args.task)
    print(result.answer)
    return 0 if result.status == "completed" else 1


async def cmd_events(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta events``: print the task's event envelopes (as JSON lines with ``--json``), following it with
    ``--follow``."""
    async for env in client.events(args.task, follow=args.follow):
        print(json.dumps(envelope_to_dict(env), ensure_ascii=False) if args.json else render_envelope(env), flush=True)
    return 0


async def cmd_messages(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta messages``: print the task's conversation, one line per message."""
    for item in await client.messages(args.task):
        print(render(item))
    return 0


async def cmd_cancel(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta cancel``: ask the task to cancel."""
    await client.cancel(args.task, identity=_identity(args))
    print(f"cancel requested for task {args.task}")
    return 0


async def cmd_close(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta close``: let a keep-open task end once its queued goals are done."""
    await client.close_task(args.task, identity=_identity(args))
    print(f"task {args.task} closes after its queued goals")
    return 0


async def cmd_inject(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta inject``: add a message to the task's conversation, read by the model at its next step."""
    await client.inject(args.task, args.text, args.origin, identity=_identity(args))
    print(f"injected into task {args.task} (the model sees it at its next step)")
    return 0


async def cmd_approvals(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta approvals``: list the actions waiting for a human's approval, of one task or of all."""
    if args.task:
        waiting = ApprovalsInbox([PendingApproval(args.task, None, r) for r in await client.pending_approvals(args.task)], [])
    else:
        waiting = await client.approvals_waiting(args.limit, tenant=args.tenant)
    for item in waiting:
        print(approval_line(item))
    # What could not be read is named, not hidden, and does not hide what could.
    for unreadable in waiting.unreadable:
        print(f"task {unreadable.task_id} waits for approval but could not be read here: "
              f"{type(unreadable.error).__name__}: {unreadable.error}", file=sys.stderr)
    if not waiting and not waiting.unreadable:
        print("nothing waits for approval")
    return 0


async def cmd_approve(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta approve`` / ``noeta refuse``: answer one pending approval of a task."""
    approved = args.command == "approve"
    arguments = getattr(args, "arguments", None)
    await client.approve(args.task, args.call, approved, args.reason, _identity(args), arguments=arguments)
    edited = " with edited arguments" if arguments is not None else ""
    print(f"{'approved' if approved else 'refused'} {args.call} of task {args.task}{edited}")
    return 0


async def cmd_audit(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta audit``: who started the task, answered its approvals, injected, cancelled, and when."""
    entries = await client.audit(args.task)
    for entry in entries:
        print(json.dumps(to_jsonable_python(entry), ensure_ascii=False) if args.json else audit_line(entry))
    if not entries and not args.json:
        print("nothing recorded")
    return 0


async def cmd_tasks(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta tasks``: list tasks (filtered by status, words of the goal, model or metadata), one line or
    JSON object each."""
    tasks = await client.list_tasks(
        args.status, args.limit, search=args.search, model=args.model, metadata=dict(args.metadata), tenant=args.tenant
    )
    for t in tasks:
        print(json.dumps(to_jsonable_python(t), ensure_ascii=False) if args.json else task_line(t))
    if not tasks and not args.json:
        print("no tasks" + (f" with status {args.status!r}" if args.status else ""))
    return 0


async def cmd_setup(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta setup``: register Noeta's search attributes with the cluster."""
    added = await register_search_attributes(client.temporal)
    print(f"registered search attributes: {', '.join(added)}" if added else "search attributes already registered")
    return 0


async def cmd_retention(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta retention``: release the stored bodies of tasks closed more than ``--days`` ago (only report
    them with ``--dry-run``)."""
    from noeta.client.retention import apply_retention

    report = await apply_retention(
        client.temporal, client.content_store, timedelta(days=args.days), dry_run=args.dry_run
    )
    verb = "would release" if args.dry_run else "released"
    print(
        f"{verb} {len(report.released)} task(s) closed more than {args.days:g} day(s) ago; kept {report.kept}; "
        f"deleted {report.bodies_deleted} bodies ({report.bytes_deleted} bytes) and {report.step_records_deleted} "
        "step records"
    )
    for task_id in report.released if args.verbose else ():
        print(task_id)
    return 0


COMMANDS = {
    "start": cmd_start,
    "send": cmd_send,
    "result": cmd_result,
    "events": cmd_events,
    "messages": cmd_messages,
    "cancel": cmd_cancel,
    "close": cmd_close,
    "inject": cmd_inject,
    "approvals": cmd_approvals,
    "approve": cmd_approve,
    "deny": cmd_approve,
    "audit": cmd_audit,
    "tasks": cmd_tasks,
    "setup": cmd_setup,
    "retention": cmd_retention,
    "export": cmd_export,
    "fork": cmd_fork,
    "import": cmd_import,
    "schedule": cmd_schedule,
    "queue-limits": cmd_queue_limits,
    "versions": cmd_versions,
}
