// A FIFO queue's groups (GET .../groups): the largest and those with the oldest heads as the
// maintenance leader last counted them, and those a receive holds now with their lease's age.

import { age, count, h, notice, time } from "./dom.js";

function table(id, caption, head, rows) {
  if (rows.length === 0) return notice("None.");
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      { class: "data", id },
      h("caption", { class: "visually-hidden" }, caption),
      h("thead", {}, h("tr", {}, head.map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows),
    ),
  );
}

function headCells(g) {
  const head = g.head;
  if (!head) return [h("td", {}, "—"), h("td", {}, "none left")];
  const state = head.state === "in_flight" ? "in flight" : "waiting";
  return [h("td", { class: "num", "data-field": "head-age" }, age(head.age_seconds)), h("td", {}, state)];
}

function counted(id, caption, groups) {
  return table(
    id,
    caption,
    ["Group", "Messages (at the count)", "Head's age", "Head"],
    groups.map((g) =>
      h(
        "tr",
        { "data-group": g.group_id },
        h("th", { scope: "row" }, g.group_id),
        h("td", { class: "num", "data-field": "messages" }, count(g.messages)),
        headCells(g),
      ),
    ),
  );
}

export function groupsSection(groups) {
  const when = groups.counted_at
    ? `Largest and oldest as counted at ${time(groups.counted_at)} (${count(groups.group_count)} groups held messages); ` +
      "heads and leases as they are now."
    : "Not counted yet: the maintenance leader counts every queue's groups in its metrics rounds. Leases as they are now.";
  return [
    h("h2", { id: "groups-title" }, "Groups"),
    h("p", { class: "hint", id: "groups-counted" }, when),
    h("h3", {}, "Holding the most messages"),
    counted("groups-largest", "The groups holding the most messages", groups.largest),
    h("h3", {}, "Oldest heads"),
    counted("groups-oldest", "The groups whose first message was sent first", groups.oldest),
    h("h3", {}, "In flight"),
    table(
      "groups-in-flight",
      "The groups a receive holds, longest held first",
      ["Group", "Messages in flight", "Lease age", "Lease ends"],
      groups.in_flight.map((g) =>
        h(
          "tr",
          { "data-group": g.group_id },
          h("th", { scope: "row" }, g.group_id),
          h("td", { class: "num", "data-field": "messages" }, count(g.messages)),
          h("td", { class: "num", "data-field": "lease-age" }, age(g.lease_age_seconds)),
          h("td", {}, time(g.lease_expires_at)),
        ),
      ),
    ),
  ];
}
