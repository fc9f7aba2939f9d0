"""LocalContentStore, TranscriptStore (hash chain) and MemoryStore, on temp directories."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from noeta.builtins.memory.impl import Memory, MemoryStore, slugify
from noeta.context.content_store import (
    ContentNotFoundError,
    ContentStore,
    LocalContentStore,
)
from noeta.context.transcript import NODE_MEDIA_TYPE, TranscriptStore
from noeta.protocols.messages import (
    ContentRef,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)


def _files(root: Path) -> list[Path]:
    """Body files (and stray temp files); not the retention bookkeeping at the top (.owners, lock)."""
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.relative_to(root).parts[0].startswith("."))


# =========================================================================== LocalContentStore


@pytest.fixture
def store(tmp_path: Path) -> LocalContentStore:
    return LocalContentStore(tmp_path / "content")


def test_local_store_is_a_content_store(store: LocalContentStore) -> None:
    assert isinstance(store, ContentStore)


def test_put_returns_sha256_ref(store: LocalContentStore) -> None:
    data = b"hello, noeta"
    ref = store.put(data, "application/json")
    assert ref == ContentRef(hash=hashlib.sha256(data).hexdigest(), size=len(data), media_type="application/json")
    assert store.put(b"x").media_type == "text/plain"


def test_put_empty_bytes(store: LocalContentStore) -> None:
    ref = store.put(b"")
    assert ref.hash == hashlib.sha256(b"").hexdigest()
    assert ref.size == 0
    assert store.get(ref) == b""


def test_same_bytes_same_ref_one_file(store: LocalContentStore) -> None:
    data = b"\x00\x01 binary \xff" * 100
    first = store.put(data)
    second = store.put(data)
    assert first == second
    files = _files(store.root)
    assert len(files) == 1
    # Laid out as root/ab/cdef... with no temp file left behind.
    assert files[0] == store.root / first.hash[:2] / first.hash[2:]
    assert files[0].read_bytes() == data


def test_distinct_bytes_distinct_files(store: LocalContentStore) -> None:
    a, b = store.put(b"a"), store.put(b"b")
    assert a.hash != b.hash
    assert len(_files(store.root)) == 2


def test_get_by_ref_or_hash(store: LocalContentStore) -> None:
    data = "unicode ✓ 日本語".encode()
    ref = store.put(data)
    assert store.get(ref) == data
    assert store.get(ref.hash) == data
    # Lookups use the hash only.
    assert store.get(ContentRef(hash=ref.hash, size=0, media_type="image/png")) == data


def test_second_store_on_same_root_sees_content(store: LocalContentStore) -> None:
    ref = store.put(b"shared")
    assert LocalContentStore(store.root).get(ref) == b"shared"


def test_missing_hash_raises_content_not_found(store: LocalContentStore) -> None:
    missing = hashlib.sha256(b"never stored").hexdigest()
    with pytest.raises(ContentNotFoundError) as info:
        store.get(missing)
    assert isinstance(info.value, KeyError)
    message = str(info.value)
    assert "client and worker must use the same content store" in message
    assert missing[:12] in message
    with pytest.raises(KeyError):
        store.get(ContentRef(hash=missing, size=1))


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "abc",
        "0" * 63,
        "0" * 65,
        "A" * 64,  # upper-case hex is not the canonical form
        "g" * 64,
        "../" + "0" * 61,
        "0" * 63 + "/",
    ],
)
def test_malformed_hash_raises_value_error(store: LocalContentStore, bad: str) -> None:
    with pytest.raises(ValueError, match="not a sha256 hex digest"):
        store.get(bad)
    with pytest.raises(ValueError):
        store.get(ContentRef(hash=bad, size=0))


def test_malformed_hash_is_not_content_not_found(store: LocalContentStore) -> None:
    with pytest.raises(ValueError) as info:
        store.get("nope")
    assert not isinstance(info.value, KeyError)


# =========================================================================== TranscriptStore


def _user(text: str) -> Message:
    return Message(role="user", content=[TextBlock(text=text)], origin="human")


def _assistant(text: str) -> Message:
    return Message(role="assistant", content=[TextBlock(text=text)])


@pytest.fixture
def transcripts(store: LocalContentStore) -> TranscriptStore:
    return TranscriptStore(store)


def test_load_of_none_is_empty(transcripts: TranscriptStore) -> None:
    assert transcripts.load(None) == ()


def test_append_returns_new_head_and_load_returns_all_in_order(
    store: LocalContentStore, transcripts: TranscriptStore
) -> None:
    h1 = transcripts.append(None, [_user("hi")])
    h2 = transcripts.append(h1, [_assistant("hello"), _user("more")])
    h3 = transcripts.append(h2, [_assistant("done")])
    assert len({h1.hash, h2.hash, h3.hash}) == 3
    assert h3.media_type == NODE_MEDIA_TYPE

    expected = (_user("hi"), _assistant("hello"), _user("more"), _assistant("done"))
    assert transcripts.load(h3) == expected
    # Earlier heads still load their own prefix.
    assert transcripts.load(h1) == expected[:1]
    assert transcripts.load(h2) == expected[:3]

    # A fresh store on the same content (empty cache) walks the chain and agrees.
    fresh = TranscriptStore(store)
    assert fresh.load(h3) == expected
    assert fresh.load(h2) == expected[:3]
    assert TranscriptStore(LocalContentStore(store.root)).load(h3) == expected


def test_chain_round_trips_every_block_type(store: LocalContentStore, transcripts: TranscriptStore) -> None:
    big = store.put(b"a large tool output")
    image = ImageBlock(source=store.put(b"\x89PNG", "image/png"))
    messages = [
        Message(role="system", content=[TextBlock(text="sys")], origin="system"),
        Message(role="user", content=[TextBlock(text="look"), image], origin="human"),
        Message(
            role="assistant",
            content=[ToolUseBlock(call_id="c1", tool_name="grep", arguments={"q": "x", "n": [1, 2]})],
        ),
        Message(
            role="tool",
            content=[
                ToolResultBlock(call_id="c1", output=big, success=True, images=[image]),
                ToolResultBlock(call_id="c2", output="small", success=False, error="boom"),
                ToolResultBlock(call_id="c3", output=None, success=True),
            ],
        ),
    ]
    head = transcripts.append(None, messages)
    loaded = TranscriptStore(store).load(head)
    assert loaded == tuple(messages)
    assert isinstance(loaded[3].content[0].output, ContentRef)
    assert isinstance(loaded[1].content[1], ImageBlock)


def test_fresh_store_with_tiny_cache_loads_long_chain(store: LocalContentStore) -> None:
    writer = TranscriptStore(store)
    head = None
    expected: list[Message] = []
    heads = []
    for i in range(30):
        step = [_user(f"u{i}"), _assistant(f"a{i}")]
        head = writer.append(head, step)
        heads.append(head)
        expected.extend(step)

    reader = TranscriptStore(store, cache_mb=2 * (heads[1].size + 1) / 2**20)  # room for about two nodes
    assert reader.load(heads[9]) == tuple(expected[:20])
    # Walks back only to the cached ancestor, result must still be complete and ordered.
    assert reader.load(head) == tuple(expected)
    assert reader.load(heads[0]) == tuple(expected[:2])
    assert reader.load(heads[20]) == tuple(expected[:42])


class CountingStore(LocalContentStore):
    """Counts the bodies read back, to tell what the transcript cache spared."""

    reads = 0

    def get(self, ref: ContentRef | str) -> bytes:
        self.reads += 1
        return super().get(ref)


def _tool_round(task: int, step: int) -> list[Message]:
    return [_assistant(f"task {task} calls step {step}"), _user(f"task {task} result {step} " + "x" * 200)]


def test_every_running_task_keeps_its_transcript_cached(tmp_path: Path) -> None:
    """A worker running a thousand tasks at once reads no transcript back between their model calls
    (a cache bounded by count, 256 chains, read every chain back from the store at every call)."""
    store = CountingStore(tmp_path / "content")
    transcripts = TranscriptStore(store)
    heads: list[ContentRef | None] = [None] * 1000
    expected: list[list[Message]] = [[] for _ in heads]
    for step in range(3):
        for task, head in enumerate(heads):  # round robin, as a busy worker serves them
            assert transcripts.load(head) == tuple(expected[task])
            heads[task] = transcripts.append(head, _tool_round(task, step))
            expected[task].extend(_tool_round(task, step))
    assert store.reads == 0


def test_transcript_cache_is_bounded_by_stored_size(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "content")
    writer = TranscriptStore(store)
    chains = []
    for task in range(3):
        head = None
        for step in range(3):
            head = writer.append(head, _tool_round(task, step))
        chains.append(head)
    one_chain = _chain_size(store, chains[0])
    reader = TranscriptStore(store, cache_mb=2.5 * one_chain / 2**20)  # room for two of the three
    for head in chains:
        reader.load(head)
    store.reads = 0
    assert reader.load(chains[2]) == writer.load(chains[2]) and store.reads == 0  # the newest two stay
    assert reader.load(chains[1]) and store.reads == 0
    reader.load(chains[0])  # the oldest was evicted: read back, all of its nodes
    assert store.reads == 3


def test_transcript_larger_than_the_cache_is_read_back_and_evicts_nothing(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "content")
    small = TranscriptStore(store).append(None, [_user("short")])
    big = TranscriptStore(store).append(None, [_user("y" * 5000)])
    reader = TranscriptStore(store, cache_mb=1000 / 2**20)
    reader.load(small)
    reader.load(big)
    store.reads = 0
    assert reader.load(small) == (_user("short"),) and store.reads == 0
    assert reader.load(big) == (_user("y" * 5000),) and store.reads == 1


def test_new_head_replaces_its_parent_in_the_cache(tmp_path: Path) -> None:
    """One entry per task: a retry of a call still finds its parent, read back from the store."""
    store = CountingStore(tmp_path / "content")
    transcripts = TranscriptStore(store)
    parent = transcripts.append(None, [_user("goal")])
    head = transcripts.append(parent, [_assistant("answer")])
    store.reads = 0
    assert transcripts.load(head) == (_user("goal"), _assistant("answer")) and store.reads == 0
    assert transcripts.load(parent) == (_user("goal"),) and store.reads == 1


def _chain_size(store: LocalContentStore, head: ContentRef) -> int:
    size, digest = 0, head.hash
    while digest:
        data = store.get(digest)
        size += len(data)
        digest = json.loads(data)["parent"]
    return size


def test_same_parent_and_messages_give_same_head(store: LocalContentStore) -> None:
    a = TranscriptStore(store).append(None, [_user("same")])
    b = TranscriptStore(store).append(None, [_user("same")])
    assert a == b
    # Branching from one head keeps both branches intact.
    t = TranscriptStore(store)
    left = t.append(a, [_assistant("left")])
    right = t.append(a, [_assistant("right")])
    assert TranscriptStore(store).load(left) == (_user("same"), _assistant("left"))
    assert TranscriptStore(store).load(right) == (_user("same"), _assistant("right"))


def test_node_holds_only_its_steps_messages(store: LocalContentStore, transcripts: TranscriptStore) -> None:
    head = None
    sizes = []
    for i in range(25):
        new = [_user(f"question {i:03d}"), _assistant(f"answer {i:03d}")]
        parent = head
        head = transcripts.append(head, new)
        node = json.loads(store.get(head))
        assert node["parent"] == (parent.hash if parent else None)
        assert len(node["messages"]) == 2
        assert [m["content"][0]["text"] for m in node["messages"]] == [f"question {i:03d}", f"answer {i:03d}"]
        assert head.size == len(store.get(head))
        sizes.append(head.size)
    # Every node after the root has the same size: it does not grow with the chain's length.
    assert len(set(sizes[1:])) == 1
    assert sizes[0] < sizes[1]  # root has "parent": null instead of a 64-char hash
    assert sizes[-1] - sizes[0] == len(json.dumps("0" * 64)) - len("null")


def test_resolve_replaces_only_content_ref_outputs(store: LocalContentStore, transcripts: TranscriptStore) -> None:
    body = "line 1\nline 2 ✓\n" * 50
    ref = store.put(body.encode())
    image = ImageBlock(source=store.put(b"img", "image/png"))
    tool_message = Message(
        role="tool",
        content=[
            ToolResultBlock(call_id="c1", output=ref, success=True, error=None, images=[image]),
            ToolResultBlock(call_id="c2", output="inline", success=False, error="e"),
            ToolResultBlock(call_id="c3", output=None, success=True),
            TextBlock(text="note"),
        ],
        origin="system",
    )
    plain = _user("untouched")
    resolved = transcripts.resolve((plain, tool_message))

    assert len(resolved) == 2
    assert resolved[0] is plain  # messages without references are passed through as-is
    out = resolved[1]
    assert out.role == "tool"
    assert out.origin == "system"
    assert out.content[0] == ToolResultBlock(call_id="c1", output=body, success=True, error=None, images=[image])
    assert out.content[1] == tool_message.content[1]
    assert out.content[2] == tool_message.content[2]
    assert out.content[3] == TextBlock(text="note")
    # The input is not mutated.
    assert tool_message.content[0].output == ref


def test_resolve_after_load_from_fresh_store(store: LocalContentStore) -> None:
    ref = store.put(b"stored text")
    head = TranscriptStore(store).append(
        None, [Message(role="tool", content=[ToolResultBlock(call_id="c", output=ref, success=True)])]
    )
    fresh = TranscriptStore(store)
    resolved = fresh.resolve(fresh.load(head))
    assert resolved[0].content[0].output == "stored text"


def test_resolve_missing_body_raises_content_not_found(store: LocalContentStore) -> None:
    missing = ContentRef(hash=hashlib.sha256(b"gone").hexdigest(), size=4)
    message = Message(role="tool", content=[ToolResultBlock(call_id="c", output=missing, success=True)])
    with pytest.raises(ContentNotFoundError):
        TranscriptStore(store).resolve([message])


def test_load_of_unknown_head_raises_content_not_found(store: LocalContentStore) -> None:
    with pytest.raises(ContentNotFoundError):
        TranscriptStore(store).load(ContentRef(hash=hashlib.sha256(b"nope").hexdigest(), size=0))


# =========================================================================== MemoryStore


@pytest.fixture
def memories(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "memory")


def test_write_read_round_trip_with_frontmatter(memories: MemoryStore) -> None:
    fm = {
        "title": "Preferred deploy window",
        "tags": ["ops", "deploy"],
        "priority": 3,
        "score": 0.25,
        "pinned": True,
        "owner": None,
        "nested": {"k": [1, None, "x"]},
        "quote": 'he said "hi": ok\nnext line',
        "unicode": "日本語 ✓ émoji 🎉",
    }
    body = "Deploys happen Tuesdays after 14:00 UTC.\n\n---\nnot frontmatter: 1\n"
    written = memories.write("deploy-window", body, **fm)
    assert written == Memory("deploy-window", body, fm)
    read = memories.read("deploy-window")
    assert read == Memory("deploy-window", body, fm)
    assert type(read.frontmatter["priority"]) is int
    assert type(read.frontmatter["score"]) is float


def test_file_format_is_human_readable(memories: MemoryStore) -> None:
    memories.write("note", "Body ✓", title="Tïtle", tags=["a"])
    text = (memories.root / "note.md").read_text(encoding="utf-8")
    assert text == '---\ntags: ["a"]\ntitle: "Tïtle"\n---\nBody ✓'


def test_empty_body_with_frontmatter(memories: MemoryStore) -> None:
    memories.write("e", "", k=1)
    assert memories.read("e") == Memory("e", "", {"k": 1})


def test_round_trip_without_frontmatter(memories: MemoryStore) -> None:
    memories.write("plain", "just a body")
    assert memories.read("plain") == Memory("plain", "just a body", {})


def test_body_line_endings_round_trip(memories: MemoryStore) -> None:
    memories.write("crlf", "a\r\nb\rc", k=1)
    assert memories.read("crlf").body == "a\r\nb\rc"


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85"])
def test_frontmatter_unicode_line_separators_round_trip(memories: MemoryStore, sep: str) -> None:
    memories.write("sep", "b", title=f"a{sep}b")
    assert memories.read("sep").frontmatter == {"title": f"a{sep}b"}


def test_overwrite_replaces(memories: MemoryStore) -> None:
    memories.write("m", "one", v=1)
    memories.write("m", "two", w=2)
    assert memories.read("m") == Memory("m", "two", {"w": 2})
    assert memories.list() == ["m"]


def test_list_and_delete(memories: MemoryStore) -> None:
    assert memories.list() == []
    for slug in ["zeta", "alpha", "m-1"]:
        memories.write(slug, slug, k=slug)
    assert memories.list() == ["alpha", "m-1", "zeta"]
    assert memories.delete("m-1") is True
    assert memories.delete("m-1") is False
    assert memories.list() == ["alpha", "zeta"]
    with pytest.raises(FileNotFoundError):
        memories.read("m-1")
    # No temp files are left behind by writes.
    assert sorted(p.name for p in memories.root.iterdir()) == ["alpha.md", "zeta.md"]


def test_store_reopened_on_same_root(memories: MemoryStore) -> None:
    memories.write("kept", "body", tags=["x"])
    assert MemoryStore(memories.root).read("kept") == Memory("kept", "body", {"tags": ["x"]})


@pytest.mark.parametrize(
    "slug",
    ["", "Upper", "-leading", "has space", "under_score", "dot.md", "../escape", "a/b", "é", "a" * 81],
)
def test_invalid_slug_raises_value_error(memories: MemoryStore, slug: str) -> None:
    with pytest.raises(ValueError, match="invalid memory slug"):
        memories.write(slug, "x")
    with pytest.raises(ValueError, match="invalid memory slug"):
        memories.read(slug)
    with pytest.raises(ValueError, match="invalid memory slug"):
        memories.delete(slug)
    assert memories.list() == []


def test_slug_with_trailing_newline_is_invalid(memories: MemoryStore) -> None:
    with pytest.raises(ValueError):
        memories.write("abc\n", "x")


def test_valid_slug_edges(memories: MemoryStore) -> None:
    longest = "a" * 80
    for slug in ["0", "a-", longest, "9-lives"]:
        memories.write(slug, "x")
    assert memories.list() == sorted(["0", "a-", longest, "9-lives"])


@pytest.mark.parametrize(
    ("text", "slug"),
    [
        ("Preferred deploy window", "preferred-deploy-window"),
        ("  Hello, World!  ", "hello-world"),
        ("already-a-slug", "already-a-slug"),
        ("Ünïcode words", "n-code-words"),
        ("v2.0 -- release", "v2-0-release"),
        ("a" * 79 + " b", "a" * 79),  # cut at 80, then the trailing '-' stripped
        ("x" * 200, "x" * 80),
    ],
)
def test_slugify(text: str, slug: str) -> None:
    assert slugify(text) == slug
    assert len(slug) <= 80


@pytest.mark.parametrize("text", ["", "   ", "日本語", "!!!", "---"])
def test_slugify_rejects_text_without_ascii_words(text: str) -> None:
    with pytest.raises(ValueError, match="cannot make a slug"):
        slugify(text)


def test_slugify_output_is_accepted_by_store(memories: MemoryStore) -> None:
    for text in ["Preferred deploy window", "x" * 200, "a" * 79 + " b", "  Hello, World!  "]:
        slug = slugify(text)
        memories.write(slug, text, source=text)
        assert memories.read(slug) == Memory(slug, text, {"source": text})
