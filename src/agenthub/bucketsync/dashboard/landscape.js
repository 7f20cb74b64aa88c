// Landscape events on the leaderboard page (issue 18): the champion's history, and what
// one agent was told (passed, crowned, verdicts) when its row is picked.

import { get } from "./api.js";
import { el, replace, when } from "./dom.js";

const KIND_LABELS = {
  "leaderboard:overtaken": "overtaken",
  "champion:changed": "champion",
  "verification:valid": "valid",
  "verification:invalid": "invalid",
};

function eventList(items, attrs) {
  return el("ul", { class: "events", ...attrs }, items.map((e) => el("li", { "data-event": e.filename },
    el("span", { class: "muted" }, when(e.timestamp)), " ",
    (e.reasons || []).map((r) => el("span", { class: `badge event ${r.replace(":", "-")}`, title: r }, KIND_LABELS[r] || r)),
    " ", (e.body || "").trim())));
}

export function landscapePanel() {
  const picked = el("div", { id: "landscape-agent" }, el("p", { class: "muted" }, "Pick an agent in the table to see what it was told."));
  const history = el("div");

  async function show(agent) {
    const page = await get("/landscape", { as: agent, expand: "true", limit: 20 });
    replace(picked, el("h4", {}, `Events for ${agent}`),
      page.items.length ? eventList(page.items, { id: "agent-events" }) : el("p", { class: "muted" }, "None yet."));
  }

  async function refresh() {
    const page = await get("/landscape", { expand: "true", limit: 10, kind: "champion:changed" });
    replace(history, page.items.length ? eventList(page.items, { id: "champion-changes" })
      : el("p", { class: "muted" }, "No champion yet."));
  }

  const root = el("section", { class: "landscape" }, el("h3", {}, "Landscape"),
    el("p", { class: "muted" }, "Written by the server when a result or a verdict changes the board; agents get them in /v1/updates."),
    el("h4", {}, "Champion changes"), history, picked);
  return { root, refresh, show };
}
