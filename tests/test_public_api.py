"""The public API is noeta.sdk (with noeta.sdk.testing); noeta.client is implementation."""

from __future__ import annotations

import importlib

import pytest

import noeta.sdk


def test_every_public_name_is_importable_from_the_sdk():
    missing = [name for name in noeta.sdk.__all__ if not hasattr(noeta.sdk, name)]
    assert missing == []
    assert {"Client", "AsyncClient", "Options", "query", "tool", "project"} <= set(noeta.sdk.__all__)


#: Orders a user may import the API in: a name whose implementation module shares it (``query`` in
#: a module ``query``) was bound to the module once that module loaded first.
IMPORT_ORDERS = [
    "from noeta.sdk import aquery, query",
    "from noeta.sdk import QueryResult; from noeta.sdk import query",
    "import noeta.sdk.testing; from noeta.sdk import query, tool, image",
    "from noeta.sdk import *",
    # The homes of the providers, plugins and tuning loaded before the facade, and after it.
    "import noeta.providers.openai, noeta.providers.local, noeta.worker.plugin, noeta.config.tuning; "
    "from noeta.sdk import OpenAIProvider, LocalModelProvider, NoetaPlugin, WorkerTuning",
    "from noeta.sdk import AnthropicProvider, NoetaWorkerPlugin, ProviderLimit; "
    "import noeta.providers.anthropic, noeta.providers.limits, noeta.worker.plugin, noeta.worker",
    "from noeta.sdk import ProviderResponseError; import noeta.errors; from noeta.sdk import NoetaError",
]


@pytest.mark.server
@pytest.mark.parametrize("statement", IMPORT_ORDERS)
def test_every_exported_name_is_the_object_not_a_module_in_any_import_order(statement: str):
    import subprocess
    import sys

    # Each name is the object its defining module holds, whether reached as an attribute of the
    # facade or through `from noeta.sdk import *`.
    probe = (
        f"import importlib, types; {statement}; import noeta.sdk as sdk; from noeta.sdk import *; "
        "home = lambda n: getattr(importlib.import_module(sdk._LAZY[n]), n) if n in sdk._LAZY else getattr(sdk, n); "
        "bad = [n for n in sdk.__all__ if isinstance(getattr(sdk, n), types.ModuleType) "
        "or not getattr(sdk, n) is globals()[n] is home(n)]; "
        "print(','.join(bad) or 'ok', callable(query), callable(aquery))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["ok", "True", "True"]


def user_facing_classes() -> dict[str, type]:
    """What a user constructs or catches: every Noeta error, each provider class of the public
    provider modules (an object with ``complete``), the Temporal plugins, and what a worker of
    one's own takes besides them (``ProviderLimit`` for ``Registry.of``, ``WorkerTuning`` for a
    hand-built ``Worker``)."""
    import inspect
    import pkgutil

    import noeta.errors
    import noeta.worker.plugin
    import noeta.providers
    from noeta.providers.limits import ProviderLimit
    from noeta.config.tuning import WorkerTuning

    found: dict[str, type] = {"ProviderLimit": ProviderLimit, "WorkerTuning": WorkerTuning}
    for module in (noeta.errors, noeta.worker.plugin):
        found.update({n: o for n in module.__all__ if inspect.isclass(o := getattr(module, n))})
    for info in pkgutil.iter_modules(noeta.providers.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"noeta.providers.{info.name}")
        found.update({
            name: obj for name, obj in vars(module).items()
            if inspect.isclass(obj) and obj.__module__ == module.__name__ and not name.startswith("_")
            and callable(getattr(obj, "complete", None))
        })
    return found


def test_every_user_facing_class_is_importable_from_the_sdk():
    classes = user_facing_classes()
    assert {"AnthropicProvider", "OpenAIProvider", "LocalModelProvider", "NoetaPlugin", "NoetaWorkerPlugin",
            "ProviderResponseError", "TemporalUnavailableError"} <= set(classes)
    assert [n for n in classes if n not in noeta.sdk.__all__] == []
    assert [n for n, cls in classes.items() if getattr(noeta.sdk, n) is not cls] == []


def test_the_docs_import_only_from_the_sdk():
    # Users copy the examples: an import from an inner module would teach them a path that may move.
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    inner = re.compile(r"^\s*(?:from noeta(?!\.sdk\b)[.\w]* import|import noeta(?!\.sdk\b))", re.MULTILINE)
    offending = []
    for page in [root / "README.md", *sorted((root / "docs").rglob("*.md")), *sorted((root / "docs").rglob("*.py"))]:
        text = page.read_text()
        blocks = [text] if page.suffix == ".py" else re.findall(r"```python\n(.*?)```", text, re.DOTALL)
        offending += [f"{page.name}: {m.group(0).strip()}" for block in blocks for m in inner.finditer(block)]
    assert offending == []


def test_the_client_package_no_longer_re_exports_the_api_but_old_imports_still_work():
    client = importlib.import_module("noeta.client")
    with pytest.warns(DeprecationWarning, match="import it from noeta.sdk"):
        old = client.Client
    assert old is noeta.sdk.Client
    with pytest.raises(AttributeError):
        client.NoSuchThing  # noqa: B018


def test_implementation_modules_behind_the_sdk_are_not_star_exported():
    # `from noeta.client import *` gives nothing: the package has no public names of its own.
    namespace: dict[str, object] = {}
    exec("from noeta.client import *", namespace)
    assert not {k for k in namespace if not k.startswith("__")}


def test_the_lazy_table_the_type_checking_imports_and_all_agree():
    import ast
    from pathlib import Path

    source = Path(noeta.sdk.__file__).read_text()
    checked: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                checked.update({alias.name: imp.module for alias in imp.names})
    assert checked == noeta.sdk._LAZY
    assert set(noeta.sdk.__all__) == set(noeta.sdk._protocol_names) | set(noeta.sdk._LAZY)


def loaded_by(statement: str, *modules: str) -> list[str]:
    """Which of ``modules`` a fresh interpreter has loaded after ``statement``."""
    import subprocess
    import sys

    probe = f"import sys; {statement}; print(','.join(m for m in {modules!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return [m for m in out.strip().split(",") if m]


@pytest.mark.server
def test_a_tools_module_importing_the_sdk_does_not_load_the_client_side():
    # A worker process whose tools do `from noeta.sdk import tool` stays without the client side
    # (task operations, projection, query): the facade imports those names on first use.
    statement = "from noeta.sdk import tool, ToolResult; import noeta.worker"
    assert loaded_by(statement, "noeta.client.client", "noeta.client.projection", "noeta.sdk._query") == []
    assert loaded_by("from noeta.sdk import query", "noeta.sdk._query") == ["noeta.sdk._query"]  # the probe sees


@pytest.mark.server
def test_a_worker_without_tracing_or_keys_loads_neither_opentelemetry_nor_cryptography():
    # Each costs a worker megabytes of memory it has no use for while tracing is off and no
    # encryption key is set; both load when configured.
    worker_side = (
        "import noeta.worker, noeta.activities.model_call, noeta.activities.tool_call; "
        "from noeta.security.codec import codec_from_env; from noeta.telemetry.interceptors import interceptors; "
        "from noeta.telemetry.instrument import start_resource_span; "
        "codec_from_env(); interceptors(); start_resource_span('db', 'get')"
    )
    assert loaded_by(worker_side, "opentelemetry", "opentelemetry.sdk", "cryptography") == []
    with_key = "import os; os.environ['NOETA_ENCRYPTION_KEYS'] = 'k1:' + 'A' * 43 + '='; " + worker_side
    assert loaded_by(with_key, "cryptography") == ["cryptography"]
    with_tracing = "import os; os.environ['OTEL_TRACES_EXPORTER'] = 'console'; " + worker_side
    assert loaded_by(with_tracing, "opentelemetry.sdk") == ["opentelemetry.sdk"]


@pytest.mark.server
def test_the_cli_loads_each_side_only_for_the_commands_that_need_it():
    # `noeta tasks` need not load the worker's activities, nor `noeta worker` the client side.
    assert loaded_by("import noeta.cli", "noeta.client.client", "noeta.worker", "noeta.activities") == []
