// The console's schedules page: every schedule of the key's tenant with its timing, next run,
// paused state and recent runs (links to their tasks), and pause / unpause / run-now buttons.
// The page's helpers (element builder, the list loader, the error banner) are app.js's, handed in; every
// server value is set as text, never as HTML.
import { get, post } from "./api.js";

export function schedulesView({ h, keepLoading, showError, when, taskHref, badge }) {
  const rows = h("tbody", { "data-testid": "schedule-rows" });
  const note = h("p", { class: "muted" });

  async function act(id, action) {
    try {
      await post(`/schedules/${encodeURIComponent(id)}/${action}`);
      await load();
    } catch (err) {
      showError(err);
    }
  }

  function row(s) {
    const runs = (s.recent_runs || []).slice(-3).reverse(); // the newest first
    const toggle = s.paused ? "unpause" : "pause";
    return h("tr", { "data-schedule": s.schedule_id },
      h("td", {}, h("div", { class: "mono", text: s.schedule_id }), h("div", { class: "muted", text: s.goal || "" })),
      h("td", { class: "mono", text: s.timing }),
      h("td", { "data-testid": "state" }, badge(s.paused ? "paused" : "active"), s.note ? h("div", { class: "muted", text: s.note }) : null),
      h("td", { "data-testid": "next-run", text: s.paused ? "—" : when(s.next_runs && s.next_runs[0]) }),
      h("td", {}, runs.length ? h("ul", { class: "runs" }, runs.map((r) => h("li", {},
        h("a", { href: taskHref(r.task_id), class: "mono", "data-testid": "run-link", text: r.task_id }),
        h("span", { class: "muted", text: ` ${when(r.started_at)}` })))) : h("span", { class: "muted", text: "none yet" })),
      h("td", {}, h("div", { class: "actions" },
        h("button", { type: "button", "data-testid": toggle, onclick: () => act(s.schedule_id, toggle), text: s.paused ? "Unpause" : "Pause" }),
        h("button", { type: "button", class: "quiet", "data-testid": "trigger", onclick: () => act(s.schedule_id, "trigger"), text: "Run now" }))));
  }

  const load = keepLoading(async () => {
    const schedules = await get("/schedules");
    rows.replaceChildren(...schedules.map(row));
    note.textContent = schedules.length ? "" : "No schedules: noeta schedule create, or POST /schedules.";
  });
  return h("section", {},
    h("h1", { text: "Schedules" }),
    h("p", { class: "muted", text: "Goals started as tasks on a clock (Temporal Schedules); each run is an ordinary task." }),
    h("table", { class: "tasks" },
      h("thead", {}, h("tr", {}, ["Schedule", "Timing", "State", "Next run", "Recent runs", ""].map((t) => h("th", { text: t })))),
      rows),
    note);
}
