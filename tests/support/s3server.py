"""A loopback S3 server for tests: moto's server mode in its own process, one per test
session, and a fresh S3 bucket per test. Skips where moto is missing; FAILS in CI
(`services_required`), where the S3 store must be proven.

`running_s3(serial=True)` serves one request at a time. moto checks a conditional put's
If-Match / If-None-Match and then stores the object with no lock around the two, so with
its threaded server two concurrent conditional puts can both succeed; AWS S3 (and R2,
GCS, MinIO) apply each conditional put atomically. A server that handles requests one by
one makes each put atomic, as the real stores are, so concurrency tests of
compare-and-swap test our code, not moto's race."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.support.databases import services_required

REGION = "us-east-1"
KEY_ID = "testing"
SECRET = "testing"


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    def new_bucket(self) -> str:
        """A new empty S3 bucket on the server; its name."""
        import boto3

        name = f"bsync-{uuid.uuid4().hex[:12]}"
        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=KEY_ID,
            aws_secret_access_key=SECRET,
        )
        client.create_bucket(Bucket=name)
        return name

    def env(self, bucket: str) -> dict[str, str]:
        """The settings a bucket-sync process needs to use `bucket` on this server."""
        return {
            "BUCKETSYNC_STORAGE": "s3",
            "BUCKETSYNC_S3_BUCKET": bucket,
            "BUCKETSYNC_S3_ENDPOINT": self.endpoint,
            "BUCKETSYNC_S3_REGION": REGION,
            "BUCKETSYNC_S3_ACCESS_KEY_ID": KEY_ID,
            "BUCKETSYNC_S3_SECRET_ACCESS_KEY": SECRET,
        }


def _unavailable(reason: str) -> None:
    if services_required():
        pytest.fail(f"the S3 store tests need moto's server ({reason})", pytrace=False)
    pytest.skip(f"S3 tests need `moto[server]` ({reason})")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# moto's own `moto.server` entry point, with requests handled one at a time.
_SERIAL = (
    "import sys; from werkzeug.serving import run_simple; "
    "from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app; "
    "run_simple(sys.argv[1], int(sys.argv[2]), "
    "DomainDispatcherApplication(create_backend_app), threaded=False)"
)


@contextlib.contextmanager
def running_s3(*, serial: bool = False) -> Iterator[S3Server]:
    try:
        import boto3  # noqa: F401
        import flask  # noqa: F401  (moto's server mode)
        import moto.server  # noqa: F401
    except ImportError as exc:
        _unavailable(str(exc))
    port = _free_port()
    command = (
        [sys.executable, "-c", _SERIAL, "127.0.0.1", str(port)]
        if serial
        else [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    )
    proc = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                _unavailable(f"moto.server exited or did not listen on {port}")
            time.sleep(0.05)
        yield S3Server(endpoint=f"http://127.0.0.1:{port}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
