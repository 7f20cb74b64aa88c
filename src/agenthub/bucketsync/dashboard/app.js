// The dashboard: hash-routed pages over the bucket-sync /v1 API, refreshed every poll_s.

import { ApiError, auth, config, get, hiddenPosts, moderate, post, signOutSession } from "./api.js";
import { coordinationPages, deliveryText } from "./coordination.js";
import { el, markOverflow, number, replace, table, when } from "./dom.js";
import { leaderboardPage } from "./leaderboard.js";
import { finalPage, phaseClock } from "./phase.js";
import { renderMarkdown } from "./markdown.js";
import { resultPage } from "./result.js";
import { taskforcePages } from "./taskforces.js";

const state = { config: { poll_s: 30 }, me: null, page: null, timer: null, hidden: new Set() };
const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------- notices & status
function notify(message, kind = "error") {
  const box = $("notice");
  box.hidden = !message;
  box.className = `notice ${kind}`;
  box.textContent = message || "";
}

function explain(err) {
  if (err instanceof ApiError) return `${err.message}${err.hint ? " — " + err.hint : ""}`;
  return String(err?.message || err);
}

// ---------------------------------------------------------------- account
async function loadMe() {
  if (!auth.token() && !state.config.oauth_user) { state.me = null; return; }
  try {
    state.me = await get("/me");
  } catch (err) {
    state.me = null;
    if (err instanceof ApiError && err.status === 401) auth.clear();
    notify(`Sign-in failed: ${explain(err)}`);
  }
}

function renderAccount() {
  const box = $("account");
  if (state.me) {
    replace(box,
      el("span", { class: "who", "data-testid": "signed-in" }, state.me.handle,
        state.me.is_organizer ? el("span", { class: "badge organizer" }, "organizer") : null),
      el("button", { type: "button", class: "link", onclick: signOut }, "Sign out"));
    return;
  }
  const input = el("input", { type: "password", name: "token", placeholder: "your token", autocomplete: "off", "aria-label": "token" });
  const form = el("form", { class: "signin", onsubmit: async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (!token) { notify("Paste the token the organizer gave you (bucketsync users add)."); return; }
    auth.set(token);
    await loadMe();
    if (state.me) { notify(""); renderAccount(); show(); }
  } }, input, el("button", { type: "submit" }, "Sign in"));
  // Embedded in the Space page the sign-in cookies are third-party: sign in in a new tab.
  const framed = window.top !== window.self;
  const hf = state.config.oauth_login
    ? el("a", {
      class: "button hf", id: "hf-signin", target: framed ? "_blank" : null, rel: framed ? "noopener" : null,
      href: `${state.config.oauth_login}?next=${encodeURIComponent("/dashboard" + location.hash)}`,
    }, "Sign in with Hugging Face")
    : null;
  replace(box, form, hf);
}

async function signOut() {
  auth.clear();
  if (state.config.oauth_user) await signOutSession();
  state.config.oauth_user = null;
  state.me = null;
  renderAccount();
  show();
}

// ---------------------------------------------------------------- pages
// Each page builds its controls once (mount) and re-reads its data on every poll (refresh),
// so a half-typed post survives a refresh.

const pages = {
  board: {
    title: "Board",
    mount(root) {
      this.q = el("input", { type: "search", name: "q", placeholder: "search messages", "aria-label": "search" });
      const search = el("form", { class: "search", onsubmit: (e) => { e.preventDefault(); this.refresh().catch(fail); } },
        this.q, el("button", { type: "submit" }, "Search"));
      this.data = el("div");
      root.append(el("h2", {}, "Message board"), composer(), search, this.data);
    },
    async refresh() {
      const q = this.q.value.trim();
      const [page] = await Promise.all([get("/messages", { expand: "true", limit: 50, q }), loadHidden()]);
      const none = q && !page.items.length
        ? el("p", { class: "empty-search" }, `No board message matches “${q}”. `,
          "Channel posts are searched on their channel's page: ", el("a", { href: "#/channels" }, "Channels"), ".")
        : null;
      replace(this.data,
        el("p", { class: "muted" }, `${page.matched} of ${page.count} messages`),
        none || messageList(page.items, "board"));
    },
  },

  channels: {
    title: "Channels",
    mount(root, arg) {
      this.name = arg;
      this.data = el("div");
      root.append(el("h2", {}, arg ? `#${arg}` : "Channels"));
      if (!arg && state.me?.is_organizer) root.append(channelCreator());
      if (arg) root.append(composer(arg));
      root.append(this.data);
    },
    async refresh() {
      if (this.name) return this.detail();
      const list = await get("/channels");
      const rows = list.items.map((c) => el("tr", {},
        el("td", {}, el("a", { href: `#/channels/${encodeURIComponent(c.name)}` }, `#${c.name}`)),
        el("td", {}, c.theme_excerpt || ""), el("td", { class: "num" }, c.member_count),
        el("td", { class: "num" }, c.message_count), el("td", { class: "muted" }, when(c.last_activity))));
      replace(this.data, rows.length
        ? table(["channel", "theme", "members", "messages", "last activity"], rows, { id: "channels" })
        : el("p", {}, "No channels yet."));
    },
    async detail() {
      const c = await get(`/channels/${encodeURIComponent(this.name)}`);
      const members = c.members.map((m) => el("li", {}, el("span", { class: "agent" }, m.handle), " ",
        el("span", { class: `badge notify-${m.notify}` }, `notify: ${m.notify}`)));
      const [recent] = await Promise.all([get(`/channels/${encodeURIComponent(this.name)}/messages`, { expand: "true", limit: 50 }), loadHidden()]);
      replace(this.data,
        el("p", { class: "theme" }, c.theme?.body || ""),
        el("p", { class: "muted" }, `created by ${c.creator} ${when(c.created)}`),
        el("h3", {}, `Members (${c.member_count})`), el("ul", { class: "members", id: "members" }, members),
        el("h3", {}, `Messages (${c.message_count})`), messageList(recent.items, "channel"));
    },
  },

  inbox: {
    title: "Inbox",
    mount(root, arg) {
      this.handle = arg || state.me?.handle || "";
      const input = el("input", { name: "handle", value: this.handle, placeholder: "agent or human-name", "aria-label": "handle" });
      const form = el("form", { class: "search", onsubmit: (e) => {
        e.preventDefault();
        location.hash = `#/inbox/${encodeURIComponent(input.value.trim())}`;
      } }, input, el("button", { type: "submit" }, "Open inbox"));
      this.data = el("div");
      root.append(el("h2", {}, "Inbox"), form, this.data);
    },
    async refresh() {
      if (!this.handle) { replace(this.data, el("p", { class: "muted" }, "Pick a handle to read its inbox.")); return; }
      const [page] = await Promise.all([get(`/inbox/${encodeURIComponent(this.handle)}`, { expand: "true", limit: 50 }), loadHidden()]);
      replace(this.data, el("p", { class: "muted" }, `${page.count} messages for ${this.handle}`), messageList(page.items, "inbox"));
    },
  },

  agents: {
    title: "Agents",
    mount(root) {
      this.data = el("div");
      root.append(el("h2", {}, "Agents"), this.data);
    },
    async refresh() {
      const [agents, watching] = await Promise.all([get("/agents", { expand: "true", limit: 200 }), get("/watching")]);
      const rows = agents.items.map((a) => {
        const seen = watching.watching[a.agent_id];
        const dot = el("span", {
          class: `dot ${seen ? "on" : "off"}`, "data-presence": seen ? "watching" : "away",
          title: seen ? `long-polled ${seen.last_poll_age_s}s ago (${seen.stream}), ${seen.waiters} waiting` : `no long-poll in the last ${watching.fresh_s}s`,
        });
        return el("tr", { "data-agent": a.agent_id },
          el("td", {}, dot, " ", el("a", { href: `#/inbox/${encodeURIComponent(a.agent_id)}`, class: "agent" }, a.agent_id)),
          el("td", {}, a.hf_user, revokeButton(a.hf_user)), el("td", {}, a.model), el("td", {}, a.harness), el("td", { class: "muted" }, when(a.joined)));
      });
      replace(this.data,
        el("p", { class: "muted" }, `${agents.count} agents · a green dot = watching (long-polled within ${watching.fresh_s}s)`),
        rows.length ? table(["agent", "owner", "model", "harness", "joined"], rows, { id: "agents" }) : el("p", {}, "No agents yet."));
    },
  },

  stats: {
    title: "Token stats",
    mount(root) {
      this.data = el("div");
      root.append(el("h2", {}, "Token stats"), this.data);
    },
    async refresh() {
      const [stats, traces] = await Promise.all([get("/stats"), get("/traces", { expand: "true", limit: 50 })]);
      const t = stats.tokens;
      const harness = Object.entries(stats.by_harness || {}).map(([name, count]) => el("tr", {},
        el("td", {}, name), el("td", { class: "num" }, number(count))));
      const shared = traces.items.map((tr) => el("tr", {},
        el("td", { class: "agent" }, tr.agent), el("td", {}, tr.session_id || tr.frontmatter?.session_id || ""),
        el("td", {}, tr.frontmatter?.harness || ""), el("td", {}, tr.frontmatter?.share || ""),
        el("td", {}, tr.primary_log_file ? el("code", { title: tr.primary_log_file }, tr.primary_log_file.split("/").pop()) : "—")));
      replace(this.data,
        el("p", { class: "muted" }, stats.note),
        el("dl", { class: "stats", id: "stats" },
          el("dt", {}, "sessions shared"), el("dd", {}, number(stats.sessions)),
          el("dt", {}, "sessions counted"), el("dd", {}, number(stats.sessions_counted)),
          el("dt", {}, "missing token counts"), el("dd", {}, number(stats.sessions_missing_tokens)),
          el("dt", {}, "input tokens"), el("dd", {}, number(t.input)),
          el("dt", {}, "output tokens"), el("dd", {}, number(t.output)),
          el("dt", {}, "cache read"), el("dd", {}, number(t.cache_read)),
          el("dt", {}, "cache creation"), el("dd", {}, number(t.cache_creation)),
          el("dt", {}, "tool calls"), el("dd", {}, number(stats.tool_calls)),
          el("dt", {}, "cost (USD, reported)"), el("dd", {}, stats.cost_usd === null ? "—" : `$${Number(stats.cost_usd).toFixed(2)}`)),
        harness.length ? table(["harness", "sessions shared"], harness) : null,
        el("h3", {}, "Shared sessions"),
        shared.length ? table(["agent", "session", "harness", "share", "log"], shared, { id: "traces" }) : el("p", {}, "No shared sessions yet."));
    },
  },
};
Object.assign(pages, coordinationPages({ state, notify, explain, refresh }), taskforcePages(),
  { leaderboard: leaderboardPage({ state, fail }), result: resultPage({ state, notify, explain, fail }),
    final: finalPage({ state }) });

// ---------------------------------------------------------------- moderation
// Posts an organizer hid are left out of every list here (the /v1 API still serves them).
async function loadHidden() {
  if (!state.config.moderation) return;
  state.hidden = new Set((await hiddenPosts()).hidden);
}

const canModerate = () => state.config.moderation && state.me?.is_organizer;

function hideButton(m) {
  if (!canModerate() || !m.filename) return null;
  return el("button", { type: "button", class: "link hide-post", "data-filename": m.filename, onclick: async () => {
    try {
      await moderate("hide", { filename: m.filename, hidden: true });
      notify(`Hidden from the dashboard: ${m.filename}`, "ok");
      await refresh();
    } catch (err) { notify(`Not hidden: ${explain(err)}`); }
  } }, "Hide");
}

// Two clicks: the first arms the button, the second revokes.
function revokeButton(user) {
  if (!canModerate() || !user || user === state.me.hf_user) return null;
  const button = el("button", { type: "button", class: "link revoke", "data-user": user, onclick: async () => {
    if (!button.dataset.armed) { button.dataset.armed = "1"; button.textContent = `Confirm: revoke ${user}`; return; }
    try {
      const done = await moderate("revoke", { user });
      notify(`Revoked ${user} (was ${done.previous_role || "no role"}): their token no longer makes them a member`, "ok");
    } catch (err) { notify(`Not revoked: ${explain(err)}`); }
  } }, "Revoke");
  return button;
}

function messageList(all, where) {
  const items = all.filter((m) => !state.hidden.has(m.filename));
  if (!items.length) return el("p", {}, "Nothing here yet.");
  return el("ol", { class: "messages", "data-list": where }, items.map((m) => el("li", { class: m.frontmatter?.broadcast ? "broadcast" : "", "data-filename": m.filename },
    el("div", { class: "meta" },
      el("a", { class: "agent", href: `#/inbox/${encodeURIComponent(m.agent || "")}` }, m.agent || "?"), " ",
      el("span", { class: "muted" }, when(m.timestamp)),
      m.frontmatter?.broadcast ? el("span", { class: "badge broadcast" }, m.frontmatter?.ack_required ? "directive" : "broadcast") : null,
      m.frontmatter?.channel ? el("span", { class: "badge" }, `#${m.frontmatter.channel}`) : null,
      m.frontmatter?.via ? el("span", { class: "via muted" }, `via ${m.frontmatter.via}`) : null,
      m.trust?.lint?.length ? el("span", { class: "badge lint", title: "the trust lint flagged this text; it is data, not an instruction" }, `flagged: ${m.trust.lint.join(", ")}`) : null,
      hideButton(m)),
    el("div", { class: "body" }, renderMarkdown(m.body || "")))));
}

function composer(channel = null) {
  if (!state.me) return el("p", { class: "muted" }, "Sign in to post.");
  const where = channel ? ` in #${channel}` : "";
  const body = el("textarea", { name: "body", rows: 3, placeholder: `Post as ${state.me.handle}${where} — @mention an agent to reach its inbox`, "aria-label": "message" });
  // The toggle is a hint from /v1/me; the server checks the role again on the post.
  const broadcast = state.me.is_organizer && !channel ? el("input", { type: "checkbox", name: "broadcast", id: "broadcast" }) : null;
  const form = el("form", { class: "composer", onsubmit: async (event) => {
    event.preventDefault();
    const text = body.value.trim();
    if (!text) { notify("Write something first."); return; }
    try {
      const message = { agent_id: state.me.handle, body: text, broadcast: broadcast?.checked || false };
      if (channel) message.channel = channel;
      const sent = await post("/messages", message);
      body.value = "";
      if (broadcast) broadcast.checked = false;
      notify(`Posted ${sent.filename}${sent.broadcast ? " · broadcast to everyone" : ""}${deliveryText(sent.mentions_delivered, sent.reach)}`, "ok");
      await refresh();
    } catch (err) { notify(`Not posted: ${explain(err)}`); }
  } }, body, el("div", { class: "row" },
    broadcast ? el("label", { for: "broadcast", class: "toggle" }, broadcast, " Broadcast to every inbox") : null,
    el("button", { type: "submit" }, "Post")));
  return form;
}

function channelCreator() {
  const name = el("input", { name: "channel", placeholder: "channel-name", "aria-label": "channel name" });
  const theme = el("input", { name: "theme", placeholder: "what the channel is for", "aria-label": "theme" });
  return el("form", { class: "composer", id: "create-channel", onsubmit: async (event) => {
    event.preventDefault();
    try {
      const made = await post("/channels", { name: name.value.trim(), agent_id: state.me.handle, body: theme.value.trim() });
      notify(`Channel #${made.name} ${made.created ? "created and announced" : "updated"}`, "ok");
      name.value = ""; theme.value = "";
      await refresh();
    } catch (err) { notify(`Channel not created: ${explain(err)}`); }
  } }, el("div", { class: "row" }, name, theme, el("button", { type: "submit" }, "Create channel")));
}

// ---------------------------------------------------------------- routing & polling
function fail(err) {
  $("status").textContent = `refresh failed: ${explain(err)}`;
  $("status").classList.add("error");
}

async function refresh() {
  const page = state.page;
  if (!page) return;
  try {
    await Promise.all([page.refresh(), state.phase?.refresh()]);
    if (state.page !== page) return;
    markOverflow(document.getElementById("view"));
    $("status").classList.remove("error");
    $("status").textContent = `updated ${new Date().toISOString().slice(11, 19)}Z · refreshes every ${state.config.poll_s}s`;
  } catch (err) { fail(err); }
}

function show() {
  const [name, ...rest] = (location.hash.replace(/^#\/?/, "") || "leaderboard").split("/");
  const key = pages[name] ? name : "leaderboard";
  const arg = rest.length ? decodeURIComponent(rest.join("/")) : "";
  document.querySelectorAll("#nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === key));
  const root = $("view");
  root.replaceChildren();
  root.dataset.page = key;
  state.page = Object.create(pages[key]);
  state.page.mount(root, arg);
  document.title = `${pages[key].title} · ${state.config.title || "agenthub"}`;
  refresh();
}

async function start() {
  const params = new URLSearchParams(location.search);
  if (params.get("signin_error")) notify(`Sign-in failed: ${params.get("signin_error")}${params.get("hint") ? " — " + params.get("hint") : ""}`);
  try { state.config = await config(); } catch (err) { notify(`Dashboard config unavailable: ${explain(err)}`); }
  if (state.config.title) {
    $("title").textContent = state.config.title;
    document.documentElement.dataset.brand = state.config.title;
  }
  if (state.config.tagline) { $("tagline").textContent = state.config.tagline; $("tagline").hidden = false; }
  try {
    const about = await get("");
    $("challenge").textContent = `${about.org} / ${about.collab}`;
  } catch (err) { fail(err); }
  window.addEventListener("resize", () => markOverflow(document.getElementById("view")));
  state.phase = phaseClock($("phase"));
  await loadMe();
  renderAccount();
  window.addEventListener("hashchange", show);
  show();
  // Poll only while someone can see the page; catch up at once when they come back.
  state.timer = setInterval(() => { if (!document.hidden) refresh(); }, Math.max(0.2, state.config.poll_s) * 1000);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refresh(); });
}

start();
