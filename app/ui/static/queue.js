// A queue's page (#/queue/NAME), or the same queue seen as a dead-letter queue (#/dlq/NAME):
// its counts and attributes, a peek at its next messages (GET .../messages, the peek:
// nothing is received), a test send, and for an admin purge, and redrive on a dead-letter queue
// (all of it, one source queue's, or on a FIFO one a group's), each confirmation counting what it
// will move; links to the queue's history (history.js).
// Looking needs `read` (admin implies it); each action shows only when the key's grants allow it
// (a read key sees the numbers and no action); the API refuses the rest anyway.

import { ApiError, call, q } from "./api.js";
import { activity } from "./chart.js";
import { age, confirmDialog, count, h, json, notice, time } from "./dom.js";
import { groupsSection } from "./groups.js";
import { grantsList, queueLink } from "./queues.js";
import { allows } from "./scopes.js";

const PEEK = 20;

function attributes(queue) {
  const dl = queue.dead_letter;
  const rows = [
    ["Kind", queue.fifo ? "FIFO" : "standard"],
    ["Visibility timeout", queue.visibility_timeout + " s"],
    ["Delay", queue.delay_seconds + " s"],
    ["Retention", age(queue.retention_seconds)],
    ["Largest message", count(queue.max_message_bytes) + " bytes"],
    ["Receive wait", queue.receive_wait_seconds + " s"],
    ["Content-based deduplication", queue.content_based_deduplication ? "yes" : "no"],
    ["Deduplication scope", queue.deduplication_scope],
    ["Dead-letter queue", dl ? h("span", {}, queueLink(dl.queue, true), ` after ${dl.max_receive_count} receives`) : "—"],
    ["May be the DLQ of", queue.dead_letter_for === null ? "any queue" : queue.dead_letter_for.join(", ") || "no queue"],
    ["Created", time(queue.created_at)],
    ["Changed", time(queue.updated_at)],
  ];
  return h("dl", { class: "attributes", id: "attributes" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function stats(s) {
  const items = [
    ["visible", "Visible", count(s.visible)],
    ["in_flight", "In flight", count(s.in_flight)],
    ["delayed", "Delayed", count(s.delayed)],
    ["oldest", "Oldest", age(s.oldest_age_seconds)],
  ];
  return items.map(([key, label, value]) =>
    h("div", { class: "stat" }, h("span", { class: "label" }, label), h("span", { class: "value", "data-stat": key }, value)),
  );
}

function peekTable(messages, dlq) {
  if (messages.length === 0) return notice("No messages.");
  const head = ["#", "Group", "State", "Receives", "Sent", "Body", "Last error"];
  if (dlq) head.push("From");
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      { class: "data", id: "peek" },
      h("caption", { class: "visually-hidden" }, "Next messages, looked at without receiving them"),
      h("thead", {}, h("tr", {}, head.map((t) => h("th", { scope: "col" }, t)))),
      h(
        "tbody",
        {},
        messages.map((m) =>
          h(
            "tr",
            { "data-message": m.message_id },
            h("td", { class: "num" }, m.sequence_number),
            h("td", {}, m.group_id ?? "—"),
            h("td", {}, m.state === "in_flight" ? "in flight" : m.state),
            h("td", { class: "num", "data-field": "receive_count" }, m.receive_count),
            h("td", {}, time(m.sent_at)),
            h("td", {}, h("code", {}, json(m.body))),
            h("td", { "data-field": "last_error" }, m.last_error === null ? "—" : h("code", {}, json(m.last_error))),
            dlq ? h("td", {}, m.source_queue ?? "—") : null,
          ),
        ),
      ),
    ),
  );
}

function sendForm(name, fifo, done) {
  const body = h("textarea", { id: "send-body", rows: "3", spellcheck: "false" }, '{"test": true}');
  const group = fifo ? h("input", { id: "send-group", value: "test", autocomplete: "off" }) : null;
  const result = h("div", { id: "send-result" });
  const form = h(
    "form",
    { id: "send", class: "card", "aria-labelledby": "send-title" },
    h("h2", { id: "send-title" }, "Send a test message"),
    h("label", { for: "send-body" }, "Body (JSON)"),
    body,
    fifo ? [h("label", { for: "send-group" }, "Group id"), group] : null,
    h("button", { type: "submit", class: "primary", "data-action": "send" }, "Send"),
    result,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let parsed;
    try {
      parsed = JSON.parse(body.value);
    } catch {
      result.replaceChildren(notice("The body is not JSON.", "error"));
      return;
    }
    const message = { body: parsed };
    if (fifo) message.group_id = group.value;
    try {
      const sent = await call("POST", q(name) + "/messages", { body: message });
      result.replaceChildren(notice(`Sent: message ${sent.message_id}${sent.duplicate ? " (a duplicate)" : ""}.`));
      done();
    } catch (err) {
      result.replaceChildren(notice(err.message, "error"));
    }
  });
  return form;
}

// The attributes an admin may change here, as PATCH takes them (the API checks their bounds).
const EDITABLE = [
  ["visibility_timeout", "Visibility timeout (s)"],
  ["delay_seconds", "Delay (s)"],
  ["retention_seconds", "Retention (s)"],
  ["max_message_bytes", "Largest message (bytes)"],
  ["receive_wait_seconds", "Receive wait (s)"],
];

// The dead-letter settings (a queue's name, empty for none, and the receives before a message
// moves there) and, on a FIFO queue, deduplication: the other attributes PATCH changes.
function extraFields(queue) {
  const dl = queue.dead_letter;
  const fields = {
    dlq: h("input", { id: "edit-dead-letter", value: dl ? dl.queue : "", autocomplete: "off", spellcheck: "false" }),
    receives: h("input", {
      id: "edit-max-receives", inputmode: "numeric", value: dl ? dl.max_receive_count : "", autocomplete: "off",
    }),
    dedup: queue.fifo ? h("input", { id: "edit-content-dedup", type: "checkbox" }) : null,
    scope: queue.fifo
      ? h("select", { id: "edit-dedup-scope" }, ["queue", "group"].map((v) => h("option", { value: v }, v)))
      : null,
  };
  if (fields.dedup) fields.dedup.checked = queue.content_based_deduplication;
  if (fields.scope) fields.scope.value = queue.deduplication_scope;
  return fields;
}

function editForm(name, queue, done) {
  const inputs = EDITABLE.map(([field, label]) => [
    field,
    label,
    h("input", { id: "edit-" + field, name: field, inputmode: "numeric", value: queue[field], autocomplete: "off" }),
  ]);
  const extra = extraFields(queue);
  const result = h("div", { id: "edit-result" });
  const form = h(
    "form",
    { id: "edit", class: "card", "aria-labelledby": "edit-title" },
    h("h2", { id: "edit-title" }, "Change attributes"),
    h(
      "div",
      { class: "fields" },
      inputs.map(([field, label, input]) => h("div", {}, h("label", { for: "edit-" + field }, label), input)),
      h("div", {}, h("label", { for: "edit-dead-letter" }, "Dead-letter queue (empty: none)"), extra.dlq),
      h("div", {}, h("label", { for: "edit-max-receives" }, "Receives before it moves there"), extra.receives),
      extra.scope ? h("div", {}, h("label", { for: "edit-dedup-scope" }, "Deduplication scope"), extra.scope) : null,
    ),
    extra.dedup
      ? h("div", { class: "checks" }, h("div", {}, extra.dedup, h("label", { for: "edit-content-dedup" }, "Content-based deduplication")))
      : null,
    h("button", { type: "submit", class: "primary", "data-action": "edit" }, "Save"),
    result,
  );
  const refuse = (text, input) => {
    result.replaceChildren(notice(text, "error"));
    input.focus();
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const changes = {};
    for (const [field, label, input] of inputs) {
      const text = input.value.trim();
      if (!/^-?\d+$/.test(text)) return refuse(`${label}: a whole number, please.`, input);
      if (Number(text) !== queue[field]) changes[field] = Number(text);
    }
    const dl = queue.dead_letter;
    const dlq = extra.dlq.value.trim();
    if (dlq) {
      const text = extra.receives.value.trim();
      if (!/^\d+$/.test(text)) return refuse("Receives before it moves there: a whole number, please.", extra.receives);
      if (!dl || dl.queue !== dlq || dl.max_receive_count !== Number(text)) {
        changes.dead_letter = { queue: dlq, max_receive_count: Number(text) };
      }
    } else if (dl) {
      changes.dead_letter = null; // an empty name removes the dead-letter queue
    }
    if (extra.dedup && extra.dedup.checked !== queue.content_based_deduplication) {
      changes.content_based_deduplication = extra.dedup.checked;
    }
    if (extra.scope && extra.scope.value !== queue.deduplication_scope) changes.deduplication_scope = extra.scope.value;
    if (Object.keys(changes).length === 0) {
      result.replaceChildren(notice("Nothing changed."));
      return;
    }
    try {
      const changed = await call("PATCH", q(name), { body: changes });
      Object.assign(queue, changed);
      result.replaceChildren(notice("Saved: " + Object.keys(changes).join(", ") + "."));
      done();
    } catch (err) {
      result.replaceChildren(notice(err.message, "error"));
    }
  });
  return form;
}

// A button for an action behind a confirmation (purge, redrive): ask() gives (or resolves to) the
// dialog's title, text and confirming label as the numbers are now, null for nothing to ask;
// then POST path() with body(), tell the outcome in `message`, and refresh the page's numbers
// either way.
function confirmedPost({ attrs, label, path, body = () => undefined, ask, told, message, refresh }) {
  const button = h("button", { type: "button", ...attrs }, label);
  button.addEventListener("click", async () => {
    try {
      const question = await ask();
      if (question === null || !(await confirmDialog(...question))) return;
      message.replaceChildren(notice(told(await call("POST", path(), { body: body() }))));
    } catch (err) {
      message.replaceChildren(notice(err.message, "error"));
    }
    refresh();
  });
  return button;
}

// How many dead letters a redrive (of `only`: {group_id}, or all) would move now: the redrive's
// own dry run, so the confirmation counts what the redrive will pick.
async function wouldMove(name, only) {
  return (await call("POST", q(name) + "/redrive", { body: { ...only, dry_run: true } })).count;
}

function plural(n) {
  return `${count(n)} ${n === 1 ? "message" : "messages"}`;
}

// The parts of a dead-letter queue's messages a redrive can take alone (the redrive body's
// fields), as the page words them: a FIFO queue's group, or the messages from one source queue.
const SUBSETS = {
  group: { field: "group_id", what: "group id", ask: "Which group? Type its id first.", of: (v) => `of group ${v}` },
  source: {
    field: "source_queue",
    what: "queue name",
    ask: "Which source queue? Type its name first.",
    of: (v) => `from ${v}`,
  },
};

// On a dead-letter queue: redrive one group's messages, or one source queue's, after a
// confirmation that counts them. `choices`: the names to offer (a datalist; any other may be
// typed), or null.
function subsetRedrive(name, kind, message, refresh, choices = null) {
  const { field, what, ask, of } = SUBSETS[kind];
  const list = choices && h("datalist", { id: `redrive-${kind}s` });
  const input = h("input", { id: `redrive-${kind}`, autocomplete: "off", spellcheck: "false", list: list && list.id });
  const only = () => ({ [field]: input.value.trim() });
  const button = confirmedPost({
    attrs: { class: "primary", "data-action": `redrive-${kind}` },
    label: `Redrive ${kind}…`,
    path: () => q(name) + "/redrive",
    body: only,
    ask: async () => {
      const value = only()[field];
      if (!value) {
        message.replaceChildren(notice(ask, "error"));
        input.focus();
        return null;
      }
      const n = await wouldMove(name, only());
      const back = kind === "source" ? value : "the queues they came from";
      return [
        `Redrive ${kind} ${value}?`,
        `Move ${plural(n)} ${of(value)} back to ${back}, in order.`,
        `Redrive ${count(n)}`,
      ];
    },
    told: (done) => `Redrove ${count(done.count)} messages ${of(only()[field])}.`,
    message,
    refresh,
  });
  if (choices) choices.then((names) => list.replaceChildren(...names.map((n) => h("option", { value: n }))));
  return h(
    "div",
    { class: "card", id: `redrive-one-${kind}` },
    h("label", { for: input.id }, `Redrive one ${kind}: ${what}`),
    input,
    list,
    button,
  );
}

// The queues whose dead-letter queue is `name`: where its messages came from (unless a queue's
// setting changed since). Read from the listing, which needs read on every queue; a page of
// LIST_PAGE at a time, at most LIST_PAGES pages. Nothing on a failure: the name can be typed.
const LIST_PAGE = 1000;
const LIST_PAGES = 10;
async function sourcesOf(name) {
  const found = [];
  let after = "";
  try {
    for (let page = 0; page < LIST_PAGES; page++) {
      const listed = await call("GET", `/v1/queues?limit=${LIST_PAGE}&after=${encodeURIComponent(after)}`);
      found.push(...listed.queues.filter((queue) => queue.dead_letter?.queue === name).map((queue) => queue.name));
      if (listed.next_after === null) break;
      after = listed.next_after;
    }
  } catch {
    // The datalist stays as it is: a suggestion, nothing depends on it.
  }
  return found;
}

// The last hour's chart, and the groups of a FIFO queue (`groups` null for a standard one).
async function refreshActivity(name, charts, groups) {
  const hour = await call("GET", q(name) + "/throughput?minutes=60");
  charts.replaceChildren(h("h2", { id: "activity-title" }, "The last hour"), activity(hour.minutes));
  if (groups) groups.replaceChildren(...groupsSection(await call("GET", q(name) + "/groups?limit=10")));
}

export function queuePage(ctx, name, dlq) {
  const looks = allows(ctx.grants, "read", name);
  const admin = allows(ctx.grants, "admin", name);
  const maySend = allows(ctx.grants, "send", name);
  const title = h("h1", {}, dlq ? "Dead letters: " : "Queue ", h("span", { class: "name" }, name));
  const message = h("div", { class: "message", id: "message" });
  const numbers = h("div", { class: "stats", id: "stats" });
  const attrs = h("section", { "aria-labelledby": "attributes-title" }, h("h2", { id: "attributes-title" }, "Attributes"));
  const peek = h("section", { "aria-labelledby": "peek-title" });
  // The activity chart, and a FIFO queue's groups (chart.js, groups.js).
  const charts = h("section", { "aria-labelledby": "activity-title", id: "activity" });
  const groups = name.endsWith(".fifo") ? h("section", { "aria-labelledby": "groups-title", id: "groups" }) : null;
  const actions = h("div", { class: "actions" });
  let current = null; // the queue as last read

  if (!looks) {
    ctx.show(
      title,
      notice("This key may not look at this queue: its counts, attributes and messages need read (or admin) on it."),
      h("h2", {}, "This key may"),
      grantsList(ctx.grants),
      maySend ? sendForm(name, name.endsWith(".fifo"), () => {}) : null,
    );
    return;
  }

  // The actions: only for a key that administers this queue.
  const editing = h("div");
  // A dead-letter queue's sources, to offer in its redrive of one source (listing needs read on *).
  const sources = admin && dlq && allows(ctx.grants, "read", null) ? sourcesOf(name) : Promise.resolve([]);
  if (admin) {
    const purge = confirmedPost({
      attrs: { class: "danger", "data-action": "purge" },
      label: "Purge…",
      path: () => q(name) + "/purge",
      ask: () => {
        const n = current ? current.stats.visible + current.stats.in_flight + current.stats.delayed : 0;
        return [
          "Purge " + name + "?",
          `Remove every message of ${name} (${count(n)} now). They are recorded in history as purged.`,
          `Purge ${count(n)} messages`,
        ];
      },
      told: (done) => `Purged ${count(done.count)} messages.`,
      message,
      refresh: () => ctx.live.now(),
    });
    actions.append(purge);
    const edit = h("button", { type: "button", "data-action": "edit", "aria-expanded": "false" }, "Change attributes");
    edit.addEventListener("click", () => {
      const open = edit.getAttribute("aria-expanded") === "true";
      edit.setAttribute("aria-expanded", String(!open));
      editing.replaceChildren(open || !current ? "" : editForm(name, { ...current }, () => ctx.live.now()));
      if (!open && current) editing.querySelector("input").focus();
    });
    actions.append(edit);
    if (dlq) {
      const redrive = confirmedPost({
        attrs: { class: "primary", "data-action": "redrive" },
        label: "Redrive…",
        path: () => q(name) + "/redrive",
        ask: async () => {
          const n = await wouldMove(name, {});
          return [
            "Redrive " + name + "?",
            `Move ${plural(n)} (the ones ready now) back to the queues they came from, in order.`,
            `Redrive ${count(n)}`,
          ];
        },
        told: (done) => `Redrove ${count(done.count)} messages.`,
        message,
        refresh: () => ctx.live.now(),
      });
      actions.append(redrive);
    }
  }

  const links = [
    dlq ? h("a", { href: "#/queue/" + encodeURIComponent(name) }, "As a queue") : null,
    h("a", { href: "#/history/" + encodeURIComponent(name) }, "History"),
  ].filter(Boolean);
  ctx.show(
    h("div", { class: "toolbar" }, title, h("div", { class: "live-controls" }, ctx.live.controls(h))),
    h("p", { class: "links" }, links.flatMap((link, i) => (i ? [" · ", link] : [link]))),
    message,
    numbers,
    actions,
    admin && dlq && name.endsWith(".fifo") ? subsetRedrive(name, "group", message, () => ctx.live.now()) : null,
    admin && dlq ? subsetRedrive(name, "source", message, () => ctx.live.now(), sources) : null,
    editing,
    charts,
    groups,
    peek,
    // A test message belongs in a queue a consumer reads, not among the dead letters.
    maySend && !dlq ? sendForm(name, name.endsWith(".fifo"), () => ctx.live.now()) : null,
    attrs,
  );

  ctx.live.start(async () => {
    try {
      current = await call("GET", q(name));
      numbers.replaceChildren(...stats(current.stats));
      attrs.replaceChildren(h("h2", { id: "attributes-title" }, "Attributes"), attributes(current));
      const found = await call("GET", q(name) + "/messages?limit=" + PEEK);
      peek.replaceChildren(
        h("h2", { id: "peek-title" }, dlq ? "Dead letters (peek)" : "Next messages (peek)"),
        h("p", { class: "hint" }, `Up to ${PEEK}, looked at without receiving them: nothing changes.`),
        peekTable(found.messages, dlq),
      );
      await refreshActivity(name, charts, groups);
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return ctx.signedOut();
      message.replaceChildren(notice(err.message, "error"));
    }
  });
}
