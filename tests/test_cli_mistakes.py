"""Every CLI mistake a person makes, run as they would run it (a real process): a
non-zero exit, one `error:` line, one `hint:` line, and no traceback unless `--debug`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

import agenthub as agenthub_package
from tests.support.databases import require_pg

DEAD_URL = "http://127.0.0.1:9"  # discard port: nothing listens there
# The code under test, wherever the child's working directory is.
CHILD_ENV = {"PYTHONPATH": str(Path(agenthub_package.__file__).resolve().parents[1])}


def agenthub(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "agenthub.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **CHILD_ENV, "AGENTHUB_DEBUG": "", **(env or {})},
        cwd=cwd,
        timeout=60,
    )
    return done.returncode, done.stdout, done.stderr


def assert_two_lines(code: int, stderr: str, error: str) -> None:
    assert code != 0
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 2, stderr
    assert lines[0].startswith("error: ") and error in lines[0], stderr
    assert lines[1].startswith("hint: "), stderr


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("mysql://x", "unsupported database URL scheme 'mysql'"),
        ("not a url", "'not a url' is not a database URL"),
        ("postgresql://postgres@127.0.0.1:9/x", "cannot open the database"),
    ],
)
def test_a_bad_statehub_database_url_is_two_lines(url: str, error: str) -> None:
    code, _out, err = agenthub("statehub", "migrate", env={"STATEHUB_DATABASE_URL": url})
    assert_two_lines(code, err, error)


def test_a_missing_postgres_database_is_two_lines() -> None:
    missing = (
        make_url(require_pg())
        .set(database="agenthub_no_such_db")
        .render_as_string(hide_password=False)
    )
    code, _out, err = agenthub("statehub", "serve", env={"STATEHUB_DATABASE_URL": missing})
    assert_two_lines(code, err, 'database "agenthub_no_such_db" does not exist')


def test_the_debug_flag_shows_the_traceback() -> None:
    code, _out, err = agenthub(
        "--debug", "statehub", "migrate", env={"STATEHUB_DATABASE_URL": "mysql://x"}
    )
    assert code == 2 and "Traceback" in err and "error: " in err


def test_a_port_in_use_fails_before_announcing(busy_port: int, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    code, out, err = agenthub(
        "statehub", "serve", "--port", str(busy_port), env={"STATEHUB_DATABASE_URL": db}
    )
    assert_two_lines(code, err, f"127.0.0.1:{busy_port} is already in use")
    assert "http://" not in out + err.splitlines()[0].replace(f"127.0.0.1:{busy_port}", "")


def test_buckets_cp_of_a_missing_local_file_is_two_lines() -> None:
    code, _out, err = agenthub(
        "buckets", "cp", "/nonexistent", "hf://buckets/a/b/c.md",
        env={"BUCKETSYNC_URL": DEAD_URL, "BUCKETSYNC_TOKEN": "t"},
    )  # fmt: skip
    assert_two_lines(code, err, "cannot read /nonexistent")


def test_buckets_ls_with_the_server_down_is_two_lines() -> None:
    code, _out, err = agenthub(
        "buckets", "ls", "hf://buckets/a/b",
        env={"BUCKETSYNC_URL": DEAD_URL, "BUCKETSYNC_TOKEN": "t"},
    )  # fmt: skip
    assert_two_lines(code, err, f"cannot reach bucket-sync at {DEAD_URL}")


def test_buckets_ls_help_shows_the_prefix_syntax() -> None:
    code, out, err = agenthub("buckets", "ls", "--help")
    assert code == 0, err
    assert "hf://buckets/NS/NAME[/PREFIX]" in out


def generated(var: Path) -> dict[Path, int]:
    """What `up` writes (tokens, environment, README, clients, buckets), by mtime; the
    databases are left out because the running stack keeps writing them."""
    return {p: p.stat().st_mtime_ns for p in var.rglob("*") if p.is_file() and ".db" not in p.name}


def test_a_second_up_fails_and_writes_nothing(tmp_path: Path) -> None:
    var = tmp_path / "var"
    ports = ["--statehub-port", "0", "--hubcore-port", "0", "--bucketsync-port", "0"]
    first = subprocess.Popen(
        [sys.executable, "-m", "agenthub.cli", "up", "--var", str(var), *ports],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **CHILD_ENV},
    )
    try:
        assert first.stdout is not None
        deadline = time.monotonic() + 60
        while "Ctrl-C" not in first.stdout.readline():
            assert first.poll() is None and time.monotonic() < deadline, "up did not start"
        before = generated(var)

        code, out, err = agenthub("up", "--var", str(var), *ports, cwd=tmp_path)

        assert_two_lines(code, err, f"another `agenthub up` is running on {var}")
        assert out == ""
        assert generated(var) == before
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=30)


def test_a_second_up_on_the_same_ports_names_the_busy_port(busy_port: int, tmp_path: Path) -> None:
    code, out, err = agenthub(
        "up", "--var", str(tmp_path / "var"), "--statehub-port", str(busy_port), cwd=tmp_path
    )
    assert_two_lines(code, err, f"127.0.0.1:{busy_port} is already in use")
    assert "--statehub-port" in err and out == ""
    assert not (tmp_path / "var").exists()
