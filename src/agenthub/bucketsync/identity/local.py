"""`LocalIdentity`: the Identity adapter for local mode — users and token digests in
`users.json`, managed by `agenthub bucketsync users add|list|remove`."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


class LocalIdentity:
    """Users in `users.json`: {username: {email, role, token_sha256}}, all in one org.

    The file is re-read when it changes, so `users add` works while the server runs.
    Only token digests are stored.
    """

    def __init__(self, path: Path, *, org: str) -> None:
        self._path = Path(path)
        self._org = org
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._users: dict[str, dict[str, str | None]] = {}

    def _load(self) -> dict[str, dict[str, str | None]]:
        with self._lock:
            try:
                st = self._path.stat()
            except FileNotFoundError:
                self._users, self._stamp = {}, None
                return self._users
            stamp = (st.st_mtime_ns, st.st_size)
            if stamp != self._stamp:
                try:
                    data = json.loads(self._path.read_text("utf-8"))
                except (OSError, ValueError) as exc:
                    raise StorageUnavailable(
                        f"user file {self._path} is unreadable: {exc}"
                    ) from exc
                self._users = dict(data.get("users", {}))
                self._stamp = stamp
            return self._users

    def whoami(self, token: str) -> Caller:
        if not token:
            raise Unauthorized("no token given", hint="send Authorization: Bearer <token>")
        digest = _token_digest(token)
        for name, record in self._load().items():
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
        record = self._load().get(user)
        return None if record is None else record.get("role")

    def add_user(self, name: str, *, role: str, email: str | None = None) -> str:
        """Create (or re-key) a user and return the new token (see `add_user`)."""
        with self._lock:
            token = add_user(self._path, name, role=role, email=email)
            self._stamp = None
        return token

    def revoke_user(self, name: str) -> str | None:
        """Take `name`'s org role away (see `revoke_user`); returns the role it had."""
        with self._lock:
            previous = revoke_user(self._path, name)
            self._stamp = None
        return previous


_FILE_LOCK = threading.Lock()


def add_user(
    path: Path, name: str, *, role: str, email: str | None = None, rotate: bool = True
) -> str:
    """Create (or re-key) a user in the token file and return the new token; only its
    digest is stored. With `rotate=False` an existing name is refused (`Conflict`): a
    re-key revokes the token that user holds."""
    if not USERNAME_RE.match(name):
        raise InvalidRequest(
            f"user name {name!r} is not valid", hint="1-40 of [A-Za-z0-9-], e.g. 'alice'"
        )
    if role not in ROLES:
        raise InvalidRequest(f"role {role!r} is not one of {', '.join(ROLES)}")
    token = "bst_" + secrets.token_urlsafe(32)
    with _FILE_LOCK:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            data = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            data = {"users": {}}
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
        _replace(path, data)
    return token


def list_users(path: Path) -> dict[str, dict[str, str | None]]:
    """The users in the token file by name: {email, role} (never a digest)."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {}
    return {
        name: {"email": record.get("email"), "role": record.get("role")}
        for name, record in sorted(data.get("users", {}).items())
    }


@contextlib.contextmanager
def _editing_user(path: Path, name: str) -> Iterator[dict[str, Any]]:
    """The token file's users, `name` known to be among them, under the file lock; the
    file is written back when the block ends without an exception."""
    with _FILE_LOCK:
        try:
            data = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            data = {"users": {}}
        users = data.get("users", {})
        if name not in users:
            known = ", ".join(sorted(users)) or "none yet"
            raise NotFound(f"user {name!r} does not exist", hint=f"users in {path}: {known}")
        yield users
        _replace(path, data)


def remove_user(path: Path, name: str) -> None:
    """Delete a user from the token file: its token stops working at the next request."""
    with _editing_user(path, name) as users:
        del users[name]


def revoke_user(path: Path, name: str) -> str | None:
    """Revoke `name`'s org membership (seed §9): the role becomes null, so the token still
    names the user (their posts stay attributed) but answers as no member. Returns the role
    the user had."""
    with _editing_user(path, name) as users:
        previous: str | None = users[name].get("role")
        users[name]["role"] = None
    return previous


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
