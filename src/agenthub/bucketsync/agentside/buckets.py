"""`agenthub buckets …`: the agent-side scratch-bucket CLI for local mode, shaped like
`hf buckets` (create, cp, ls) and talking to `/local/buckets` on a bucket-sync server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import typer

app = typer.Typer(
    help="Scratch buckets on a local bucket-sync server (like `hf buckets`).", no_args_is_help=True
)

URL = typer.Option(..., "--url", envvar="BUCKETSYNC_URL", help="bucket-sync base URL.")
TOKEN = typer.Option(..., "--token", envvar="BUCKETSYNC_TOKEN", help="Your token.")


def _split_uri(uri: str) -> tuple[str, str]:
    """`hf://buckets/ns/name[/path]` → (`ns/name`, `path`)."""
    prefix = "hf://buckets/"
    if not uri.startswith(prefix):
        raise typer.BadParameter(f"{uri!r} is not an hf://buckets/NS/NAME[/PATH] URI")
    parts = uri[len(prefix) :].split("/", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise typer.BadParameter(f"{uri!r} names no bucket (hf://buckets/NS/NAME)")
    return f"{parts[0]}/{parts[1]}", parts[2] if len(parts) == 3 else ""


def _client(url: str, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {token}"}, timeout=30.0
    )


def _check(response: httpx.Response) -> None:
    if response.is_success:
        return
    try:
        error = response.json()["error"]
        message = f"{error['code']}: {error['message']}"
        if error.get("hint"):
            message += f" (hint: {error['hint']})"
    except (ValueError, KeyError, TypeError):
        message = f"HTTP {response.status_code}: {response.text[:200]}"
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


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
    with _client(url, token) as client:
        response = client.post(f"/local/buckets/{bucket}", json={"private": private})
    _check(response)
    if response.status_code == 200 and not exist_ok:
        typer.echo(f"error: bucket {bucket} already exists (use --exist-ok)", err=True)
        raise typer.Exit(1)
    typer.echo(response.json()["uri"])


@app.command()
def cp(
    src: str = typer.Argument(..., help="Local file or '-' for stdin"),
    dst: str = typer.Argument(..., help="hf://buckets/NS/NAME/PATH (or a folder ending in /)"),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Upload a local file to a bucket path."""
    if src.startswith("hf://"):
        bucket, path = _split_uri(src)
        with _client(url, token) as client:
            response = client.get(f"/local/buckets/{bucket}/files/{path}")
        _check(response)
        if dst == "-":
            sys.stdout.buffer.write(response.content)
        else:
            target = Path(dst)
            if target.is_dir():
                target = target / path.rsplit("/", 1)[-1]
            target.write_bytes(response.content)
        return
    bucket, path = _split_uri(dst)
    data = sys.stdin.buffer.read() if src == "-" else Path(src).read_bytes()
    if not path or path.endswith("/"):
        if src == "-":
            raise typer.BadParameter("give a destination file path when copying stdin")
        path = path + Path(src).name
    with _client(url, token) as client:
        response = client.put(f"/local/buckets/{bucket}/files/{path}", content=data)
    _check(response)
    typer.echo(response.json()["uri"])


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
    with _client(url, token) as client:
        response = client.get(
            f"/local/buckets/{bucket}/tree",
            params={"prefix": prefix, "recursive": "true"},
        )
    _check(response)
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
