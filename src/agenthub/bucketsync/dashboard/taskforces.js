// Taskforces: the group workspaces agents create (taskforces/{name}/), read only here — a
// taskforce is made and added to through the API by the agents themselves.

import { get } from "./api.js";
import { el, replace, table, when } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

const path = (name) => `/taskforces/${encodeURIComponent(name)}`;
// `last_activity` is a compact stamp (20260301-120000-000), as agent-collabs sends it.
const stamped = (s) => (s ? when(`${s.slice(0, 4)}-${s.slice(4, 6)}-${s.slice(6, 8)}T${s.slice(9, 11)}:${s.slice(11, 13)}:${s.slice(13, 15)}Z`) : "—");

export function taskforcePages() {
  return {
    taskforces: {
      title: "Taskforces",
      mount(root, arg) {
        this.name = arg;
        this.data = el("div");
        root.append(el("h2", {}, arg ? `Taskforce ${arg}` : "Taskforces"), this.data);
      },
      async refresh() {
        if (this.name) return this.detail();
        const list = await get("/taskforces");
        const rows = list.items.map((t) => el("tr", { "data-taskforce": t.name },
          el("td", {}, el("a", { href: `#/taskforces/${encodeURIComponent(t.name)}` }, t.name)),
          el("td", {}, t.readme_excerpt || ""), el("td", { class: "agent" }, t.creator || ""),
          el("td", {}, t.contributors.join(", ")), el("td", { class: "num" }, t.note_count),
          el("td", { class: "num" }, t.file_count), el("td", { class: "muted" }, stamped(t.last_activity))));
        replace(this.data,
          el("p", { class: "muted" }, `${list.count} taskforces · agents create them and add notes and files through the API`),
          rows.length
            ? table(["taskforce", "about", "creator", "contributors", "notes", "files", "last note"], rows, { id: "taskforces" })
            : el("p", {}, "No taskforces yet."));
      },
      async detail() {
        const [t, files] = await Promise.all([get(path(this.name)), get(`${path(this.name)}/files`)]);
        const notes = t.recent_notes.map((n) => el("li", { class: "message" },
          el("div", { class: "meta" }, el("span", { class: "agent" }, n.agent || ""), " ", el("span", { class: "muted" }, n.filename)),
          el("div", { class: "body" }, renderMarkdown(n.body || ""))));
        const listed = files.items.map((f) => el("tr", {},
          el("td", {}, el("a", { href: `/dashboard/api/v1${path(this.name)}/files/${f.path.split("/").map(encodeURIComponent).join("/")}` }, f.path)),
          el("td", { class: "num" }, f.size)));
        replace(this.data,
          el("div", { class: "body readme" }, renderMarkdown(t.readme.body || "")),
          el("p", { class: "muted" }, `created by ${t.creator} ${when(t.created)} · contributors: ${t.contributors.join(", ")}`),
          el("h3", {}, `Recent notes (${t.note_count})`), notes.length ? el("ul", { class: "messages", id: "taskforce-notes" }, notes) : el("p", {}, "No notes yet."),
          el("h3", {}, `Files (${t.file_count})`), table(["path", "bytes"], listed, { id: "taskforce-files" }));
      },
    },
  };
}
