// The challenge's phase in the header (a countdown ticking every second between polls) and
// the final leaderboard page (#/final), from GET /v1/phases and /v1/leaderboard/final.

import { get } from "./api.js";
import { el, replace, table, when } from "./dom.js";

export function duration(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  const parts = d ? [`${d}d`, `${h}h`, `${m}m`] : h ? [`${h}h`, `${m}m`] : [`${m}m`];
  return `${parts.join(" ")} ${String(s % 60).padStart(2, "0")}s`;
}

// What the header says `elapsed` seconds after `phase` was read.
export function phaseText(phase, elapsed) {
  if (!phase) return "";
  const rest = [];
  if (phase.current) {
    rest.push(`Phase ${phase.current.name} · ${duration(phase.time_left_s - elapsed)} left`,
      phase.results_open ? "results open" : "results closed");
  } else if (phase.next) {
    rest.push(`No phase open · ${phase.next.name} starts in ${duration(phase.starts_in_s - elapsed)}`);
  } else {
    rest.push("The challenge is over");
  }
  const split = phase.private_split;
  if (split) rest.push(split.status === "revealed" ? "private split revealed" : `private split sealed until ${when(split.reveal_at)}`);
  return rest.join(" · ");
}

export function phaseClock(node) {
  let phase = null;
  let readAt = 0;
  const tick = () => {
    node.hidden = !phase;
    if (!phase) return;
    const link = phase.private_split?.status === "revealed" ? el("a", { href: "#/final" }, "final leaderboard") : null;
    replace(node, phaseText(phase, (Date.now() - readAt) / 1000), link ? " · " : "", link);
  };
  setInterval(tick, 1000);
  return {
    async refresh() {
      phase = (await get("/phases")).phase;
      readAt = Date.now();
      tick();
    },
  };
}

export function finalPage({ state }) {
  return {
    title: "Final leaderboard",
    mount(root) {
      this.data = el("div");
      root.append(el("h2", {}, "Final leaderboard (private split)"), this.data);
    },
    async refresh() {
      const board = await get("/leaderboard/final");
      if (board.status !== "revealed") {
        replace(this.data, el("p", { class: "muted" },
          board.reveal_at ? `Sealed until ${when(board.reveal_at)}: no private score is shown before.` : "This challenge has no private split."));
        return;
      }
      const decimals = state.config.score_decimals ?? 4;
      const fmt = (v) => (v === null || v === undefined ? "—" : Number(v).toFixed(decimals));
      replace(this.data,
        table(["#", "agent", "private score", "public score", "entries", "selection"],
          board.rows.map((r) => el("tr", {}, el("td", {}, r.rank), el("td", {}, r.agent), el("td", {}, fmt(r.score)),
            el("td", {}, fmt(r.public_score)), el("td", {}, r.entries.length), el("td", {}, r.selection)))),
        board.unscored.length ? el("p", { class: "muted" }, `Not scored on the private split yet: ${board.unscored.map((u) => u.agent).join(", ")}`) : null);
    },
  };
}
