// The keys page (#/keys), for a key that administers every queue (admin on `*`, what /v1/keys
// needs): every key with its grants, a form to make one (its key and SQS secret shown once, in
// this page only: never kept in sessionStorage or put in a URL), and revoke behind a confirmation.
// A key cannot grant more than it holds, nor revoke itself: the API refuses both, and the page
// offers neither where it can tell.

import { ApiError, call } from "./api.js";
import { confirmDialog, h, notice, time } from "./dom.js";
import { grantsList } from "./queues.js";
import { administersAll } from "./scopes.js";

// The actions a grant can hold, as app/access.py names them; admin implies read.
const ACTIONS = [
  ["read", "read (look: counts, attributes, peek)"],
  ["send", "send"],
  ["receive", "receive"],
  ["ack", "ack"],
  ["admin", "admin (change, purge, redrive; implies read)"],
];
const MAX_GRANTS = 20;

function grantRow(index, remove) {
  const id = (field) => `grant-${index}-${field}`;
  const pattern = h("input", {
    id: id("queues"), class: "pattern", value: "*", autocomplete: "off", spellcheck: "false", required: true,
  });
  const boxes = ACTIONS.map(([action]) => h("input", { type: "checkbox", id: id(action), value: action }));
  const row = h(
    "fieldset",
    { class: "grant" },
    h("legend", {}, `Grant ${index + 1}`),
    h("label", { for: id("queues") }, "Queues (a name, or a glob: *, ?, [...])"),
    pattern,
    h(
      "div",
      { class: "checks" },
      ACTIONS.map(([action, label], i) => h("div", {}, boxes[i], h("label", { for: id(action) }, label))),
    ),
    remove ? h("button", { type: "button", onclick: () => remove(row) }, "Remove grant") : null,
  );
  row.read = () => ({ queues: pattern.value.trim(), actions: boxes.filter((b) => b.checked).map((b) => b.value) });
  return row;
}

// The answer of a create, shown once: nothing else holds the key or the secret.
function shownOnce(made) {
  const field = (id, label, value) => [
    h("label", { for: id }, label),
    h("input", { id, value, readonly: true, autocomplete: "off", spellcheck: "false", onfocus: (e) => e.target.select() }),
  ];
  return h(
    "section",
    { class: "card secret", id: "new-key", "aria-labelledby": "new-key-title" },
    h("h2", { id: "new-key-title" }, `Key ${made.api_key.key_id} (${made.api_key.name}) made`),
    notice("Copy it now (select the field, then Ctrl+C): it is shown this once and stored nowhere."),
    field("new-key-value", "API key (Authorization: Bearer)", made.key),
    field("new-key-sqs-id", "SQS access key id", made.api_key.key_id),
    field("new-key-sqs-secret", "SQS secret access key", made.sqs_secret_access_key),
  );
}

function createForm(done) {
  const name = h("input", { id: "key-name", autocomplete: "off", spellcheck: "false", required: true });
  const grants = h("div", { class: "grants-form" });
  let next = 0;
  const remove = (row) => row.remove();
  const add = () => {
    if (grants.children.length >= MAX_GRANTS) return;
    grants.append(grantRow(next, next === 0 ? null : remove));
    next += 1;
  };
  add();
  const result = h("div", { id: "create-result" });
  const form = h(
    "form",
    { id: "create-key", class: "card", "aria-labelledby": "create-key-title" },
    h("h2", { id: "create-key-title" }, "Make a key"),
    h("label", { for: "key-name" }, "Name (who or what uses it)"),
    name,
    grants,
    h("div", { class: "actions" },
      h("button", { type: "button", onclick: add }, "Add a grant"),
      h("button", { type: "submit", class: "primary", "data-action": "create-key" }, "Make the key")),
    result,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { name: name.value.trim(), grants: [...grants.children].map((row) => row.read()) };
    if (!body.name) return result.replaceChildren(notice("Give the key a name.", "error"));
    if (body.grants.some((g) => g.actions.length === 0)) {
      return result.replaceChildren(notice("Each grant needs at least one action.", "error"));
    }
    try {
      const made = await call("POST", "/v1/keys", { body });
      result.replaceChildren(shownOnce(made));
      name.value = ""; // a fresh form: the next key starts from nothing granted
      grants.replaceChildren();
      next = 0;
      add();
      done();
    } catch (err) {
      result.replaceChildren(notice(err.message, "error"));
    }
  });
  return form;
}

function keyRow(key, own, revoke) {
  const status = key.revoked_at ? "revoked " + time(key.revoked_at) : "active";
  let action = "—";
  if (own) action = "this key";
  else if (!key.revoked_at) {
    action = h("button", { type: "button", class: "danger", "data-action": "revoke", onclick: () => revoke(key) }, "Revoke…");
  }
  return h(
    "tr",
    { "data-key": key.key_id },
    h("th", { scope: "row" }, h("code", {}, key.key_id)),
    h("td", {}, key.name),
    h("td", {}, grantsList(key.grants)),
    h("td", {}, time(key.created_at)),
    h("td", { "data-field": "status" }, status),
    h("td", {}, key.signs_sqs ? "yes" : "no"),
    h("td", {}, action),
  );
}

export function keysPage(ctx) {
  if (!administersAll(ctx.grants)) {
    ctx.show(
      h("h1", {}, "Keys"),
      notice("This key may not manage keys: that needs admin on every queue (a grant for *)."),
      h("h2", {}, "This key may"),
      grantsList(ctx.grants),
    );
    return;
  }
  const message = h("div", { class: "message", id: "message" });
  const body = h("tbody");
  const table = h(
    "table",
    { id: "keys", class: "data" },
    h("caption", { class: "visually-hidden" }, "API keys"),
    h("thead", {}, h("tr", {}, ["Id", "Name", "Grants", "Made", "Status", "SQS", ""].map((t) => h("th", { scope: "col" }, t)))),
    body,
  );

  async function load() {
    try {
      const { keys } = await call("GET", "/v1/keys");
      body.replaceChildren(...keys.map((key) => keyRow(key, key.key_id === ctx.keyId, revoke)));
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return ctx.signedOut();
      message.replaceChildren(notice(err.message, "error"));
    }
  }

  async function revoke(key) {
    const ask = [
      `Revoke key ${key.key_id}?`,
      `Requests with key ${key.key_id} (${key.name}) are refused from now on, by this server at once and by ` +
        "other server processes within their key cache time. It cannot be undone.",
      "Revoke " + key.key_id,
    ];
    if (!(await confirmDialog(...ask))) return;
    try {
      await call("DELETE", "/v1/keys/" + encodeURIComponent(key.key_id));
      message.replaceChildren(notice(`Revoked key ${key.key_id} (${key.name}).`));
    } catch (err) {
      message.replaceChildren(notice(err.message, "error"));
    }
    load();
  }

  ctx.show(
    h("h1", {}, "Keys"),
    h("p", { class: "hint" }, "A key made here holds at most what this key holds; a key cannot revoke itself."),
    message,
    h("div", { class: "scroll" }, table),
    createForm(load),
  );
  load();
}
