"""`agenthub up`: State Hub and hub-core on the embedded defaults, in one process.

Both are uvicorn servers on one event loop. State Hub starts first (so its
real port is known when a port of 0 was asked for), then hub-core following
it with reads enabled for one agent and an operator token kept under the var
directory (0600) so restarts keep it. SIGINT/SIGTERM stop hub-core first (its
follower's long-poll closes) and then State Hub.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

TOKEN_FILE = "operator-token"
DEFAULT_AGENT = "operator"
START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Stack:
    statehub_url: str
    hubcore_url: str
    token: str
    agent: str
    var: Path


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
) -> None:
    from agenthub.hubcore.app import create_app as create_hubcore
    from agenthub.hubcore.settings import HubCoreSettings
    from agenthub.statehub.app import create_app as create_statehub
    from agenthub.statehub.settings import StateHubSettings

    var = var.resolve()
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
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    on_ready(Stack(statehub_url, f"http://{host}:{hubcore_bound}", token, agent, var))
    try:
        done = asyncio.ensure_future(stopping.wait())
        await asyncio.wait([done, statehub_task, hubcore_task], return_when=asyncio.FIRST_COMPLETED)
        done.cancel()
    finally:
        hubcore.should_exit = True
        await hubcore_task
        # The cancelled long-poll is expected here; uvicorn would log it as an error.
        logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
        statehub.should_exit = True
        await statehub_task
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
