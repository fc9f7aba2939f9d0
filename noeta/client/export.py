"""Task exports: a task's history and the stored bodies it refers to, as one JSON-serialisable
dict, and loading one back.

An export is what a task *is* on the record, taken anywhere: its history (every run, payloads
decoded, so it reads without the cluster's codec) and every content-store body its history points
at (the transcript's nodes and what they refer to: tool outputs, images; the system prompt, the
schemas, the providers' raw responses). It can be replayed on a laptop or kept as a test fixture
(``noeta.sdk.testing.load_task``). An export of an encrypted task holds its payloads and bodies in
the clear: treat it like the data it holds.

Shape (``format`` names the version)::

    {"format": "noeta-task-export/1", "task_id": "...",
     "runs": [<a run's history, as Temporal's JSON>, ...],
     "bodies": {"<sha256>": {"media_type": "...", "data": "<base64>"}, ...},
     "missing": ["<sha256>", ...]}

``missing`` lists bodies the history points at that the store no longer had (retention released
them): a turn whose transcript needs one cannot be rebuilt.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message as ProtoMessage
from temporalio.api.common.v1 import Payload
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client as TemporalClient
from temporalio.client import WorkflowHistory

from noeta.client.events import history_runs
from noeta.client.projection import project
from noeta.client.projection.turns import RecordedTask, recorded_turns
from noeta.context.content_store import ContentNotFoundError, ContentStore
from noeta.context.memory_store import MemoryContentStore
from noeta.context.transcript import NODE_MEDIA_TYPE
from noeta.errors import ExportFormatError
from noeta.protocols.ids import check_task_id
from noeta.protocols.messages import ContentRef
from noeta.protocols.event_log import EventEnvelope

EXPORT_FORMAT = "noeta-task-export/1"
_JSON_ENCODINGS = (b"json/plain",)


async def export_task(temporal: TemporalClient, store: ContentStore, task_id: str) -> dict[str, Any]:
    """The export of ``task_id``: its runs' history (decoded with the client's codec) and the
    bodies they refer to, read from ``store``. TaskNotFoundError for an unknown task."""
    runs = await history_runs(temporal, task_id)
    return export_of(task_id, runs, store)


def export_of(task_id: str, runs: Sequence[Sequence[HistoryEvent]], store: ContentStore) -> dict[str, Any]:
    """The export of a task's ``runs``, with the bodies they refer to read from ``store``."""
    bodies, missing = collect_bodies(runs, store)
    return {
        "format": EXPORT_FORMAT,
        "task_id": task_id,
        "runs": [WorkflowHistory(task_id, events).to_json_dict() for events in runs],
        "bodies": {
            digest: {"media_type": media_type, "data": base64.b64encode(data).decode("ascii")}
            for digest, (media_type, data) in sorted(bodies.items())
        },
        "missing": sorted(missing),
    }


def collect_bodies(
    runs: Sequence[Sequence[HistoryEvent]], store: ContentStore
) -> tuple[dict[str, tuple[str, bytes]], set[str]]:
    """Every body the runs' payloads refer to, and the ones they refer to in turn (a transcript
    node's parent and messages), by hash: ({hash: (media type, bytes)}, hashes the store lacks)."""
    wanted: dict[str, str] = {}
    for events in runs:
        for event in events:
            for payload in _payloads(event):
                if payload.metadata.get("encoding") in _JSON_ENCODINGS:
                    try:
                        value = json.loads(payload.data)
                    except ValueError:
                        continue
                    wanted.update(_refs_in(value))
    bodies: dict[str, tuple[str, bytes]] = {}
    missing: set[str] = set()
    queue = list(wanted.items())
    while queue:
        digest, media_type = queue.pop()
        if digest in bodies or digest in missing:
            continue
        try:
            data = store.get(digest)
        except ContentNotFoundError:
            missing.add(digest)
            continue
        bodies[digest] = (media_type, data)
        if media_type == NODE_MEDIA_TYPE:  # a transcript node: its parent and what its messages hold
            node = json.loads(data)
            if node.get("parent"):
                queue.append((node["parent"], NODE_MEDIA_TYPE))
            queue.extend(_refs_in(node.get("messages")).items())
    return bodies, missing


def _payloads(message: ProtoMessage) -> Iterator[Payload]:
    """Every Payload inside a protobuf message, however deep."""
    if isinstance(message, Payload):
        yield message
        return
    for descriptor, value in message.ListFields():
        if descriptor.message_type is None:
            continue
        if isinstance(value, ProtoMessage):
            values: Any = (value,)
        elif descriptor.message_type.GetOptions().map_entry:
            values = value.values()
        else:  # a repeated field
            values = value
        for item in values:
            if isinstance(item, ProtoMessage):
                yield from _payloads(item)


def _refs_in(value: Any) -> dict[str, str]:
    """The content references (``{"type": "ref", "hash": ...}``) in a JSON value, by hash."""
    found: dict[str, str] = {}
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            digest = item.get("hash")
            if item.get("type") == "ref" and isinstance(digest, str) and len(digest) == 64:
                found[digest] = str(item.get("media_type") or "text/plain")
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


@dataclass
class LoadedTask:
    """A task read back from an export: its history, and its bodies in a content store of its own.
    """

    task_id: str
    runs: list[list[HistoryEvent]]
    """Each run's history events, in order."""
    store: MemoryContentStore
    """The exported bodies (hash-checked when loaded)."""
    missing: tuple[str, ...] = ()
    """Bodies the export lacked (released from the store before the export was taken)."""
    ignored_bodies: int = 0
    """Bodies in the file that its history does not refer to: not read, not kept."""

    def histories(self) -> list[WorkflowHistory]:
        """Each run as a WorkflowHistory (for ``temporalio.worker.Replayer``)."""
        return [WorkflowHistory(self.task_id, events) for events in self.runs]

    def events(self) -> list[EventEnvelope]:
        """The task's event log, projected from the exported history as from a live task's."""
        return project(self.runs, task_id=self.task_id)

    def recorded(self) -> RecordedTask:
        """The task's model turns, as its history recorded them."""
        return recorded_turns(self.runs)


def load_export(data: Mapping[str, Any] | str | bytes) -> LoadedTask:
    """Read an export (the dict, or its JSON text) back. ExportFormatError when it is not one, or
    a body does not match its hash."""
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except ValueError as err:
            raise ExportFormatError(f"a task export is JSON: {err}") from err
        except RecursionError:  # the decoder recurses per level: a hostile file nests deep
            raise ExportFormatError("a task export nests deeper than any export does: refused") from None
    if not isinstance(data, Mapping):
        raise ExportFormatError(f"a task export is a JSON object, not {type(data).__name__}")
    if data.get("format") != EXPORT_FORMAT:
        raise ExportFormatError(
            f"not a task export of format {EXPORT_FORMAT!r} (format: {data.get('format')!r}); "
            "`noeta export TASK` or Client.export(task_id) writes one"
        )
    task_id = data.get("task_id")
    runs, bodies = data.get("runs"), data.get("bodies")
    if not isinstance(task_id, str) or not isinstance(runs, list) or not runs or not isinstance(bodies, Mapping):
        raise ExportFormatError("a task export needs task_id, a non-empty runs list and bodies")
    check_task_id(task_id)  # as a start refuses it: it becomes a workflow id, URLs, keys
    try:
        histories = [list(WorkflowHistory.from_json(task_id, run).events) for run in runs]
    except Exception as err:  # protobuf's JSON parser raises its own ParseError, or TypeError...
        raise ExportFormatError(f"a run's history in the export does not decode: {err}") from err
    # Only the bodies the history refers to (directly, or through the transcript nodes it names)
    # are read, checked and kept: anything else in the file is ignored, never stored.
    try:
        referenced, absent = collect_bodies(histories, _ExportedBodies(bodies))
    except ExportFormatError:
        raise
    except (RecursionError, ValueError) as err:  # a transcript node that is not JSON, or nests deep
        raise ExportFormatError(f"a body the history refers to does not decode: {type(err).__name__}") from None
    store = MemoryContentStore()
    for media_type, raw in referenced.values():
        store.put(raw, media_type)
    missing = tuple(sorted({*(str(m) for m in data.get("missing") or ()), *absent}))
    return LoadedTask(task_id, histories, store, missing, ignored_bodies=len(bodies) - len(referenced))


class _ExportedBodies:
    """An export's ``bodies`` as a store to read from: a body is decoded and checked against its
    hash only when asked for (ExportFormatError when malformed or altered)."""

    def __init__(self, bodies: Mapping[str, Any]) -> None:
        self.bodies = bodies

    def put(self, data: bytes, media_type: str = "text/plain") -> ContentRef:
        raise ExportFormatError("an export's bodies are read, not written")

    def get(self, ref: ContentRef | str) -> bytes:
        digest = ref if isinstance(ref, str) else ref.hash
        body = self.bodies.get(digest)
        if body is None:
            raise ContentNotFoundError(f"the export has no body {digest}")
        try:
            raw = base64.b64decode(body["data"], validate=True)
        except (KeyError, TypeError, ValueError) as err:
            raise ExportFormatError(f"body {digest} in the export is malformed: {err}") from err
        if hashlib.sha256(raw).hexdigest() != digest:
            raise ExportFormatError(f"body {digest} in the export does not match its hash")
        return raw
