// Building the page: elements made with the DOM API, text always set as text (never parsed as
// HTML), so a queue name or a message body cannot inject markup.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function age(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 60) return seconds.toFixed(1) + " s";
  if (seconds < 3600) return (seconds / 60).toFixed(1) + " min";
  if (seconds < 86400) return (seconds / 3600).toFixed(1) + " h";
  return (seconds / 86400).toFixed(1) + " d";
}

export function count(n) {
  return n === null || n === undefined ? "—" : n.toLocaleString("en");
}

export function json(value, max = 200) {
  const text = JSON.stringify(value);
  return text.length > max ? text.slice(0, max) + "…" : text;
}

export function time(iso) {
  return iso ? new Date(iso).toLocaleString("en-GB", { hour12: false }) : "—";
}

export function notice(text, kind = "info") {
  return h("p", { class: "notice " + kind, role: kind === "error" ? "alert" : "status" }, text);
}

// A confirmation in a modal <dialog>: resolves to true when the user confirms.
export function confirmDialog(title, text, confirmLabel) {
  return new Promise((resolve) => {
    const dialog = h(
      "dialog",
      { class: "confirm", "aria-labelledby": "confirm-title" },
      h("h2", { id: "confirm-title" }, title),
      h("p", {}, text),
      h(
        "div",
        { class: "buttons" },
        h("button", { type: "button", onclick: () => dialog.close("cancel") }, "Cancel"),
        h("button", { type: "button", class: "danger", "data-confirm": true, onclick: () => dialog.close("confirm") },
          confirmLabel),
      ),
    );
    // Escape closes it with an empty returnValue: not a confirmation.
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "confirm");
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}
