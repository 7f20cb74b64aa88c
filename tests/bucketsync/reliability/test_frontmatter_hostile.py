"""Hostile or ambiguous frontmatter is refused before anything is built, naming the cause."""

from __future__ import annotations

import time

import pytest
import yaml

from agenthub.bucketsync.core import frontmatter
from agenthub.bucketsync.errors import InvalidFrontmatter
from tests.bucketsync.conftest import World


def alias_bomb(levels: int) -> str:
    """~300 bytes that expand to 10**levels leaves in a YAML loader."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, levels):
        refs = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "---\n" + "\n".join(lines) + "\n---\nboom\n"


def test_the_bomb_is_what_it_claims_to_be() -> None:
    loaded = yaml.safe_load(alias_bomb(3).split("---")[1])
    assert len(loaded["a2"]) * len(loaded["a2"][0]) * len(loaded["a2"][0][0]) == 1000


def test_alias_bomb_post_is_refused_within_100_ms(world: World) -> None:
    world.agent("agent-1")
    world.put("agent-1", "bomb.md", alias_bomb(7))
    started = time.perf_counter()
    response = world.client.post("/v1/messages", json={"source": world.uri("agent-1", "bomb.md")})
    elapsed = time.perf_counter() - started
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_FRONTMATTER"
    assert "alias" in response.json()["error"]["message"]
    assert elapsed < 0.1


@pytest.mark.parametrize(
    "header",
    [
        pytest.param("a: " + "[" * 700 + "]" * 700, id="flow"),
        pytest.param("".join("  " * i + f"k{i}:\n" for i in range(700)), id="block"),
    ],
)
def test_deep_nesting_is_invalid_frontmatter_not_a_crash(header: str) -> None:
    with pytest.raises(InvalidFrontmatter, match="nests deeper"):
        frontmatter.parse_strict(f"---\n{header}\n---\nbody".encode())


def test_duplicate_key_is_refused_naming_the_key(world: World) -> None:
    world.agent("agent-1")
    response = world.promote("agent-1", "dup.md", "---\ntype: agent\ntype: note\n---\nhi\n")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "INVALID_FRONTMATTER"
    assert "'type'" in error["message"]


def test_a_leading_bom_keeps_the_frontmatter(world: World) -> None:
    world.agent("agent-1")
    response = world.promote("agent-1", "bom.md", "\ufeff---\ntype: note\n---\nhello\n")
    assert response.status_code == 201, response.text
    filename = response.json()["filename"]
    record = world.client.get(f"/v1/messages/{filename}").json()
    assert record["frontmatter"]["type"] == "note"
    assert "---" not in record["body"]


@pytest.mark.parametrize("value", [".nan", ".inf", "-.Inf", "1.0e+999"])
def test_non_finite_numbers_are_refused(value: str) -> None:
    with pytest.raises(InvalidFrontmatter, match="not a finite number"):
        frontmatter.parse_strict(f"---\nscore: {value}\n---\nbody".encode())


def test_anchor_without_alias_is_refused() -> None:
    with pytest.raises(InvalidFrontmatter, match="anchor"):
        frontmatter.parse_strict(b"---\ntype: &t agent\n---\nbody")


def test_lenient_parse_of_a_refused_file_keeps_the_body() -> None:
    document = frontmatter.parse_lenient(alias_bomb(7).encode())
    assert document.frontmatter == {}
    assert document.body == "boom\n"
