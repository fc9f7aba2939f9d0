"""The client side's implementation: connection, task operations, inspection, options, the history
projection. Import the public API from :mod:`noeta.sdk`.

Names this package used to re-export are still importable from it, with a DeprecationWarning
that names their public home (``project`` is public as ``noeta.sdk.project``).
"""

from __future__ import annotations

import warnings
from typing import Any

__all__: list[str] = []  # nothing public here

#: What ``from noeta.client import X`` gave before the package stopped re-exporting the API.
_MOVED = frozenset({
    "AssistantMessage", "AsyncClient", "Client", "HostConfig", "InjectedMessage", "Options",
    "Result", "ToolResultView", "ToolUse", "UserMessage", "ViewItem", "as_messages",
    "envelope_to_dict", "project",
})


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        import noeta.sdk

        warnings.warn(
            f"noeta.client.{name} is deprecated: import it from noeta.sdk", DeprecationWarning, stacklevel=2
        )
        return getattr(noeta.sdk, name)
    raise AttributeError(f"module 'noeta.client' has no attribute {name!r}")
