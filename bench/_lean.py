"""A lean HTTP/1.1 client for benchmarks: one keep-alive asyncio stream per connection.

httpx spends more per request than the small servers we measure (trivial apps
score the same through it), so a benchmark timed with it sees the client, not
a server regression. This client writes the request bytes and reads the status
line, the headers and a `Content-Length` or chunked body, nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit


class LeanConnection:
    """One keep-alive connection; requests on it run one at a time."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> LeanConnection:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self._writer.wait_closed()
            self._writer = None

    async def request(
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """(status, body). Reconnects once if the server closed an idle connection."""
        for attempt in (0, 1):
            if self._writer is None:
                await self.open()
            try:
                return await self._exchange(method, target, body, headers or {})
            except (ConnectionError, asyncio.IncompleteReadError):
                await self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def _exchange(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        assert self._reader is not None and self._writer is not None
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        self._writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b""))
        head = await self._reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head[:-4].decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        length: int | None = None
        chunked = False
        close = False
        for line in header_lines:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
            elif name == "connection" and value.strip().lower() == "close":
                close = True
        if chunked:
            content = await self._read_chunked()
        elif length is not None:
            content = await self._reader.readexactly(length)
        else:
            content = await self._reader.read()
            close = True
        if close:
            await self.close()
        return status, content

    async def _read_chunked(self) -> bytes:
        assert self._reader is not None
        parts: list[bytes] = []
        while True:
            size = int((await self._reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await self._reader.readuntil(b"\r\n")
                return b"".join(parts)
            parts.append(await self._reader.readexactly(size))
            await self._reader.readexactly(2)


async def closed_loop(
    base_url: str,
    clients: int,
    seconds: float,
    request: Callable[[LeanConnection, int], Awaitable[int]],
) -> tuple[float, list[float]]:
    """`clients` connections each sending back to back for `seconds`.

    Returns (requests/s, latencies in seconds). `request(conn, i)` sends one
    request and returns its status; a status >= 400 aborts the run (a benchmark
    of failing requests measures nothing)."""
    connections = [await LeanConnection(base_url).open() for _ in range(clients)]
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def run(i: int) -> None:
        conn = connections[i]
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            status = await request(conn, i)
            latencies.append(time.perf_counter() - t0)
            if status >= 400:
                raise RuntimeError(f"request failed with HTTP {status}")

    began = time.perf_counter()
    try:
        await asyncio.gather(*(run(i) for i in range(clients)))
    finally:
        for conn in connections:
            await conn.close()
    return len(latencies) / (time.perf_counter() - began), latencies
