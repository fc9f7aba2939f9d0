"""Decoding the payloads inside raw history events with a PayloadCodec, so that the projection
(a pure function over history) reads encrypted tasks like plain ones.

Temporal's SDK decodes the payloads it hands to workflows and clients, but not the raw
``HistoryEvent`` messages Noeta projects. This walks an event's message tree: every ``Payload``
(alone, repeated, or as a map value: memos) goes through the codec; search attributes are left
alone (the server indexes them, they are never encoded); a ``Failure`` whose message and stack
trace were moved into ``encoded_attributes`` gets them back.
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

_PAYLOAD = Payload.DESCRIPTOR.full_name
_SKIP = {"temporal.api.common.v1.SearchAttributes"}
_FAILURE = "temporal.api.failure.v1.Failure"


async def decode_message(message: Message, codec: PayloadCodec) -> None:
    """Decode every payload in ``message`` in place."""
    for field, value in message.ListFields():
        kind = field.message_type
        if field.type != FieldDescriptor.TYPE_MESSAGE or kind is None or kind.full_name in _SKIP:
            continue
        if kind.GetOptions().map_entry:
            value_field = kind.fields_by_name["value"]
            if value_field.type == FieldDescriptor.TYPE_MESSAGE and value_field.message_type is not None:
                if value_field.message_type.full_name == _PAYLOAD:
                    keys = list(value)
                    decoded = await codec.decode([value[k] for k in keys])
                    for key, payload in zip(keys, decoded, strict=True):
                        value[key].CopyFrom(payload)
                else:
                    for key in list(value):
                        await decode_message(value[key], codec)
        elif field.is_repeated:
            if kind.full_name == _PAYLOAD:
                decoded = await codec.decode(list(value))
                del value[:]
                value.extend(decoded)
            else:
                for item in value:
                    await decode_message(item, codec)
        elif kind.full_name == _PAYLOAD:
            [single] = await codec.decode([value])
            value.CopyFrom(single)
        else:
            await decode_message(value, codec)
    if message.DESCRIPTOR.full_name == _FAILURE:
        _restore_failure_attributes(message)


def _restore_failure_attributes(failure: Any) -> None:
    if not failure.HasField("encoded_attributes"):
        return
    attributes = failure.encoded_attributes
    if attributes.metadata.get("encoding") != b"json/plain":
        return
    try:
        values = json.loads(attributes.data)
    except ValueError:
        return
    if isinstance(values, dict):
        if isinstance(values.get("message"), str):
            failure.message = values["message"]
        if isinstance(values.get("stack_trace"), str):
            failure.stack_trace = values["stack_trace"]
    failure.ClearField("encoded_attributes")
