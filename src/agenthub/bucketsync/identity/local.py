"""`LocalIdentity`: the Identity adapter for local and S3 mode — users and token digests
in a users document, managed by `agenthub bucketsync users add|list|remove`: `users.json`
in the data directory (local), or one file in the shared store every host reads (S3,
`identity.stored`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from agenthub.bucketsync.errors import (
    Conflict,
    InvalidRequest,
    NotFound,
    StorageUnavailable,
    Unauthorized,
)
from agenthub.bucketsync.identity.base import Caller

ROLES = ("admin", "write", "contributor", "read")
USERNAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38}[A-Za-z0-9])?$")


def _token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


Document = dict[str, Any]  # {"users": {name: {email, role, token_sha256}}}
T = TypeVar("T")


class UsersDocument(Protocol):
    """Where the users live: a file on this host (`UsersFile`), or a file in the shared
    store every host reads (`identity.stored.StoredUsers`, S3)."""

    where: str  # for messages: the file, or the store location

    def users(self, *, fresh: bool = False) -> dict[str, dict[str, str | None]]:
        """The users as stored (`fresh`: never an older copy this process kept)."""
        ...

    def edit(self, change: Callable[[Document], T]) -> T:
        """Apply `change` to the whole document and store it, atomically against other
        editors; `change` may run more than once, so it only computes."""
        ...


class UsersFile:
    """`users.json` on this host, re-read when it changes (so `users add` works while the
    server runs), replaced atomically."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.where = str(self.path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._users: dict[str, dict[str, str | None]] = {}

    def users(self, *, fresh: bool = False) -> dict[str, dict[str, str | None]]:
        with self._lock:
            try:
                st = self.path.stat()
            except FileNotFoundError:
                self._users, self._stamp = {}, None
                return self._users
            stamp = (st.st_mtime_ns, st.st_size)
            if stamp != self._stamp:
                try:
                    data = json.loads(self.path.read_text("utf-8"))
                except (OSError, ValueError) as exc:
                    raise StorageUnavailable(f"user file {self.path} is unreadable: {exc}") from exc
                self._users = dict(data.get("users", {}))
                self._stamp = stamp
            return self._users

    def edit(self, change: Callable[[Document], T]) -> T:
        with _FILE_LOCK:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                data = json.loads(self.path.read_text("utf-8"))
            except FileNotFoundError:
                data = {"users": {}}
            result = change(data)
            _replace(self.path, data)
        with self._lock:
            self._stamp = None
        return result


def _document(target: Path | UsersDocument) -> UsersDocument:
    return UsersFile(target) if isinstance(target, Path) else target


class LocalIdentity:
    """Users in a users document: {username: {email, role, token_sha256}}, all in one org
    (`users.json` on this host, or, given a `UsersDocument`, the shared one). Only token
    digests are stored. A token not found is looked up once more in a fresh read, so a
    user added on another host is known at its first request."""

    def __init__(self, source: Path | UsersDocument, *, org: str) -> None:
        self.document = _document(source)
        self._org = org

    def whoami(self, token: str) -> Caller:
        if not token:
            raise Unauthorized("no token given", hint="send Authorization: Bearer <token>")
        digest = _token_digest(token)
        for fresh in (False, True):
            for name, record in self.document.users(fresh=fresh).items():
                if secrets.compare_digest(str(record.get("token_sha256", "")), digest):
                    return Caller(user=name, email=record.get("email"), orgs=self._orgs(record))
        raise Unauthorized(
            "the token is not valid", hint="ask the organizer for a token (bucketsync users add)"
        )

    def _orgs(self, record: dict[str, str | None]) -> dict[str, str | None]:
        role = record.get("role")
        # A user whose membership was revoked (role null) keeps a token but is in no org.
        return {self._org: role} if role else {}

    def org_role(self, org: str, user: str, email: str | None = None) -> str | None:
        if org != self._org:
            return None
        record = self.document.users().get(user)
        return None if record is None else record.get("role")

    def add_user(self, name: str, *, role: str, email: str | None = None) -> str:
        """Create (or re-key) a user and return the new token (see `add_user`)."""
        return add_user(self.document, name, role=role, email=email)

    def revoke_user(self, name: str) -> str | None:
        """Take `name`'s org role away (see `revoke_user`); returns the role it had."""
        return revoke_user(self.document, name)


_FILE_LOCK = threading.Lock()


def add_user(
    target: Path | UsersDocument,
    name: str,
    *,
    role: str,
    email: str | None = None,
    rotate: bool = True,
) -> str:
    """Create (or re-key) a user in the users document and return the new token; only its
    digest is stored. With `rotate=False` an existing name is refused (`Conflict`): a
    re-key revokes the token that user holds."""
    if not USERNAME_RE.match(name):
        raise InvalidRequest(
            f"user name {name!r} is not valid", hint="1-40 of [A-Za-z0-9-], e.g. 'alice'"
        )
    if role not in ROLES:
        raise InvalidRequest(f"role {role!r} is not one of {', '.join(ROLES)}")
    token = "bst_" + secrets.token_urlsafe(32)

    def change(data: Document) -> None:
        if not rotate and name in data.get("users", {}):
            raise Conflict(
                f"user {name!r} already exists",
                hint=f"pass --rotate to issue {name} a new token (the old one stops working)",
            )
        data.setdefault("users", {})[name] = {
            "email": email,
            "role": role,
            "token_sha256": _token_digest(token),
        }

    _document(target).edit(change)
    return token


def list_users(target: Path | UsersDocument) -> dict[str, dict[str, str | None]]:
    """The users by name: {email, role} (never a digest)."""
    users = _document(target).users(fresh=True)
    return {
        name: {"email": record.get("email"), "role": record.get("role")}
        for name, record in sorted(users.items())
    }


def _editing_user(
    target: Path | UsersDocument, name: str, change: Callable[[dict[str, Any]], T]
) -> T:
    """Apply `change` to the users of the document, `name` known to be among them."""
    document = _document(target)

    def edit(data: Document) -> T:
        users = data.setdefault("users", {})
        if name not in users:
            known = ", ".join(sorted(users)) or "none yet"
            raise NotFound(
                f"user {name!r} does not exist", hint=f"users in {document.where}: {known}"
            )
        return change(users)

    return document.edit(edit)


def remove_user(target: Path | UsersDocument, name: str) -> None:
    """Delete a user: its token stops working at the next request."""
    _editing_user(target, name, lambda users: users.pop(name))


def revoke_user(target: Path | UsersDocument, name: str) -> str | None:
    """Revoke `name`'s org membership (seed §9): the role becomes null, so the token still
    names the user (their posts stay attributed) but answers as no member. Returns the role
    the user had."""

    def revoke(users: dict[str, Any]) -> str | None:
        previous: str | None = users[name].get("role")
        users[name]["role"] = None
        return previous

    return _editing_user(target, name, revoke)


def _replace(path: Path, data: object) -> None:
    """Write the token file atomically (0600): readers see the old or the new file."""
    fd, tmp = tempfile.mkstemp(prefix=".users-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
