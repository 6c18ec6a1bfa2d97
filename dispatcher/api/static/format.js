// Building the dashboard's DOM and formatting what it shows: plain JS, an ES module, no build step.
// Everything is built with text nodes (never markup strings), so nothing the API returns is interpreted as
// markup; amounts have one unit per resource (cores, GiB, whole counts), times are local and relative.

// el("div", {class: "x"}, "text", child, [more, children], ...): strings become text nodes, arrays are
// flattened, null and undefined are skipped.
export function el(tag, attrs) {
  var node = document.createElement(tag);
  var key;
  for (key in attrs || {}) {
    if (attrs[key] === null || attrs[key] === undefined) continue;
    if (key === "class") node.className = attrs[key];
    else if (key === "title") node.title = attrs[key];
    else node.setAttribute(key, attrs[key]);
  }
  function add(child) {
    if (child === null || child === undefined) return;
    if (Array.isArray(child)) child.forEach(add);
    else node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  for (var i = 2; i < arguments.length; i++) add(arguments[i]);
  return node;
}

export function replace(parent, children) {
  while (parent.firstChild) parent.removeChild(parent.firstChild);
  children.forEach(function (c) { if (c) parent.appendChild(c); });
}

export function safeClass(value) { return String(value).replace(/[^A-Za-z0-9_-]/g, ""); }
export function badge(text, kind) { return el("span", { class: "badge " + kind }, text); }
export function stateBadge(state) { return badge(state, "state-" + safeClass(state)); }
export function row(cells) { return el("tr", null, cells); }
export function emptyRow(columns, text) { return el("tr", null, el("td", { class: "empty", colspan: String(columns) }, text)); }

// -- units: one per resource ------------------------------------------------------------------------
// The API gives Kueue's integers: cpu in milli-cores, memory and storage in bytes, HAMi's GPU memory in
// MiB, GPU cores in percent of a GPU, everything else in whole units. A column never mixes "1500m" and "2":
// cpu is always cores, every memory (host or GPU) is GiB, counts are integers.
var UNLIMITED = 9.2e18;  // Kueue's MaxInt64 sentinel, as far as a JS number can tell

export function unitOf(resource) {
  var r = String(resource);
  if (r === "cpu") return "cores";
  if (r === "memory" || r === "ephemeral-storage" || r.indexOf("hugepages-") === 0) return "GiB";
  if (/gpumem$/.test(r)) return "GiB";
  if (/gpucores$|gpumem-percentage$/.test(r)) return "%";
  return "";
}

function decimals(x) {
  if (x === 0) return "0";
  if (Math.abs(x) < 0.01) return x > 0 ? "<0.01" : ">-0.01";
  return String(Math.round(x * 100) / 100);  // at most two decimals, no trailing zeros
}

// The number alone, in the resource's unit (see unitOf).
export function scaled(resource, value) {
  var v = Number(value);
  if (!isFinite(v)) return "?";
  if (v >= UNLIMITED) return "unlimited";
  var r = String(resource);
  if (r === "cpu") return decimals(v / 1000);
  if (unitOf(r) === "GiB") return decimals(/gpumem$/.test(r) ? v / 1024 : v / 1073741824);
  return String(Math.round(v));
}

export function formatAmount(resource, value) {
  var n = scaled(resource, value);
  var unit = unitOf(resource);
  if (n === "unlimited" || !unit) return n;
  return n + (unit === "%" ? "%" : " " + unit);
}

// -- time ----------------------------------------------------------------------------------------------
export function ago(iso) {
  if (!iso) return "";
  var s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (!isFinite(s)) return "";
  if (s < 0) s = 0;
  if (s < 60) return s + "s ago";
  if (s < 3600) return Math.floor(s / 60) + "m ago";
  if (s < 86400) return Math.floor(s / 3600) + "h ago";
  return Math.floor(s / 86400) + "d ago";
}
export function when(iso) {
  var d = new Date(iso);
  return iso && !isNaN(d.getTime()) ? d.toLocaleString() : "";
}
export function duration(seconds) {
  if (!isFinite(seconds)) return "";
  if (seconds < 1) return Math.round(seconds * 1000) + " ms";
  if (seconds < 120) return (Math.round(seconds * 10) / 10) + " s";
  if (seconds < 7200) return Math.round(seconds / 60) + " min";
  return (Math.round(seconds / 360) / 10) + " h";
}
export function agoCell(iso) { return el("td", { title: when(iso), class: "when" }, ago(iso)); }

export function link(href, text, cls) { return el("a", { href: href, class: cls }, text); }
