// The queues page: every queue (a page of up to PAGE) with its kind, counts, oldest age and DLQ,
// filtered by name prefix, refreshed live. Listing needs `read` (or `admin`, which implies it) on
// every queue (`*`); the counts are each queue's GET (the list answers attributes only).

import { ApiError, call, q } from "./api.js";
import { sparkline } from "./chart.js";
import { age, count, h, notice } from "./dom.js";
import { allows } from "./scopes.js";

const PAGE = 100;
let prefix = "";
// Each queue's last hour (its sparkline), read again at most every SPARK_MS: per minute figures
// need no 3 s refresh, and a page of 100 queues would otherwise double its requests.
const SPARK_MS = 15000;
const hours = new Map();

async function lastHour(name) {
  const kept = hours.get(name);
  if (kept && performance.now() - kept.at < SPARK_MS) return kept.minutes;
  const { minutes } = await call("GET", q(name) + "/throughput?minutes=60");
  hours.set(name, { at: performance.now(), minutes });
  return minutes;
}

export function grantsList(grants) {
  return h(
    "ul",
    { class: "grants", "aria-label": "What this key may do" },
    grants.map((g) => h("li", {}, h("code", {}, g.queues), ": ", g.actions.join(", "))),
  );
}

export function queueLink(name, dlq = false) {
  return h("a", { href: (dlq ? "#/dlq/" : "#/queue/") + encodeURIComponent(name) }, name);
}

export function queuesPage(ctx) {
  if (!allows(ctx.grants, "read", null)) {
    ctx.show(
      h("h1", {}, "Queues"),
      notice("This key may not list queues: listing needs read (or admin) on every queue (a grant for *)."),
      h("h2", {}, "This key may"),
      grantsList(ctx.grants),
    );
    return;
  }
  const filter = h("input", { id: "prefix", type: "search", value: prefix, autocomplete: "off", spellcheck: "false" });
  filter.addEventListener("input", () => {
    prefix = filter.value;
    ctx.live.now();
  });
  const body = h("tbody");
  const message = h("div", { class: "message" });
  const table = h(
    "table",
    { id: "queues", class: "data" },
    h("caption", { class: "visually-hidden" }, "Queues and their messages"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Name", "Kind", "Visible", "In flight", "Delayed", "Oldest", "Sent / acked, last hour", "Dead-letter queue"].map((t) =>
          h("th", { scope: "col" }, t),
        ),
      ),
    ),
    body,
  );
  ctx.show(
    h(
      "div",
      { class: "toolbar" },
      h("h1", {}, "Queues"),
      h("div", { class: "field" }, h("label", { for: "prefix" }, "Filter by name prefix"), filter),
      h("div", { class: "live-controls" }, ctx.live.controls(h)),
    ),
    message,
    h("div", { class: "scroll" }, table),
  );

  ctx.live.start(async () => {
    try {
      const asked = prefix;
      const list = await call("GET", "/v1/queues?" + new URLSearchParams({ prefix: asked, limit: String(PAGE) }));
      const queues = await Promise.all(list.queues.map((queue) => call("GET", q(queue.name))));
      const byName = new Map(queues.map((queue) => [queue.name, queue]));
      const lines = new Map(await Promise.all(queues.map(async (queue) => [queue.name, await lastHour(queue.name)])));
      if (asked !== prefix) return; // typed on since: the next refresh follows at once
      body.replaceChildren(...queues.map((queue) => row(queue, byName, lines.get(queue.name))));
      message.replaceChildren(
        queues.length === 0 ? notice(asked ? "No queue's name starts with this." : "No queues yet.") : "",
        list.next_after ? notice(`Showing the first ${PAGE} queues: narrow the filter to see others.`) : "",
      );
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return ctx.signedOut();
      message.replaceChildren(notice(err.message, "error"));
    }
  });
}

function row(queue, byName, minutes) {
  const s = queue.stats;
  const dlq = queue.dead_letter;
  let dlqCell = "—";
  if (dlq) {
    const held = byName.get(dlq.queue);
    dlqCell = h(
      "span",
      {},
      queueLink(dlq.queue, true),
      held ? h("span", { class: "badge", "data-dlq-count": dlq.queue }, count(held.stats.visible + held.stats.in_flight + held.stats.delayed)) : "",
    );
  }
  return h(
    "tr",
    { "data-queue": queue.name },
    h("th", { scope: "row" }, queueLink(queue.name)),
    h("td", {}, queue.fifo ? "FIFO" : "standard"),
    h("td", { class: "num", "data-stat": "visible" }, count(s.visible)),
    h("td", { class: "num", "data-stat": "in_flight" }, count(s.in_flight)),
    h("td", { class: "num", "data-stat": "delayed" }, count(s.delayed)),
    h("td", { class: "num", "data-stat": "oldest" }, age(s.oldest_age_seconds)),
    h("td", { "data-stat": "last-hour" }, sparkline(minutes)),
    h("td", {}, dlqCell),
  );
}
