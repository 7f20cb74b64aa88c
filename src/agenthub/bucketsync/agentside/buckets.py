"""`agenthub buckets …`: the agent-side scratch-bucket CLI for local mode, shaped like
`hf buckets` (create, cp, sync, ls, and `whoami` like `hf auth whoami`) and talking to
`/local/buckets` on a bucket-sync server.

Every failure is a `CliError` (one `error:` line, one `hint:` line, no traceback): a
server refusal exits 1 with its code, an unreachable server or a missing local file 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

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
            raise CliError(
                f"cannot reach bucket-sync at {self.url} ({type(exc).__name__})",
                hint="start it (agenthub up) or set BUCKETSYNC_URL to its URL",
            ) from exc
        if not response.is_success:
            wrong = wrong_service_hint(self.url, response, self.client)
            if wrong is not None:
                raise CliError(f"{self.url} is not bucket-sync", hint=wrong, exit_code=REFUSED_EXIT)
            _refused(response)
        return response


def _refused(response: httpx.Response) -> None:
    try:
        error = response.json()["error"]
        message = f"{error['code']}: {error['message']}"
        hint = error.get("hint") or None
    except (ValueError, KeyError, TypeError):
        message = f"HTTP {response.status_code}: {response.text[:200]}"
        hint = None
    raise CliError(message, hint=hint, exit_code=REFUSED_EXIT)


def _read_local(src: str) -> bytes:
    if src == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(src).read_bytes()
    except OSError as exc:
        raise CliError(
            f"cannot read {src}: {exc.strerror or exc}", hint="give an existing local file"
        ) from exc


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
        with _Server(url, token) as server:
            response = server.call("GET", f"/local/buckets/{bucket}/files/{path}")
        if dst == "-":
            sys.stdout.buffer.write(response.content)
        else:
            target = Path(dst)
            if target.is_dir():
                target = target / path.rsplit("/", 1)[-1]
            target.write_bytes(response.content)
        return
    bucket, path = _split_uri(dst)
    if (not path or path.endswith("/")) and src == "-":
        raise CliError(
            "copying stdin needs a destination file", hint="end the destination with a file name"
        )
    data = _read_local(src)
    if not path or path.endswith("/"):
        path = path + Path(src).name
    with _Server(url, token) as server:
        response = server.call("PUT", f"/local/buckets/{bucket}/files/{path}", content=data)
    typer.echo(response.json()["uri"])


@app.command()
def sync(
    src: str = typer.Argument(..., help="Local directory"),
    dst: str = typer.Argument(..., help="hf://buckets/NS/NAME[/PREFIX]"),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Upload every file under a local directory to a bucket prefix."""
    directory = Path(src)
    if not directory.is_dir():
        raise CliError(f"{src} is not a directory", hint="give the local folder to upload")
    bucket, prefix = _split_uri(dst)
    base = prefix.rstrip("/") + "/" if prefix else ""
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    with _Server(url, token) as server:
        for file in files:
            path = base + file.relative_to(directory).as_posix()
            server.call("PUT", f"/local/buckets/{bucket}/files/{path}", content=file.read_bytes())
    typer.echo(f"{len(files)} file(s) -> hf://buckets/{bucket}/{base}")


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
