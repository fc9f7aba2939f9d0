"""The public API is noeta.sdk (with noeta.sdk.testing); noeta.client is implementation."""

from __future__ import annotations

import importlib

import pytest

import noeta.sdk


def test_every_public_name_is_importable_from_the_sdk():
    missing = [name for name in noeta.sdk.__all__ if not hasattr(noeta.sdk, name)]
    assert missing == []
    assert {"Client", "AsyncClient", "Options", "query", "tool", "project"} <= set(noeta.sdk.__all__)


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
