"""`agenthub up`: State Hub, hub-core and bucket-sync on the embedded defaults, in one
process.

All are uvicorn servers on one event loop. State Hub starts first (so its
real port is known when a port of 0 was asked for), then hub-core following
it with reads enabled for one agent and an operator token kept under the var
directory (0600) so restarts keep it. bucket-sync runs on the local bucket store
under `var/bucketsync` with an example challenge set up through the same
bootstrap as `agenthub challenge init`, and two local-identity users (an organizer
and a first contributor) whose tokens are kept in `var/bucketsync-tokens.json`
(0600). SIGINT/SIGTERM stop bucket-sync and hub-core first (the follower's
long-poll closes) and then State Hub.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import secrets
import signal
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from agenthub.bucketsync.app import create_app as create_bucketsync
from agenthub.bucketsync.app.adapters import local_adapters
from agenthub.bucketsync.errors import Unauthorized
from agenthub.bucketsync.identity.base import UserAdmin
from agenthub.bucketsync.settings import load_settings
from agenthub.challenge import bootstrap
from agenthub.challenge.schema import load
from agenthub.clierrors import CliError
from agenthub.hubcore.app import create_app as create_hubcore
from agenthub.hubcore.settings import HubCoreSettings
from agenthub.statehub.app import create_app as create_statehub
from agenthub.statehub.settings import StateHubSettings

TOKEN_FILE = "operator-token"
LOCK_FILE = ".up.lock"
BUCKETSYNC_TOKENS_FILE = "bucketsync-tokens.json"
BUCKETSYNC_USERS = {"organizer": "admin", "alice": "contributor"}
EXAMPLE_CHALLENGE = (
    Path(__file__).resolve().parents[2] / "examples" / "bucketsync-challenge" / "challenge.yaml"
)
DEFAULT_AGENT = "operator"
START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class BucketSync:
    url: str
    central_bucket: str
    org: str
    slug: str
    tokens: dict[str, str]  # user -> bearer token
    data_dir: Path
    env_file: Path
    init_report: list[tuple[str, str]]


@dataclass(frozen=True)
class Stack:
    statehub_url: str
    hubcore_url: str
    token: str
    agent: str
    var: Path
    bucketsync: BucketSync | None = None


@contextlib.contextmanager
def holding(var: Path) -> Iterator[None]:
    """Hold `var/.up.lock` for as long as the stack runs: a second `up` on the same
    directory fails here, before it writes anything."""
    var.mkdir(parents=True, exist_ok=True)
    with (var / LOCK_FILE).open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CliError(
                f"another `agenthub up` is running on {var}",
                hint="stop it (Ctrl-C), or give this one its own --var directory and ports",
            ) from None
        yield


def operator_token(var: Path) -> str:
    """The stack's operator token: read from `var/operator-token`, or generated once (0600)."""
    path = var / TOKEN_FILE
    if path.exists():
        token = path.read_text().strip()
        if token:
            return token
    var.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return token


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def bucketsync_tokens(var: Path, identity: UserAdmin) -> dict[str, str]:
    """Tokens of the stack's bucket-sync users: kept in `var/bucketsync-tokens.json` (0600)
    while the user file still knows them, created (or re-keyed) otherwise."""
    path = var / BUCKETSYNC_TOKENS_FILE
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        kept = {}
    tokens: dict[str, str] = {}
    for user, role in BUCKETSYNC_USERS.items():
        token = kept.get(user) if isinstance(kept, dict) else None
        try:
            known = isinstance(token, str) and identity.whoami(token).user == user
        except Unauthorized:
            known = False
        tokens[user] = str(token) if known else identity.add_user(user, role=role)
    if tokens != kept:
        _write_private(path, json.dumps(tokens, indent=2) + "\n")
    return tokens


def prepare_bucketsync(var: Path, challenge_file: Path, *, public_url: str) -> tuple[Any, Any]:
    """Set the example challenge up on the local store (idempotent) and build bucket-sync's
    app; returns (app, BucketSync without its URL)."""
    challenge = load(challenge_file)
    data_dir = var / "bucketsync"
    settings = load_settings(
        **challenge.to_env(), BUCKETSYNC_DATA_DIR=str(data_dir), BUCKETSYNC_STORAGE="local"
    )
    store, identity = local_adapters(settings)
    env_file = var / "challenge.env"
    # `up` owns var/: its generated files follow the current URL (a port of 0 changes it).
    report = bootstrap.apply(
        bootstrap.plan(challenge, service_url=public_url, target="local"),
        store,
        env_file=env_file,
        force=True,
    )
    tokens = bucketsync_tokens(var, identity)
    app = create_bucketsync(settings, store=store, identity=identity)
    info = BucketSync(
        url=public_url,
        central_bucket=settings.central_bucket,
        org=settings.org,
        slug=settings.collab_slug,
        tokens=tokens,
        data_dir=data_dir,
        env_file=env_file,
        init_report=list(report.lines),
    )
    return app, info


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signals to `serve_stack` (two servers share them)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _start(
    app: Any, host: str, port: int, *, grace_s: float = 5.0
) -> tuple[_Server, asyncio.Task[None], int]:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=int(grace_s) or None,
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_TIMEOUT_S
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError(f"server on {host}:{port} stopped while starting")
        if loop.time() > deadline:
            raise RuntimeError(f"server on {host}:{port} did not start")
        await asyncio.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    return server, task, int(bound)


async def serve_stack(
    var: Path,
    *,
    host: str,
    statehub_port: int,
    hubcore_port: int,
    agent: str,
    on_ready: Callable[[Stack], None],
    bucketsync_port: int | None = None,
    challenge: Path = EXAMPLE_CHALLENGE,
) -> None:
    var = var.resolve()
    # Held until the stack stops: a second `up` on this directory fails before writing.
    with holding(var):
        token = operator_token(var)
        statehub_app = create_statehub(
            StateHubSettings(database_url=f"sqlite:///{var / 'statehub.db'}")
        )
        # State Hub does not end parked long-polls when it stops; the follower's
        # last one outlives hub-core's close by up to its wait, so cut it after 1 s.
        statehub, statehub_task, statehub_bound = await _start(
            statehub_app, host, statehub_port, grace_s=1
        )
        statehub_url = f"http://{host}:{statehub_bound}"
        hubcore_app = create_hubcore(
            HubCoreSettings(
                database_url=f"sqlite:///{var / 'hubcore.db'}",
                inbox_reads=True,
                operator_token=token,
                inbox_agent=agent,
                statehub_url=statehub_url,
            )
        )
        try:
            hubcore, hubcore_task, hubcore_bound = await _start(hubcore_app, host, hubcore_port)
        except BaseException:
            statehub.should_exit = True
            await statehub_task
            raise
        bucketsync_info: BucketSync | None = None
        extra: list[tuple[_Server, asyncio.Task[None]]] = []
        if bucketsync_port is not None:
            try:
                # The README names bucket-sync's URL, so the port is fixed before the bootstrap.
                port = bucketsync_port or _free_port(host)
                bucketsync_app, bucketsync_info = prepare_bucketsync(
                    var, challenge, public_url=f"http://{host}:{port}"
                )
                bucketsync, bucketsync_task, _bound = await _start(bucketsync_app, host, port)
                extra.append((bucketsync, bucketsync_task))
            except BaseException:
                hubcore.should_exit = True
                statehub.should_exit = True
                await hubcore_task
                await statehub_task
                raise
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopping.set)
        on_ready(
            Stack(
                statehub_url, f"http://{host}:{hubcore_bound}", token, agent, var, bucketsync_info
            )
        )
        try:
            done = asyncio.ensure_future(stopping.wait())
            await asyncio.wait(
                [done, statehub_task, hubcore_task, *(task for _s, task in extra)],
                return_when=asyncio.FIRST_COMPLETED,
            )
            done.cancel()
        finally:
            for server, task in extra:
                server.should_exit = True
                await task
            hubcore.should_exit = True
            await hubcore_task
            # The cancelled long-poll is expected here; uvicorn would log it as an error.
            logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
            statehub.should_exit = True
            await statehub_task
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
