"""Resources (seed 002: runWith / expectResource / equipResource / instrument), translated to
Python and run against a real PostgreSQL pool and a real Redis client."""

from __future__ import annotations

import asyncio
import threading

import pytest
import redis
from pydantic import BaseModel

from noeta.client.client import AsyncClient
from noeta.errors import (
    ConfigurationError,
    ProviderError,
    ResourceNotFoundError,
    TaskCancelledError,
)
from noeta.sdk import (
    Options,
    SubAgent,
    ToolResult,
    equip_resource,
    expect_resource,
    expect_scope,
    expect_validator,
    instrument,
    run_with,
    tool,
)
from noeta.sdk.testing import FakeLLMProvider
from tests.support.postgres import require_postgres
from tests.support.resources import REDIS_URL, open_pool, require_redis, serving, unique
from tests.support.scripts import call, say
from tests.support.waiting import eventually

NO_ARGS = {"type": "object"}


@tool(name="list_users", version="1", input_schema=NO_ARGS, resources=["database"])
def list_users(arguments, ctx):
    """The seed's child handler: db = expectResource('database'); db.query(...)."""
    db = expect_resource("database")
    with db.connection() as conn:
        value = conn.execute("select 'u_123'").fetchone()[0]
    return ToolResult(success=True, output=value)


@tool(name="cached_get", version="1", input_schema=NO_ARGS)
def cached_get(arguments, ctx):
    """The seed's optional resource: a degraded path when there is no cache."""
    cache = expect_resource("cache", optional=True)
    if cache is not None:
        return ToolResult(success=True, output=f"cached:{cache.get('key')}")
    return ToolResult(success=True, output="no cache")


@tool(name="read_config", version="1", input_schema=NO_ARGS)
def read_config(arguments, ctx):
    return ToolResult(success=True, output=str(expect_resource("config")))


def test_resource_lookup_outside_a_task_uses_run_with_blocks():
    require_redis()
    r = redis.Redis.from_url(REDIS_URL)
    key = unique("noeta_quota")
    try:
        # The seed's runWith example: inject the real client, read it back with expectResource.
        with run_with(resources={"redis": r}):
            client = expect_resource("redis")
            assert client is r
            assert client.incr(key) == 1
            with run_with(resources={"redis": "inner"}):
                assert expect_resource("redis") == "inner"  # nearest block wins
            assert expect_resource("redis") is r
        assert run_with(lambda: expect_resource("redis"), resources={"redis": r}) is r
        with pytest.raises(ResourceNotFoundError) as err:
            expect_resource("redis")
        assert err.value.key == "redis"
        assert expect_resource("redis", optional=True) is None
        assert int(r.get(key)) == 1
    finally:
        r.delete(key)
        r.close()


async def test_a_missing_declared_resource_fails_the_task_before_any_model_call(client: AsyncClient, task_queue):
    provider = FakeLLMProvider(responses=[call(("c1", "list_users", {})), say("done")])
    options = Options(provider=provider, allowed_tools=[list_users])
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("who are the users?", options, task_queue=task_queue)
        with pytest.raises(ResourceNotFoundError, match="tool 'list_users' needs resource 'database'") as err:
            await client.result(task_id)
    assert err.value.key == "database"
    assert provider.received_requests == []  # no token spent
    events = await client.events(task_id)
    assert "ProviderCallStarted" not in [e.type for e in events]
    assert events[-1].type == "TaskFailed" and events[-1].payload.error_type == "ResourceNotFoundError"


async def test_a_missing_undeclared_resource_fails_the_task_instead_of_reaching_the_model(
    client: AsyncClient, task_queue
):
    provider = FakeLLMProvider(responses=[call(("c1", "read_config", {})), say("the model never sees this")])
    options = Options(provider=provider, allowed_tools=[read_config])
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("read the config", options, task_queue=task_queue)
        with pytest.raises(ResourceNotFoundError, match="resource 'config' is not available"):
            await client.result(task_id)
    assert len(provider.received_requests) == 1  # the task did not go on as if nothing happened


async def test_an_optional_resource_is_none_when_absent_and_the_object_when_given(client: AsyncClient, task_queue):
    require_redis()
    r = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    r.set("key", "v1")  # a shared read-only fixture value; the test only reads it
    try:
        for resources, expected in ((None, "no cache"), ({"cache": r}, "cached:v1")):
            provider = FakeLLMProvider(responses=[call(("c1", "cached_get", {})), say("ok")])
            options = Options(provider=provider, allowed_tools=[cached_get])
            async with serving(client, task_queue, options, provider, resources=resources):
                task_id = await client.start("get it", options, task_queue=task_queue)
                assert (await client.result(task_id)).status == "completed"
            assert provider.received_requests[1].messages[-1].content[0].output == expected
    finally:
        r.close()


def _lifecycle(log: list[str]):
    """The seed's equipResource('database', {create, destroy, expose}) with a real pool."""

    def create():
        pool = open_pool()
        log.append("created")
        return pool

    def destroy(pool):
        pool.close()
        log.append("destroyed")

    return equip_resource("database", create=create, destroy=destroy, expose=True)


async def test_an_equipped_resource_is_created_once_per_task_and_destroyed_when_it_completes(
    client: AsyncClient, task_queue
):
    log: list[str] = []
    seen: list[object] = []

    @tool(name="use_db", version="1", input_schema=NO_ARGS, resources=["database"])
    def use_db(arguments, ctx):
        db = expect_resource("database")
        seen.append(db)
        assert ctx.resources["database"] is db
        with db.connection() as conn:
            return ToolResult(success=True, output=str(conn.execute("select 41 + 1").fetchone()[0]))

    provider = FakeLLMProvider(responses=[call(("c1", "use_db", {}), ("c2", "use_db", {})), say("42")])
    options = Options(provider=provider, allowed_tools=[use_db], resources=[_lifecycle(log)])
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("use the database twice", options, task_queue=task_queue)
        assert (await client.result(task_id)).answer == "42"
    assert log == ["created", "destroyed"]
    assert len(seen) == 2 and seen[0] is seen[1] and seen[0].closed
    events = await client.events(task_id)
    equipped = next(e.payload for e in events if e.type == "ResourcesEquipped")
    assert (equipped.owned, equipped.exposed) == (["database"], ["database"])
    assert [e.payload.released for e in events if e.type == "ResourcesReleased"] == [["database"]]
    types = [e.type for e in events]
    assert types.index("ResourcesEquipped") < types.index("ProviderCallStarted")  # created before the model ran


async def test_an_equipped_resource_is_destroyed_when_the_task_fails(client: AsyncClient, task_queue):
    log: list[str] = []

    def refuse(request):
        raise ProviderError(provider="fake", message="bad request", status=400)

    provider = FakeLLMProvider(responder=refuse)
    options = Options(provider=provider, resources=[_lifecycle(log)])
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("fail", options, task_queue=task_queue)
        with pytest.raises(ProviderError):
            await client.result(task_id)
    assert log == ["created", "destroyed"]
    types = [e.type for e in await client.events(task_id)]
    assert types[-2:] == ["ResourcesReleased", "TaskFailed"]


async def test_an_equipped_resource_is_destroyed_when_the_task_is_cancelled(client: AsyncClient, task_queue):
    log: list[str] = []
    asked = threading.Event()

    def busy(request):
        asked.set()
        raise ProviderError(provider="fake", message="busy", status=503, retryable=True)

    provider = FakeLLMProvider(responder=busy)
    options = Options(provider=provider, resources=[_lifecycle(log)], max_retries=20)
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("wait", options, task_queue=task_queue)
        assert await asyncio.to_thread(asked.wait, 30)
        assert log == ["created"]
        await client.cancel(task_id)
        with pytest.raises(TaskCancelledError):
            await client.result(task_id)
    assert log == ["created", "destroyed"]
    types = [e.type for e in await client.events(task_id)]
    assert types[-2:] == ["ResourcesReleased", "TaskCancelled"]


async def test_a_resource_that_cannot_be_created_fails_the_task_before_any_model_call(client: AsyncClient, task_queue):
    def unreachable():
        raise ConnectionRefusedError("database is down")

    provider = FakeLLMProvider(responses=[say("never")])
    options = Options(
        provider=provider, max_retries=0, resources=[equip_resource("database", create=unreachable)]
    )
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("go", options, task_queue=task_queue)
        with pytest.raises(Exception, match="creating resource 'database' failed: ConnectionRefusedError"):
            await client.result(task_id)
    assert provider.received_requests == []


def _probing_responder(agent_calls):
    """Parent: call the sub-agents; each child: call ``probe`` once, then answer."""

    def responder(request):
        task_id = request.metadata["task_id"]
        done = any(b.type == "tool_result" for m in request.messages for b in m.content)
        if "/sub/" in task_id:
            return say("child done") if done else call(("p1", "probe", {}))
        return say("parent done") if done else call(*agent_calls)

    return responder


async def test_sub_agents_see_what_their_parent_exposes_and_nothing_else(client: AsyncClient, task_queue):
    """The seed's lookup rules: a parent's exposed resource is the child's (the same instance);
    one it does not expose stays with the parent."""
    made: list[str] = []
    seen: dict[str, tuple[object, object]] = {}

    @tool(name="probe", version="1", input_schema=NO_ARGS)
    def probe(arguments, ctx):
        seen[ctx.task_id] = (expect_resource("database"), expect_resource("secret", optional=True))
        return ToolResult(success=True, output="probed")

    provider = FakeLLMProvider(responder=_probing_responder([("a1", "prober", {"goal": "probe"})]))
    options = Options(
        provider=provider,
        resources=[
            equip_resource("database", create=lambda: made.append("database") or "parent-db", expose=True),
            equip_resource("secret", create=lambda: made.append("secret") or "parent-secret"),
        ],
        subagents=[SubAgent("prober", "Probes resources.", Options(allowed_tools=[probe]))],
    )
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("delegate", options, task_queue=task_queue)
        assert (await client.result(task_id)).answer == "parent done"
    child = f"{task_id}/sub/a1"
    assert seen[child] == ("parent-db", None)
    assert made == ["database", "secret"]  # once each, for the parent
    equipped = next(e.payload for e in await client.events(child) if e.type == "ResourcesEquipped")
    assert equipped.inherited == {"database": task_id} and equipped.owned == []


async def test_a_sub_agent_that_equips_a_resource_itself_gets_its_own_instance(client: AsyncClient, task_queue):
    """Nearest first: the child's own instance shadows the one its parent exposes."""
    made: list[int] = []
    seen: dict[str, object] = {}

    def create():
        made.append(len(made))
        return f"db#{made[-1]}"

    database = equip_resource("database", create=create, destroy=lambda db: made.append(-1), expose=True)

    @tool(name="probe", version="1", input_schema=NO_ARGS, resources=["database"])
    def probe(arguments, ctx):
        seen[ctx.task_id] = expect_resource("database")
        return ToolResult(success=True, output="probed")

    provider = FakeLLMProvider(
        responder=_probing_responder([("a1", "inheriting", {"goal": "probe"}), ("a2", "owning", {"goal": "probe"})])
    )
    options = Options(
        provider=provider,
        resources=[database],
        subagents=[
            SubAgent("inheriting", "Uses its parent's database.", Options(allowed_tools=[probe])),
            SubAgent("owning", "Uses a database of its own.", Options(allowed_tools=[probe], resources=[database])),
        ],
    )
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("delegate", options, task_queue=task_queue)
        await client.result(task_id)
    assert seen == {f"{task_id}/sub/a1": "db#0", f"{task_id}/sub/a2": "db#1"}
    assert made == [0, 1, -1, -1]  # the child's instance went when the child ended, the parent's after


async def test_instrument_records_the_redis_calls_a_tool_makes(client: AsyncClient, task_queue):
    require_redis()
    raw = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    quota, text_key = unique("noeta_quota"), unique("noeta_text")
    raw.set(text_key, "not a number")
    observed: list[object] = []
    r = instrument(
        raw, name="redis", ops=["incr", "get"], derive=lambda c: {"key": c.args[0]}, on_call=observed.append
    )

    @tool(name="bump_quota", version="1", input_schema=NO_ARGS, resources=["redis"])
    def bump_quota(arguments, ctx):
        client = expect_resource("redis")  # the tool does not know it is instrumented
        client.incr(quota)
        count = client.incr(quota)
        try:
            client.incr(text_key)
        except redis.ResponseError:
            pass
        return ToolResult(success=True, output=f"{count} {client.get(quota)}")

    provider = FakeLLMProvider(responses=[call(("c1", "bump_quota", {})), say("bumped")])
    options = Options(provider=provider, allowed_tools=[bump_quota])
    try:
        async with serving(client, task_queue, options, provider, resources={"redis": r}):
            task_id = await client.start("bump the quota", options, task_queue=task_queue)
            await client.result(task_id)
        assert raw.get(quota) == "2"
    finally:
        raw.delete(quota, text_key)
        raw.close()
    events = await client.events(task_id)
    calls = [e for e in events if e.type == "ResourceCallObserved"]
    assert [(e.payload.op, e.payload.outcome, e.payload.fields["key"]) for e in calls] == [
        ("incr", "ok", quota), ("incr", "ok", quota), ("incr", "error", text_key), ("get", "ok", quota),
    ]
    assert calls[2].payload.error_type == "ResponseError"
    assert all(e.actor == "resource:redis" and e.payload.call_id == "c1" and e.payload.duration_ms >= 0 for e in calls)
    types = [e.type for e in events]
    assert types.index("ToolCallStarted") < types.index("ResourceCallObserved") < types.index("ToolCallCompleted")
    assert len(observed) == 4
    assert provider.received_requests[1].messages[-1].content[0].output == "2 2"


async def test_instrument_observes_an_async_client(client: AsyncClient, task_queue):
    require_redis()
    import redis.asyncio as aredis

    raw = aredis.Redis.from_url(REDIS_URL, decode_responses=True)
    key = unique("noeta_async")
    records: list[object] = []
    r = instrument(raw, name="aredis", ops=["set", "get"], on_call=records.append)
    try:
        assert await r.set(key, "1")
        assert await r.get(key) == "1"
        assert r.connection_pool is raw.connection_pool  # everything else is the client's own
    finally:
        await raw.delete(key)
        await raw.aclose()
    assert [(c.op, c.outcome) for c in records] == [("set", "ok"), ("get", "ok")]
    with pytest.raises(ConfigurationError, match="no method"):
        instrument(raw, name="aredis", ops=["nope"])


async def test_worker_lifetime_resources_live_as_long_as_the_worker(client: AsyncClient, task_queue):
    log: list[str] = []
    seen: list[object] = []

    @tool(name="ping_db", version="1", input_schema=NO_ARGS, resources=["database"])
    def ping_db(arguments, ctx):
        seen.append(expect_resource("database"))
        return ToolResult(success=True, output="pong")

    spec = equip_resource(
        "database", create=lambda: log.append("created") or open_pool(),
        destroy=lambda pool: (pool.close(), log.append("destroyed")), lifetime="worker",
    )
    provider = FakeLLMProvider(responder=lambda r: say("ok") if len(r.messages) > 1 else call(("c", "ping_db", {})))
    options = Options(provider=provider, allowed_tools=[ping_db])
    async with serving(client, task_queue, options, provider, resources={"database": spec}):
        await eventually(lambda: log == ["created"])  # when the worker starts
        for goal in ("one", "two"):
            task_id = await client.start(goal, options, task_queue=task_queue)
            await client.result(task_id)
        assert log == ["created"]
    assert log == ["created", "destroyed"]
    assert seen[0] is seen[1]
    assert "ResourcesReleased" not in [e.type for e in await client.events(task_id)]  # nothing task-scoped


async def test_deps_are_created_first_from_the_nearest_provider_and_destroyed_last(client: AsyncClient, task_queue):
    require_postgres()
    log: list[str] = []
    table = unique("noeta_deps")

    def make_db(dsn):
        log.append("db")
        from psycopg_pool import ConnectionPool

        pool = ConnectionPool(dsn, min_size=1, max_size=1, open=True)
        pool.wait(timeout=10)
        return pool

    def make_repo(db):
        log.append("repo")
        with db.connection() as conn:
            conn.execute(f"create table {table} (name text)")
        return db

    def drop_repo(db):
        with db.connection() as conn:
            conn.execute(f"drop table {table}")
        log.append("repo destroyed")

    @tool(name="save", version="1", input_schema=NO_ARGS, resources=["repo"])
    def save(arguments, ctx):
        with expect_resource("repo").connection() as conn:
            conn.execute(f"insert into {table} values ('a')")
            return ToolResult(success=True, output=str(conn.execute(f"select count(*) from {table}").fetchone()[0]))

    from tests.support.postgres import DSN as PG_DSN

    provider = FakeLLMProvider(responses=[call(("c1", "save", {})), say("saved")])
    options = Options(
        provider=provider,
        allowed_tools=[save],
        resources=[
            equip_resource("db", create=make_db, destroy=lambda p: (p.close(), log.append("db destroyed")), deps=["dsn"]),
            equip_resource("repo", create=make_repo, destroy=drop_repo, deps=["db"]),
        ],
    )
    async with serving(client, task_queue, options, provider, resources={"dsn": PG_DSN}):
        task_id = await client.start("save", options, task_queue=task_queue)
        await client.result(task_id)
    assert log == ["db", "repo", "repo destroyed", "db destroyed"]
    assert provider.received_requests[1].messages[-1].content[0].output == "1"
    released = [e.payload.released for e in await client.events(task_id) if e.type == "ResourcesReleased"]
    assert released == [["repo", "db"]]


def test_resource_declarations_are_checked_when_made():
    with pytest.raises(ConfigurationError, match="create must be callable"):
        equip_resource("db", create=None)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="cannot depend on itself"):
        equip_resource("db", create=object, deps=["db"])
    with pytest.raises(ConfigurationError, match="lifetime"):
        equip_resource("db", create=object, lifetime="forever")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="spec of 'a'"):
        Options(resources={"b": equip_resource("a", create=object)})
    with pytest.raises(ConfigurationError, match="not an equip_resource"):
        Options(resources=[object()])  # type: ignore[list-item]


class Limits(BaseModel):
    max_price: int


async def test_validators_read_the_tasks_resources_and_scope(client: AsyncClient, task_queue):
    """The seed's expectValidator with a price rule whose limit comes from the scope and whose
    price list comes from a resource."""

    def price_check(data):
        prices = expect_resource("prices")
        limits = expect_scope(Limits)
        price = prices[data]
        return True if price <= limits.max_price else f"{data} costs {price}, over {limits.max_price}"

    provider = FakeLLMProvider(responses=[say("gold"), say("tin")])
    options = Options(provider=provider, validators=[expect_validator(price_check)], scope={"max_price": 100})
    async with serving(client, task_queue, options, provider, resources={"prices": {"gold": 900, "tin": 3}}):
        task_id = await client.start("pick a metal", options, task_queue=task_queue)
        assert (await client.result(task_id)).answer == "tin"
    failed = [e.payload.issue for e in await client.events(task_id) if e.type == "ValidationFailed"]
    assert failed == ["gold costs 900, over 100"]
