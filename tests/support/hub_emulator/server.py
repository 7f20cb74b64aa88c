"""The emulator's HTTP server: two loopback listeners (the Hub API and the Xet CAS host),
a thread per connection, HTTP/1.1 keep-alive, faults applied per route.

It is the standard library's `BaseHTTPRequestHandler` rather than uvicorn because the
faults need the socket itself: a reset is a TCP RST (`SO_LINGER` 0), a refusal is a closed
listener, and ASGI hides both.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.hub_emulator.faults import Fault, Policy, RequestLog, RequestRecord
from tests.support.hub_emulator.wire import (
    HubError,
    HubRequest,
    HubResponse,
    RouteKind,
    RouteTable,
)

log = logging.getLogger(__name__)


class _Listener:
    """One listening socket whose port survives being closed (refusing) and reopened."""

    def __init__(self, server: HttpServer, kinds: set[RouteKind]) -> None:
        self.server = server
        self.kinds = kinds
        self.port = 0
        self._sock: socket.socket | None = None
        self._open()
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _open(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(128)
        sock.settimeout(0.1)
        self.port = sock.getsockname()[1]
        self._sock = sock

    def refuse(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def accept(self) -> None:
        # The accept loop may still hold the closed socket for one timeout tick.
        deadline = time.monotonic() + 5
        while self._sock is None:
            try:
                self._open()
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @property
    def refusing(self) -> bool:
        return self._sock is None

    def _accept_loop(self) -> None:
        while not self.server.stopping.is_set():
            sock = self._sock
            if sock is None:
                time.sleep(0.05)
                continue
            try:
                conn, address = sock.accept()
            except (TimeoutError, OSError):
                continue
            conn.settimeout(None)
            # Headers and body go out in separate writes: without this, Nagle's algorithm
            # meets the client's delayed ACK and every answer waits 40 ms.
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(
                target=self.server.serve_connection, args=(conn, address, self), daemon=True
            ).start()
        self.refuse()


def _reset(conn: socket.socket) -> None:
    """Close with an RST, the way a crashed proxy or a dropped route looks to a client."""
    with contextlib.suppress(OSError):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()


class _Abort(Exception):
    """The connection was reset on purpose; the handler stops without answering."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hub-emulator"
    http: HttpServer
    listener: _Listener

    def __init__(self, conn: socket.socket, address: Any, listener: _Listener) -> None:
        self.http = listener.server
        self.listener = listener
        super().__init__(conn, address, None)  # type: ignore[arg-type]

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except _Abort:
            self.close_connection = True
        except (ConnectionError, OSError):
            self.close_connection = True

    def finish(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            super().finish()

    def _dispatch(self) -> None:
        if self.listener.refusing or self.http.stopping.is_set():
            _reset(self.connection)
            raise _Abort
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = HubRequest.parse(self.command, self.path, headers, body, self.listener.url)
        response = self.http.answer(request, self.listener.kinds, self.connection)
        self._write(response)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _dispatch

    def _write(self, response: HubResponse) -> None:
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        if response.stream is not None:
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                for chunk in response.stream:
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except OSError:
                pass
            return
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)


class HttpServer:
    """Dispatch and faults; `HubEmulator` adds the Hub's state and routes on top."""

    def __init__(self, table: RouteTable, *, hang_max_s: float = 120.0) -> None:
        self.table = table
        self.log = RequestLog()
        self.stopping = threading.Event()
        self.hang_max_s = hang_max_s
        self._policies: list[Policy] = []
        self._release = threading.Event()
        self.api = _Listener(self, {"api", "resolve"})
        self.cas = _Listener(self, {"cas"})

    # -- faults ------------------------------------------------------------------------------
    def add_policy(self, policy: Policy) -> Policy:
        self._policies.append(policy)
        return policy

    def remove_policy(self, policy: Policy) -> None:
        with contextlib.suppress(ValueError):
            self._policies.remove(policy)

    def release_hangs(self) -> None:
        """Let every hung request go (they end by a reset); later hangs hang again."""
        self._release.set()
        self._release = threading.Event()

    @contextlib.contextmanager
    def refusing(self, which: str = "api") -> Iterator[None]:
        """Refuse TCP connections on the `api` or `cas` listener (open ones are reset)."""
        listener = self.api if which == "api" else self.cas
        listener.refuse()
        try:
            yield
        finally:
            listener.accept()

    # -- dispatch ----------------------------------------------------------------------------
    def serve_connection(self, conn: socket.socket, address: Any, listener: _Listener) -> None:
        with contextlib.suppress(OSError):
            _Handler(conn, address, listener)

    def _fault_for(self, request: HubRequest, route: Any) -> Fault | None:
        for policy in list(self._policies):
            fault = policy(request, route)
            if fault is not None:
                return fault
        return None

    def answer(
        self, request: HubRequest, kinds: set[RouteKind], conn: socket.socket
    ) -> HubResponse:
        try:
            route, params = self.table.match(request.method, request.path, kinds)
        except LookupError:
            self.log.record(RequestRecord("unknown", "api", request.method, request.path, None))
            return HubError(404, f"no emulated route for {request.path}").response()
        request.params = params
        fault = self._fault_for(request, route)
        self.log.record(
            RequestRecord(
                route.name,
                route.kind,
                request.method,
                request.path,
                fault.kind if fault else None,
                request.body,
                request.token,
                request.query,
            )
        )
        if fault is not None and not fault.after_apply:
            if fault.kind == "status":
                headers = {}
                if fault.retry_after is not None:
                    headers["Retry-After"] = str(int(fault.retry_after))
                return HubResponse.json(
                    {"error": f"injected {fault.status_code}"}, fault.status_code, headers
                )
            if fault.kind in ("reset", "hang"):
                self._fail_connection(fault, conn)
            if fault.kind == "slow":
                self._release.wait(fault.delay_s)
        try:
            response = route.handler(request)
        except HubError as exc:
            response = exc.response()
        if fault is not None and fault.after_apply:
            self._fail_connection(fault, conn)
        return response

    def _fail_connection(self, fault: Fault, conn: socket.socket) -> None:
        if fault.kind == "hang":
            release = self._release
            deadline = time.monotonic() + self.hang_max_s
            while not (release.is_set() or self.stopping.is_set()) and time.monotonic() < deadline:
                release.wait(0.1)
        _reset(conn)
        raise _Abort

    def stop(self) -> None:
        self.stopping.set()
        self._release.set()
