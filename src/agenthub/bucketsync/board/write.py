"""Promoting messages to the board, with inbox fan-out in the same batch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from agenthub.bucketsync.board import reach
from agenthub.bucketsync.channels import write as channels
from agenthub.bucketsync.core import frontmatter, idempotency, journal, mentions, naming
from agenthub.bucketsync.core.access import (
    bearer_caller,
    is_registered,
    require_organizer,
    require_registered,
)
from agenthub.bucketsync.core.dedup import PromotionDedup
from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.core.idempotency import Attempt
from agenthub.bucketsync.core.naming import SourceRef
from agenthub.bucketsync.core.notify import wake_keys
from agenthub.bucketsync.core.records import stamp_record
from agenthub.bucketsync.core.sources import claim_source, read_source
from agenthub.bucketsync.errors import (
    BodyOrSourceRequired,
    IdentityMismatch,
    InvalidRequest,
    NotOrganizer,
    PayloadTooLarge,
)


@dataclass(frozen=True)
class MessageRequest:
    source: str | None = None
    agent_id: str | None = None
    body: str | None = None
    type: str | None = None
    refs: Any = None
    broadcast: bool = False
    channel: str | None = None
    # Server-owned frontmatter a slice above the board adds (a directive's `ack_required`
    # and `supersedes`); never read from a request body.
    extra: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Draft:
    author: str
    via: str
    client_fm: dict[str, Any]
    body: str
    source_uri: str | None
    source_bytes: bytes | None
    broadcast: bool = False
    channel: str | None = None


def _require_unicode(request: MessageRequest) -> None:
    """JSON can carry a lone surrogate (`"\\ud800"`), which no file can store: refuse it
    as a 400 instead of failing at the write."""
    for name in ("source", "agent_id", "body", "type", "channel", "refs"):
        value = getattr(request, name)
        texts = value if isinstance(value, list) else [value]
        for text in texts:
            if isinstance(text, str):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    raise InvalidRequest(
                        f"{name} is not valid Unicode text (it holds a lone surrogate)",
                        hint="send UTF-8 text; escape sequences must form whole characters",
                    ) from None


def promote(
    hub: Hub,
    request: MessageRequest,
    *,
    authorization: str | None,
    caller_info: CallerInfo,
) -> dict[str, Any]:
    _require_unicode(request)
    has_source = bool(request.source)
    has_body = request.body is not None and request.agent_id is not None
    if has_source == has_body or (has_source and request.body is not None):
        raise BodyOrSourceRequired(
            "send exactly one of {source} or {agent_id, body}",
            hint='{"source": "hf://buckets/ORG/SLUG-you/msg.md"} or '
            '{"agent_id": "you", "body": "text"}',
        )
    if request.channel is not None and request.broadcast:
        raise InvalidRequest(
            "a message is either a broadcast or a channel post, not both",
            hint="drop broadcast or channel",
        )
    if request.channel is not None:
        channels.require_channel(hub, request.channel)
    draft = _from_source(hub, request) if has_source else _from_raw(hub, request, authorization)
    if request.channel is not None:
        draft = replace(draft, channel=request.channel)
    if request.extra:
        draft = replace(draft, client_fm={**draft.client_fm, **dict(request.extra)})
    if draft.source_bytes is not None:
        folder = (
            naming.MESSAGE_BOARD
            if draft.channel is None
            else naming.channel_message_path(draft.channel, "")
        )
        with hub.dedup.claim(draft.source_bytes, folder) as written:
            key = PromotionDedup.key(draft.source_bytes, folder)
            journal.refuse_promoted(hub, key)
            result = publish(
                hub,
                draft,
                caller_info=caller_info,
                attempt=idempotency.current.get(),
                dedup_key=key,
            )
            written.append(result["filename"])
            return result
    return publish(hub, draft, caller_info=caller_info, attempt=idempotency.current.get())


def _from_source(hub: Hub, request: MessageRequest) -> Draft:
    assert request.source is not None

    def refuse_broadcast(_source: SourceRef) -> None:
        if request.broadcast:
            raise NotOrganizer("agents cannot broadcast", hint="drop broadcast: true")

    source = claim_source(hub, request.source, check=refuse_broadcast)
    data = read_source(hub, source, request.source)
    if len(data) > hub.settings.max_source_bytes:
        raise PayloadTooLarge(
            f"the source is {len(data)} bytes; messages are limited to "
            f"{hub.settings.max_source_bytes}",
            hint="shorten the message or share a file via your bucket and link it",
        )
    document = frontmatter.parse_strict(data)
    frontmatter.check_message_keys(document.frontmatter)
    return Draft(
        author=source.agent_id,
        via="bucket",
        client_fm=dict(document.frontmatter),
        body=document.body,
        source_uri=request.source,
        source_bytes=data,
    )


def _from_raw(hub: Hub, request: MessageRequest, authorization: str | None) -> Draft:
    assert request.agent_id is not None and request.body is not None
    agent_id = request.agent_id
    if len(request.body.encode("utf-8")) > hub.settings.max_source_bytes:
        raise PayloadTooLarge(
            f"the body is larger than {hub.settings.max_source_bytes} bytes",
            hint="shorten the message",
        )
    client_fm: dict[str, Any] = {}
    if request.type is not None:
        client_fm["type"] = request.type
    if request.refs is not None:
        client_fm["refs"] = request.refs
    frontmatter.check_message_keys(client_fm)
    if naming.is_human_handle(agent_id):
        caller = bearer_caller(hub, authorization)
        name = agent_id.removeprefix("human-")
        member = caller.is_member(hub.settings.org) or (
            hub.identity.org_role(hub.settings.org, caller.user, caller.email) is not None
        )
        if caller.user.lower() != name or not member:
            raise IdentityMismatch(
                f"{agent_id!r} does not match the token's user {caller.user!r} in "
                f"{hub.settings.org}",
                hint=f"post as human-{caller.user.lower()}",
            )
        if request.broadcast:
            require_organizer(hub, caller.user, caller.email)
        hub.limiters.raw_messages.acquire(agent_id)
        client_fm.setdefault("type", "user")
        return Draft(
            agent_id, "dashboard", client_fm, request.body, None, None, broadcast=request.broadcast
        )
    naming.validate_agent_id(agent_id)
    if request.broadcast:
        raise NotOrganizer("agents cannot broadcast", hint="drop broadcast: true")
    require_registered(hub, agent_id)
    hub.limiters.raw_messages.acquire(agent_id)
    return Draft(agent_id, "raw", client_fm, request.body, None, None)


def publish(
    hub: Hub,
    draft: Draft,
    *,
    caller_info: CallerInfo,
    route: str = "/v1/messages",
    audit_fields: Mapping[str, Any] | None = None,
    attempt: Attempt | None = None,
    dedup_key: str | None = None,
) -> dict[str, Any]:
    """THE board post: stamp, a journal entry (intent), one batch of the derived files
    (inbox fan-out or broadcast copy, the channel's auto-subscribe marker) with the board
    file last, the audit row, the answer (`attempt`'s Idempotency-Key, `dedup_key`'s
    filename) and the wakes. Requests
    (`promote`) and the server itself (the verifier, `route` names it) post through here. `audit_fields` replaces the
    request's `broadcast`/`channel` columns of the audit row."""
    refs = mentions.normalize_refs(draft.client_fm.get("refs"))
    fm: dict[str, Any] = {
        key: value
        for key, value in draft.client_fm.items()
        if key not in ("agent", "timestamp", "via", "refs", "broadcast", "channel")
    }
    fm.setdefault("type", "agent")
    if refs:  # stored as given (a string stays a string, as agent-collabs writes it)
        fm["refs"] = draft.client_fm["refs"]
    entries = hub.read_model.entries(naming.MESSAGE_BOARD)
    channel_entries = hub.read_model.entries(channels.CHANNELS) if draft.channel is not None else {}

    def taken(name: str) -> bool:
        if draft.channel is not None:
            return naming.channel_message_path(draft.channel, name) in channel_entries
        return f"{naming.MESSAGE_BOARD}{name}" in entries

    if draft.broadcast:
        fm["broadcast"] = True
    if draft.channel is not None:
        fm["channel"] = draft.channel
    filename, data = stamp_record(
        hub, draft.author, via=draft.via, fields=fm, body=draft.body, taken=taken
    )
    recipients = (
        []
        if draft.broadcast
        else mentions.recipients(
            author=draft.author,
            body=draft.body,
            refs=refs,
            is_registered=lambda handle: is_registered(hub, handle),
            cap=hub.settings.mention_fanout_cap,
        )
    )
    board_path = (
        f"{naming.MESSAGE_BOARD}{filename}"
        if draft.channel is None
        else naming.channel_message_path(draft.channel, filename)
    )
    # One batch, the board file last (not transactional on HF: a half-applied batch never
    # shows a board message whose fan-out is missing). The journal entry written first lets
    # the next start roll back derived files whose board file never landed (core.journal).
    derived = [(naming.inbox_path(handle, filename), data) for handle in recipients]
    if draft.broadcast:
        derived.append((naming.broadcast_path(filename), data))
    auto_subscribed = False
    if draft.channel is not None and not channels.is_member(hub, draft.channel, draft.author):
        # Posting subscribes the author (seed §12), in the same batch.
        derived.append(channels.marker(hub, draft.channel, draft.author, via="auto", notify=None))
        auto_subscribed = True
    write_id = hub.audit.new_write_id()
    audit_row = hub.audit.row(
        agent_id=draft.author,
        route="/v1/messages",
        via=draft.via,
        source=draft.source_uri,
        target_path=board_path,
        size=len(data),
        status_code=201,
        mentions_delivered=recipients,
        **(
            audit_fields
            if audit_fields is not None
            else {
                "broadcast": draft.broadcast,
                **({"channel": draft.channel} if draft.channel is not None else {}),
            }
        ),
        caller_ip=caller_info.ip,
        user_agent=caller_info.user_agent,
        write_id=write_id,
    )
    answer = {
        "filename": filename,
        "via": draft.via,
        "path": board_path,
        "mentions_delivered": recipients,
        # Ours (agent-collabs drops them silently): mentions that reached nobody.
        "mentions_unknown": mentions.unknown(
            author=draft.author,
            body=draft.body,
            is_registered=lambda handle: is_registered(hub, handle),
        ),
        "broadcast": draft.broadcast,
        "channel": draft.channel,
        "auto_subscribed": auto_subscribed,
    }
    pid, host = journal.owner()
    entry = journal.Entry(
        write_id=write_id,
        board_path=board_path,
        derived=derived,
        audit_row=audit_row,
        answer=answer,
        attempt=attempt,
        dedup_key=dedup_key,
        pid=pid,
        host=host,
        at=hub.clock.now().timestamp(),
    )
    journal.begin(hub, entry)
    try:
        hub.write_central([*derived, (board_path, data)])
    except BaseException:
        journal.roll_back(hub, entry)
        raise
    # The waiters are woken (latched: the reach is decided) here, their doorbells rung once
    # the answer is recorded: the poster's answer goes out before the woken waiters' pages.
    with hub.wakes_held():
        forecast = reach.wake(
            hub,
            author=draft.author,
            broadcast=draft.broadcast,
            channel=draft.channel,
            recipients=recipients,
            keys=wake_keys(broadcast=draft.broadcast, recipients=recipients, channel=draft.channel),
        )
        if forecast is not None:
            # Before `complete`, so an Idempotency-Key replay answers with it too.
            answer["reach"] = forecast.as_dict()
        journal.complete(hub, entry, audit=True)
    return answer
