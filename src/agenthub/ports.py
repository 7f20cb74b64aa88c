"""The default port of every `serve` command (one table, also in the README), and the
check each runs before it announces a URL.

    State Hub 8100 · hub-core 8200 · bucket-sync 8300 · dashboard 8400
"""

from __future__ import annotations

import errno
import socket

from agenthub.clierrors import CliError

STATEHUB_PORT = 8100
HUBCORE_PORT = 8200
BUCKETSYNC_PORT = 8300
DASHBOARD_PORT = 8400


def require_free(host: str, port: int, *, option: str = "--port") -> None:
    """Raise `CliError` when `host:port` cannot be bound (in use, or not an address of
    this machine); port 0 (any free port) always passes."""
    if port == 0:
        return
    with socket.socket() as probe:
        # Without SO_REUSEADDR a port in TIME_WAIT would look taken; uvicorn sets it too.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CliError(
                    f"{host}:{port} is already in use",
                    hint=f"stop what listens there, or pick another port with {option} N",
                ) from None
            raise CliError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                hint="use an address of this machine (--host 127.0.0.1)",
            ) from None
