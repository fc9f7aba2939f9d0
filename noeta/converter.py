"""The data converter every Noeta client and worker uses: pydantic JSON with one shared schema cache.

temporalio's pydantic converter keeps its ``TypeAdapter`` cache on the converter instance, and the
workflow sandbox builds a new payload converter for every workflow instance. Noeta's messages are
large dataclass unions whose schemas take milliseconds to build, so a per-instance cache means every
new task rebuilds them. Here the cache lives at module level; because ``noeta`` is passed through
the sandbox (see :mod:`noeta.plugin`), every workflow instance and every activity of a worker
process shares it.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import TypeAdapter
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultFailureConverter,
    DefaultFailureConverterWithEncodedAttributes,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
    PayloadCodec,
)

#: Distinct type hints seen by a worker are few (Noeta's inputs and outputs, users' output models);
#: the bound only matters for type hints built afresh per task, which then cannot pile up.
TYPE_ADAPTER_CACHE_SIZE = 4096


@functools.lru_cache(maxsize=TYPE_ADAPTER_CACHE_SIZE)
def type_adapter(type_hint: Any) -> TypeAdapter[Any]:
    return TypeAdapter(type_hint)


class SharedCacheJSONConverter(PydanticJSONPlainPayloadConverter):
    """``json/plain`` through pydantic, decoding with the process-wide :func:`type_adapter` cache."""

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        hint = Any if type_hint is None else type_hint
        try:
            adapter = type_adapter(hint)
        except TypeError:  # an unhashable type hint: nothing to cache it by
            adapter = TypeAdapter(hint)
        return adapter.validate_json(payload.data)


class NoetaPayloadConverter(CompositePayloadConverter):
    """Temporal's default converter chain with :class:`SharedCacheJSONConverter` for JSON."""

    def __init__(self) -> None:
        # The parent's own per-instance cache is unused here: size 0.
        json_converter = SharedCacheJSONConverter(max_cached_type_adapters=0)
        super().__init__(
            *(
                json_converter if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


def data_converter(codec: PayloadCodec | None = None) -> DataConverter:
    """Noeta's data converter, with ``codec`` (e.g. encryption) applied to every payload. With a
    codec, failure messages and stack traces are moved into an encoded payload too: they may quote
    customer data (a tool's error, a provider's error body)."""
    return DataConverter(
        payload_converter_class=NoetaPayloadConverter,
        payload_codec=codec,
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes if codec else DefaultFailureConverter,
    )


def is_noeta_converter(converter: DataConverter) -> bool:
    return converter.payload_converter_class is NoetaPayloadConverter


__all__ = ["NoetaPayloadConverter", "data_converter", "is_noeta_converter", "type_adapter"]
