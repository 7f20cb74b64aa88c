"""Organizer moderation from the dashboard: a verdict on a result, hiding a board post,
revoking a user. Each action is an org admin's (checked on the server, fail-closed) and
leaves one audit row.

- A verdict is a human verdict (seed §9): written into `results/verification_status.json`
  under the index lock, re-read as stored, compared against the state the organizer saw
  (`expected`: a verdict another organizer or the verifier wrote meanwhile is a 409, never
  overwritten). The verifier's own compare-and-set (`scoring.verdicts`) then defers to it:
  a value its ledger did not write is a human's.
- Hidden posts are a dashboard concept (the seed's board API has none): the list lives in
  the central bucket at `HIDDEN_POSTS` so every worker and every dashboard sees it, and
  the page leaves those posts out. The `/v1` API still serves them (inboxes are public).
- Revoking a user takes away their org role through the identity port (local mode's
  `users.json`); on Hugging Face the organizer removes the org membership (seed §9).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.access import bearer_caller, require_organizer
from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.errors import Conflict, InvalidRequest, NotFound, StorageUnavailable
from agenthub.bucketsync.identity.base import Caller
from agenthub.bucketsync.results import standings
from agenthub.bucketsync.results.verification import (
    VERIFICATION_INDEX,
    encode_index,
    index_edits,
    parse_index,
)

MODERATION = "moderation/"
HIDDEN_POSTS = f"{MODERATION}hidden_posts.json"
HIDDEN_LOCK = "dashboard hidden posts"
ROUTE = "/dashboard/moderation"
Verdict = Literal["valid", "invalid"]


def organizer(hub: Hub, authorization: str | None, action: str) -> Caller:
    """The caller, if an admin of the challenge org (401 without a token, 403 otherwise)."""
    caller = bearer_caller(hub, authorization)
    require_organizer(
        hub, caller.user, caller.email, action=action, hint="ask an org admin to do it"
    )
    return caller


def _audit(
    hub: Hub, caller: Caller, action: str, target: str, info: CallerInfo, **extra: Any
) -> None:
    hub.audit.record(
        agent_id=f"human-{caller.user.lower()}",
        route=f"{ROUTE}/{action}",
        via="dashboard",
        source=None,
        target_path=target,
        size=0,
        status_code=200,
        caller_ip=info.ip,
        user_agent=info.user_agent,
        action=action,
        **extra,
    )


# -- verdicts ----------------------------------------------------------------------------
def set_verdict(
    hub: Hub,
    authorization: str | None,
    *,
    filename: str,
    verdict: str,
    expected: str,
    info: CallerInfo,
) -> dict[str, Any]:
    """Mark `filename` valid or invalid if its verdict is still `expected`."""
    caller = organizer(hub, authorization, "judge results")
    if verdict not in ("valid", "invalid"):
        raise InvalidRequest(f"verdict {verdict!r} is not valid", hint="valid or invalid")
    if naming.parse_stamped_filename(filename) is None or (
        hub.store.read(hub.central, naming.result_path(filename)) is None
    ):
        raise NotFound(f"no result {filename!r}", hint="pick one from the leaderboard")
    for edit in index_edits(hub):
        index = parse_index(edit.data)
        if index is None:
            raise StorageUnavailable(
                "the verification index cannot be read; no verdict was written",
                hint="fix results/verification_status.json (it must be a JSON object)",
            )
        current = str(index.get(filename, "pending"))
        if current != expected:
            raise Conflict(
                f"{filename} is {current} now, not {expected}: nothing was written",
                hint="reload the result and judge it again",
            )
        before = {str(k): str(v) for k, v in index.items()}
        if current != verdict:
            index[filename] = verdict
            edit.write(encode_index(index))
    if current != verdict:
        after = {**before, filename: verdict}
        standings.after_verdict(hub, filename, verdict, before=before, after=after)
    _audit(hub, caller, "verdict", VERIFICATION_INDEX, info, result=filename,
           verdict=verdict, previous=current)  # fmt: skip
    return {"filename": filename, "verification": verdict, "previous": current}


# -- hidden posts ------------------------------------------------------------------------
def _stored_hidden(hub: Hub) -> dict[str, Any]:
    """The hidden-post list as stored now (a read-modify-write never starts from a TTL'd
    copy); an unreadable list is never rewritten."""
    data = hub.store.read(hub.central, HIDDEN_POSTS)
    parsed = _parse(data) if data is not None else {}
    if parsed is None:
        raise StorageUnavailable(
            f"{HIDDEN_POSTS} is not a JSON object; nothing was changed",
            hint="fix or delete the file in the central bucket",
        )
    return parsed


def _parse(data: bytes | str) -> dict[str, Any] | None:
    try:
        parsed = json.loads(data)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def hidden_posts(hub: Hub) -> list[str]:
    """The hidden board filenames, from the read model (listed once per LISTING_TTL_S, a
    write here seen at once; an unreadable list hides nothing)."""
    hub.read_model.register_folder(MODERATION)
    record = hub.read_model.record(HIDDEN_POSTS, MODERATION)
    parsed = _parse(record.body) if record is not None else None
    return sorted(parsed or {})


def hide_post(
    hub: Hub, authorization: str | None, *, filename: str, hidden: bool, reason: str,
    info: CallerInfo,
) -> dict[str, Any]:  # fmt: skip
    """Hide (or show again) the board post `filename` on the dashboard."""
    caller = organizer(hub, authorization, "hide posts")
    if naming.parse_stamped_filename(filename) is None or (
        hub.store.read(hub.central, f"{naming.MESSAGE_BOARD}{filename}") is None
    ):
        raise NotFound(f"no board post {filename!r}", hint="pick one from the board")
    with hub.locks.hold(HIDDEN_LOCK):
        stored = _stored_hidden(hub)
        if hidden:
            stored[filename] = {
                "by": caller.user,
                "at": hub.clock.now().isoformat().replace("+00:00", "Z"),
                "reason": reason,
            }
        else:
            stored.pop(filename, None)
        data = json.dumps(stored, indent=2, sort_keys=True).encode()
        hub.write_central([(HIDDEN_POSTS, data)])
    _audit(hub, caller, "hide" if hidden else "unhide", HIDDEN_POSTS, info, post=filename,
           reason=reason)  # fmt: skip
    return {"filename": filename, "hidden": hidden}


# -- users -------------------------------------------------------------------------------
def revoke_user(
    hub: Hub, authorization: str | None, *, user: str, info: CallerInfo
) -> dict[str, Any]:
    """Take `user`'s org role away (their token then answers as no member)."""
    caller = organizer(hub, authorization, "revoke users")
    if user == caller.user:
        raise InvalidRequest(
            "you cannot revoke yourself", hint="ask another org admin, or use the CLI"
        )
    revoke = getattr(hub.identity, "revoke_user", None)
    if revoke is None:
        raise InvalidRequest(
            "this identity provider has no user list the dashboard can change",
            hint="revoke the org membership on huggingface.co (seed §9: removing an agent)",
        )
    previous = revoke(user)
    _audit(hub, caller, "revoke", "users", info, user=user, previous_role=previous)
    return {"user": user, "revoked": True, "previous_role": previous}
