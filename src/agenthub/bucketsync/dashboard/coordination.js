// Coordination pages (issue 18): experiment claims and the organizers' directives with
// their ack roster. `ctx` carries the app's state and its notify/explain/refresh.

import { get, post } from "./api.js";
import { el, replace, table, when } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

const liveBadge = (live) => el("span", { class: `badge ${live ? "v-valid" : "v-hidden"}` }, live ? "live" : "expired");

function claimRows(items) {
  return items.map((c) => el("tr", { "data-claim": c.filename },
    el("td", { class: "agent" }, c.agent), el("td", { class: "idea" }, c.idea || ""),
    el("td", {}, (c.tags || []).join(", ")), el("td", {}, liveBadge(c.live)),
    el("td", { class: "muted" }, when(c.expires_at)),
    el("td", { class: "num", title: (c.overlaps || []).join("\n") }, (c.overlaps || []).length)));
}

export function coordinationPages(ctx) {
  const { state, notify, explain, refresh } = ctx;
  const headers = ["agent", "idea", "tags", "state", "expires", "overlaps"];

  function directiveComposer(active) {
    const body = el("textarea", { name: "directive", rows: 3, placeholder: "What every agent must do — pinned until each acks", "aria-label": "directive" });
    const supersedes = el("select", { name: "supersedes", "aria-label": "supersedes" },
      el("option", { value: "" }, "new directive"),
      active.map((d) => el("option", { value: d.filename }, `supersede ${d.filename}`)));
    return el("form", { class: "composer", id: "post-directive", onsubmit: async (event) => {
      event.preventDefault();
      const text = body.value.trim();
      if (!text) { notify("Write the directive first."); return; }
      try {
        const message = { agent_id: state.me.handle, body: text };
        if (supersedes.value) message.supersedes = supersedes.value;
        const sent = await post("/directives", message);
        body.value = "";
        notify(`Directive ${sent.filename} pinned for every agent until acked${deliveryText([], sent.reach)}`, "ok");
        await refresh();
      } catch (err) { notify(`Not posted: ${explain(err)}`); }
    } }, body, el("div", { class: "row" }, supersedes, el("button", { type: "submit" }, "Post directive")));
  }

  return {
    claims: {
      title: "Claims",
      mount(root) {
        this.data = el("div");
        root.append(el("h2", {}, "Claims"),
          el("p", { class: "muted" }, "What agents are trying now: a lease over an idea, with the near-duplicates found when it was claimed."),
          this.data);
      },
      async refresh() {
        const [live, expired] = await Promise.all([
          get("/claims", { expand: "true", live: "true", limit: 100 }),
          get("/claims", { expand: "true", live: "false", limit: 50 }),
        ]);
        replace(this.data,
          el("p", { class: "muted" }, `${live.matched} live of ${live.count} claims`),
          live.items.length ? table(headers, claimRows(live.items), { id: "claims" }) : el("p", {}, "No live claims."),
          el("h3", {}, "Expired"),
          expired.items.length ? table(headers, claimRows(expired.items), { id: "expired-claims" }) : el("p", { class: "muted" }, "None."));
      },
    },

    directives: {
      title: "Directives",
      mount(root, arg) {
        this.name = arg;
        this.form = el("div");
        this.data = el("div");
        root.append(el("h2", {}, arg ? "Directive" : "Directives"), this.form, this.data);
      },
      async refresh() {
        if (this.name) return this.detail();
        const list = await get("/directives", { expand: "true", limit: 100 });
        if (state.me?.is_organizer && !this.form.childElementCount) {
          this.form.append(directiveComposer(list.items.filter((d) => d.active)));
        }
        const rows = list.items.map((d) => el("tr", { "data-directive": d.filename },
          el("td", {}, el("a", { href: `#/directives/${encodeURIComponent(d.filename)}` }, d.filename)),
          el("td", { class: "agent" }, d.agent), el("td", {}, (d.body || "").slice(0, 80)),
          el("td", {}, d.active ? el("span", { class: "badge broadcast" }, "pinned") : el("span", { class: "badge v-hidden" }, `superseded by ${d.superseded_by}`)),
          el("td", { class: "num" }, `${d.acked_count} / ${d.acked_count + d.not_acked_count}`)));
        replace(this.data, rows.length
          ? table(["directive", "by", "says", "state", "acked"], rows, { id: "directives" })
          : el("p", {}, "No directives yet."));
      },
      async detail() {
        const d = await get(`/directives/${encodeURIComponent(this.name)}`);
        const names = (list, id) => list.length
          ? el("ul", { class: "members", id }, list.map((h) => el("li", { class: "agent" }, h)))
          : el("p", { class: "muted", id }, "nobody");
        replace(this.data,
          el("p", { class: "muted" }, `${d.agent} · ${when(d.timestamp)} · `,
            d.active ? "pinned until each agent acks" : `superseded by ${d.superseded_by}`,
            d.supersedes ? ` · replaces ${d.supersedes}` : ""),
          el("div", { class: "body" }, renderMarkdown(d.body || "")),
          el("h3", {}, `Acked (${d.acked.length})`), names(d.acked, "acked"),
          el("h3", {}, `Not acked (${d.not_acked.length})`), names(d.not_acked, "not-acked"));
      },
    },
  };
}

// The post's reach forecast: who got it now, who will at their next poll, who nobody watches.
const REACH = {
  woken: "watching: woken now",
  next_poll: "sees it at its next poll",
  unreachable: "not watching now: it waits in the inbox",
};
const GROUP = { woken: "woken now", next_poll: "at their next poll", unreachable: "not watching now (it waits in their inbox)" };

// Who got a post, and when they will see it: each mentioned handle once, its delivery and
// its reach together ("delivered to b (not watching now: …)"), never as two claims that
// read like opposites; the rest of the audience (a broadcast's) grouped by reach.
export function deliveryText(delivered = [], reach = null) {
  const state = new Map();
  for (const key of Object.keys(REACH)) for (const handle of reach?.[key] || []) state.set(handle, key);
  const named = new Set(delivered);
  const parts = delivered.length
    ? [` · delivered to ${delivered.map((h) => (state.has(h) ? `${h} (${REACH[state.get(h)]})` : h)).join(", ")}`] : [];
  for (const key of Object.keys(REACH)) {
    const rest = (reach?.[key] || []).filter((h) => !named.has(h));
    if (rest.length) parts.push(` · ${GROUP[key]}: ${rest.join(", ")}`);
  }
  return parts.join("");
}
