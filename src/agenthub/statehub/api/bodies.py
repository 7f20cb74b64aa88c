"""Inbox response bodies, encoded once with orjson in the shape `MessageRead` documents.

The hot routes (send, the unread read) return these bytes as a `Response`, so
FastAPI neither validates them against `response_model` (which stays for the
OpenAPI schema) nor hops to the threadpool a second time to do it: building and
validating one pydantic model per row was a fifth of an unread read. orjson
writes UUIDs, UTC timestamps (`Z`, microseconds only when non-zero) and text
exactly as pydantic's `dump_json` does (`tests/statehub/test_bodies.py`
compares the two); a value orjson refuses takes pydantic's path.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
from pydantic import TypeAdapter
from starlette.responses import Response

from agenthub.statehub.schemas import MessageRead, ReceiptRead

MESSAGE_FIELDS = tuple(MessageRead.model_fields)
RECEIPT_FIELDS = tuple(ReceiptRead.model_fields)
_MESSAGES = TypeAdapter(list[MessageRead])
_OPTIONS = orjson.OPT_UTC_Z


def message_fields(message: Any) -> dict[str, Any]:
    """A message (ORM object or row) as `MessageRead`'s fields."""
    return {name: getattr(message, name) for name in MESSAGE_FIELDS}


def message_json(message: Any) -> bytes:
    fields = message_fields(message)
    try:
        return orjson.dumps(fields, option=_OPTIONS)
    except TypeError:
        return MessageRead.model_validate(fields).model_dump_json().encode()


def receipt_json(receipt: Any) -> bytes:
    fields = {name: getattr(receipt, name) for name in RECEIPT_FIELDS}
    try:
        return orjson.dumps(fields, option=_OPTIONS)
    except TypeError:
        return ReceiptRead.model_validate(fields).model_dump_json().encode()


def messages_json(messages: Iterable[Any]) -> bytes:
    listed = [message_fields(m) for m in messages]
    try:
        return orjson.dumps(listed, option=_OPTIONS)
    except TypeError:
        return _MESSAGES.dump_json(_MESSAGES.validate_python(listed))


def json_response(body: bytes, status_code: int = 200) -> Response:
    return Response(body, status_code=status_code, media_type="application/json")
