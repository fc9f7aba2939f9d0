"""Scopes (seed 002: equipScope / expectScope / ScopeError), the seed's examples in Python:
validated with schema defaults, deep-frozen, nearest level wins across grandparent -> parent ->
child, recorded in history and shown in the projection, failing fast before any token is spent."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from noeta.client.client import AsyncClient
from noeta.errors import ConfigurationError, ScopeError
from noeta.protocols.scope import ScopeLevel, merge_scopes, validate_scope
from noeta.sdk import (
    GuardContext,
    Options,
    ProposedToolCall,
    SubAgent,
    ToolResult,
    VerdictResult,
    equip_scope,
    expect_scope,
    tool,
)
from noeta.sdk.testing import FakeLLMProvider
from tests.support.policies import ScopeReadingPolicy
from tests.support.resources import serving
from tests.support.scripts import call, say

NO_ARGS = {"type": "object"}


class Config(BaseModel):
    timeout: int = 3000


class ChildScope(BaseModel):
    """The seed's child schema: userId, permissions, config.timeout (default 3000)."""

    userId: str
    permissions: list[str]
    config: Config
    debug: bool = False
    retries: int = 3


class ThemeScope(BaseModel):
    theme: str
    lang: str


class NeedsApiKey(BaseModel):
    requiredApiKey: str


def depth(task_id: str) -> int:
    return task_id.count("/sub/")


def finished(request) -> bool:
    return any(b.type == "tool_result" for m in request.messages for b in m.content)


def test_validate_scope_applies_defaults_freezes_deeply_and_names_bad_keys():
    scope = validate_scope(
        ChildScope, {"userId": "u_123", "permissions": ["read", "write"], "config": {"timeout": 5000}}
    )
    assert isinstance(scope, ChildScope)
    assert (scope.userId, scope.permissions, scope.config.timeout, scope.debug, scope.retries) == (
        "u_123", ("read", "write"), 5000, False, 3,
    )
    with pytest.raises(ValidationError, match="frozen"):
        scope.userId = "xxx"  # the seed: a runtime error (Object.freeze)
    with pytest.raises(ValidationError, match="frozen"):
        scope.config.timeout = 1
    with pytest.raises(AttributeError):
        scope.permissions.append("admin")  # type: ignore[attr-defined]
    assert validate_scope(ChildScope, {"userId": "u", "permissions": [], "config": {}}).config.timeout == 3000

    with pytest.raises(ScopeError) as err:
        validate_scope(ChildScope, {"permissions": "read", "config": {"timeout": "soon"}})
    assert err.value.keys == ["userId", "permissions", "config.timeout"]
    assert "scope key 'userId' is missing" in str(err.value)
    assert "scope key 'config.timeout' is invalid" in str(err.value)

    whole = validate_scope(None, {"a": {"b": [1]}})
    with pytest.raises(TypeError):
        whole["a"]["c"] = 2  # type: ignore[index]


def test_levels_merge_key_by_key_and_the_nearest_wins():
    levels = [
        ScopeLevel("grandparent", {"theme": "dark", "lang": "en"}),
        ScopeLevel("parent", {"lang": "zh"}),
        ScopeLevel("child", {}),
    ]
    assert merge_scopes(levels) == {"theme": "dark", "lang": "zh"}


def test_scope_input_is_checked_before_anything_starts():
    with pytest.raises(ConfigurationError, match="JSON values only"):
        Options(scope={"when": object()})
    with pytest.raises(ConfigurationError, match="over 16384 bytes"):
        Options(scope={"blob": "x" * 20_000})
    with pytest.raises(ConfigurationError, match="scope_schema is not valid JSON Schema"):
        Options(scope_schema={"type": "nope"})
    assert equip_scope({"tenantId": "1001"}) == {"tenantId": "1001"}
    with pytest.raises(ScopeError, match="outside a task"):
        expect_scope(ThemeScope)


async def test_a_three_level_scope_chain_resolves_with_shadowing(client: AsyncClient, task_queue):
    """The seed's grandparent equipScope({theme, lang}), parent equipScope({lang}), child expectScope."""
    seen: list[tuple[str, str]] = []

    @tool(name="read_scope", version="1", input_schema=NO_ARGS)
    def read_scope(arguments, ctx):
        scope = expect_scope(ThemeScope)
        seen.append((scope.theme, scope.lang))
        assert dict(ctx.scope) == {"theme": "dark", "lang": "zh"}
        return ToolResult(success=True, output=f"{scope.theme}/{scope.lang}")

    def responder(request):
        level = depth(request.metadata["task_id"])
        if finished(request):
            return say(f"level {level} saw " + request.messages[-1].content[0].output)
        if level == 0:
            return call(("p", "parent", {"goal": "ask your child"}))
        if level == 1:
            return call(("c", "child", {"goal": "read the scope"}))
        return call(("r", "read_scope", {}))

    provider = FakeLLMProvider(responder=responder)
    child = SubAgent("child", "Reads the scope.", Options(allowed_tools=[read_scope]))
    parent = SubAgent("parent", "Delegates to its child.", Options(scope=equip_scope({"lang": "zh"}), subagents=[child]))
    options = Options(provider=provider, scope=equip_scope({"theme": "dark", "lang": "en"}), subagents=[parent])
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("go", options, task_queue=task_queue)
        result = await client.result(task_id)
    assert seen == [("dark", "zh")]
    assert result.answer == "level 0 saw level 1 saw level 2 saw dark/zh"
    # Usage rolls up through both levels: 2 model calls at each of the three levels.
    assert len(provider.received_requests) == 6
    assert result.usage.output == sum(r.usage.output for r in [call(("x", "y", {}))] * 3 + [say("x")] * 3)
    # The scope is data: recorded in each task's input and shown in its event log.
    grandchild = f"{task_id}/sub/p/sub/c"
    scoped = next(e.payload for e in await client.events(grandchild) if e.type == "ScopeEquipped")
    assert scoped.levels == [
        ScopeLevel(task_id, {"theme": "dark", "lang": "en"}),
        ScopeLevel(f"{task_id}/sub/p", {"lang": "zh"}),
    ]
    assert scoped.scope == {"theme": "dark", "lang": "zh"}
    root_events = await client.events(task_id)
    assert root_events[1].type == "ScopeEquipped" and root_events[1].causation_id == 1


async def test_the_seeds_equip_scope_expect_scope_pair_with_defaults(client: AsyncClient, task_queue):
    seen: list[ChildScope] = []

    @tool(name="instruct", version="1", input_schema=NO_ARGS)
    def instruct(arguments, ctx):
        scope = expect_scope(ChildScope)
        seen.append(scope)
        return ToolResult(success=True, output=f"User {scope.userId} with permissions: {', '.join(scope.permissions)}")

    def responder(request):
        if depth(request.metadata["task_id"]) == 0:
            return say("analyzed") if finished(request) else call(("a", "analyze", {"goal": "analyze"}))
        return say(request.messages[-1].content[0].output) if finished(request) else call(("i", "instruct", {}))

    provider = FakeLLMProvider(responder=responder)
    options = Options(
        provider=provider,
        scope={"userId": "u_123", "permissions": ["read", "write"], "config": {"timeout": 5000}},
        subagents=[SubAgent("analyze", "Analyzes for a user.", Options(allowed_tools=[instruct], scope_schema=ChildScope))],
    )
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("parent", options, task_queue=task_queue)
        await client.result(task_id)
    [scope] = seen
    assert (scope.config.timeout, scope.debug, scope.retries) == (5000, False, 3)
    answer = next(e.payload.answer for e in await client.events(task_id) if e.type == "SubtaskCompleted")
    assert answer == "User u_123 with permissions: read, write"


async def test_an_invalid_scope_fails_the_child_before_its_first_model_call(client: AsyncClient, task_queue):
    provider = FakeLLMProvider(
        responder=lambda r: call(("k", "keyed", {"goal": "use the key"})) if depth(r.metadata["task_id"]) == 0 else say("x")
    )
    options = Options(
        provider=provider,
        scope={"apiKeyName": "wrong key name"},
        subagents=[SubAgent("keyed", "Needs an API key in its scope.", Options(scope_schema=NeedsApiKey))],
    )
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("delegate", options, task_queue=task_queue)
        with pytest.raises(ScopeError, match="scope key 'requiredApiKey' is missing") as err:
            await client.result(task_id)
    assert err.value.keys == ["requiredApiKey"]
    assert [r.metadata["task_id"] for r in provider.received_requests] == [task_id]  # the child spent nothing
    child_events = await client.events(f"{task_id}/sub/k")
    assert "ProviderCallStarted" not in [e.type for e in child_events]
    assert child_events[-1].payload.error_type == "ScopeError"
    parent_events = await client.events(task_id)
    assert [e.type for e in parent_events][-3:] == ["SubtaskSpawned", "SubtaskCompleted", "TaskFailed"]


async def test_a_scope_schema_as_json_schema_fails_fast_naming_the_key(client: AsyncClient, task_queue):
    provider = FakeLLMProvider(responses=[say("never")])
    schema = {
        "type": "object",
        "properties": {"tenant": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
        "required": ["tenant", "region"],
    }
    options = Options(provider=provider, scope={"tenant": {}}, scope_schema=schema)
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("go", options, task_queue=task_queue)
        with pytest.raises(ScopeError) as err:
            await client.result(task_id)
    assert sorted(err.value.keys) == ["region", "tenant.id"]
    assert provider.received_requests == []


async def test_a_tool_expecting_a_missing_scope_key_fails_the_task(client: AsyncClient, task_queue):
    @tool(name="needs_key", version="1", input_schema=NO_ARGS)
    def needs_key(arguments, ctx):
        expect_scope(NeedsApiKey)
        return ToolResult(success=True, output="unreachable")

    provider = FakeLLMProvider(responses=[call(("c1", "needs_key", {})), say("the model never sees this")])
    options = Options(provider=provider, allowed_tools=[needs_key], scope={"other": 1})
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("go", options, task_queue=task_queue)
        with pytest.raises(ScopeError, match="requiredApiKey"):
            await client.result(task_id)
    assert len(provider.received_requests) == 1


async def test_a_policy_reads_the_scope_through_its_step_context(client: AsyncClient, task_queue):
    provider = FakeLLMProvider(responses=[])
    for scope, outcome in (({"tenantId": "1001"}, "tenant 1001 debug=False"), ({}, ScopeError)):
        options = Options(provider=provider, policy=ScopeReadingPolicy(), scope=scope)
        async with serving(client, task_queue, options, provider):
            task_id = await client.start("answer from scope", options, task_queue=task_queue)
            if isinstance(outcome, str):
                assert (await client.result(task_id)).answer == outcome
            else:
                with pytest.raises(ScopeError, match="tenantId"):
                    await client.result(task_id)
    assert provider.received_requests == []


class TenantGuard:
    """Lets a tool run only for the tenant the task's metadata names, as the scope says."""

    name = "tenant_guard"

    def check(self, action, ctx: GuardContext) -> VerdictResult:
        if not isinstance(action, ProposedToolCall):
            return VerdictResult("allow")
        if ctx.metadata.get("tenant") == ctx.scope.get("tenantId"):
            return VerdictResult("allow", f"tenant {ctx.metadata['tenant']}")
        return VerdictResult("deny", f"metadata tenant {ctx.metadata.get('tenant')} is not {ctx.scope.get('tenantId')}")


async def test_guards_see_the_tasks_metadata_and_scope(client: AsyncClient, task_queue):
    @tool(name="noop", version="1", input_schema=NO_ARGS)
    def noop(arguments, ctx):
        return ToolResult(success=True, output="ran")

    for tenant, verdict in (("1001", "allow"), ("2002", "deny")):
        provider = FakeLLMProvider(responses=[call(("c1", "noop", {})), say("done")])
        options = Options(
            provider=provider, allowed_tools=[noop], guards=[TenantGuard()],
            metadata={"tenant": tenant}, scope={"tenantId": "1001"},
        )
        async with serving(client, task_queue, options, provider):
            task_id = await client.start("go", options, task_queue=task_queue)
            await client.result(task_id)
        verdicts = [e.payload for e in await client.events(task_id) if e.type == "GuardVerdict" and e.payload.call_id == "c1"]
        assert [v.verdict for v in verdicts] == [verdict]


async def test_a_hand_written_spawn_equips_a_scope_level_for_its_child(client: AsyncClient, task_queue):
    from tests.support.policies import ScopedDelegatingPolicy, TenantScope

    @tool(name="read_tenant", version="1", input_schema=NO_ARGS)
    def read_tenant(arguments, ctx):
        scope = expect_scope(TenantScope)
        return ToolResult(success=True, output=f"{scope.tenantId}/{dict(ctx.scope)['region']}")

    def responder(request):
        return say(request.messages[-1].content[0].output) if finished(request) else call(("t", "read_tenant", {}))

    provider = FakeLLMProvider(responder=responder)
    options = Options(
        provider=provider, policy=ScopedDelegatingPolicy(), allowed_tools=[read_tenant],
        scope={"tenantId": "1", "region": "eu"},
    )
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("delegate", options, task_queue=task_queue)
        assert (await client.result(task_id)).answer == "7/eu"  # the spawn's level shadows, the rest shows through
    scoped = next(e.payload for e in await client.events(f"{task_id}/sub/s1") if e.type == "ScopeEquipped")
    assert [level.values for level in scoped.levels] == [{"tenantId": "1", "region": "eu"}, {"tenantId": "7"}]
