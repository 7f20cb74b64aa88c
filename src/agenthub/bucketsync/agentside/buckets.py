"""`agenthub buckets …`: the agent-side scratch-bucket CLI for local mode, shaped like
`hf buckets` (create, cp, sync, ls, and `whoami` like `hf auth whoami`) and talking to
`/local/buckets` on a bucket-sync server.

Every failure is a `CliError` (one `error:` line, one `hint:` line, no traceback): a
server refusal exits 1 with its code, an unreachable server or a missing local file 2.

Files travel in pieces both ways (`cp` and `sync` stream from disk, a download streams to
disk), so a checkpoint of gigabytes needs no more memory than a note. `sync` skips files
whose size and content hash match the bucket's, prints one line per file, goes on past a
file that fails and exits 1 naming every file that was not uploaded.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import httpx
import typer

from agenthub.bucketsync.agentside.serviceurl import (
    NotAServiceUrl,
    checked_url,
    wrong_service_hint,
)
from agenthub.clierrors import CliError, Commands

app = typer.Typer(
    cls=Commands,
    help="Scratch buckets on a local bucket-sync server (like `hf buckets`).",
    no_args_is_help=True,
    # Bucket paths such as [/PREFIX] are text, not rich markup (when run on its own).
    rich_markup_mode=None,
)

URL = typer.Option(..., "--url", envvar="BUCKETSYNC_URL", help="bucket-sync base URL.")
TOKEN = typer.Option(..., "--token", envvar="BUCKETSYNC_TOKEN", help="Your token.")
# A refusal by the server (4xx/5xx with its error body) exits 1, like `hf buckets`.
REFUSED_EXIT = 1
# Files are read, sent, received and hashed in pieces of this size.
PIECE = 1 << 20


def _split_uri(uri: str) -> tuple[str, str]:
    """`hf://buckets/ns/name[/path]` → (`ns/name`, `path`)."""
    prefix = "hf://buckets/"
    if not uri.startswith(prefix):
        raise CliError(
            f"{uri!r} is not a bucket URI", hint="write it as hf://buckets/NS/NAME[/PATH]"
        )
    parts = uri[len(prefix) :].split("/", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise CliError(f"{uri!r} names no bucket", hint="write it as hf://buckets/NS/NAME[/PATH]")
    return f"{parts[0]}/{parts[1]}", parts[2] if len(parts) == 3 else ""


class _Server:
    """One bucket-sync server as the agent's token sees it; every call's failure is a
    `CliError`."""

    def __init__(self, url: str, token: str) -> None:
        try:
            self.url = checked_url(url)
        except NotAServiceUrl as exc:
            raise CliError(str(exc), hint=exc.hint) from None
        self.client = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=30.0
        )

    def __enter__(self) -> _Server:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.client.close()

    def call(self, method: str, path: str, **kwargs: object) -> httpx.Response:
        try:
            response = self.client.request(method, path, **kwargs)  # type: ignore[arg-type]
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        self._check(response)
        return response

    @contextmanager
    def download(self, path: str) -> Iterator[Iterator[bytes]]:
        """A file's bytes in pieces, as they arrive."""
        try:
            with self.client.stream("GET", path) as response:
                if not response.is_success:
                    response.read()
                    self._check(response)
                yield response.iter_bytes(PIECE)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc

    def upload(self, bucket: str, path: str, source: BinaryIO, size: int | None) -> httpx.Response:
        """PUT a file read in pieces from `source` (its size declared when known, so an
        oversized file is refused before it is sent)."""
        headers = {"Content-Length": str(size)} if size is not None else {}
        return self.call(
            "PUT",
            f"/local/buckets/{bucket}/files/{path}",
            content=_pieces(source),
            headers=headers,
            timeout=httpx.Timeout(30.0, write=None, read=None),
        )

    def _unreachable(self, exc: httpx.HTTPError) -> CliError:
        return CliError(
            f"cannot reach bucket-sync at {self.url} ({type(exc).__name__})",
            hint="start it (agenthub up) or set BUCKETSYNC_URL to its URL",
        )

    def _check(self, response: httpx.Response) -> None:
        if not response.is_success:
            wrong = wrong_service_hint(self.url, response, self.client)
            if wrong is not None:
                raise CliError(f"{self.url} is not bucket-sync", hint=wrong, exit_code=REFUSED_EXIT)
            _refused(response)


def _pieces(source: BinaryIO) -> Iterator[bytes]:
    while piece := source.read(PIECE):
        yield piece


def _file_hash(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _refused(response: httpx.Response) -> None:
    try:
        error = response.json()["error"]
        message = f"{error['code']}: {error['message']}"
        hint = error.get("hint") or None
    except (ValueError, KeyError, TypeError):
        message = f"HTTP {response.status_code}: {response.text[:200]}"
        hint = None
    raise CliError(message, hint=hint, exit_code=REFUSED_EXIT)


@contextmanager
def _open_local(src: str) -> Iterator[tuple[BinaryIO, int | None]]:
    """The local file (or stdin) to upload, and its size when it has one."""
    if src == "-":
        yield sys.stdin.buffer, None
        return
    try:
        handle = Path(src).open("rb")  # noqa: SIM115 - closed by the `with` below
        size = Path(src).stat().st_size
    except OSError as exc:
        raise CliError(
            f"cannot read {src}: {exc.strerror or exc}", hint="give an existing local file"
        ) from exc
    with handle:
        yield handle, size


@app.command()
def whoami(url: str = URL, token: str = TOKEN) -> None:
    """Print the user your token belongs to (what a handshake file holds)."""
    with _Server(url, token) as server:
        typer.echo(server.call("GET", "/v1/me").json()["hf_user"])


@app.command()
def create(
    bucket_id: str = typer.Argument(..., help="NS/NAME"),
    private: bool = typer.Option(False, "--private"),
    exist_ok: bool = typer.Option(False, "--exist-ok"),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Create a bucket you will own."""
    bucket = bucket_id.removeprefix("hf://buckets/")
    with _Server(url, token) as server:
        response = server.call("POST", f"/local/buckets/{bucket}", json={"private": private})
    if response.status_code == 200 and not exist_ok:
        raise CliError(
            f"bucket {bucket} already exists",
            hint="pass --exist-ok to accept an existing bucket",
            exit_code=REFUSED_EXIT,
        )
    typer.echo(response.json()["uri"])


@app.command()
def cp(
    src: str = typer.Argument(..., help="Local file, '-' for stdin, or hf://buckets/NS/NAME/PATH"),
    dst: str = typer.Argument(
        ..., help="hf://buckets/NS/NAME/PATH (or a folder ending in /), or a local path / '-'"
    ),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Upload a local file to a bucket path, or download a bucket file."""
    if src.startswith("hf://"):
        bucket, path = _split_uri(src)
        with (
            _Server(url, token) as server,
            server.download(f"/local/buckets/{bucket}/files/{path}") as pieces,
        ):
            if dst == "-":
                for piece in pieces:
                    sys.stdout.buffer.write(piece)
                return
            target = Path(dst)
            if target.is_dir():
                target = target / path.rsplit("/", 1)[-1]
            partial = target.with_name(f".{target.name}.part")
            with partial.open("wb") as out:
                for piece in pieces:
                    out.write(piece)
            partial.replace(target)  # an interrupted download leaves no half file at dst
        return
    bucket, path = _split_uri(dst)
    if (not path or path.endswith("/")) and src == "-":
        raise CliError(
            "copying stdin needs a destination file", hint="end the destination with a file name"
        )
    if not path or path.endswith("/"):
        path = path + Path(src).name
    with _open_local(src) as (source, size), _Server(url, token) as server:
        response = server.upload(bucket, path, source, size)
    typer.echo(response.json()["uri"])


@app.command()
def sync(
    src: str = typer.Argument(..., help="Local directory"),
    dst: str = typer.Argument(..., help="hf://buckets/NS/NAME[/PREFIX]"),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Upload the files under a local directory that differ from the bucket's (size and
    content hash), one line per file; go on past a failing file, exit 1 if any failed."""
    directory = Path(src)
    if not directory.is_dir():
        raise CliError(f"{src} is not a directory", hint="give the local folder to upload")
    bucket, prefix = _split_uri(dst)
    base = prefix.rstrip("/") + "/" if prefix else ""
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    failed: list[str] = []
    uploaded = unchanged = 0
    with _Server(url, token) as server:
        remote = _remote_files(server, bucket, base)
        for number, file in enumerate(files, 1):
            path = base + file.relative_to(directory).as_posix()
            step = f"[{number}/{len(files)}]"
            try:
                size = file.stat().st_size
                known = remote.get(path)
                if known is not None and known == (size, _file_hash(file)):
                    unchanged += 1
                    typer.echo(f"{step} unchanged  {path} ({size} bytes)")
                    continue
                with file.open("rb") as source:
                    server.upload(bucket, path, source, size)
            except (CliError, OSError) as exc:
                failed.append(path)
                reason = exc.message if isinstance(exc, CliError) else str(exc)
                typer.echo(f"{step} FAILED     {path}: {reason}", err=True)
                continue
            uploaded += 1
            typer.echo(f"{step} uploaded   {path} ({size} bytes)")
    typer.echo(
        f"{uploaded} uploaded, {unchanged} unchanged, {len(failed)} failed "
        f"-> hf://buckets/{bucket}/{base}"
    )
    if failed:
        raise CliError(
            f"{len(failed)} of {len(files)} file(s) not uploaded: {', '.join(failed)}",
            hint="fix what each FAILED line says and run the same sync again "
            "(files already uploaded are skipped)",
            exit_code=REFUSED_EXIT,
        )


def _remote_files(server: _Server, bucket: str, base: str) -> dict[str, tuple[int, str]]:
    """The bucket's files under `base`: path -> (size, content hash)."""
    response = server.call(
        "GET", f"/local/buckets/{bucket}/tree", params={"prefix": base, "recursive": "true"}
    )
    return {
        str(item["path"]): (int(item["size"]), str(item["content_hash"]))
        for item in response.json()["items"]
    }


@app.command("ls")
def ls(
    target: str = typer.Argument(..., help="hf://buckets/NS/NAME[/PREFIX]"),
    recursive: bool = typer.Option(False, "-R", "--recursive"),
    as_json: bool = typer.Option(False, "--json"),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """List files in a bucket (under PREFIX)."""
    bucket, prefix = _split_uri(target)
    with _Server(url, token) as server:
        response = server.call(
            "GET", f"/local/buckets/{bucket}/tree", params={"prefix": prefix, "recursive": "true"}
        )
    items = response.json()["items"]
    if not recursive:
        base = prefix.rstrip("/") + "/" if prefix else ""
        shown: dict[str, dict[str, object]] = {}
        for item in items:
            rest = str(item["path"])[len(base) :] if str(item["path"]).startswith(base) else ""
            head, sep, _tail = rest.partition("/")
            key = base + head + sep if sep else str(item["path"])
            shown.setdefault(key, item if not sep else {"path": key, "size": None})
        items = list(shown.values())
    if as_json:
        typer.echo(json.dumps(items))
        return
    for item in items:
        size = "" if item.get("size") is None else str(item["size"])
        typer.echo(f"{size:>10}  {item['path']}")
