// The Noeta console: task list, task page (live events, conversation, tool calls, usage),
// approvals inbox, new task. Plain DOM; every server value is set as text, never as HTML.
import { ApiError, apiKey, follow, forgetApiKey, get, post, query, setApiKey, whenUnauthorized } from "./api.js";
import { schedulesView } from "./schedules.js";

const STATUSES = ["running", "idle", "awaiting_approval", "completed", "failed", "cancelled", "terminated", "timed_out"];
const view = document.getElementById("view");
let cleanup = [];

// -- small helpers ------------------------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "text") el.textContent = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const short = (text, n = 120) => (text && text.length > n ? `${text.slice(0, n - 1)}…` : text || "");
const when = (iso) => (iso ? new Date(iso).toLocaleString() : "");
// No cost (null, or 0 from an older server) means no price was known: "unknown", never "$0.000000".
const dollars = (usd) => (usd ? `$${usd.toFixed(usd >= 1 ? 2 : usd >= 0.01 ? 4 : 6)}` : "unknown");
// The task's page in the Temporal UI (absent when the server does not know the UI's address).
const uiLink = (t) => (t.ui_url ? h("a", { href: t.ui_url, target: "_blank", rel: "noopener", class: "ui-link", "data-testid": "ui-link", text: "Temporal UI" }) : null);
const json = (value) => JSON.stringify(value, null, 2);
const taskHref = (id) => `#/tasks/${encodeURIComponent(id)}`;

// A run of a schedule says which, with a link to the schedules page.
const scheduledBy = (t) => (t.schedule_id ? h("div", { class: "fork-of", "data-testid": "scheduled-by" },
  h("span", { class: "badge status-active", text: "scheduled" }), " by ", h("a", { class: "mono", href: "#/schedules", text: t.schedule_id })) : null);
// A fork says so, with a link to the task it was forked from (two rows never look the same).
const forkOf = (t) => (t.forked_from ? h("div", { class: "fork-of", "data-testid": "fork-of" },
  h("span", { class: "badge status-fork", text: "fork" }), " of ", h("a", { class: "mono", href: taskHref(t.forked_from), text: t.forked_from })) : null);

// The agent version a task runs, and the worker build it is pinned to (docs/versions.md).
const versionOf = (t) => (t.agent || t.worker_version ? h("div", { class: "fork-of", "data-testid": "agent-version" },
  t.agent ? h("span", { class: "badge status-active", text: t.agent }) : null,
  t.worker_version ? h("span", { class: "muted mono", text: ` worker ${t.worker_version}` }) : null) : null);

// Status words for people; the raw status stays in the data attribute (and the API).
const STATUS_WORDS = { running: "running", idle: "waiting for a goal", awaiting_approval: "waiting for approval",
  completed: "completed", failed: "failed", cancelled: "cancelled", terminated: "terminated", timed_out: "timed out",
  proposed: "proposed", refused: "refused" };
const statusWord = (status) => STATUS_WORDS[status] || String(status).replace(/_/g, " ");

function badge(status) {
  return h("span", { class: `badge status-${status}`, "data-testid": "status", "data-status": status, text: statusWord(status) });
}

function banner(text, kind = "error") {
  const el = document.getElementById("banner");
  el.hidden = !text;
  el.className = `banner ${kind}`;
  el.textContent = text || "";
}

function showError(err) {
  if (err instanceof ApiError && err.status === 401) return; // the key dialog is up
  banner(err instanceof ApiError ? `${err.name}: ${err.message}` : String(err));
}

// The task's current details are Temporal markdown: **bold** and `code` are rendered, the rest is text.
function markdownLite(text) {
  return text.split(/\n\n+/).map((para) => {
    const p = h("p");
    for (const part of para.split(/(\*\*[^*]+\*\*|`[^`]+`)/)) {
      if (part.startsWith("**") && part.endsWith("**") && part.length > 4) p.append(h("b", { text: part.slice(2, -2) }));
      else if (part.startsWith("`") && part.endsWith("`") && part.length > 2) p.append(h("code", { text: part.slice(1, -1) }));
      else if (part) p.append(document.createTextNode(part));
    }
    return p;
  });
}

function every(ms, fn) {
  const id = setInterval(fn, ms);
  cleanup.push(() => clearInterval(id));
}

// A list page's data: loaded now and every 5 s; a failure shows in the banner until a load works.
// Returns the loader, to reload at once (after an action).
function keepLoading(load) {
  const attempt = async () => {
    try {
      await load();
      banner("");
    } catch (err) {
      showError(err);
    }
  };
  attempt();
  every(5000, attempt);
  return attempt;
}

function toolCall(name, args) {
  const parts = Object.entries(args || {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`);
  return `${name}(${short(parts.join(", "), 100)})`;
}

// A call as it ran; an approver's edit shows both: what ran, marked, and what the model proposed.
function ranCall(name, args, proposed) {
  const ran = h("code", { "data-testid": "ran", text: toolCall(name, args) });
  if (!proposed) return ran;
  return h("span", { class: "edited" }, ran, h("span", { class: "badge status-edited", "data-testid": "edited", text: "edited by approver" }),
    h("div", { class: "muted" }, "proposed ", h("s", {}, h("code", { "data-testid": "proposed", text: toolCall(name, proposed) }))));
}

// -- API key ------------------------------------------------------------------------------------

const dialog = document.getElementById("key-dialog");
function askForKey(message) {
  const error = document.getElementById("key-error");
  error.hidden = !message;
  error.textContent = message || "";
  // Several requests are refused at once; only the first opens the dialog. The later ones must
  // not overwrite what the user may already be typing.
  if (dialog.open) return;
  document.getElementById("key-input").value = apiKey();
  dialog.showModal();
}
whenUnauthorized(() => askForKey(apiKey() ? "That key was refused." : "This server needs an API key."));
document.getElementById("key-button").addEventListener("click", () => askForKey(""));
document.getElementById("key-form").addEventListener("submit", () => {
  setApiKey(document.getElementById("key-input").value.trim(), document.getElementById("key-remember").checked);
  banner("");
  route();
});
document.getElementById("key-forget").addEventListener("click", () => {
  forgetApiKey();
  dialog.close();
  route();
});

// -- approvals count in the header --------------------------------------------------------------

async function refreshApprovalCount() {
  try {
    const inbox = await get("/approvals");
    const count = inbox.waiting.length + inbox.unreadable.length;  // an unreadable task waits too
    const el = document.getElementById("approval-count");
    el.hidden = count === 0;
    el.textContent = String(count);
  } catch {
    /* shown by the page itself */
  }
}

// -- task list ------------------------------------------------------------------------------------

function tasksView(params) {
  const status = h("select", { name: "status", "data-testid": "filter-status" },
    h("option", { value: "", text: "any status" }),
    STATUSES.map((s) => h("option", { value: s, selected: params.get("status") === s, text: statusWord(s) })));
  const search = h("input", { name: "search", type: "search", placeholder: "words of the goal", value: params.get("search") || "", "data-testid": "filter-search" });
  const model = h("input", { name: "model", placeholder: "model", value: params.get("model") || "" });
  const metadata = h("input", { name: "metadata", placeholder: "metadata key=value", value: params.get("metadata") || "" });
  const body = h("tbody", { "data-testid": "task-rows" });
  const note = h("p", { class: "muted" });
  const form = h("form", { class: "filters", onsubmit: (e) => {
    e.preventDefault();
    location.hash = `#/${query({ status: status.value, search: search.value.trim(), model: model.value.trim(), metadata: metadata.value.trim() })}`;
  } }, status, search, model, metadata, h("button", { type: "submit", text: "Filter" }));

  keepLoading(async () => {
    const tasks = await get(`/tasks${query({ status: params.get("status"), search: params.get("search"), model: params.get("model"), metadata: params.get("metadata"), limit: 100 })}`);
    body.replaceChildren(...tasks.map((t) => h("tr", { "data-task": t.task_id },
      h("td", {}, h("a", { href: taskHref(t.task_id), text: short(t.goal || t.task_id, 90) }),
        h("div", { class: "muted mono", text: t.task_id }), forkOf(t), scheduledBy(t), versionOf(t)),
      h("td", {}, badge(t.status)),
      h("td", { class: "nowrap", text: t.model || "" }),
      h("td", { class: "num", text: t.turns }),
      h("td", { class: "num", text: `${t.tokens_in} / ${t.tokens_out}` }),
      h("td", { class: "nowrap", text: when(t.started) }),
      h("td", { class: "nowrap", "data-testid": "ended", text: when(t.closed) }),
      h("td", { class: "num nowrap", "data-testid": "cost", text: dollars(t.cost_usd) }),
      // The mean of its online scores (Options.scoring); blank: not scored.
      h("td", { class: "num nowrap", "data-testid": "score", text: t.score == null ? "" : t.score.toFixed(2) }),
      h("td", {}, uiLink(t)),
      h("td", { class: "muted", text: Object.entries(t.metadata || {}).map(([k, v]) => `${k}=${v}`).join(" ") }))));
    note.textContent = tasks.length ? "" : "No tasks match.";
  });
  return h("section", {},
    h("h1", { text: "Tasks" }), form,
    h("table", { class: "tasks" },
      h("thead", {}, h("tr", {}, ["Goal", "Status", "Model", "Turns", "Tokens in / out", "Started", "Ended", "Cost", "Score", "", "Metadata"].map((t) => h("th", { text: t })))),
      body),
    note);
}

// -- approvals --------------------------------------------------------------------------------------

function approvalCard(taskId, request, done) {
  const action = request.action || {};
  const reason = h("input", { placeholder: "reason (optional)", "data-testid": "approval-reason" });
  const status = h("span", { class: "muted" });
  // A tool call's arguments can be edited before approving; the guards check the edit again.
  const edit = action.type === "tool_call"
    ? h("textarea", { class: "mono", rows: 3, "data-testid": "approval-arguments", "aria-label": "arguments" }) : null;
  if (edit) edit.value = json(action.arguments || {});
  async function answer(approved) {
    try {
      // The approver recorded is the API key's name (the server's doing): nothing to fill in here.
      const body = { call_id: request.call_id, approved, reason: reason.value.trim() || null };
      if (approved && edit) {
        const edited = JSON.parse(edit.value);
        if (JSON.stringify(edited) !== JSON.stringify(action.arguments || {})) body.arguments = edited;
      }
      await post(`/tasks/${encodeURIComponent(taskId)}/approvals`, body);
      status.textContent = approved ? "approved" : "refused";
      done();
    } catch (err) {
      showError(err);
    }
  }
  const what = action.type === "tool_call" ? toolCall(action.tool_name, action.arguments)
    : action.type === "spawn_subtask" ? `subtask: ${short(action.goal)}`
    : action.type === "finish" ? `finish: ${short(action.answer)}`
    // an MCP server's question: its message and the fields it asks for (answered as an approval)
    : action.type === "elicitation"
      ? `${action.server} asks: ${short(action.message)} (fields: ${Object.keys((action.requested_schema || {}).properties || {}).join(", ") || "none"})`
    : request.call_id;
  return h("div", { class: "card approval", "data-call": request.call_id, "data-testid": "approval" },
    h("div", {}, h("strong", { class: "mono", text: what })),
    h("div", { class: "muted", text: `guard ${request.guard}: ${request.reason || "no reason given"} · call ${request.call_id}` }),
    h("div", { class: "muted", "data-testid": "approval-wait", text: [
      action.risk_level ? `risk ${action.risk_level}` : "",
      request.waiting_since ? `waiting since ${when(request.waiting_since)}` : "",
      request.deadline ? `refused at ${when(request.deadline)} unless answered` : ""].filter(Boolean).join(" · ") }),
    edit || (action.arguments ? h("pre", { text: json(action.arguments) }) : null),
    h("div", { class: "actions" }, reason,
      h("button", { type: "button", class: "approve", "data-testid": "approve", onclick: () => answer(true), text: "Approve" }),
      h("button", { type: "button", class: "deny", "data-testid": "deny", onclick: () => answer(false), text: "Deny" }),
      status));
}

function approvalsView() {
  const list = h("div", { "data-testid": "approvals" });
  async function load() {
    try {
      const { waiting, unreadable } = await get("/approvals");
      const byTask = new Map();
      for (const p of waiting) {
        if (!byTask.has(p.task_id)) byTask.set(p.task_id, { goal: p.goal, requests: [] });
        byTask.get(p.task_id).requests.push(p.request);
      }
      // A waiting task the server could not read is named, with why, never left out silently.
      const unread = unreadable.map((u) => h("div", { class: "group", "data-task": u.task_id, "data-testid": "unreadable" },
        h("a", { href: taskHref(u.task_id), class: "mono", text: u.task_id }),
        h("p", { class: "muted", text: `waits for approval, but the server could not read it: ${u.error}: ${u.message}` })));
      const groups = [...byTask].map(([taskId, t]) => h("div", { class: "group", "data-task": taskId },
        h("a", { href: taskHref(taskId), text: short(t.goal || taskId, 100) }), h("span", { class: "muted mono", text: `  ${taskId}` }),
        t.requests.map((r) => approvalCard(taskId, r, load))));
      list.replaceChildren(...(groups.length + unread.length ? [...groups, ...unread]
        : [h("p", { class: "muted", text: "Nothing waits for approval." })]));
      refreshApprovalCount();
      banner("");
    } catch (err) {
      showError(err);
    }
  }
  load();
  every(3000, load);
  return h("section", {}, h("h1", { text: "Approvals" }), list);
}

// -- new task -----------------------------------------------------------------------------------------

// A setting's default and range are declared once, on its field (noeta.protocols.task_settings); the
// form reads them from the API's own description of the start body instead of restating them.
async function settingLimits(input, name) {
  try {
    const rule = (await get("/openapi.json")).components.schemas.TaskOptions.properties[name];
    if (rule.minimum !== undefined) input.min = rule.minimum;
    if (rule.maximum !== undefined) input.max = rule.maximum;
    if (rule.default !== undefined && rule.default !== null) input.placeholder = String(rule.default);
  } catch (err) {
    // Without them the form still works: the server checks the value and says what is allowed.
  }
}

function newTaskView() {
  const field = (label, input) => h("label", {}, label, input);
  const goal = h("textarea", { name: "goal", rows: 3, required: true, "data-testid": "new-goal" });
  const provider = h("input", { name: "provider", placeholder: "default" });
  const model = h("input", { name: "model", placeholder: "the provider's default" });
  const tools = h("input", { name: "tools", placeholder: "tool names, comma-separated", "data-testid": "new-tools" });
  const guards = h("input", { name: "guards", placeholder: "guard names, comma-separated", "data-testid": "new-guards" });
  const system = h("textarea", { name: "system", rows: 2 });
  const maxTurns = h("input", { name: "max_turns", type: "number", step: 1, "data-testid": "new-max-turns" });
  settingLimits(maxTurns, "max_turns");
  const queue = h("input", { name: "task_queue", placeholder: "the server's task queue", "data-testid": "new-queue" });
  const keepOpen = h("input", { name: "keep_open", type: "checkbox" });
  // With a catalog on the server (NOETA_AGENTS) a task can start as an agent: its settings, the
  // fields filled in here over them.
  const agent = h("select", { name: "agent", "data-testid": "new-agent" }, h("option", { value: "", text: "none: the settings below" }));
  const agentField = h("label", { hidden: true }, "Agent", agent);
  get("/agents").then((agents) => {
    for (const a of agents) {
      const ramp = a.ramping ? `, ${a.ramp_percent}% on ${a.ramping}` : "";
      agent.append(h("option", { value: a.name, text: `${a.name} (current ${a.current}${ramp})` }),
        ...a.versions.map((v) => h("option", { value: `${a.name}@${v}`, text: `${a.name}@${v}` })));
    }
    agentField.hidden = !agents.length;
  }).catch(() => {}); // an older server: no agents to offer
  const list = (input) => input.value.split(",").map((s) => s.trim()).filter(Boolean);
  async function submit(e) {
    e.preventDefault();
    const options = {};
    if (provider.value.trim()) options.provider = provider.value.trim();
    if (model.value.trim()) options.model = model.value.trim();
    if (list(tools).length) options.allowed_tools = list(tools);
    if (list(guards).length) options.guards = list(guards);
    if (system.value.trim()) options.system_prompt = system.value;
    if (maxTurns.value) options.max_turns = Number(maxTurns.value);
    try {
      const { task_id } = await post("/tasks", { goal: goal.value, keep_open: keepOpen.checked, task_queue: queue.value.trim() || null, options, agent: agent.value || null });
      location.hash = taskHref(task_id);
    } catch (err) {
      showError(err);
    }
  }
  return h("section", {}, h("h1", { text: "New task" }),
    h("form", { class: "stack", onsubmit: submit, "data-testid": "new-task" },
      field("Goal", goal), agentField, field("Provider", provider), field("Model", model), field("Tools", tools),
      field("Guards", guards), field("System prompt", system), field("Max turns", maxTurns), field("Task queue", queue),
      h("label", { class: "inline" }, keepOpen, "keep open for further goals"),
      h("div", { class: "actions" }, h("button", { type: "submit", "data-testid": "start", text: "Start" }))));
}

// -- task page ----------------------------------------------------------------------------------------

function renderMessage(item) {
  switch (item.type) {
    case "UserMessage": return h("div", { class: "msg user" }, h("b", { text: "user" }), h("p", { text: item.text }));
    case "InjectedMessage": return h("div", { class: "msg injected" }, h("b", { text: item.origin }), h("p", { text: item.text }));
    case "AssistantMessage": return h("div", { class: "msg assistant" }, h("b", { text: "assistant" }), h("p", { text: item.text }));
    case "ToolUse": return h("div", { class: "msg tool", "data-call": item.call_id }, h("b", { text: "tool call" }), ranCall(item.tool_name, item.arguments, item.proposed_arguments));
    case "ToolResultView": {
      // A fork can start on a result whose call is in its source's part of the record: no name to show.
      const name = item.tool_name && item.tool_name !== "?" ? item.tool_name : "tool result";
      return h("div", { class: `msg tool ${item.success ? "" : "failed"}` }, h("b", { text: item.success ? `${name} →` : `${name} ✗` }), h("pre", { text: item.output || "" }));
    }
    case "Result": return h("div", { class: `msg result status-${item.status}` }, h("b", { text: `result (${item.status})` }), h("p", { text: item.answer }));
    default: return h("div", { class: "msg" }, h("pre", { text: json(item) }));
  }
}

// An answered approval: who (and how identified), after how long, why, and an approver's edit.
function approvalText(p) {
  let text = `${p.call_id} · by ${p.approver || "?"}${p.via ? ` (${p.via})` : ""}`;
  if (p.waited_seconds !== null && p.waited_seconds !== undefined) text += ` after ${Math.round(p.waited_seconds)}s`;
  if (p.reason) text += ` — ${p.reason}`;
  if (p.arguments) text += ` · edited ${JSON.stringify(p.proposed_arguments)} → ${JSON.stringify(p.arguments)}`;
  return text;
}

function eventLine(env) {
  const p = env.payload || {};
  let what = "";
  const block = (b) => b.text || (b.tool_name ? `${b.tool_name}(…)` : b.call_id ? `${b.call_id} ${b.success ? "ok" : "failed"}` : "");
  if (env.type === "MessagesAppended") what = (p.messages || []).map((m) => `${m.role}: ${short((m.content || []).map(block).join(" "), 80)}`).join(" | ");
  else if (p.tool_name) what = `${p.tool_name} [${p.call_id}]${p.reason ? ` — ${p.reason}` : ""}`;
  else if (p.approver !== undefined) what = approvalText(p);
  else if (p.call_id) what = `${p.call_id}${p.guard ? ` · ${p.guard}` : ""}${p.verdict ? ` · ${p.verdict}` : ""}${p.reason ? ` — ${p.reason}` : ""}`;
  else if (p.answer !== undefined) what = `[${p.status || "interrupted"}] ${short(p.answer, 80)}`;
  else if (p.reason) what = p.reason;
  else if (p.goal) what = short(p.goal, 80);
  else if (p.turn) what = `turn ${p.turn}${p.model ? ` · ${p.model}` : ""}`;
  return h("li", { "data-type": env.type, "data-seq": env.seq, class: env.type === "ApprovalRequested" ? "waiting" : null },
    h("span", { class: "seq", text: env.seq }), h("span", { class: "etype", text: env.type }),
    h("span", { class: "muted", text: env.actor }), h("span", { text: what }));
}

// "fork from here" on a model turn: a new task from that turn of this one, decided anew with the
// settings typed here (blank: the task's own); the console then opens the fork.
function forkAction(taskId, turn) {
  const provider = h("input", { name: "provider", placeholder: "provider (the task's)", "data-testid": "fork-provider" });
  const model = h("input", { name: "model", placeholder: "model (the task's)", "data-testid": "fork-model" });
  const system = h("input", { name: "system_prompt", placeholder: "system prompt (the task's)", "data-testid": "fork-system-prompt" });
  const form = h("form", { class: "inline-form fork-form", hidden: true, "data-testid": "fork-form", onsubmit: async (e) => {
    e.preventDefault();
    const options = {};
    if (provider.value.trim()) options.provider = provider.value.trim();
    if (model.value.trim()) options.model = model.value.trim();
    if (system.value.trim()) options.system_prompt = system.value;
    try {
      const fork = await post(`/tasks/${encodeURIComponent(taskId)}/fork`, { at_turn: turn, options });
      location.hash = taskHref(fork.task_id);
    } catch (err) { showError(err); }
  } }, provider, model, system, h("button", { type: "submit", "data-testid": "fork-submit", text: `Fork at turn ${turn}` }));
  const open = h("button", { type: "button", class: "quiet", "data-testid": "fork-turn", "data-turn": turn,
    title: `a new task from turn ${turn}, decided anew`, text: "fork from here", onclick: () => { form.hidden = !form.hidden; } });
  return h("div", { class: "fork" }, open, form);
}

function taskView(taskId) {
  const title = h("h1", { "data-testid": "task-goal", text: taskId });
  const meta = h("div", { class: "meta", "data-testid": "task-meta" });
  const details = h("div", { class: "details", "data-testid": "current-details", hidden: true });
  const answer = h("div", { class: "answer", "data-testid": "answer", hidden: true });
  const approvals = h("div", { "data-testid": "task-approvals" });
  const conversation = h("div", { class: "conversation", "data-testid": "conversation" });
  const calls = h("tbody", { "data-testid": "tool-calls" });
  const events = h("ol", { class: "events", "data-testid": "events" });
  const audit = h("ol", { class: "events audit", "data-testid": "audit" }); // who started, answered, injected, cancelled
  const live = h("div", { class: "live", "data-testid": "live-text", hidden: true });
  const goalInput = h("input", { placeholder: "the next goal", "data-testid": "next-goal" });
  // What the goal does while another one runs (if_busy; docs/client.md).
  const ifBusy = h("select", { name: "if_busy", title: "while another goal runs", "data-testid": "if-busy" },
    h("option", { value: "enqueue", text: "after the current goal" }),
    h("option", { value: "steer", text: "steer the current goal" }),
    h("option", { value: "interrupt", text: "interrupt it" }),
    h("option", { value: "reject", text: "only if idle" }));
  const injectInput = h("input", { placeholder: "context for the next step" });
  // A one-line form that posts its text to the task's `action` as `{ [field]: text, ...more() }`, then runs `after`.
  const textForm = (input, action, field, button, after = () => {}, more = () => ({}), ...controls) =>
    h("form", { class: "inline-form", onsubmit: async (e) => {
      e.preventDefault();
      const text = input.value.trim();
      if (!text) return;
      input.value = "";
      try { await post(`/tasks/${encodeURIComponent(taskId)}/${action}`, { [field]: text, ...more() }); } catch (err) { showError(err); }
      after();
    } }, input, ...controls, button);
  const actions = h("div", { class: "actions task-actions" },
    textForm(goalInput, "goals", "goal", h("button", { type: "submit", "data-testid": "send-goal", text: "Send goal" }), refresh,
      () => ({ if_busy: ifBusy.value }), ifBusy),
    textForm(injectInput, "inject", "text", h("button", { type: "submit", class: "quiet", text: "Inject" })),
    h("button", { type: "button", class: "quiet", "data-testid": "close", onclick: async () => {
      try { await post(`/tasks/${encodeURIComponent(taskId)}/close`); refresh(); } catch (err) { showError(err); }
    }, text: "Close" }),
    h("button", { type: "button", class: "deny", "data-testid": "cancel", onclick: async () => {
      if (!confirm("Cancel this task?")) return;
      try { await post(`/tasks/${encodeURIComponent(taskId)}/cancel`); refresh(); } catch (err) { showError(err); }
    }, text: "Cancel" }));

  const callRows = new Map();
  function callRow(p) {
    let row = callRows.get(p.call_id);
    if (!row) {
      row = { call: h("td", {}, ranCall(p.tool_name, p.arguments)), state: h("td", {}), output: h("pre", {}), tr: null };
      row.tr = h("tr", { "data-call": p.call_id }, h("td", { class: "mono", text: p.call_id }), row.call, row.state, h("td", {}, row.output));
      callRows.set(p.call_id, row);
      calls.append(row.tr);
    }
    return row;
  }

  let running = true;
  async function refresh() {
    try {
      const task = await get(`/tasks/${encodeURIComponent(taskId)}`);
      running = task.running;
      title.textContent = task.goal || task.task_id;
      const usage = task.result ? task.result.usage : null;
      meta.replaceChildren(...[badge(task.status),
        h("span", { text: `model ${task.model || "default"}` }),
        h("span", { "data-testid": "usage", text: `turns ${task.turns} · tokens ${task.tokens_in} in / ${task.tokens_out} out` }),
        usage ? h("span", { class: "muted", text: `cache read ${usage.cache_read} · write ${usage.cache_write}` }) : null,
        h("span", { class: "muted mono", text: task.task_id }), forkOf(task), scheduledBy(task), versionOf(task),
        task.started ? h("span", { class: "muted", text: `started ${when(task.started)}` }) : null,
        task.closed ? h("span", { class: "muted", "data-testid": "ended", text: `ended ${when(task.closed)}` }) : null,
        h("span", { "data-testid": "cost", text: `cost ${dollars(task.cost_usd)}` }),
        uiLink(task)].filter(Boolean));
      details.hidden = !task.current_details;
      details.replaceChildren(...markdownLite(task.current_details || ""));
      actions.hidden = !task.running;
      if (task.result) {
        answer.hidden = false;
        answer.replaceChildren(h("b", { text: `answer (${task.result.status})` }), h("p", { text: task.result.answer }));
      } else if (task.error) {
        answer.hidden = false;
        answer.replaceChildren(h("b", { class: "error", text: task.error.error }), h("p", { text: task.error.message }));
      } else answer.hidden = true;
      const waiting = task.running ? await get(`/tasks/${encodeURIComponent(taskId)}/approvals`) : [];
      approvals.replaceChildren(...waiting.map((r) => approvalCard(taskId, r, refresh)));
      const items = await get(`/tasks/${encodeURIComponent(taskId)}/messages`);
      conversation.replaceChildren(...items.map(renderMessage));
      const acts = await get(`/tasks/${encodeURIComponent(taskId)}/audit`);
      audit.replaceChildren(...acts.map((a) => h("li", { "data-action": a.action },
        h("span", { class: "muted", text: when(a.at) }), h("span", { class: "etype", text: a.action }),
        h("span", { text: `${a.who} (${a.via})${a.call_id ? ` [${a.call_id}]` : ""}` }),
        a.detail ? h("span", { class: "muted", text: short(a.detail, 80) }) : null)));
      for (const item of items) {
        if (item.type === "ToolResultView" && callRows.has(item.call_id)) callRows.get(item.call_id).output.textContent = item.output || "";
        // The table shows the call as it ran: an approver's edit replaces what the model proposed.
        if (item.type === "ToolUse" && item.proposed_arguments && callRows.has(item.call_id)) {
          callRows.get(item.call_id).call.replaceChildren(ranCall(item.tool_name, item.arguments, item.proposed_arguments));
        }
      }
      banner("");
    } catch (err) {
      showError(err);
    }
  }

  let pending = null;
  function refreshSoon() {
    if (pending) return;
    pending = setTimeout(() => { pending = null; refresh(); }, 150);
  }

  let turn = null; // the model turn under way (its ProviderCallStarted), forkable once it completes
  const stopEvents = follow(`/tasks/${encodeURIComponent(taskId)}/events`, (type, env) => {
    const line = eventLine(env);
    events.append(line);
    const p = env.payload || {};
    if (type === "ProviderCallStarted") turn = p.turn;
    if (type === "ProviderCallCompleted" && turn) line.append(forkAction(taskId, turn));
    if (type === "TaskForked") line.append(h("a", { href: taskHref(p.source_task_id), "data-testid": "forked-from", text: `from ${p.source_task_id} at turn ${p.turn}` }));
    if (type === "ToolCallProposed") {
      const row = callRow(p);
      row.state.replaceChildren(badge("proposed"));
      row.proposed = json(p.arguments);
      row.proposedArgs = p.arguments;
    }
    if (type === "ToolCallStarted") {
      const row = callRow(p);
      row.state.replaceChildren(badge("running"));
      if (json(p.arguments) !== row.proposed) row.call.replaceChildren(ranCall(p.tool_name, p.arguments, row.proposedArgs));
    }
    if (type === "ToolCallCompleted") callRow(p).state.replaceChildren(badge(p.success ? "completed" : "failed"));
    if (type === "ToolCallFailed") { callRow(p).state.replaceChildren(badge("failed")); callRow(p).output.textContent = p.error; }
    if (type === "ToolCallRefused") { callRow(p).state.replaceChildren(badge("refused")); callRow(p).output.textContent = p.reason; }
    if (type === "ProviderCallCompleted") live.hidden = true;
    if (type === "GoalInterrupted") {  // its calls still running were cancelled, or their results left unused
      for (const row of callRows.values()) if (row.state.textContent === "running") row.state.replaceChildren(badge("interrupted"));
    }
    refreshSoon();
  }, { onError: showError });
  cleanup.push(stopEvents);

  const stopDeltas = follow(`/tasks/${encodeURIComponent(taskId)}/deltas`, (type, delta) => {
    if (type !== "delta" || delta.kind !== "text") return;
    if (live.dataset.call !== `${delta.call_id}/${delta.attempt}`) {
      live.dataset.call = `${delta.call_id}/${delta.attempt}`;
      live.textContent = "";
    }
    live.hidden = false;
    live.textContent += delta.text;
  });  // a reconnect resumes after the last piece shown (Last-Event-ID), so none shows twice
  cleanup.push(stopDeltas);

  refresh();
  every(4000, () => { if (running) refresh(); });

  return h("section", {},
    h("p", {}, h("a", { href: "#/", text: "← tasks" })),
    title, meta, details, approvals, answer, actions,
    h("div", { class: "columns" },
      h("div", {}, h("h2", { text: "Conversation" }), live, conversation,
        h("h2", { text: "Tool calls" }),
        h("table", { class: "calls" }, h("thead", {}, h("tr", {}, ["Call", "Tool", "State", "Output"].map((t) => h("th", { text: t })))), calls)),
      h("div", {}, h("h2", { text: "Events" }), events, h("h2", { text: "Audit" }), audit)));
}

// -- router ---------------------------------------------------------------------------------------------

function route() {
  for (const stop of cleanup) stop();
  cleanup = [];
  banner("");
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, search = ""] = hash.split("?");
  const params = new URLSearchParams(search);
  let page = "tasks";
  let content;
  if (path.startsWith("/tasks/")) {
    content = taskView(decodeURIComponent(path.slice("/tasks/".length)));
    page = "";
  } else if (path === "/approvals") {
    content = approvalsView();
    page = "approvals";
  } else if (path === "/schedules") {
    content = schedulesView({ h, keepLoading, showError, when, taskHref, badge });
    page = "schedules";
  } else if (path === "/new") {
    content = newTaskView();
    page = "new";
  } else {
    content = tasksView(params);
  }
  for (const link of document.querySelectorAll("[data-nav]")) link.classList.toggle("active", link.dataset.nav === page);
  view.replaceChildren(content);
  refreshApprovalCount();
}

window.addEventListener("hashchange", route);
setInterval(refreshApprovalCount, 10000);
route();
