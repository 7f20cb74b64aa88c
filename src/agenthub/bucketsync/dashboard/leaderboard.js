// The leaderboard page: the server's board (GET /v1/leaderboard) with its own filters
// (valid only, every submission), paged; per agent its entries and last submission, the
// rank change over a chosen window, ties marked, baselines labelled; the best-so-far chart
// from the same endpoint's every-submission rows.

import { get } from "./api.js";
import { bestSoFar, scoreChart } from "./chart.js";
import { el, replace, table, when } from "./dom.js";
import { landscapePanel } from "./landscape.js";

export const PAGE_SIZE = 10;
const WINDOWS = { latest: "the latest result", "1h": "1 hour", "1d": "1 day", "7d": "7 days" };
const WINDOW_MS = { "1h": 3_600_000, "1d": 86_400_000, "7d": 7 * 86_400_000 };

export const scoreText = (value, decimals) => (value === null || value === undefined ? "—" : Number(value).toFixed(decimals));

// Organizer baselines sit among the ranked rows where their score puts them, unranked.
function withBaselines(board, rows) {
  const better = (a, b) => (board.order === "asc" ? a.score < b.score : a.score > b.score);
  const out = [...rows];
  for (const baseline of board.baselines || []) {
    const at = out.findIndex((row) => !row.baseline && better(baseline, row));
    out.splice(at === -1 ? out.length : at, 0, baseline);
  }
  return out;
}

// Each agent's rank on the board as it stood at `cutoff` (rows submitted by then): its
// first row in the server's order, the server's own best-per-agent rule.
function ranksAt(every, keep) {
  const ranks = new Map();
  for (const row of every) if (keep(row) && !ranks.has(row.agent)) ranks.set(row.agent, ranks.size + 1);
  return ranks;
}

function rankChange(every, windowKey, now) {
  let keep;
  if (windowKey === "latest") {
    const newest = Math.max(...every.map((r) => new Date(r.timestamp).getTime()));
    keep = (row) => new Date(row.timestamp).getTime() < newest;
  } else {
    const cutoff = now - WINDOW_MS[windowKey];
    keep = (row) => new Date(row.timestamp).getTime() <= cutoff;
  }
  return ranksAt(every, keep);
}

function changeMark(before, rank) {
  if (before === undefined) return el("span", { class: "delta new", title: "not on the board then" }, "new");
  const moved = before - rank;
  if (moved > 0) return el("span", { class: "delta up", title: `up ${moved} (was ${before})` }, `▲${moved}`);
  if (moved < 0) return el("span", { class: "delta down", title: `down ${-moved} (was ${before})` }, `▼${-moved}`);
  return el("span", { class: "delta same", title: `unchanged (${rank})` }, "–");
}

// Per agent: how many results it promoted, and its newest (filenames are {stamp}_{agent}.md).
async function entriesByAgent() {
  const listed = await get("/results", { limit: 100000, order: "desc" });
  const out = new Map();
  for (const name of listed.items) {
    const match = /^(\d{8}-\d{6}(?:-\d+)?)_(.+)\.md$/.exec(name) || /^([^_]+)_(.+)\.md$/.exec(name);
    if (!match) continue;
    const seen = out.get(match[2]) || { count: 0, last: null, lastFile: null };
    seen.count += 1;
    if (!seen.lastFile) seen.lastFile = name; // newest first
    out.set(match[2], seen);
  }
  return out;
}

export function leaderboardPage({ state, fail }) {
  return {
    title: "Leaderboard",
    mount(root) {
      this.view = { valid: false, all: false, page: 0, window: "1d" };
      const check = (name, label, key) => el("label", { class: "toggle" },
        el("input", { type: "checkbox", name, onchange: (e) => { this.view[key] = e.target.checked; this.view.page = 0; this.refresh().catch(fail); } }), ` ${label}`);
      const windowPick = el("select", { name: "since", "aria-label": "rank change since",
        onchange: (e) => { this.view.window = e.target.value; this.refresh().catch(fail); } },
      Object.entries(WINDOWS).map(([key, label]) => el("option", { value: key, selected: key === this.view.window }, label)));
      this.data = el("div");
      this.chart = el("div");
      this.landscape = landscapePanel();
      root.append(el("h2", {}, "Leaderboard"),
        el("div", { class: "controls" }, check("valid-only", "valid only", "valid"), check("all-submissions", "every submission", "all"),
          el("label", { class: "toggle" }, "rank change since ", windowPick)),
        this.data, el("h3", {}, "Best score so far"), this.chart, this.landscape.root);
    },
    async refresh() {
      const verification = this.view.valid ? "valid" : null;
      const [board, every, entries] = await Promise.all([
        get("/leaderboard", { verification, best_per_agent: this.view.all ? "false" : "true" }),
        get("/leaderboard", { verification, best_per_agent: "false" }),
        entriesByAgent(),
        this.landscape.refresh(),
      ]);
      const decimals = state.config.score_decimals ?? 4;
      const fmt = (v) => scoreText(v, decimals);
      const before = rankChange(every.rows, this.view.window, Date.now());
      const bestRank = ranksAt(every.rows, () => true);
      const pages = Math.max(1, Math.ceil(board.rows.length / PAGE_SIZE));
      this.view.page = Math.min(this.view.page, pages - 1);
      const start = this.view.page * PAGE_SIZE;
      const shown = board.rows.slice(start, start + PAGE_SIZE);
      const tied = (i) => [board.rows[i - 1], board.rows[i + 1]].some((o) => o && o.score === board.rows[i].score);
      const pick = (agent) => (event) => { event.preventDefault(); this.landscape.show(agent).catch(fail); };
      const lo = shown.length ? shown[0].score : null, hi = shown.length ? shown[shown.length - 1].score : null;
      // Baselines go where they fall among this page's rows (the first and last page take the ends).
      const inPage = (b) => (pages === 1) || (board.order === "asc"
        ? (this.view.page === 0 || b.score >= lo) && (this.view.page === pages - 1 || b.score <= hi)
        : (this.view.page === 0 || b.score <= lo) && (this.view.page === pages - 1 || b.score >= hi));
      const rows = withBaselines({ ...board, baselines: (board.baselines || []).filter(inPage) }, shown).map((row) => {
        const i = board.rows.indexOf(row);
        const mine = entries.get(row.agent);
        const link = el("a", { href: `#/result/${encodeURIComponent(row.filename)}`, class: "score-link", title: "this result in detail" }, fmt(row.score));
        const rankCell = row.baseline ? "—"
          : [String(row.rank), tied(i) ? el("span", { class: "tie", title: "tied score: the earlier submission ranks first" }, "=") : null];
        return el("tr", { "data-agent": row.agent, "data-filename": row.filename, "data-baseline": row.baseline ? "true" : null, class: row.baseline ? "baseline" : null },
          el("td", { class: "rank" }, rankCell),
          el("td", { class: "change" }, row.baseline || this.view.all ? "" : changeMark(before.get(row.agent), bestRank.get(row.agent) ?? row.rank)),
          el("td", { class: "agent" }, row.baseline ? row.agent
            : el("a", { href: "#/leaderboard", class: "events-of", title: "this agent's landscape events", onclick: pick(row.agent) }, row.agent)),
          el("td", { class: "num" }, link),
          el("td", {}, row.baseline
            ? el("span", { class: "badge baseline", title: "organizer baseline: shown for reference, not ranked or verified" }, "baseline")
            : el("span", { class: `badge v-${row.verification}` }, row.verification)),
          el("td", { class: "num entries" }, mine ? mine.count : "—"),
          el("td", { class: "num credit", title: "results of other agents that build on this agent's work" }, String(board.credits?.[row.agent]?.credit ?? 0)),
          el("td", { class: "muted last" }, mine?.lastFile ? el("a", { href: `#/result/${encodeURIComponent(mine.lastFile)}` }, lastWhen(mine.lastFile)) : "—"),
          el("td", {}, row.method || ""), el("td", { class: "muted" }, when(row.timestamp)));
      });
      const unit = board.score_unit ? ` (${board.score_unit})` : "";
      const download = el("a", { id: "leaderboard-csv", class: "button", href: "/dashboard/api/v1/leaderboard?format=csv", download: "" }, "Download CSV");
      const pager = pages > 1 ? el("nav", { class: "pager", "aria-label": "leaderboard pages" },
        el("button", { type: "button", name: "prev", disabled: this.view.page === 0, onclick: () => { this.view.page -= 1; this.refresh().catch(fail); } }, "‹ prev"),
        el("span", { class: "muted", "data-page": this.view.page + 1 }, ` page ${this.view.page + 1} of ${pages} `),
        el("button", { type: "button", name: "next", disabled: this.view.page === pages - 1, onclick: () => { this.view.page += 1; this.refresh().catch(fail); } }, "next ›")) : null;
      replace(this.data,
        el("p", { class: "muted" }, `${board.score_field}${unit}, ${board.order === "asc" ? "lower" : "higher"} is better · ${this.view.all ? "every submission" : "best result per agent"} · showing ${board.verification.join(" + ")} · ${board.rows.length} ranked · `, download),
        rows.length ? table(["#", "Δ", "agent", "score", "verification", "entries", "built on", "last submission", "method", "when"], rows, { id: "leaderboard" })
          : el("p", {}, "No ranked results yet."),
        pager);
      const width = this.chart.clientWidth || document.getElementById("view").clientWidth;
      replace(this.chart, scoreChart(bestSoFar(every.rows), { baselines: every.baselines, field: board.score_field, unit: board.score_unit, format: fmt, width }));
    },
  };
}

function lastWhen(filename) {
  const m = /^(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})/.exec(filename);
  return m ? `${m[1]}-${m[2]}-${m[3]} ${m[4]}:${m[5]}:${m[6]}Z` : filename;
}
