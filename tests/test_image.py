"""The container image and compose.yaml, proven without a container runtime (none runs on
these machines).

What runs: the Dockerfile's COPY sources are copied into a fresh build context, its
`pip install` RUN line is run there into a fresh venv (`--system-site-packages` with
`--no-deps --no-build-isolation`, so the dependencies are the machine's rather than
downloaded: the package build, its package data and its entry point are what is proved;
only the build backend named in pyproject.toml is installed into the venv first, from the
package index, as pip's build isolation would),
then every compose service built from the image runs its own `command` from that venv
against real PostgreSQL and Redis, and the image's HEALTHCHECK command passes for each.

What does not run: `docker build` itself (the base image, `useradd`, USER 1000 and file
ownership), container networking (service names are rewritten to 127.0.0.1 and each
service's port to a free one), volumes (mount targets are rewritten to directories under
the test's tmp path), the postgres and redis images and the `configs` init SQL (the test's
servers and two throw-away databases stand in), `depends_on`, `restart` and healthcheck
timing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import venv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.databases import require_pg, temporary_pg_database
from tests.support.redisdb import drop_prefix, require_redis, unique_prefix
from tests.support.service_process import free_port, running, wait_healthy

ROOT = Path(__file__).resolve().parent.parent
IMAGE_SERVICES = ("statehub", "hubcore", "challenge-init", "bucketsync", "dashboard")


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(instruction, arguments) pairs, continuation lines joined, comments dropped."""
    text = (ROOT / "Dockerfile").read_text()
    joined = re.sub(r"\\\n\s*", " ", text)
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, rest = line.partition(" ")
            found.append((instruction.upper(), rest.strip()))
    return found


def test_the_image_is_non_root_with_a_healthcheck_and_a_space_default() -> None:
    instructions = dict(dockerfile_instructions())
    assert instructions["USER"] == "user"
    assert "HEALTHCHECK_URL" in instructions["HEALTHCHECK"]
    command = json.loads(instructions["CMD"])
    assert "bucketsync serve" in command[-1] and "${PORT:-7860}" in command[-1]
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert set(IMAGE_SERVICES) <= set(services)
    assert {"postgres", "redis"} <= set(services)
    assert "--workers" in services["bucketsync"]["command"][-1]
    assert services["bucketsync"]["environment"]["BUCKETSYNC_BUS_URL"].startswith("redis://")


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The image's filesystem steps: COPY into a context, RUN pip install into a venv.
    Returns the venv's bin directory."""
    base = tmp_path_factory.mktemp("image")
    context = base / "app"
    context.mkdir()
    environment = base / "venv"
    venv.create(environment, system_site_packages=True, with_pip=False)
    python = environment / "bin" / "python"
    # The build backend pip would fetch into an isolated build env (setuptools, wheel):
    # installed once into the venv so the build itself runs without isolation.
    build_requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         *build_requires["requires"]],
        check=True,
        timeout=300,
    )  # fmt: skip
    installs = 0
    for instruction, args in dockerfile_instructions():
        if instruction == "COPY":
            words = [w for w in shlex.split(args) if not w.startswith("--")]
            *sources, destination = words
            for source in sources:
                target = context / destination if destination.rstrip("/") != "." else context
                if (ROOT / source).is_dir():
                    shutil.copytree(
                        ROOT / source,
                        target,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
                    )
                else:
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(ROOT / source, target / Path(source).name)
        elif instruction == "RUN" and args.startswith("pip install"):
            # The system pip drives the venv's interpreter: the same install, offline.
            argv = [sys.executable, "-m", "pip", "--python", str(python), *shlex.split(args)[1:]]
            argv += ["--no-deps", "--no-build-isolation", "--quiet"]
            subprocess.run(argv, cwd=context, check=True, timeout=300)
            installs += 1
    assert installs == 1
    return environment / "bin"


def test_the_installed_image_carries_the_package_data(image: Path, tmp_path: Path) -> None:
    """Installed from the build context, not imported from the checkout: every non-Python
    file of src/agenthub (dashboard assets, published clients, ...) is in the package."""
    out = subprocess.run(
        [str(image / "python"), "-c", "import agenthub; print(agenthub.__file__)"],
        cwd=tmp_path,
        env={"PATH": f"{image}:{os.environ['PATH']}", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installed = Path(out.strip()).parent
    assert installed.is_relative_to(image.parent), installed  # the venv's copy, not src/
    source = ROOT / "src" / "agenthub"
    data = [
        p.relative_to(source)
        for p in source.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    ]
    assert data
    missing = [str(p) for p in data if not (installed / p).is_file()]
    assert missing == [], "not in the installed package (pyproject package-data)"


@contextlib.contextmanager
def backing_services() -> Iterator[dict[str, str]]:
    """What compose's postgres and redis become here: the test servers."""
    pg = require_pg()
    redis_url = require_redis()
    prefix = unique_prefix()
    with (
        temporary_pg_database(pg, prefix="image_statehub") as statehub,
        temporary_pg_database(pg, prefix="image_hubcore") as hubcore,
    ):
        try:
            yield {
                "postgresql://agenthub:agenthub@postgres:5432/statehub": statehub,
                "postgresql://agenthub:agenthub@postgres:5432/hubcore": hubcore,
                "redis://redis:6379/0": redis_url,
                "__bus_prefix__": prefix,
            }
        finally:
            drop_prefix(redis_url, prefix)


def rewrite(value: str, mapping: dict[str, str]) -> str:
    """Every key of `mapping` replaced in one pass (longest first; no re-replacement)."""
    keys = sorted(mapping, key=len, reverse=True)
    return re.sub("|".join(map(re.escape, keys)), lambda m: mapping[m.group(0)], value)


def test_each_compose_service_runs_from_the_image_against_postgres_and_redis(
    image: Path, tmp_path: Path
) -> None:
    compose: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    ports = {name: free_port() for name in ("statehub", "hubcore", "bucketsync", "dashboard")}
    default_ports = {"statehub": 8100, "hubcore": 8200, "bucketsync": 8300, "dashboard": 8400}
    volumes = tmp_path / "volumes"
    challenge = tmp_path / "challenge"
    shutil.copytree(ROOT / "examples" / "bucketsync-challenge", challenge)
    check_code = shlex.split(dict(dockerfile_instructions())["HEALTHCHECK"].split(" CMD ", 1)[1])
    assert check_code[:2] == ["python", "-c"]

    with backing_services() as backing:
        mapping = {k: v for k, v in backing.items() if not k.startswith("__")}
        for name, port in ports.items():
            mapping[f"http://{name}:{default_ports[name]}"] = f"http://127.0.0.1:{port}"
            mapping[f"127.0.0.1:{default_ports[name]}"] = f"127.0.0.1:{port}"
            mapping[f"localhost:{default_ports[name]}"] = f"localhost:{port}"
            mapping[f"--port {default_ports[name]}"] = f"--port {port}"
        mapping["/data/"] = f"{volumes}/"
        mapping["/challenge/"] = f"{challenge}/"

        def prepared(name: str) -> tuple[list[str], dict[str, str]]:
            service = services[name]
            argv = [rewrite(word, mapping) for word in service["command"]]
            argv = [
                str(ports[name]) if i and argv[i - 1] == "--port" else word
                for i, word in enumerate(argv)
            ]
            env = {
                "PATH": f"{image}:/usr/bin:/bin",
                "HOME": str(tmp_path),
                "BUCKETSYNC_BUS_PREFIX": backing["__bus_prefix__"],
                **{k: rewrite(str(v), mapping) for k, v in service.get("environment", {}).items()},
            }
            return argv, env

        volumes.mkdir()
        argv, env = prepared("challenge-init")
        init = subprocess.run(
            argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert init.returncode == 0, init.stdout + init.stderr
        assert (volumes / "challenge.env").is_file()

        with contextlib.ExitStack() as stack:
            for name in ("statehub", "hubcore", "bucketsync", "dashboard"):
                argv, env = prepared(name)
                log = tmp_path / f"{name}.log"
                process = stack.enter_context(running(argv, env, cwd=tmp_path, log=log))
                health_url = env["HEALTHCHECK_URL"]
                assert f":{ports[name]}/" in health_url
                wait_healthy(health_url, process, log, timeout_s=120)
                # the image's own HEALTHCHECK command, run with the service's environment
                check = subprocess.run(
                    [str(image / "python"), *check_code[1:]],
                    env=env,
                    cwd=tmp_path,
                    capture_output=True,
                    text=True,
                    timeout=30,
                )
                assert check.returncode == 0, f"{name}: {check.stderr}"
            bucketsync_log = (tmp_path / "bucketsync.log").read_text()
            assert "workers 4" in bucketsync_log and "bus redis://" in bucketsync_log
            hubcore_log = (tmp_path / "hubcore.log").read_text()
            assert f"following http://127.0.0.1:{ports['statehub']}" in hubcore_log
