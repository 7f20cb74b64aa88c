"""The README runner itself: which commands it runs in the background, and that a
command which does not stop cleanly on Ctrl-C fails the run instead of passing quietly."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.shell import Reader, Server, group_alive, pieces

BLOCK = """\
agenthub statehub migrate
agenthub statehub serve --port 8100   # leave it running: later sections use it
BUCKETSYNC_DATA_DIR=./var agenthub challenge evaluate \\
  --evaluator e.py:evaluate   # or module:function; --once
agenthub hubcore follow --once
agenthub bucketsync serve --port 8300 &
curl -s localhost:8300/v1
"""


def test_the_block_is_cut_around_each_command_that_runs_until_ctrl_c() -> None:
    assert [(piece.split()[:3], long) for piece, long in pieces(BLOCK)] == [
        (["agenthub", "statehub", "migrate"], False),
        (["agenthub", "statehub", "serve"], True),
        (["BUCKETSYNC_DATA_DIR=./var", "agenthub", "challenge"], True),  # --once: a comment
        (["agenthub", "hubcore", "follow"], False),  # a `&` server stays in the script
    ]


def sleeper(exit_on_ctrl_c: int) -> str:
    return (
        "python3 -c 'import signal, sys, time; "
        f"signal.signal(signal.SIGINT, lambda *_: sys.exit({exit_on_ctrl_c})); "
        'print("started", flush=True); time.sleep(60)\''
    )


def started(server: Server) -> bool:
    return "started" in server.output()


def test_a_clean_ctrl_c_passes(tmp_path: Path) -> None:
    server = Reader(tmp_path, {}).start(sleeper(0), started, timeout=30)
    assert "started" in server.interrupt()


def test_a_command_failing_on_ctrl_c_fails_the_run(tmp_path: Path) -> None:
    server = Reader(tmp_path, {}).start(sleeper(3), started, timeout=30)
    with pytest.raises(AssertionError, match="exit 3 after Ctrl-C"):
        server.interrupt()


def test_stopping_the_background_waits_until_what_it_left_running_is_gone(
    tmp_path: Path,
) -> None:
    # A server left running by a block (`… &`) that takes a moment to stop on SIGTERM:
    # were the runner not to wait, the next block's server on the same port would be
    # probed "ready" through this one before it had even started (seen in CI).
    reader = Reader(tmp_path, {})
    slow_stop = (
        "import signal, sys, time; "
        "signal.signal(signal.SIGTERM, lambda *_: (time.sleep(1.5), sys.exit(0))); "
        "open('up', 'w').close(); time.sleep(60)"
    )
    reader.run(f'python3 -c "{slow_stop}" &\nwhile [ ! -f up ]; do sleep 0.05; done\n')
    [group] = reader.sessions
    assert group_alive(group)
    reader.stop_background()
    assert not group_alive(group)
