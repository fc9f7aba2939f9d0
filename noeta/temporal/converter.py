"""The data converter every Noeta client and worker uses: pydantic JSON with one shared schema cache,
and Noeta's own dataclasses written without the fields that hold their defaults.

temporalio's pydantic converter keeps its ``TypeAdapter`` cache on the converter instance, and the
workflow sandbox builds a new payload converter for every workflow instance. Noeta's messages are
large dataclass unions whose schemas take milliseconds to build, so a per-instance cache means every
new task rebuilds them. Here the cache lives at module level; because ``noeta`` is passed through
the sandbox (see :mod:`noeta.worker.plugin`), every workflow instance and every activity of a worker
process shares it.

Most fields of an activity's input and output sit at their defaults in most steps (no retries, no
memories, no raw body...); written out they were a fifth of a step's history. A payload of one of
Noeta's dataclasses therefore leaves out every field equal to its default, and decoding fills it
back in. Two things keep that exact: single-value ``Literal`` fields (the ``type`` tags that
discriminated unions decode by) are always written, and the defaults are a wire format — a
recorded history leans on them, so they never change (tests/test_compact_payloads.py pins them).
Values of other types (users' models, dicts) are written as before, every field included.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import TypeAdapter
from pydantic_core import SchemaSerializer, to_json
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    EncodingPayloadConverter,
    JSONPlainPayloadConverter,
    PayloadCodec,
    PayloadConverter,
)

from noeta.errors import EncryptionKeyError

from noeta.security.codec import ENCODING, no_keys_error, sealed_key_id
from noeta.temporal.failures import ReadableFailureConverter

#: Distinct type hints seen by a worker are few (Noeta's inputs and outputs, users' output models);
#: the bound only matters for type hints built afresh per task, which then cannot pile up.
TYPE_ADAPTER_CACHE_SIZE = 4096


@functools.lru_cache(maxsize=TYPE_ADAPTER_CACHE_SIZE)
def type_adapter(type_hint: Any) -> TypeAdapter[Any]:
    """A pydantic TypeAdapter for ``type_hint``, shared by every converter of the process (bounded
    LRU cache)."""
    return TypeAdapter(type_hint)


def is_noeta_type(cls: type) -> bool:
    return cls.__module__ == "noeta" or cls.__module__.startswith("noeta.")


def _equals(default: Any) -> Callable[[Any], bool]:
    # The type check keeps False apart from 0 and 1 from 1.0: each decodes back as its own type only
    # if it is written.
    if dataclasses.is_dataclass(default):
        # == on dataclasses skips their compare=False fields; what is written does not.
        written = to_json(default)
        return lambda value: type(value) is type(default) and to_json(value) == written
    return lambda value: type(value) is type(default) and value == default


def noeta_dataclass_schemas(schema: Any) -> Iterator[dict[str, Any]]:
    """The schemas of Noeta's dataclasses inside pydantic core schema ``schema``."""
    if isinstance(schema, list):
        for item in schema:
            yield from noeta_dataclass_schemas(item)
    elif isinstance(schema, dict):
        if schema.get("type") == "dataclass" and is_noeta_type(schema["cls"]):
            yield schema
        for value in schema.values():
            yield from noeta_dataclass_schemas(value)


def _omit_defaults(schema: Any) -> None:
    """Mark, in a copied core schema, every defaulted field of Noeta's dataclasses to be left out
    when it holds its default (tags excepted, see the module's docstring)."""
    for dataclass_schema in list(noeta_dataclass_schemas(schema)):
        # NaN and infinities stay as to_json writes them (a bad input must reach the workflow's
        # checks as itself, not as null).
        dataclass_schema["config"] = {**dataclass_schema.get("config", {}), "ser_json_inf_nan": "constants"}
        for field in dataclass_schema["schema"]["fields"]:
            inner = field["schema"]
            if inner["type"] != "default":
                continue
            if inner["schema"]["type"] == "literal" and len(inner["schema"]["expected"]) == 1:
                continue
            if "default" in inner:
                field["serialization_exclude_if"] = _equals(inner["default"])
            elif not inner.get("default_factory_takes_data"):
                field["serialization_exclude_if"] = _equals(inner["default_factory"]())


@functools.lru_cache(maxsize=TYPE_ADAPTER_CACHE_SIZE)
def compact_serializer(cls: type) -> SchemaSerializer:
    """The serializer of Noeta dataclass ``cls`` that leaves out fields holding their defaults."""
    schema = copy.deepcopy(type_adapter(cls).core_schema)
    _omit_defaults(schema)
    return SchemaSerializer(schema)


def to_json_bytes(value: Any) -> bytes:
    """What a ``json/plain`` payload of ``value`` holds (see the module's docstring)."""
    cls = type(value)
    if dataclasses.is_dataclass(cls) and is_noeta_type(cls):
        # Like to_json, values that do not match a field's annotation are written as they are.
        return compact_serializer(cls).to_json(value, warnings=False)
    return to_json(value)


class SharedCacheJSONConverter(PydanticJSONPlainPayloadConverter):
    """``json/plain`` through pydantic: Noeta's dataclasses without their default fields, decoding
    with the process-wide :func:`type_adapter` cache."""

    def to_payload(self, value: Any) -> Payload | None:
        return Payload(metadata={"encoding": self.encoding.encode()}, data=to_json_bytes(value))

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        hint = Any if type_hint is None else type_hint
        try:
            adapter = type_adapter(hint)
        except TypeError:  # an unhashable type hint: nothing to cache it by
            adapter = TypeAdapter(hint)
        return adapter.validate_json(payload.data)


class SealedPayloadConverter(EncodingPayloadConverter):
    """Reads an encrypted payload that reached the converter still sealed (a process without
    encryption keys): EncryptionKeyError naming the key, instead of "unknown encoding". Never
    writes one (the codec does)."""

    @property
    def encoding(self) -> str:
        """The encrypted payloads' encoding."""
        return ENCODING.decode()

    def to_payload(self, value: Any) -> Payload | None:
        """Never: values are encrypted by the codec, after conversion."""
        return None

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        """Always EncryptionKeyError naming the payload's key."""
        raise no_keys_error(sealed_key_id(payload) or "?")


class NoetaPayloadConverter(CompositePayloadConverter):
    """Temporal's default converter chain with :class:`SharedCacheJSONConverter` for JSON, and
    :class:`SealedPayloadConverter` for encrypted payloads that were not decrypted."""

    def __init__(self) -> None:
        """Temporal's default converters, with the JSON one replaced by a SharedCacheJSONConverter.
        """
        # The parent's own per-instance cache is unused here: size 0.
        json_converter = SharedCacheJSONConverter(max_cached_type_adapters=0)
        super().__init__(
            *(
                json_converter if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            ),
            SealedPayloadConverter(),
        )


class SealedFailureConverter(ReadableFailureConverter):
    """Failure messages and stack traces moved into an encoded payload (so a codec seals them: they
    may quote customer data, a tool's error, a provider's error body), except an
    ``EncryptionKeyError``'s: it names key ids only, and a reader without the writer's key must
    still learn which key a worker lacks."""

    def __init__(self) -> None:
        """Encodes the common attributes, as ``DefaultFailureConverterWithEncodedAttributes``."""
        super().__init__(encode_common_attributes=True)

    def to_failure(self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure) -> None:
        """The failure of ``exception``, with key errors along its chain left in the clear."""
        super().to_failure(exception, payload_converter, failure)
        node: Failure | None = failure
        while node is not None:
            if node.application_failure_info.type == EncryptionKeyError.__name__ and node.HasField("encoded_attributes"):
                attributes = payload_converter.from_payloads([node.encoded_attributes])[0]
                node.message, node.stack_trace = attributes.get("message", ""), attributes.get("stack_trace", "")
                node.ClearField("encoded_attributes")
            node = node.cause if node.HasField("cause") else None


def data_converter(codec: PayloadCodec | None = None) -> DataConverter:
    """Noeta's data converter, with ``codec`` (e.g. encryption) applied to every payload. Failures
    of Noeta's typed errors carry no stack trace (:mod:`noeta.temporal.failures`); with a codec,
    failure messages and stack traces are moved into an encoded payload too
    (:class:`SealedFailureConverter`)."""
    return DataConverter(
        payload_converter_class=NoetaPayloadConverter,
        payload_codec=codec,
        failure_converter_class=SealedFailureConverter if codec else ReadableFailureConverter,
    )


def is_noeta_converter(converter: DataConverter) -> bool:
    """Whether ``converter`` uses Noeta's payload converter."""
    return converter.payload_converter_class is NoetaPayloadConverter


__all__ = ["NoetaPayloadConverter", "compact_serializer", "data_converter", "is_noeta_converter", "noeta_dataclass_schemas", "to_json_bytes", "type_adapter"]
