"""How long a killed bucket-sync is down (issue 31): `serve --workers 2` on Redis, CPU
burners making the load, `kill -9` of the whole server (supervisor and workers), a restart,
and the time until `/v1/healthz` answers 200 and a board post is acknowledged.

    AGENTHUB_TEST_REDIS_URL=redis://127.0.0.1:6379/15 \\
    PYTHONPATH=src python3 bench/restart_under_load.py --load 10 --rounds 3 \\
        [--healthcheck-timeout 5]

`--healthcheck-timeout` is passed to `serve --worker-healthcheck-timeout` (uvicorn's own
default is 5 s, the setting that made workers be killed while starting under load).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from tests.bucketsync.reliability.processes import Burners, ServeProcess

ORG = "bench-org"
SLUG = "chal"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", type=int, default=10, help="CPU burner processes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--healthcheck-timeout", type=int, default=None)
    parser.add_argument(
        "--own-sessions",
        action="store_true",
        help="each burner in its own session: with the kernel's autogroup scheduling on, "
        "the server then competes with every burner, not with them as one group",
    )
    args = parser.parse_args()
    redis_url = os.environ.get("AGENTHUB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "ORG": ORG,
            "COLLAB_SLUG": SLUG,
            "AUDIT_BUCKET": f"{ORG}-admin/chal-audit",
            "BUCKETSYNC_DATA_DIR": str(Path(tmp) / "data"),
            "BUCKETSYNC_STORAGE": "local",
            "BUCKETSYNC_BUS_URL": redis_url,
            "BUCKETSYNC_BUS_PREFIX": f"bench-restart:{uuid.uuid4().hex[:8]}:",
        }
        extra = (
            []
            if args.healthcheck_timeout is None
            else ["--worker-healthcheck-timeout", str(args.healthcheck_timeout)]
        )
        server = ServeProcess(env, Path(tmp) / "serve.log", workers=args.workers, extra=extra)
        server.start()
        server.wait_healthy(60)
        server.register("agent-1", org=ORG, slug=SLUG)
        downtimes = []
        with Burners(args.load, own_sessions=args.own_sessions):
            time.sleep(2)  # let the load average build
            for round_ in range(args.rounds):
                server.kill()
                started = time.monotonic()
                server.start()
                healthy = server.wait_healthy(120) - started
                written = server.wait_written("agent-1", f"round {round_}", 120) - started
                load = os.getloadavg()[0]
                print(
                    f"round {round_ + 1}: healthz 200 after {healthy:.2f} s, post acknowledged "
                    f"after {written:.2f} s (load average {load:.1f})",
                    flush=True,
                )
                downtimes.append(written)
        server.stop()
    print(
        f"restart under load {args.load}, workers {args.workers}: serving again after "
        f"p50 {statistics.median(downtimes):.2f} s, max {max(downtimes):.2f} s "
        f"over {len(downtimes)} kills"
    )


if __name__ == "__main__":
    main()
