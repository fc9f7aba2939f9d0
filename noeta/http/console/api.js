// The console's only way to the server: the HTTP API, with the API key as a bearer token.
// Server-Sent Events are read with fetch (EventSource cannot send an Authorization header).

const KEY = "noeta.apiKey";

export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.name = (body && body.error) || `HTTP${status}`;
    this.body = body;
  }
}

export function apiKey() {
  return sessionStorage.getItem(KEY) || localStorage.getItem(KEY) || "";
}

export function setApiKey(key, remember) {
  sessionStorage.setItem(KEY, key);
  if (remember) localStorage.setItem(KEY, key);
  else localStorage.removeItem(KEY);
}

export function forgetApiKey() {
  sessionStorage.removeItem(KEY);
  localStorage.removeItem(KEY);
}

function headers(key, extra) {
  const h = { Accept: "application/json", ...extra };
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

let onUnauthorized = () => {};
export function whenUnauthorized(callback) {
  onUnauthorized = callback;
}

// A 401 answers the key the request carried. If the user has given another key since (a slow
// request still in flight), the refusal is about the old key and must not reopen the dialog.
function refused(sentKey) {
  if (sentKey === apiKey()) onUnauthorized();
}

export async function request(method, path, body) {
  const sentKey = apiKey();
  const init = { method, headers: headers(sentKey, body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  let data = null;
  const text = await response.text();
  if (text) {
    try { data = JSON.parse(text); } catch { data = { error: "BadResponse", message: text.slice(0, 200) }; }
  }
  if (response.status === 401) refused(sentKey);
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

export const get = (path) => request("GET", path);
export const post = (path, body) => request("POST", path, body ?? {});

export function query(params) {
  const q = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (Array.isArray(value)) value.filter(Boolean).forEach((v) => q.append(name, v));
    else if (value !== undefined && value !== null && value !== "") q.set(name, String(value));
  }
  const text = q.toString();
  return text ? `?${text}` : "";
}

// Follow an SSE stream: onEvent(name, data, id) per message. Reconnects after a network error
// with Last-Event-ID (the event log and the delta stream resume after it); stops on "end" or when
// stop() is called.
export function follow(path, onEvent, { onError = () => {}, resume = true } = {}) {
  const controller = new AbortController();
  let lastId = null;
  let stopped = false;

  async function once() {
    const extra = { Accept: "text/event-stream" };
    if (resume && lastId !== null) extra["Last-Event-ID"] = String(lastId);
    const sentKey = apiKey();
    const response = await fetch(path, { headers: headers(sentKey, extra), signal: controller.signal });
    if (!response.ok) {
      let body = null;
      try { body = await response.json(); } catch { /* not JSON */ }
      if (response.status === 401) refused(sentKey);
      throw new ApiError(response.status, body);
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      buffer += value.replace(/\r\n/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const message = { event: "message", data: "", id: null };
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) continue;
          const at = line.indexOf(":");
          const field = at < 0 ? line : line.slice(0, at);
          const text = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
          if (field === "event") message.event = text;
          else if (field === "data") message.data += (message.data ? "\n" : "") + text;
          else if (field === "id") message.id = text;
        }
        if (!message.data) continue;
        if (message.id !== null) lastId = message.id;  // a seq, or a delta's OFFSET:INDEX
        const data = JSON.parse(message.data);
        if (message.event === "end") return true;
        onEvent(message.event, data, message.id);
      }
    }
  }

  (async () => {
    let delay = 500;
    while (!stopped) {
      try {
        if (await once()) return;
        delay = 500;
      } catch (err) {
        if (stopped || err.name === "AbortError") return;
        onError(err);
        if (err instanceof ApiError && err.status < 500) return;
      }
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10000);
    }
  })();

  return () => {
    stopped = true;
    controller.abort();
  };
}
