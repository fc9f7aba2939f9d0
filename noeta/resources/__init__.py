"""Resources and scopes at run time: what user code calls (``expect_resource``, ``expect_scope``,
``run_with``, ``instrument``) and the worker's pool of live objects. Declarations and recorded
types live in :mod:`noeta.protocols.resources` and :mod:`noeta.protocols.scope`."""

from noeta.protocols.resources import ResourceCall, ResourceSpec, equip_resource
from noeta.protocols.scope import equip_scope
from noeta.resources.context import expect_resource, expect_scope, run_with
from noeta.resources.instrument import ObservedCall, instrument

__all__ = [
    "ObservedCall", "ResourceCall", "ResourceSpec", "equip_resource", "equip_scope", "expect_resource",
    "expect_scope", "instrument", "run_with",
]
