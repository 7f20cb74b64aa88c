"""JSON answers a route sends itself, skipping FastAPI's response validation.

A route declared `-> dict[str, Any]` has FastAPI validate and re-encode the dict it
returns, and for a sync route that validation takes a second threadpool hop after the
endpoint's. The hot routes (a post, the watched reads a broadcast wakes by the hundred)
send their answer with `json_answer` instead, under `response_model=dict[str, Any]` so the
OpenAPI document is unchanged. orjson encodes plain JSON values; anything else (a date a
frontmatter parser produced, a set) goes through FastAPI's `jsonable_encoder` as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from fastapi import Response
from fastapi.encoders import jsonable_encoder

JSON = "application/json"


def json_bytes(payload: Mapping[str, Any]) -> bytes:
    try:
        return orjson.dumps(payload)
    except TypeError:
        return orjson.dumps(jsonable_encoder(payload))


def json_answer(payload: Mapping[str, Any], status_code: int = 200) -> Response:
    return Response(json_bytes(payload), status_code=status_code, media_type=JSON)
