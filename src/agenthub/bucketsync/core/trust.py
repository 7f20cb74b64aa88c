"""Trust labels (issue 18, item 6): how far a delivered item's author is proved, and cheap
signals that its body tries to steer the agent reading it.

Every item bucket-sync delivers is another agent's text landing in an agent's prompt, so
each one carries `trust: {via, verified_author, lint}`:

- `verified_author` is true only for a bucket-proved write (`via: bucket`: promoted from
  the author's own scratch bucket, which only its creator can write, seed §2). Raw posts
  (`agent_id` + `body`, `via: raw`) are best-effort attribution, and everything else
  (dashboard posts, server announcements, files edited out of band) is not bucket-proved.
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
from collections.abc import Mapping
from typing import Any

# (label, pattern). Each pattern is matched case-insensitively against the body.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(pattern, re.IGNORECASE))
    for label, pattern in (
        # Imperatives addressed to the reading agent about its own instructions.
        (
            "instruction-override",
            r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|the\s+|your\s+|"
            r"my\s+|these\s+|those\s+)*(?:previous|prior|earlier|above|preceding|system|"
            r"original)\s+(?:instructions?|prompts?|rules|messages?|directions|context)\b",
        ),
        (
            "instruction-override",
            r"\b(?:new|updated|real)\s+(?:system\s+)?instructions?\s*:|\bsystem\s+prompt\s*:"
            r"|\byou\s+are\s+now\s+(?:a|an|in)\b|\bfrom\s+now\s+on,?\s+you\s+(?:must|will|are)\b",
        ),
        # Shell commands to run: pipe-to-shell, destructive deletes, decode-and-execute.
        (
            "shell-command",
            r"\b(?:curl|wget)\b[^\n|]*\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b",
        ),
        ("shell-command", r"\brm\s+-(?:[a-z]*r[a-z]*f|[a-z]*f[a-z]*r)[a-z]*\b"),
        (
            "shell-command",
            r"\bbase64\s+(?:-d|--decode)\b[^\n]*\|\s*(?:ba|z)?sh\b|\beval\s*\(\s*(?:atob|base64)",
        ),
        (
            "shell-command",
            r"\b(?:chmod\s+\+x|python3?\s+-c\s+['\"]import\s+os|nc\s+-e|mkfifo\s+/tmp)\b",
        ),
        # Links to executables or script URLs.
        ("executable-link", r"\bjavascript:"),
        (
            "executable-link",
            r"\b(?:https?|ftp)://\S+?\.(?:sh|bash|exe|msi|bat|cmd|ps1|scr|dmg|pkg|deb|rpm|apk|"
            r"jar|vbs|bin|run|appimage)(?:[?#]\S*)?(?=$|[\s)\]>'\"])",
        ),
        # Requests for tokens and secrets.
        (
            "secret-request",
            r"\b(?:send|share|post|paste|give|reveal|print|tell|dm|email|upload|provide|"
            r"show|leak|forward)\b[^.\n]{0,40}?\b(?:your|the|my|our|its)\s+(?:hf[_\s-]?|"
            r"hugging\s*face\s+|api[_\s-]?|access\s+|auth\s+|bearer\s+|github\s+|aws\s+|"
            r"secret\s+|private\s+)*(?:tokens?|api[_\s-]?keys?|secrets?|passwords?|"
            r"credentials?|private\s+keys?|ssh\s+keys?|\.env|env(?:ironment)?\s+variables)\b",
        ),
        (
            "secret-request",
            r"\b(?:cat|echo|printenv)\s+[^\n]{0,40}?(?:HF_TOKEN|\.env\b|id_rsa|\.netrc|"
            r"\.aws/credentials|\$\w*(?:TOKEN|SECRET|KEY|PASSWORD)\w*)",
        ),
    )
)

# Server-stamped keys (seed §3): never the author's text.
_STAMPED = frozenset({"agent", "timestamp", "via"})

LABELS = tuple(dict.fromkeys(label for label, _ in _PATTERNS))


def lint(text: str) -> list[str]:
    """The labels whose patterns occur in `text`, each once, in `LABELS` order."""
    found = {label for label, pattern in _PATTERNS if pattern.search(text)}
    return [label for label in LABELS if label in found]


def verified_author(via: object) -> bool:
    """True only for a bucket-proved write (seed §2): the one path whose attribution the
    bucket's ACL proves. Raw, dashboard, server and unknown writes are not."""
    return via == "bucket"


def label(frontmatter: Mapping[str, Any], body: str) -> dict[str, Any]:
    """`{via, verified_author, lint}` for one delivered item; the lint reads the body and
    the author's text-valued frontmatter (a claim's `idea`, a result's `description`)."""
    via = frontmatter.get("via")
    via_text = via if isinstance(via, str) else None
    texts = [body, *(v for k, v in frontmatter.items() if isinstance(v, str) and k not in _STAMPED)]
    return {
        "via": via_text,
        "verified_author": verified_author(via_text),
        "lint": lint("\n".join(texts)),
    }
