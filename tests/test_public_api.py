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
]


@pytest.mark.parametrize("statement", IMPORT_ORDERS)
def test_every_exported_name_is_the_object_not_a_module_in_any_import_order(statement: str):
    import subprocess
    import sys

    probe = (
        f"import types; {statement}; import noeta.sdk as sdk; from noeta.sdk import *; "
        "bad = [n for n in sdk.__all__ if isinstance(getattr(sdk, n), types.ModuleType)]; "
        "print(','.join(bad) or 'ok', callable(query), callable(aquery))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["ok", "True", "True"]


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


def test_a_tools_module_importing_the_sdk_does_not_load_the_client_side():
    # A worker process whose tools do `from noeta.sdk import tool` stays without the client side
    # (task operations, projection, query): the facade imports those names on first use.
    statement = "from noeta.sdk import tool, ToolResult; import noeta.worker"
    assert loaded_by(statement, "noeta.client.client", "noeta.client.projection", "noeta.sdk._query") == []
    assert loaded_by("from noeta.sdk import query", "noeta.sdk._query") == ["noeta.sdk._query"]  # the probe sees


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


def test_the_cli_loads_each_side_only_for_the_commands_that_need_it():
    # `noeta tasks` need not load the worker's activities, nor `noeta worker` the client side.
    assert loaded_by("import noeta.cli", "noeta.client.client", "noeta.worker", "noeta.activities") == []
