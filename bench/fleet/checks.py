"""The soak's invariants, each one printed line (name, expected, got, PASS/FAIL), and the
summary figures. Everything is read back the way a user meets it (the list routes), except
the State Hub / hub-core comparison, which reads the two databases."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import httpx

from bench._servers import percentile
from bench.fleet.agents import CHANNELS, Fleet, listing
from bench.fleet.ledger import Ledger
from bench.fleet.procs import Samples

OP = re.compile(r"\bop-[a-z0-9-]+-\d{5}\b")
# A process may grow while its caches fill; past this it leaks (the soak's data is small).
RSS_SLACK_MB, RSS_SLACK_RATIO, FD_SLACK = 48.0, 0.25, 16
MIN_LIFE_S = 30.0


@dataclass(frozen=True)
class Check:
    name: str
    expected: str
    got: str
    passed: bool
    detail: str = ""

    def line(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return f"{self.name:<44} expected {self.expected:<18} got {self.got:<18} {verdict}"


def ops_in(items: Iterable[dict[str, object]]) -> Counter[str]:
    """How many stored files carry each op token, and under which filename."""
    found: Counter[str] = Counter()
    for item in items:
        for op in set(OP.findall(str(item.get("body") or ""))):
            found[f"{op} {item['filename']}"] += 1
    return found


def stored_once(client: httpx.Client, fleet: Fleet, ledger: Ledger) -> list[Check]:
    board = ops_in(listing(client, "/v1/messages"))
    results = ops_in(listing(client, "/v1/results"))
    channels: Counter[str] = Counter()
    for name in CHANNELS:
        channels += ops_in(listing(client, f"/v1/channels/{name}/messages"))
    where = {"board": board, "broadcast": board, "channel": channels, "result": results}
    written = [w for w in ledger.writes if w.kind in where]
    copies = {op.split()[0] for found in where.values() for op in found}
    ok = [w for w in written if where[w.kind][f"{w.op} {w.filename}"] == 1]
    stored_ops = Counter(op.split()[0] for found in (board, channels, results) for op in found)
    twice = sorted(op for op, n in stored_ops.items() if n > 1)
    missing = [f"{w.op} ({w.filename})" for w in written if w not in ok]
    checks = [
        Check(
            "bucket-sync writes stored exactly once",
            f"{len(written)}/{len(written)}",
            f"{len(ok)}/{len(written)}",
            len(ok) == len(written) and not twice,
            f"missing or repeated: {missing[:5]}; stored twice: {twice[:5]}",
        )
    ]
    pairs = [(w, h) for w in ledger.writes for h in sorted(w.mentioned)]
    inboxes = {h: ops_in(listing(client, f"/v1/inbox/{h}")) for h in fleet.agents}
    inbox_ok = [(w, h) for w, h in pairs if inboxes[h][f"{w.op} {w.filename}"] == 1]
    told = [w for w in ledger.writes if w.mentions_delivered is not None]
    told_ok = [w for w in told if set(w.mentions_delivered or ()) == set(w.mentioned)]
    checks.append(
        Check(
            "inbox copies stored exactly once",
            f"{len(pairs)}/{len(pairs)}",
            f"{len(inbox_ok)}/{len(pairs)}",
            len(inbox_ok) == len(pairs) and len(told_ok) == len(told),
            f"mentions_delivered as mentioned in {len(told_ok)}/{len(told)} answers",
        )
    )
    unacked_stored = sorted({op for op, _, _ in ledger.unacknowledged} & copies)
    checks.append(
        Check(
            "writes acknowledged within the retry budget",
            "0 given up",
            f"{len(ledger.unacknowledged)} given up",
            not ledger.unacknowledged,
            f"{ledger.unacknowledged[:3]}; of them stored anyway: {unacked_stored[:5]}",
        )
    )
    return checks


def delivered_once(ledger: Ledger) -> Check:
    expected = ok = duplicates = extra = 0
    misses: list[str] = []
    kinds = {w.filename: w for w in ledger.writes}
    for handle, watch in sorted(ledger.watches.items()):
        wanted = ledger.addressed_to(handle)
        expected += len(wanted)
        ok += sum(1 for f in wanted if watch.counts[f] == 1)
        duplicates += sum(1 for n in watch.counts.values() if n > 1)
        extra += len(watch.addressed_kind - wanted)
        misses += [f"{handle}<-{f}({kinds[f].kind})" for f in sorted(wanted - set(watch.counts))]
    return Check(
        "updates delivered exactly once per watcher",
        f"{expected}/{expected}",
        f"{ok}/{expected}",
        ok == expected and duplicates == 0 and extra == 0,
        f"missing {len(misses)}: {misses[:6]}; duplicated {duplicates}; unaddressed {extra}",
    )


def replayed(ledger: Ledger) -> Check:
    """A retry with the first attempt's Idempotency-Key must get the first answer back,
    from bucket-sync and from State Hub alike, not a different one that only says the
    write had landed (then found by its filename, or on State Hub by listing after its
    `idempotency_answer_lost`: State Hub's answer commits with the write, kill or not)."""
    lost = ledger.answers_lost + ledger.statehub_answers_lost
    return Check(
        "Idempotency-Key retries get the first answer",
        "0 other answers",
        f"{len(lost)} other answers",
        not lost,
        f"{[(op, answer[:160]) for op, answer in lost[:3]]}",
    )


def leaderboard(client: httpx.Client, ledger: Ledger) -> Check:
    best: dict[str, float] = {}
    for w in ledger.writes:
        if w.kind == "result" and w.score is not None:
            best[w.agent] = max(best.get(w.agent, 0.0), w.score)
    rows = client.get("/v1/leaderboard", params={"limit": "1000"}, timeout=60).json()["rows"]
    served = {row["agent"]: row["score"] for row in rows}
    wrong = sorted(a for a in best.keys() | served.keys() if best.get(a) != served.get(a))
    return Check(
        "leaderboard = best result per agent",
        f"{len(best)} agents",
        f"{len(best) - len(wrong)} agents right",
        not wrong,
        f"differ: {[(a, best.get(a), served.get(a)) for a in wrong[:5]]}",
    )


def no_5xx(ledger: Ledger) -> Check:
    outside = [s for s in ledger.statuses if not ledger.in_window(s[0], s[1])]
    return Check(
        "no 5xx outside a kill window",
        "0",
        str(len(outside)),
        not outside,
        f"{len(ledger.statuses)} 5xx in all; outside: {[(s[0], s[2], s[3]) for s in outside[:5]]}",
    )


def growth(samples: dict[int, Samples]) -> list[Check]:
    """Per process that lived MIN_LIFE_S, from a third into its sampled life to its last
    sample (taken after the fleet hung up): RSS and fds other than sockets may not grow
    past a slack, and no socket may be left in CLOSE_WAIT. (Socket counts move with the
    clients, to the surviving worker when one dies: they are reported, not judged.)"""
    judged = lingering_total = 0
    worst = {"rss": (0.0, "-"), "fds": (0.0, "-"), "sockets": (0.0, "-")}
    over: dict[str, list[str]] = {"rss": [], "fds": [], "close_wait": []}
    for pid, series in samples.items():
        points = series.points
        if len(points) < 3 or points[-1][0] - points[0][0] < MIN_LIFE_S:
            continue
        judged += 1
        _, rss0, fd0, sock0, _ = points[len(points) // 3]
        _, rss1, fd1, sock1, lingering = points[-1]
        name = f"{series.role}:{pid}"
        for what, before, after in (
            ("rss", rss0, rss1),
            ("fds", fd0, fd1),
            ("sockets", sock0, sock1),
        ):
            if after - before > worst[what][0]:
                worst[what] = (after - before, name)
        if rss1 - rss0 > RSS_SLACK_MB + RSS_SLACK_RATIO * rss0:
            over["rss"].append(f"{name} {rss0:.0f}->{rss1:.0f} MB")
        if fd1 - fd0 > FD_SLACK:
            over["fds"].append(f"{name} {fd0}->{fd1}")
        lingering_total += lingering
        if lingering:
            over["close_wait"].append(f"{name} {lingering} in CLOSE_WAIT")
    detail = f"of {judged} processes; worst growth: {worst}; over: {over}"
    return [
        Check(
            "no RSS growth (per server process)",
            f"<={RSS_SLACK_MB:.0f}MB+{RSS_SLACK_RATIO:.0%}",
            f"max +{worst['rss'][0]:.0f}MB ({judged} p)",
            judged > 0 and not over["rss"],
            detail,
        ),
        Check(
            "no fd growth, no socket left in CLOSE_WAIT",
            f"<=+{FD_SLACK}, 0",
            f"+{worst['fds'][0]:.0f}, {lingering_total}",
            judged > 0 and not over["fds"] and not over["close_wait"],
            detail,
        ),
    ]


def statehub_stored(ledger: Ledger, stored: dict[str, list[str]]) -> Check:
    sends = [w for w in ledger.writes if w.kind == "statehub"]
    ok = [w for w in sends if stored.get(w.op) == [w.filename]]
    twice = sorted(s for s, ids in stored.items() if len(ids) > 1)
    return Check(
        "State Hub sends stored exactly once",
        f"{len(sends)}/{len(sends)}",
        f"{len(ok)}/{len(sends)}",
        len(ok) == len(sends) and not twice,
        f"stored twice: {twice[:5]}",
    )


def latencies(ledger: Ledger) -> dict[str, list[float]]:
    """Seconds from a write's acknowledgement to each addressed watcher's first delivery,
    by reason (mention / channel / broadcast), and the acknowledged posts' round trips."""
    found: dict[str, list[float]] = {"mention": [], "channel": [], "broadcast": [], "post": []}
    for w in ledger.writes:
        if w.kind in ("board", "channel", "broadcast", "result"):
            found["post"].append(w.latency_s)
        for handle in w.addressed:
            at = ledger.watches[handle].first_at.get(w.filename)
            if at is None:
                continue
            reason = "mention" if handle in w.mentioned else w.kind
            found[reason].append(max(0.0, at - w.acked_at))
    return found


def summary(ledger: Ledger, loads: list[float]) -> list[str]:
    kinds = Counter(w.kind for w in ledger.writes)
    lines = [
        "writes acknowledged: "
        + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
        + f"; retries {ledger.retries} (replayed answers {ledger.replayed}); "
        + f"transport errors {dict(ledger.transport_errors)}",
        "State Hub retries answered 'applied, answer not recorded' instead of the first "
        f"answer (a failure: the answer commits with the write): "
        f"{len(ledger.statehub_answers_lost)}",
        f"deliveries: {sum(sum(w.counts.values()) for w in ledger.watches.values())} items "
        f"over {sum(w.pages for w in ledger.watches.values())} pages to "
        f"{len(ledger.watches)} watchers",
        "kills: " + ", ".join(f"{w.kind} (down {w.downtime_s:.1f} s)" for w in ledger.windows),
    ]
    for name, values in latencies(ledger).items():
        label = "post round trip" if name == "post" else f"{name}->watcher"
        lines.append(
            f"{label:<20} n={len(values):<6} p50 {percentile(values, 50) * 1e3:8.0f} ms  "
            f"p99 {percentile(values, 99) * 1e3:8.0f} ms"
        )
    if loads:
        lines.append(
            f"load average (1 min): mean {sum(loads) / len(loads):.1f}, max {max(loads):.1f}"
        )
    return lines


def render(checks: list[Check], lines: list[str]) -> str:
    out = [c.line() for c in checks]
    out += [f"    {c.name}: {c.detail}" for c in checks if not c.passed and c.detail]
    return "\n".join([*out, "", *lines])
