// The dashboard: sign-in, then pages chosen by the URL's fragment (#/queues, #/queue/NAME,
// #/dlq/NAME, #/keys, #/history/NAME). The key stays in sessionStorage and goes out only in the Authorization header.

import { ApiError, call, forgetKey, keepKey, storedKey } from "./api.js";
import { h, notice } from "./dom.js";
import { historyPage } from "./history.js";
import { keysPage } from "./keys.js";
import { Live } from "./live.js";
import { queuePage } from "./queue.js";
import { queuesPage } from "./queues.js";
import { administersAll } from "./scopes.js";

const live = new Live();
const main = () => document.getElementById("main");
// The signed-in key as the API describes it (GET /v1/keys/self): {key_id, grants}.
let self = null;

function show(...children) {
  main().replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

function signInPage(message) {
  live.stop();
  document.getElementById("nav").hidden = true;
  const input = h("input", {
    id: "api-key", name: "api-key", type: "password", autocomplete: "off", spellcheck: "false", required: true,
    placeholder: "pqs_…",
  });
  const error = h("div", { id: "sign-in-error" });
  if (message) error.append(notice(message, "error"));
  const form = h(
    "form",
    { id: "sign-in", class: "card narrow", "aria-labelledby": "sign-in-title" },
    h("h1", { id: "sign-in-title" }, "Sign in"),
    h("p", {}, "An API key (pqs keys create). It is kept in this tab only (sessionStorage) and sent in a header."),
    h("label", { for: "api-key" }, "API key"),
    input,
    error,
    h("button", { type: "submit", class: "primary" }, "Sign in"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault(); // the key must never reach a URL
    const key = input.value.trim();
    try {
      self = await call("GET", "/v1/keys/self", { key });
    } catch (err) {
      const text = err instanceof ApiError && err.status === 401 ? "Unknown or revoked API key." : err.message;
      error.replaceChildren(notice(text, "error"));
      input.focus();
      return;
    }
    keepKey(key);
    input.value = "";
    if (location.hash === "#/queues") route();
    else location.hash = "#/queues";
  });
  show(form);
  input.focus();
}

function signOut() {
  forgetKey();
  self = null;
  history.replaceState(null, "", "#/");
  signInPage();
}

// What the pages share: the API, the key's grants, live refresh, and a way back to sign-in.
function context() {
  return {
    grants: self.grants,
    keyId: self.key_id,
    live,
    show,
    signedOut: () => signInPage("Your key is no longer accepted."),
  };
}

async function route() {
  if (!storedKey()) return signInPage();
  if (self === null) {
    try {
      self = await call("GET", "/v1/keys/self");
    } catch (err) {
      forgetKey();
      return signInPage(err instanceof ApiError && err.status === 401 ? "Please sign in again." : err.message);
    }
  }
  const nav = document.getElementById("nav");
  nav.hidden = false;
  // Only a key that administers every queue may manage keys (GET /v1/keys would refuse the others).
  document.getElementById("nav-keys").hidden = !administersAll(self.grants);
  document.getElementById("who").textContent = self.key_id ? "key " + self.key_id : "access control off";
  const [, page, ...rest] = location.hash.split("/");
  const name = decodeURIComponent(rest.join("/"));
  live.stop();
  if (page === "queue" && name) return queuePage(context(), name, false);
  if (page === "dlq" && name) return queuePage(context(), name, true);
  if (page === "keys") return keysPage(context());
  if (page === "history" && name) return historyPage(context(), name);
  return queuesPage(context());
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("sign-out").addEventListener("click", signOut);
  // Only "#/..." names a page: the skip link's "#main" moves the focus, not the page.
  window.addEventListener("hashchange", () => location.hash.startsWith("#/") && route());
  route();
});
