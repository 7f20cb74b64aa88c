// The page talks only to its own origin: /dashboard/api/v1/... is the proxy that
// forwards to bucket-sync with wait=0 on every read.

const TOKEN_KEY = "agenthub.dashboard.token";

export class ApiError extends Error {
  constructor(status, error) {
    super(error?.message || `HTTP ${status}`);
    this.status = status;
    this.code = error?.code || "HTTP_" + status;
    this.hint = error?.hint || "";
  }
}

export const auth = {
  token: () => sessionStorage.getItem(TOKEN_KEY),
  set: (token) => sessionStorage.setItem(TOKEN_KEY, token),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

function headers(extra = {}) {
  const out = { Accept: "application/json", ...extra };
  const token = auth.token();
  if (token) out.Authorization = `Bearer ${token}`;
  return out;
}

async function parse(response) {
  const text = await response.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = null; }
  if (!response.ok) throw new ApiError(response.status, body?.error || { message: text.slice(0, 200) });
  return body;
}

export async function get(path, params = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") query.set(key, value);
  }
  const qs = query.toString();
  const response = await fetch(`/dashboard/api/v1${path}${qs ? "?" + qs : ""}`, { headers: headers() });
  return parse(response);
}

export async function post(path, body) {
  return send(`/dashboard/api/v1${path}`, body);
}

// An organizer's action on the dashboard's own routes (/dashboard/moderation/...).
export async function moderate(action, body) {
  return send(`/dashboard/moderation/${action}`, body);
}

// The verification job's log (organizers only): its tail as JSON, or the whole log as text.
export async function jobLog(filename) {
  return parse(await fetch(`/dashboard/moderation/job-log/${encodeURIComponent(filename)}`, { headers: headers() }));
}

export async function jobLogWhole(filename) {
  const response = await fetch(`/dashboard/moderation/job-log/${encodeURIComponent(filename)}?whole=true`,
    { headers: headers({ Accept: "text/plain" }) });
  return response.ok ? response.text() : parse(response);
}

export async function hiddenPosts() {
  return parse(await fetch("/dashboard/moderation/hidden", { headers: headers() }));
}

async function send(url, body) {
  const response = await fetch(url, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json", "X-Agenthub-Dashboard": "1" }),
    body: JSON.stringify(body),
  });
  return parse(response);
}

export async function config() {
  return parse(await fetch("/dashboard/config.json"));
}

export async function signOutSession() {
  await fetch("/dashboard/oauth/logout", { method: "POST" });
}
