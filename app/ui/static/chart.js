// Charts drawn as inline SVG by this file (no library): a sparkline of sent and acked per minute
// for the queues page, and a queue's activity chart (sent, acked, dead-lettered per minute; the
// oldest message's age). Each is an image to assistive technology (role="img") named by a text
// that says what it shows in words; the figures themselves are in the page as text too.

import { age, count, h } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
// Series colours: each at least 3:1 against the white page (WCAG non-text contrast).
export const SERIES = {
  sent: { label: "Sent", colour: "#0b5cad" },
  acked: { label: "Acked", colour: "#1a7f37" },
  dead_lettered: { label: "Dead-lettered", colour: "#a4161a" },
  oldest_age_seconds: { label: "Oldest message's age", colour: "#6f42c1" },
};

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  for (const child of children) el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return el;
}

export function total(minutes, field) {
  return minutes.reduce((sum, m) => sum + (m[field] ?? 0), 0);
}

// The path of one series over a width x height box (y grows down), scaled to `top`. A minute
// without a value (null: no count of the queue fell in it; on a large database the leader counts
// every few minutes) is skipped, and the line joins the counts on either side.
function paths(minutes, field, width, height, top) {
  const step = minutes.length > 1 ? width / (minutes.length - 1) : 0;
  const points = [];
  minutes.forEach((m, i) => {
    const value = m[field];
    if (value === null || value === undefined) return;
    const y = height - (top > 0 ? (value / top) * height : 0);
    points.push(`${(i * step).toFixed(1)},${y.toFixed(1)}`);
  });
  if (points.length === 0) return [];
  // A single point is drawn as a dot (a round cap on a tiny line), so that a lone count shows.
  return ["M" + (points.length === 1 ? `${points[0]} l0.5,0` : points.join(" L"))];
}

// The first field is drawn last, on top (sent over acked over dead-lettered, which is mostly 0).
function lines(minutes, fields, width, height, top) {
  return [...fields].reverse().flatMap((field) =>
    paths(minutes, field, width, height, top).map((d) =>
      svg("path", {
        d,
        fill: "none",
        stroke: SERIES[field].colour,
        "stroke-width": 2,
        "vector-effect": "non-scaling-stroke",
        "stroke-linejoin": "round",
        "stroke-linecap": "round",
        "data-series": field,
      }),
    ),
  );
}

// A sparkline of sent and acked per minute: what the queues page shows for each queue.
export function sparkline(minutes) {
  const sent = total(minutes, "sent");
  const acked = total(minutes, "acked");
  const text = `Last ${minutes.length} minutes: ${count(sent)} sent, ${count(acked)} acked`;
  const top = Math.max(1, ...minutes.map((m) => Math.max(m.sent, m.acked)));
  const width = 120;
  const height = 28;
  return h(
    "span",
    { class: "spark", "data-sent": sent, "data-acked": acked },
    svg(
      "svg",
      { viewBox: `-1 -2 ${width + 2} ${height + 4}`, width, height, role: "img", "aria-label": text },
      svg("title", {}, text),
      svg("line", { x1: 0, y1: height, x2: width, y2: height, stroke: "#c9d1d9", "stroke-width": 1 }),
      ...lines(minutes, ["sent", "acked"], width, height, top),
    ),
    h("span", { class: "spark-figures" }, `${count(sent)} / ${count(acked)}`),
  );
}

function legend(fields) {
  return h(
    "ul",
    { class: "legend" },
    fields.map((field) =>
      h("li", {}, h("span", { class: "swatch", "data-colour": field }), SERIES[field].label),
    ),
  );
}

// One panel: `fields` over the minutes, with its scale's top written beside it.
function panel(id, minutes, fields, { title, top, topText }) {
  const width = 600;
  const height = 120;
  const first = minutes.length ? new Date(minutes[0].minute) : null;
  const clock = (d) => d.toLocaleTimeString("en-GB", { hour12: false, hour: "2-digit", minute: "2-digit" });
  const last = minutes.length ? new Date(minutes[minutes.length - 1].minute) : null;
  return h(
    "figure",
    { class: "chart", id },
    h("figcaption", {}, title),
    legend(fields),
    h(
      "div",
      { class: "plot" },
      h("span", { class: "axis top" }, topText),
      svg(
        "svg",
        {
          viewBox: `0 -2 ${width} ${height + 4}`,
          preserveAspectRatio: "none",
          role: "img",
          "aria-labelledby": id + "-text",
          class: "lines",
        },
        svg("line", { x1: 0, y1: height, x2: width, y2: height, stroke: "#c9d1d9", "stroke-width": 1, "vector-effect": "non-scaling-stroke" }),
        svg("line", { x1: 0, y1: 0, x2: width, y2: 0, stroke: "#e5e9ee", "stroke-width": 1, "vector-effect": "non-scaling-stroke" }),
        ...lines(minutes, fields, width, height, top),
      ),
      h("span", { class: "axis from" }, first ? clock(first) : ""),
      h("span", { class: "axis to" }, last ? clock(last) : ""),
    ),
  );
}

// A queue's activity over its minutes: throughput, then the oldest message's age, each with a
// sentence that says the same in words (the charts' text alternative).
export function activity(minutes) {
  const sums = ["sent", "acked", "dead_lettered"].map((f) => total(minutes, f));
  const busiest = Math.max(1, ...minutes.map((m) => Math.max(m.sent, m.acked, m.dead_lettered)));
  const ages = minutes.map((m) => m.oldest_age_seconds).filter((a) => a !== null && a !== undefined);
  const oldest = Math.max(0, ...ages);
  const counted = [...minutes].reverse().find((m) => m.visible !== null && m.visible !== undefined);
  const throughputText =
    `Over the last ${minutes.length} minutes: ${count(sums[0])} sent, ${count(sums[1])} acked, ` +
    `${count(sums[2])} dead-lettered; the busiest minute had ${count(busiest)}.`;
  const ageText = ages.length
    ? `Oldest message's age at each count: at most ${age(oldest)}; at the latest count ` +
      `${age(counted.oldest_age_seconds)} with ${count(counted.visible)} visible and ${count(counted.in_flight)} in flight.`
    : "No count of this queue in these minutes yet (the maintenance leader counts every queue in its metrics rounds).";
  return h(
    "div",
    { class: "charts" },
    panel("chart-throughput", minutes, ["sent", "acked", "dead_lettered"], {
      title: "Messages per minute",
      top: busiest,
      topText: count(busiest) + "/min",
    }),
    h("p", { class: "hint", id: "chart-throughput-text" }, throughputText),
    panel("chart-age", minutes, ["oldest_age_seconds"], {
      title: "Oldest message's age",
      top: Math.max(1, oldest),
      topText: age(Math.max(1, oldest)),
    }),
    h("p", { class: "hint", id: "chart-age-text" }, ageText),
  );
}
