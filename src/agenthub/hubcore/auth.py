"""The operator bearer token: the only credential the read endpoint accepts."""

from __future__ import annotations

import hmac

from agenthub.hubcore.errors import Unauthenticated

BEARER_PREFIX = "bearer "


class OperatorToken:
    def __init__(self, token: str) -> None:
        if not token:
            raise ValueError("an empty operator token would let anyone in")
        self._token = token.encode("utf-8")

    def verify(self, authorization: str | None) -> None:
        """Accept `Authorization: Bearer <token>`; compare in constant time."""
        hint = "send the operator token as 'Authorization: Bearer <HUB_CORE_OPERATOR_TOKEN>'"
        if not authorization or not authorization.lower().startswith(BEARER_PREFIX):
            raise Unauthenticated("missing bearer token", hint=hint)
        presented = authorization[len(BEARER_PREFIX) :].strip().encode("utf-8")
        if not hmac.compare_digest(presented, self._token):
            raise Unauthenticated("wrong bearer token", hint=hint)
