"""Test pgbouncer: Debian's `pgbouncer` in transaction pooling mode in front of the test
PostgreSQL, the way operators put one in front of State Hub and hub-core.

CI (`.ci/run`) starts one on 127.0.0.1:6432 and exports AGENTHUB_TEST_PGBOUNCER_URL; a
local run without it starts one for the session on a free port when the `pgbouncer`
binary is installed. Without either, the tests skip on a user's machine and fail in CI.

`python3 -m tests.support.pgbouncer --port 6432 --dir DIR` writes the configuration and
starts a daemon (what `.ci/run` does); it prints the URL to export.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

PGBOUNCER_ENV = "AGENTHUB_TEST_PGBOUNCER_URL"
_started: dict[str, str] = {}


def write_config(directory: Path, port: int, server_host: str, server_port: int) -> Path:
    """A transaction-pooling configuration: every database on the server (`*`), any user
    trusted (loopback tests only), no Unix socket, logs and pid file in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "users.txt").write_text('"postgres" ""\n')
    config = directory / "pgbouncer.ini"
    config.write_text(
        "[databases]\n"
        f"* = host={server_host} port={server_port}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = trust\n"
        f"auth_file = {directory / 'users.txt'}\n"
        "pool_mode = transaction\n"
        "max_client_conn = 2000\n"
        "default_pool_size = 40\n"
        "ignore_startup_parameters = extra_float_digits\n"
        f"logfile = {directory / 'pgbouncer.log'}\n"
        f"pidfile = {directory / 'pgbouncer.pid'}\n"
    )
    if os.geteuid() == 0:
        # pgbouncer refuses to run as root; `-u postgres` drops to that user, which
        # then writes the log and pid file here.
        shutil.chown(directory, user="postgres")
        for path in directory.iterdir():
            shutil.chown(path, user="postgres")
    return config


def start(directory: Path, port: int, server_host: str, server_port: int) -> None:
    """Start a pgbouncer daemon and wait until it accepts connections."""
    config = write_config(directory, port, server_host, server_port)
    command = ["pgbouncer", "-d", "-q"]
    if os.geteuid() == 0:
        command += ["-u", "postgres"]
    subprocess.run([*command, str(config)], check=True)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                log = directory / "pgbouncer.log"
                tail = log.read_text()[-2000:] if log.exists() else "(no log)"
                raise RuntimeError(f"pgbouncer did not start on port {port}:\n{tail}") from None
            time.sleep(0.05)


def stop(directory: Path) -> None:
    pid_file = directory / "pgbouncer.pid"
    if pid_file.exists():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid_file.read_text().strip()), 15)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def pgbouncer_server_url(pg_server_url: str) -> str | None:
    """The pgbouncer URL (to database `postgres`): CI's, or one started for this process
    in front of `pg_server_url`; None when no pgbouncer is installed."""
    url = os.environ.get(PGBOUNCER_ENV)
    if url:
        return url
    if pg_server_url in _started:
        return _started[pg_server_url]
    if shutil.which("pgbouncer") is None:
        return None
    server = urlsplit(pg_server_url)
    directory = Path(tempfile.mkdtemp(prefix="agenthub-pgbouncer-"))
    port = _free_port()
    start(directory, port, server.hostname or "127.0.0.1", server.port or 5432)
    atexit.register(stop, directory)
    user = server.username or "postgres"
    _started[pg_server_url] = f"postgresql://{user}@127.0.0.1:{port}/postgres"
    return _started[pg_server_url]


def require_pgbouncer(pg_server_url: str) -> str:
    """The pgbouncer URL; skips locally, FAILS in CI when pgbouncer is missing."""
    import pytest

    from tests.support.databases import services_required

    url = pgbouncer_server_url(pg_server_url)
    if url is None:
        if services_required():
            pytest.fail(f"{PGBOUNCER_ENV} is not set but CI requires pgbouncer", pytrace=False)
        pytest.skip(f"pgbouncer tests need {PGBOUNCER_ENV} or the pgbouncer binary")
    return url


def through(pgbouncer_url: str, database_url: str) -> str:
    """`database_url`'s database, reached through the pgbouncer at `pgbouncer_url`."""
    from sqlalchemy.engine import make_url

    target = make_url(database_url)
    return (
        make_url(pgbouncer_url).set(database=target.database).render_as_string(hide_password=False)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="start pgbouncer (transaction pooling)")
    parser.add_argument("--port", type=int, default=6432)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    server = urlsplit(args.server)
    start(args.dir, args.port, server.hostname or "127.0.0.1", server.port or 5432)
    print(f"postgresql://{server.username or 'postgres'}@127.0.0.1:{args.port}/postgres")


if __name__ == "__main__":
    main()
