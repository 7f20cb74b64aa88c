"""`frontmatter.render` writes libyaml's bytes only where they equal PyYAML's.

Every post renders its frontmatter, and PyYAML's pure-Python emitter was a tenth of a
post's time; libyaml's is five times faster but quotes some text differently (it escapes
characters beyond the Basic Multilingual Plane and some controls). A file in the bucket
must not depend on which emitter the build has, so the fast one is used only where the
two agree byte for byte: these tests compare both over generated frontmatter.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenthub.bucketsync.core import frontmatter

pytestmark = pytest.mark.skipif(
    getattr(yaml, "CSafeDumper", None) is None, reason="PyYAML built without libyaml"
)

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text())
_FRONTMATTER = st.dictionaries(
    st.one_of(st.from_regex(r"[a-z_]{1,20}", fullmatch=True), st.text(min_size=1)),
    st.one_of(_SCALARS, st.lists(st.text(), max_size=3)),
    max_size=6,
)


def _pure(fields: dict[str, Any], body: str) -> bytes:
    """What PyYAML's own emitter writes (the bytes before the fast path existed)."""
    header = yaml.safe_dump(fields, sort_keys=False, allow_unicode=True, width=1000)
    body = body if body.endswith("\n") or not body else body + "\n"
    return f"---\n{header}---\n\n{body}".encode()


@settings(max_examples=400, suppress_health_check=list(HealthCheck), deadline=None)
@given(fields=_FRONTMATTER, body=st.text(max_size=40))
def test_render_writes_what_pyyaml_writes(fields: dict[str, Any], body: str) -> None:
    assert frontmatter.render(fields, body) == _pure(fields, body)


@pytest.mark.parametrize(
    "value",
    ["launch \N{ROCKET}", "tab\there", "nul\x00", "\x85next line", "\U000ec742"],
)
def test_text_libyaml_writes_differently_takes_the_pure_emitter(value: str) -> None:
    fields = {"agent": "alice", "title": value}
    assert frontmatter.render(fields, "body") == _pure(fields, "body")


def test_the_broken_variant_libyaml_for_everything_changes_the_bytes() -> None:
    """Without the check, an emoji in a title is written escaped: the same value, but a
    different file than every earlier build wrote."""
    fields = {"agent": "alice", "title": "launch \N{ROCKET}"}
    fast = yaml.dump(
        fields, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True, width=1000
    )
    assert "\\U0001F680" in fast
    assert frontmatter.render(fields, "") != f"---\n{fast}---\n\n".encode()


def test_plain_frontmatter_takes_the_fast_emitter(monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[type[Any]] = []
    real_dump = yaml.dump

    def spy(data: Any, **kwargs: Any) -> Any:
        used.append(kwargs["Dumper"])
        return real_dump(data, **kwargs)

    monkeypatch.setattr(yaml, "dump", spy)
    frontmatter.render({"agent": "alice", "timestamp": "2026-12-04T16:00:00Z", "n": 1}, "hi")
    frontmatter.render({"agent": "alice", "title": "\N{ROCKET}"}, "hi")
    assert used == [yaml.CSafeDumper, yaml.SafeDumper]
