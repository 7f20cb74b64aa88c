// One result in detail (#/result/<filename>): GET /v1/results/{filename} — its score,
// description, artifacts, pin and verifier detail — and, for an org admin, the verdict
// buttons (a human verdict through /dashboard/moderation/verdict, compare-and-set against
// the state shown here) and the verification job's log (its tail, the whole log on demand;
// the re-run saw the private eval set, so nobody else gets it).

import { ApiError, get, jobLog, jobLogWhole, moderate } from "./api.js";
import { el, replace, when } from "./dom.js";
import { scoreText } from "./leaderboard.js";
import { renderMarkdown } from "./markdown.js";

function pairs(object) {
  return Object.entries(object || {}).flatMap(([k, v]) => [el("dt", {}, k),
    el("dd", {}, k === "job_url" && typeof v === "string" && /^https?:/.test(v) ? el("a", { href: v, rel: "noopener", target: "_blank" }, v)
      : typeof v === "object" && v !== null ? el("code", {}, JSON.stringify(v)) : String(v))]);
}

export function resultPage({ state, notify, explain, fail }) {
  return {
    title: "Result",
    mount(root, filename) {
      this.filename = filename;
      this.data = el("div", { id: "result" });
      root.append(el("p", {}, el("a", { href: "#/leaderboard" }, "← Leaderboard")), el("h2", {}, `Result ${filename}`), this.data);
    },
    async refresh() {
      let result;
      try {
        result = await get(`/results/${encodeURIComponent(this.filename)}`);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) { replace(this.data, el("p", {}, `No result ${this.filename}.`)); return; }
        throw err;
      }
      const fm = result.frontmatter || {};
      const field = (await get("/leaderboard", { limit: 1 })).score_field;
      const decimals = state.config.score_decimals ?? 4;
      const artifacts = [].concat(fm.artifacts || []);
      const baseline = fm.baseline === true || fm.baseline === "true";
      const pin = result.pin;
      replace(this.data,
        el("dl", { class: "stats detail" },
          el("dt", {}, "agent"), el("dd", { class: "agent" }, result.agent),
          el("dt", {}, field), el("dd", { class: "num", "data-field": "score" }, fm[field] === undefined ? "—" : scoreText(fm[field], decimals)),
          el("dt", {}, "status"), el("dd", {}, fm.status || "—"),
          el("dt", {}, "verification"), el("dd", { "data-field": "verification" }, baseline
            ? el("span", { class: "badge baseline" }, "baseline")
            : el("span", { class: `badge v-${result.verification}` }, result.verification)),
          el("dt", {}, "method"), el("dd", {}, fm.method || "—"),
          el("dt", {}, "submitted"), el("dd", {}, when(result.timestamp)),
          el("dt", {}, "description"), el("dd", { "data-field": "description" }, fm.description || "—")),
        this.moderation(result, baseline),
        el("h3", {}, "Artifacts"),
        artifacts.length ? el("ul", { id: "artifacts" }, artifacts.map((a) => el("li", {}, el("code", {}, String(a))))) : el("p", { class: "muted" }, "No artifacts named."),
        el("h3", {}, "Pin"),
        pin ? el("div", { id: "pin" },
          el("p", { class: "muted" }, `${pin.files.length} files pinned at promotion${pin.manifest_hash ? ` · manifest ${pin.manifest_hash}` : ""}`),
          el("ul", {}, pin.files.slice(0, 50).map((f) => el("li", {}, el("code", {}, f.path || JSON.stringify(f)), f.sha256 ? el("span", { class: "muted" }, ` ${String(f.sha256).slice(0, 12)}…`) : null))))
          : el("p", { class: "muted", id: "pin" }, "No submission pin (nothing named in artifacts: was pinned)."),
        el("h3", {}, "Verification"),
        result.verification_detail ? el("dl", { class: "stats", id: "verification-detail" }, pairs({ ...result.verification_detail, queue: undefined }),
          result.verification_detail.queue ? [el("dt", {}, "queue"), el("dd", {}, el("code", {}, JSON.stringify(result.verification_detail.queue)))] : null)
          : el("p", { class: "muted", id: "verification-detail" }, "No verifier detail (the verifier has not run it, or verification is manual)."),
        el("h3", {}, "Verification job log"), this.jobLog(result),
        el("h3", {}, "Notes"), el("div", { class: "body" }, renderMarkdown(result.body || "")));
    },
    jobLog(result) {
      const box = el("div", { id: "job-log" });
      if (!state.me?.is_organizer || !state.config.moderation) {
        replace(box, el("p", { class: "muted" }, "Shown to organizers only: the re-run sees the private eval set."));
        return box;
      }
      replace(box, el("p", { class: "muted" }, "Loading the log…"));
      jobLog(result.filename).then((log) => {
        const pre = el("pre", { class: "log", "data-testid": "job-log" }, log.tail || "(empty)");
        const whole = el("a", { href: "#", class: "whole-log", onclick: (event) => {
          event.preventDefault();
          jobLogWhole(result.filename).then((text) => {
            pre.textContent = text;
            replace(caption, `${log.log_file} · the whole log, ${log.size} bytes`);
          }).catch((err) => notify(`Log not loaded: ${explain(err)}`));
        } }, `the whole log (${log.size} bytes)`);
        const caption = el("p", { class: "muted" }, log.log_file,
          log.complete ? " · the whole log" : [" · its last lines; ", whole]);
        replace(box, caption, pre);
      }).catch((err) => replace(box, el("p", { class: "muted" }, err instanceof ApiError && err.status === 404
        ? "No verification job log (the verifier has not run it, or verification is manual or eval-space)."
        : `Log not loaded: ${explain(err)}`)));
      return box;
    },
    moderation(result, baseline) {
      if (!state.me?.is_organizer || !state.config.moderation || baseline) return null;
      const judge = (verdict) => async () => {
        try {
          await moderate("verdict", { filename: result.filename, verdict, expected: result.verification });
          notify(`${result.filename} marked ${verdict}`, "ok");
          await this.refresh();
        } catch (err) { notify(`Verdict not written: ${explain(err)}`); }
      };
      return el("div", { class: "row moderation", id: "verdict" },
        el("span", { class: "muted" }, "Organizer verdict: "),
        el("button", { type: "button", name: "mark-valid", disabled: result.verification === "valid", onclick: () => judge("valid")().catch(fail) }, "Mark valid"),
        el("button", { type: "button", name: "mark-invalid", disabled: result.verification === "invalid", onclick: () => judge("invalid")().catch(fail) }, "Mark invalid"));
    },
  };
}
