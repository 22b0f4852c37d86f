// A queue's history (#/history/NAME): its finished messages, newest first (GET .../history),
// with how each left, its times and the result or error recorded; filtered by outcome and
// group, one page at a time ("Older" follows the answer's next_before). The page shown is
// refreshed live: the newest page takes in what finishes meanwhile, an older one stays put.

import { ApiError, call, q } from "./api.js";
import { count, h, json, notice, time } from "./dom.js";
import { grantsList } from "./queues.js";
import { allows } from "./scopes.js";

const LIMIT = 20;
// A filtered page looks at this many entries at most (the API's walk): said when it finds none.
const WALK = 5000;
const OUTCOMES = [
  ["", "Any"],
  ["acked", "acked"],
  ["dead_lettered", "dead-lettered"],
  ["expired", "expired"],
  ["purged", "purged"],
];
const LABELS = Object.fromEntries(OUTCOMES.slice(1));

function entriesTable(entries) {
  const head = ["Finished", "Outcome", "#", "Group", "Receives", "Sent", "First received", "Last received",
    "Result", "Error"];
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      { class: "data", id: "history" },
      h("caption", { class: "visually-hidden" }, "Finished messages, newest first"),
      h("thead", {}, h("tr", {}, head.map((t) => h("th", { scope: "col" }, t)))),
      h(
        "tbody",
        {},
        entries.map((e) =>
          h(
            "tr",
            { "data-message": e.message_id },
            h("td", {}, time(e.finished_at)),
            h("td", { "data-field": "outcome" }, LABELS[e.outcome] ?? e.outcome),
            h("td", { class: "num" }, e.sequence_number),
            h("td", {}, e.group_id ?? "—"),
            h("td", { class: "num", "data-field": "receive_count" }, e.receive_count),
            h("td", {}, time(e.sent_at)),
            h("td", {}, time(e.first_received_at)),
            h("td", {}, time(e.last_received_at)),
            h("td", { "data-field": "result" }, e.result === null ? "—" : h("code", {}, json(e.result))),
            h("td", { "data-field": "error" }, e.error === null ? "—" : h("code", {}, json(e.error))),
          ),
        ),
      ),
    ),
  );
}

export function historyPage(ctx, name) {
  const title = h("h1", {}, "History: ", h("span", { class: "name" }, name));
  if (!allows(ctx.grants, "read", name)) {
    ctx.show(
      title,
      notice("This key may not look at this queue's history: it needs read (or admin) on it."),
      h("h2", {}, "This key may"),
      grantsList(ctx.grants),
    );
    return;
  }
  const outcome = h("select", { id: "history-outcome" }, OUTCOMES.map(([v, label]) => h("option", { value: v }, label)));
  const group = h("input", { id: "history-group", autocomplete: "off", spellcheck: "false" });
  const form = h(
    "form",
    { id: "history-filter", class: "toolbar", "aria-label": "Filter the history" },
    h("div", { class: "field" }, h("label", { for: "history-outcome" }, "Outcome"), outcome),
    h("div", { class: "field" }, h("label", { for: "history-group" }, "Group id"), group),
    h("button", { type: "submit", class: "primary" }, "Show"),
  );
  const message = h("div", { class: "message", id: "message" });
  const list = h("section", { "aria-label": "Finished messages" });
  // Shown once a page says there is one further back, or is not the newest.
  const older = h("button", { type: "button", "data-action": "older", hidden: true }, "Older");
  const newest = h("button", { type: "button", "data-action": "newest", hidden: true }, "Newest");
  // What the page shows: the filters as applied, and the cursor (null: the newest page).
  let shown = { outcome: "", group: "", before: null };

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    shown = { outcome: outcome.value, group: group.value.trim(), before: null };
    ctx.live.now();
  });
  newest.addEventListener("click", () => {
    shown = { ...shown, before: null };
    ctx.live.now();
  });

  ctx.show(
    h("div", { class: "toolbar" }, title, h("div", { class: "live-controls" }, ctx.live.controls(h))),
    h("p", {}, h("a", { href: "#/queue/" + encodeURIComponent(name) }, "The queue"), " · ",
      h("a", { href: "#/dlq/" + encodeURIComponent(name) }, "As a dead-letter queue")),
    form,
    message,
    list,
    h("div", { class: "actions" }, newest, older),
  );

  ctx.live.start(async () => {
    const params = new URLSearchParams({ limit: String(LIMIT) });
    if (shown.outcome) params.set("outcome", shown.outcome);
    if (shown.group) params.set("group_id", shown.group);
    if (shown.before !== null) params.set("before", String(shown.before));
    try {
      const page = await call("GET", q(name) + "/history?" + params);
      message.replaceChildren();
      const filtered = shown.outcome || shown.group;
      let empty = "No finished messages" + (filtered ? " match." : " yet.");
      if (page.next_before !== null) empty = `None among the ${count(WALK)} entries looked at: Older looks further back.`;
      list.replaceChildren(
        h("h2", {}, shown.before === null ? "Newest finished messages" : "Older finished messages"),
        page.entries.length ? entriesTable(page.entries) : notice(empty),
      );
      older.hidden = page.next_before === null;
      older.onclick = () => {
        shown = { ...shown, before: page.next_before };
        ctx.live.now();
      };
      newest.hidden = shown.before === null;
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return ctx.signedOut();
      message.replaceChildren(notice(err.message, "error"));
    }
  });
}
