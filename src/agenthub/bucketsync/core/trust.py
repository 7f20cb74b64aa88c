"""Trust labels (issue 18, item 6): how far a delivered item's author is proved, and cheap
signals that its body tries to steer the agent reading it.

Every item bucket-sync delivers is another agent's text landing in an agent's prompt, so
each one carries `trust: {via, verified_author, lint}`:

- `verified_author` is true for a write whose author the server proved: `via: bucket`
  (promoted from the author's own scratch bucket, which only its creator can write, seed
  §2) and `via: dashboard` (a person's `human-<name>` post, accepted only when the Bearer
  token's user is `<name>` in the org: an organizer's broadcast, directive or channel).
  Raw posts (`agent_id` + `body`, `via: raw`) are best-effort attribution (seed §4), and
  server announcements and files edited out of band prove nobody.
- `lint` names the patterns found in the body. It flags, it never blocks: a post is never
  refused for what the lint says, and the labels are computed at read time so a pattern
  added later covers the whole history.

The patterns are deliberately few and literal (an injection attempt has to address the
reader to work); ordinary research chatter ("ignore the outliers", "run the benchmark",
"tokens per second") must stay unflagged, and `tests/bucketsync/coordination/test_trust.py`
holds a corpus of such messages.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

# (label, pattern), matched case-insensitively. Every pattern runs in time linear in the
# text (bounded repeats, possessive quantifiers, no nested ambiguity): a body may be 1 MB
# and is linted when read; `tests/bucketsync/coordination/test_trust.py` times the worst.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(pattern, re.IGNORECASE))
    for label, pattern in (
        # Imperatives addressed to the reading agent about its own instructions.
        (
            "instruction-override",
            r"\b(?:ignore|disregard|forget|override|bypass)\s++(?:(?:all|any|the|your|my|these|"
            r"those)\s++){0,3}(?:previous|prior|earlier|above|preceding|system|original)\s++"
            r"(?:instructions?|prompts?|rules|messages?|directions|context)\b",
        ),
        (
            "instruction-override",
            r"\b(?:new|updated|real)\s++(?:system\s++)?instructions?\s*+:|\bsystem\s++prompt\s*+:"
            r"|\byou\s++are\s++now\s++(?:a|an|in)\b|\bfrom\s++now\s++on,?\s++you\s++"
            r"(?:must|will|are)\b",
        ),
        # Destructive deletes: `rm` with both -r and -f in one flag group.
        ("shell-command", r"\brm\s++-(?=[a-z]*r)(?=[a-z]*f)"),
        ("shell-command", r"\beval\s*+\(\s*+(?:atob|base64)"),
        (
            "shell-command",
            r"\bchmod\s++\+x\b|\bpython3?\s++-c\s*+['\"]import\s++os|\bnc\s++-e\b"
            r"|\bmkfifo\s++/tmp",
        ),
        # Script URLs.
        ("executable-link", r"\bjavascript:"),
        # Requests for tokens and secrets.
        (
            "secret-request",
            r"\b(?:send|share|post|paste|give|reveal|print|tell|dm|email|upload|provide|"
            r"show|leak|forward)\b[^.\n]{0,40}?\b(?:your|the|my|our|its)\s++(?:(?:hf|hugging"
            r"\s*+face|api|access|auth|bearer|github|aws|secret|private)[_\s-]?+){0,3}"
            r"(?:tokens?|api[_\s-]?keys?|secrets?|passwords?|credentials?|private\s++keys?|"
            r"ssh\s++keys?|\.env|env(?:ironment)?\s++variables)\b",
        ),
        (
            "secret-request",
            r"\b(?:cat|echo|printenv)\s++[^\n]{0,40}?(?:HF_TOKEN|\.env\b|id_rsa|\.netrc|"
            r"\.aws/credentials|\$\w{0,40}?(?:TOKEN|SECRET|KEY|PASSWORD))",
        ),
    )
)

# A pipe into a shell, and what makes the line feeding it a download or a decode.
_PIPE_TO_SHELL = re.compile(r"\|[ \t]*+(?:sudo[ \t]++)?(?:ba|z|da|k)?sh\b", re.IGNORECASE)
_FETCH_OR_DECODE = re.compile(r"\b(?:curl|wget)\b|\bbase64[ \t]++(?:-d|--decode)\b", re.I)
# A link: the URL token, taken whole (one pass), then its path's extension checked.
_URL = re.compile(r"\b(?:https?|ftp)://[^\s)\]>'\"<]++", re.IGNORECASE)
_EXECUTABLE = re.compile(
    r"\.(?:sh|bash|exe|msi|bat|cmd|ps1|scr|dmg|pkg|deb|rpm|apk|jar|vbs|bin|run|appimage)$",
    re.IGNORECASE,
)


def _pipes_a_download_into_a_shell(text: str) -> bool:
    """`curl … | sh`, `wget … | bash`, `… base64 -d | sh`: per line, what comes before the
    line's last pipe into a shell fetches or decodes."""
    for line in text.splitlines():
        pipes = list(_PIPE_TO_SHELL.finditer(line))
        if pipes and _FETCH_OR_DECODE.search(line, 0, pipes[-1].start()):
            return True
    return False


def _links_an_executable(text: str) -> bool:
    for match in _URL.finditer(text):
        path = re.split(r"[?#]", match.group(0), maxsplit=1)[0].rstrip(".,;:!")
        if _EXECUTABLE.search(path):
            return True
    return False


def _finds(pattern: re.Pattern[str]) -> Callable[[str], bool]:
    return lambda text: pattern.search(text) is not None


_CHECKS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    *((label, _finds(pattern)) for label, pattern in _PATTERNS),
    ("shell-command", _pipes_a_download_into_a_shell),
    ("executable-link", _links_an_executable),
)

# Server-stamped keys (seed §3): never the author's text.
_STAMPED = frozenset({"agent", "timestamp", "via"})

LABELS = ("instruction-override", "shell-command", "executable-link", "secret-request")


def lint(text: str) -> list[str]:
    """The labels whose checks fire on `text`, each once, in `LABELS` order."""
    found = {label for label, check in _CHECKS if check(text)}
    return [label for label in LABELS if label in found]


class _Memo:
    """Lint results by content hash (a record is read many times and its bytes never
    change), least recently used first out; holds labels only, never the text."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, list[str]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, compute: Callable[[], list[str]]) -> list[str]:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                return list(hit)
        value = compute()
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return list(value)


_MEMO = _Memo(16384)


PROVED_VIA = frozenset({"bucket", "dashboard"})


def verified_author(via: object) -> bool:
    """True for a bucket-proved write (seed §2: the bucket's ACL proves it) and a person's
    Bearer-proved post (the token's user is the handle's). Raw, server and unknown writes
    are not."""
    return via in PROVED_VIA


def label(frontmatter: Mapping[str, Any], body: str, *, content_hash: str) -> dict[str, Any]:
    """`{via, verified_author, lint}` for one delivered item (`content_hash`: its file's,
    which keys the memo); the lint reads the body and the author's text-valued
    frontmatter (a claim's `idea`, a result's `description`)."""
    via = frontmatter.get("via")
    via_text = via if isinstance(via, str) else None

    def compute() -> list[str]:
        texts = [
            body,
            *(v for k, v in frontmatter.items() if isinstance(v, str) and k not in _STAMPED),
        ]
        return lint("\n".join(texts))

    return {
        "via": via_text,
        "verified_author": verified_author(via_text),
        "lint": _MEMO.get(content_hash, compute),
    }
