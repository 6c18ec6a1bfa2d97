// The kueue-dispatcher dashboard: plain JS (ES modules), no build step. It fetches the API every 2 s and
// renders with text nodes only (never markup strings; see format.js), so nothing the API returns is
// interpreted as markup.
//
// Pages are hash routes, so the page itself stays one open file and a link can be shared:
//   #/?namespace=&queue=&state=&cluster=   the overview; the filters go to GET /api/v1/workloads
//   #/workloads/NAMESPACE/NAME             one workload: timeline, decision, copies, events
//   #/workers/NAME                         one worker: capacity, health history, its events and workloads
// A token may ride along once (#token=… or …&token=…): it moves to sessionStorage and leaves the address.
import {
  ago, agoCell, badge, duration, el, emptyRow, formatAmount, link, replace, row, safeClass, scaled, stateBadge, unitOf, when,
} from "./format.js";

var REFRESH_MS = 2000;
var TOKEN_KEY = "kueue-dispatcher-token";
var STATES = ["Pending", "Placing", "Placed", "Admitted", "Running", "Succeeded", "Failed", "Cancelled"];
var FILTERS = ["namespace", "queue", "state", "cluster"];
var PAGE = 100;          // workloads per "show more"
var MAX_LIMIT = 1000;    // the API's largest page
// What a failover list shows by default; fencing (deleting stale copies) is routine and only counted.
var FAILOVER_TYPES = "FailedOver,WorkerLost,TimedOut";
// What happened to workloads because of one worker, on its page.
var WORKER_EVENT_TYPES = "FailedOver,WorkerLost,TimedOut,Drained,Rejected,Fenced";

function $(id) { return document.getElementById(id); }

// -- the token -----------------------------------------------------------------------------------------
function takeTokenFromHash() {
  var m = /(?:^#|[&?])token=([^&]*)/.exec(location.hash);
  if (!m) return;
  try { sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1])); } catch (e) { /* storage off */ }
  // Keep the route, drop the token: it must not stay in the address bar or the history.
  var rest = location.hash.replace(/([#&?])token=[^&]*&?/, "$1").replace(/[&?]$/, "");
  history.replaceState(null, "", location.pathname + location.search + (rest === "#" ? "" : rest));
}
function token() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ""; } catch (e) { return ""; }
}

function AuthError(message) { this.message = message; }
function ApiError(status, message) { this.status = status; this.message = message; }

function api(path) {
  var headers = { Accept: "application/json" };
  var t = token();
  if (t) headers.Authorization = "Bearer " + t;
  return fetch(path, { headers: headers, cache: "no-store", credentials: "omit" }).then(function (resp) {
    return resp.json().catch(function () { return null; }).then(function (body) {
      var message = body && body.error ? body.error.message : "HTTP " + resp.status;
      if (resp.status === 401) throw new AuthError(message);
      if (!resp.ok) throw new ApiError(resp.status, path + ": " + message);
      return body;
    });
  });
}

// -- routes ----------------------------------------------------------------------------------------------
function route(hashValue) {
  var hash = (hashValue === undefined ? location.hash : hashValue).replace(/^#\/?/, "");
  var q = hash.indexOf("?");
  var path = (q >= 0 ? hash.slice(0, q) : hash).split("/").filter(Boolean).map(decodeURIComponent);
  var params = new URLSearchParams(q >= 0 ? hash.slice(q + 1) : "");
  if (path[0] === "workloads" && path.length === 3) return { view: "workload", namespace: path[1], name: path[2] };
  if (path[0] === "workers" && path.length === 2) return { view: "worker", name: path[1] };
  var filters = {};
  FILTERS.forEach(function (k) { if (params.get(k)) filters[k] = params.get(k); });
  return { view: "overview", filters: filters };
}
function filterHref(filters) {
  var p = new URLSearchParams();
  FILTERS.forEach(function (k) { if (filters[k]) p.set(k, filters[k]); });
  var s = p.toString();
  return "#/" + (s ? "?" + s : "");
}
function workloadHref(namespace, name) {
  return "#/workloads/" + encodeURIComponent(namespace) + "/" + encodeURIComponent(name);
}
function workerHref(name) { return "#/workers/" + encodeURIComponent(name); }
function workerLink(name) { return name ? link(workerHref(name), name) : "—"; }
function query(params) {
  var p = new URLSearchParams();
  Object.keys(params).forEach(function (k) { if (params[k] !== undefined && params[k] !== "") p.set(k, params[k]); });
  return p.toString();
}

// -- workers --------------------------------------------------------------------------------------------
function bar(parts, total, label) {
  var node = el("div", { class: "bar", title: label, role: "img", "aria-label": label });
  parts.forEach(function (p) {
    var part = el("div", { class: p[0] });
    // CSSOM, which the page's CSP allows (style attributes it does not)
    part.style.width = (total > 0 ? Math.max(0, Math.min(100, (100 * p[1]) / total)) : 0).toFixed(2) + "%";
    node.appendChild(part);
  });
  return node;
}

// One ClusterQueue/flavor/resource: within nominal, then what is borrowed from the Cohort ("8 / 8 cores
// + 4 borrowed"), never "12 / 8".
function quotaRow(q) {
  var res = q.resource;
  var taken = q.used + q.reserved;
  var borrowed = q.borrowed || 0;
  var within = Math.min(taken, q.nominal);
  var usedWithin = Math.min(q.used, q.nominal);
  var unit = unitOf(res);
  var nums = scaled(res, within) + " / " + scaled(res, q.nominal) + (unit === "%" ? "%" : unit ? " " + unit : "");
  if (borrowed > 0) nums += " + " + scaled(res, borrowed) + " borrowed";
  var label = res + ": " + formatAmount(res, q.used) + " admitted, " + formatAmount(res, q.reserved) +
    " reserved by the dispatcher, of a nominal " + formatAmount(res, q.nominal) +
    (borrowed > 0 ? "; " + formatAmount(res, borrowed) + " borrowed from cohort " + (q.cohort || "?") : "") +
    (q.borrowingLimit !== null && q.borrowingLimit !== undefined ? "; may borrow " +
      formatAmount(res, q.borrowingLimit) : "") +
    "; a new workload can get " + formatAmount(res, q.free);
  return el("div", { class: "row" + (borrowed > 0 ? " borrowing" : "") },
    el("span", { class: "res", title: res }, res),
    bar([["used", usedWithin], ["reserved", within - usedWithin], ["borrowed", borrowed]], q.nominal + borrowed, label),
    el("span", { class: "nums", title: label }, nums));
}

function quotaGroups(quota) {
  var groups = [];
  var byKey = {};
  quota.forEach(function (q) {
    var key = q.clusterQueue + " / " + q.flavor;
    if (!byKey[key]) { byKey[key] = { title: key, cohort: q.cohort, rows: [] }; groups.push(byKey[key]); }
    byKey[key].rows.push(q);
  });
  return groups;
}

function capacityUnknown(c) {
  if (c.health === "Ready" || c.health === "Suspect") return "capacity unknown: the worker's queues are not listed yet";
  var since = c.healthSince ? " since " + when(c.healthSince) + " (" + ago(c.healthSince) + ")" : "";
  return "capacity unknown: worker " + c.health + since;
}

function vgpuGroup(g) {
  var t = g.total;
  var free = Math.max(t.vgpuSlots - t.vgpuSlotsUsed, 0);
  var mem = "nvidia.com/gpumem";
  var group = el("div", { class: "group" },
    el("div", { class: "group-title" }, "HAMi vGPUs · " + t.healthyGpus + "/" + t.gpus + " GPUs healthy"));
  var slots = "vGPU slots: " + free + " free of " + t.vgpuSlots;
  group.appendChild(el("div", { class: "row" }, el("span", { class: "res" }, "slots"),
    bar([["used", t.vgpuSlotsUsed]], t.vgpuSlots, slots), el("span", { class: "nums", title: slots }, free + " free / " + t.vgpuSlots)));
  var memLabel = "GPU memory: " + formatAmount(mem, t.memoryFreeMiB) + " free of " + formatAmount(mem, t.memoryTotalMiB);
  group.appendChild(el("div", { class: "row" }, el("span", { class: "res" }, "memory"),
    bar([["used", t.memoryUsedMiB]], t.memoryTotalMiB, memLabel),
    el("span", { class: "nums", title: memLabel },
      scaled(mem, t.memoryFreeMiB) + " free / " + scaled(mem, t.memoryTotalMiB) + " GiB")));
  var cores = "GPU cores used: " + t.coresUsed + "% of " + t.coresTotal + "% (100% is one GPU)";
  group.appendChild(el("div", { class: "row" }, el("span", { class: "res" }, "cores"),
    bar([["used", t.coresUsed]], t.coresTotal, cores),
    el("span", { class: "nums", title: cores }, t.coresUsed + " / " + t.coresTotal + "%")));
  return group;
}

function healthLine(events) {
  // The worker's last transitions, newest first: "Ready → NotReady 3m ago".
  if (!events || !events.length) return null;
  return el("div", { class: "meta history" }, "health: ", events.slice(0, 3).map(function (e) {
    return transition(e.message).from + " → " + transition(e.message).to + " " + ago(e.at);
  }).join(" · "));
}

function transition(message) {
  var m = /^(\w+) -> (\w+)(?:: ([\s\S]*))?$/.exec(message || "");
  return m ? { from: m[1], to: m[2], why: m[3] || "" } : { from: "?", to: "?", why: message || "" };
}

// Whether a job failed over from this worker can run twice: said plainly on every card.
function fencingLine(f) {
  f = f || { mode: "none" };
  var safe = f.mode === "agent" && f.agentUp === true && !f.renewRefused;
  var text = f.mode === "agent" ? "fencing: " + f.summary
    : "fencing: none — failover from this worker is at-least-once (a cut-off worker keeps running its copies)";
  return el("div", { class: "meta fencing " + (safe ? "fencing-on" : "fencing-off") }, text);
}

function workerCard(c, opts) {
  opts = opts || {};
  var head = el("div", { class: "card-head" },
    link(workerHref(c.name), c.name, "name"),
    badge(c.health, "health-" + safeClass(c.health)),
    c.healthSince ? el("span", { class: "since", title: when(c.healthSince) }, "since " + ago(c.healthSince)) : null,
    c.cordoned ? badge("cordoned", "cordoned") : null,
    c.synced ? null : badge("not synced", "unsynced"));
  var meta = el("div", { class: "meta" },
    "in flight " + c.inFlight + "/" + c.maxInFlight +
    " · latency " + Math.round((c.latencySeconds || 0) * 1000) + " ms" +
    " · weight " + c.weight +
    " · API errors " + c.apiErrors + "/" + c.apiCalls);
  var card = el("div", { class: "card", "data-cluster": c.name }, head, meta);
  if (c.reason) card.appendChild(el("div", { class: "meta reason" }, c.reason));  // NotReady: the 401/403
  card.appendChild(fencingLine(c.fencing));
  if (opts.counts) {
    var active = STATES.filter(function (s) { return opts.counts[s] && s !== "Succeeded" && s !== "Cancelled"; });
    if (active.length) {  // each a link to those workloads
      card.appendChild(el("div", { class: "meta counts" }, active.map(function (s, i) {
        return [i ? " · " : null, link(filterHref({ cluster: c.name, state: s }), s + " " + opts.counts[s])];
      })));
    }
  }
  var history = healthLine(opts.history);
  if (history) card.appendChild(history);
  if (c.capacityKnown === false) {
    // The last numbers seen are not what the worker has now: free quota nobody can use is worse than none.
    card.appendChild(el("div", { class: "unknown" }, capacityUnknown(c)));
    return card;
  }
  var cap = c.capacity;
  if (cap) {
    card.appendChild(el("div", { class: "meta" }, "nodes " + cap.nodes.schedulable + "/" + cap.nodes.total + " schedulable"));
    quotaGroups(cap.quota).forEach(function (g) {
      var group = el("div", { class: "group" }, el("div", { class: "group-title" }, g.title,
        g.cohort ? el("span", { class: "cohort" }, " · cohort " + g.cohort) : null));
      g.rows.forEach(function (q) { group.appendChild(quotaRow(q)); });
      card.appendChild(group);
    });
    if (!cap.quota.length) card.appendChild(el("div", { class: "hint" }, "no ClusterQueue quota"));
  }
  if (c.vgpu) card.appendChild(vgpuGroup(c.vgpu));
  return card;
}

function legend() {
  return el("div", { class: "legend" }, "bars:", el("i", { class: "used" }), "admitted",
    el("i", { class: "reserved" }), "reserved by the dispatcher", el("i", { class: "borrowed" }),
    "borrowed from the cohort", " · of the nominal quota; cpu in cores, memory in GiB");
}

function renderWorkers(clusters, summary, healthEvents) {
  var counts = {};
  (summary ? summary.clusters : []).forEach(function (c) { counts[c.cluster] = c.counts; });
  var history = {};
  healthEvents.forEach(function (e) { (history[e.cluster] = history[e.cluster] || []).push(e); });
  $("workers-count").textContent = "(" + clusters.length + ")";
  var cards = clusters.map(function (c) { return workerCard(c, { counts: counts[c.name], history: history[c.name] }); });
  if (cards.length) cards[cards.length - 1].appendChild(legend());
  replace($("workers"), cards.length ? cards : [el("p", { class: "hint" }, "no workers")]);
}

function fetchWorkers() {
  return api("api/v1/clusters").then(function (list) {
    return Promise.all(list.items.map(function (c) {
      return api("api/v1/clusters/" + encodeURIComponent(c.name)).catch(function () { return c; });
    }));
  });
}

// -- the summary per LocalQueue and namespace ---------------------------------------------------------
function countsTable(rows, keyOf, title, filtersOf) {
  var shown = STATES.filter(function (s) { return rows.some(function (r) { return r.counts[s] > 0; }); });
  var head = row([el("th", null, title)].concat(shown.map(function (s) { return el("th", { class: "num" }, s); }),
    [el("th", { class: "num" }, "Total")]));
  var body = rows.map(function (r) {
    var f = filtersOf(r);
    return el("tr", { "data-key": keyOf(r) },
      el("td", null, link(filterHref(f), keyOf(r))),
      shown.map(function (s) {
        var n = r.counts[s];
        var f2 = Object.assign({}, f, { state: s });
        return el("td", { class: "num", "data-state": s }, n ? link(filterHref(f2), String(n)) : "·");
      }),
      el("td", { class: "num total" }, String(r.total)));
  });
  if (!body.length) body = [emptyRow(shown.length + 2, "no workloads")];
  return el("table", { class: "counts" }, el("thead", null, head), el("tbody", null, body));
}

function renderSummary(summary, filters) {
  // Per state, what the other filters leave (every workload when the summary cannot tell).
  replace($("states"), STATES.map(function (s) {
    var f = Object.assign({}, filters, { state: s });
    var n = matching(summary, f);
    if (n === null) n = summary.total[s];
    if (!n) return null;
    var cls = "badge state-" + s + (filters.state === s ? " selected" : "");
    return link(filterHref(f), s + " " + n, cls);
  }));
  replace($("queues"), [countsTable(summary.queues, function (r) { return r.namespace + "/" + r.queue; },
    "LocalQueue", function (r) { return { namespace: r.namespace, queue: r.queue }; })]);
  replace($("namespaces"), [countsTable(summary.namespaces, function (r) { return r.namespace; },
    "Namespace", function (r) { return { namespace: r.namespace }; })]);
}

// How many workloads match the filters, when the summary can tell (not for a queue on one worker).
function matching(summary, f) {
  if (!summary) return null;
  function pick(counts, total) { return f.state ? counts[f.state] || 0 : total; }
  if (f.cluster) {
    if (f.namespace || f.queue) return null;
    var c = summary.clusters.filter(function (x) { return x.cluster === f.cluster; })[0];
    return c ? pick(c.counts, c.total) : 0;
  }
  return summary.queues.filter(function (q) {
    return (!f.namespace || q.namespace === f.namespace) && (!f.queue || q.queue === f.queue);
  }).reduce(function (n, q) { return n + pick(q.counts, q.total); }, 0);
}

// -- workloads -------------------------------------------------------------------------------------------
function workloadRow(w) {
  return el("tr", { "data-workload": w.namespace + "/" + w.name },
    el("td", null, link(workloadHref(w.namespace, w.name), w.namespace + "/" + w.name)),
    el("td", null, w.kind),
    el("td", null, w.queue),
    el("td", { class: "num" }, w.priority + (w.priorityClass ? " (" + w.priorityClass + ")" : "")),
    el("td", null, stateBadge(w.state)),
    el("td", { class: "cluster" }, workerLink(w.cluster)),
    agoCell(w.updatedAt),
    el("td", { class: "msg" }, w.problem || w.reason || ""));
}

function renderFilterBar(filters) {
  var chips = FILTERS.filter(function (k) { return filters[k]; }).map(function (k) {
    var without = Object.assign({}, filters);
    delete without[k];
    return el("span", { class: "chip", "data-filter": k }, k + ": " + filters[k] + " ",
      link(filterHref(without), "×", "remove"));
  });
  if (chips.length) chips.push(link("#/", "clear filters", "clear"));
  else chips.push(el("span", { class: "hint" }, "all workloads · click a count above to filter"));
  replace($("filters"), chips);
}

function renderWorkloads(list, filters, summary, limit) {
  var items = list.items;
  var total = matching(summary, filters);
  $("workloads-count").textContent = "(" + items.length + (total !== null && total > items.length ? " of " + total :
    list["continue"] ? "+" : "") + ")";
  var rows = items.map(workloadRow);
  if (!rows.length) rows = [emptyRow(8, "no workloads" + (Object.keys(filters).length ? " match these filters" : ""))];
  replace($("workloads").tBodies[0], rows);
  var more = $("workloads-more");
  more.hidden = !list["continue"];
  more.disabled = limit >= MAX_LIMIT;
  more.textContent = limit >= MAX_LIMIT ? "the first " + MAX_LIMIT + " are shown: narrow the filters, or page " +
    "through GET /api/v1/workloads" : "show " + PAGE + " more";
}

function failedRow(w) {
  return el("tr", { "data-failed": w.namespace + "/" + w.name },
    el("td", null, link(workloadHref(w.namespace, w.name), w.namespace + "/" + w.name)),
    el("td", null, w.queue),
    el("td", null, workerLink(w.cluster)),
    agoCell(w.finishedAt || w.updatedAt),
    el("td", { class: "msg" }, w.reason || w.problem || ""));
}

function renderFailed(list, summary) {
  var n = summary ? summary.total.Failed : list.items.length;
  $("failed-count").textContent = "(" + n + ")";
  var rows = list.items.map(failedRow);
  if (!rows.length) rows = [emptyRow(5, "no failed workloads")];
  replace($("failed").tBodies[0], rows);
}

// -- events -------------------------------------------------------------------------------------------------
function eventClass(type) {
  if (type === "FailedOver" || type === "WorkerLost" || type === "Failed" || type === "Rejected") return "ev-bad";
  if (type === "TimedOut" || type === "Drained" || type === "WorkerHealth") return "ev-warn";
  if (type === "Fenced" || type === "GarbageCollected") return "ev-quiet";
  return "ev-ok";
}
function eventRow(e, opts) {
  opts = opts || {};
  var cells = [agoCell(e.at), el("td", null, badge(e.type, eventClass(e.type)))];
  if (!opts.noWorkload) {
    var name = e.workload ? link(workloadHref(e.workload.split("/")[0], e.workload.split("/")[1]), e.workload) :
      e.workloadId !== null ? "#" + e.workloadId : "—";
    cells.push(el("td", null, name));
  }
  cells.push(el("td", null, workerLink(e.cluster)), el("td", { class: "msg" }, e.message));
  return el("tr", { "data-type": e.type }, cells);
}

var showFencing = false;

function renderFailovers(failovers, fencing) {
  var items = failovers.items.slice();
  if (showFencing) {
    items = items.concat(fencing.items).sort(function (a, b) { return b.id - a.id; });
  }
  var rows = items.map(function (e) { return eventRow(e); });
  if (!rows.length) rows = [emptyRow(5, "no failovers or admission timeouts")];
  replace($("events").tBodies[0], rows);
  var n = fencing.items.length;
  var note = $("fencing-note");
  var latest = n ? fencing.items[0] : null;
  replace(note, [
    document.createTextNode(n ? (n >= 200 ? "200+" : String(n)) + " fencing " + (n === 1 ? "row" : "rows") +
      " (stale copies deleted from workers that came back), latest " + ago(latest.at) +
      (latest.cluster ? " on " + latest.cluster : "") + " " : "no fencing recently "),
    n ? el("button", { type: "button", id: "fencing-toggle" }, showFencing ? "hide them" : "show them") : null,
  ]);
  var toggle = $("fencing-toggle");
  if (toggle) toggle.addEventListener("click", function () { showFencing = !showFencing; renderFailovers(failovers, fencing); });
}

// -- the overview --------------------------------------------------------------------------------------------
var workloadLimit = PAGE;
var lastFilterKey = "";

function refreshOverview(r) {
  var key = filterHref(r.filters);
  if (key !== lastFilterKey) { workloadLimit = PAGE; lastFilterKey = key; }
  var f = r.filters;
  var limit = workloadLimit;
  return Promise.all([
    fetchWorkers(),
    api("api/v1/summary").catch(function () { return null; }),  // an older dispatcher: no counts
    api("api/v1/workloads?" + query({ namespace: f.namespace, queue: f.queue, state: f.state, cluster: f.cluster, limit: limit })),
    api("api/v1/events?" + query({ type: FAILOVER_TYPES, limit: 20 })),
    api("api/v1/events?" + query({ type: "Fenced", limit: 200 })),
    api("api/v1/events?" + query({ type: "WorkerHealth", limit: 100 })).catch(function () { return { items: [] }; }),
    api("api/v1/workloads?" + query({ state: "Failed", limit: 20 })),
  ]).then(function (x) {
    if (location.hash !== currentHash) return;
    renderWorkers(x[0], x[1], x[5].items);
    if (x[1]) renderSummary(x[1], f);
    $("summary-section").hidden = !x[1];
    renderFilterBar(f);
    renderWorkloads(x[2], f, x[1], limit);
    renderFailovers(x[3], x[4]);
    renderFailed(x[6], x[1]);
  });
}

// -- one workload ----------------------------------------------------------------------------------------------
function timeline(w) {
  var finished = ["Succeeded", "Failed", "Cancelled"].indexOf(w.state) >= 0 ? w.state : "Finished";
  var steps = [["Submitted", w.submittedAt], ["Placed", w.placedAt], ["Admitted", w.admittedAt],
    ["Started", w.startedAt], [finished, w.finishedAt], ["Cleaned up", w.cleanedAt]];
  var previous = null;
  return el("ol", { class: "timeline" }, steps.map(function (s) {
    var t = s[1] ? Date.parse(s[1]) : NaN;
    var delta = previous !== null && isFinite(t) ? "+" + duration((t - previous) / 1000) : "";
    if (isFinite(t)) previous = t;
    return el("li", { class: isFinite(t) ? "done" : "todo", "data-step": s[0] },
      el("span", { class: "step" }, s[0]),
      el("span", { class: "at", title: s[1] || "" }, isFinite(t) ? when(s[1]) : "—"),
      el("span", { class: "delta" }, delta));
  }));
}

function decisionView(x) {
  var d = x.decision;
  var out = [];
  if (!d) {
    out.push(el("p", { class: "hint" }, "no decision yet"));
  } else {
    out.push(el("p", { class: "decision-summary" }, d.summary || ""));
    out.push(el("p", { class: "meta" }, "strategy " + (d.strategy || "?") + (d.mode ? " · mode " + d.mode : "") +
      (d.at ? " · decided " + when(new Date(d.at * 1000).toISOString()) : "")));
    var rows = (d.workers || []).map(function (v) {
      var verdict = v.cluster === d.chosen ? "chosen" : v.feasible ? "feasible" : "not feasible";
      return el("tr", { "data-worker": v.cluster, class: v.cluster === d.chosen ? "chosen" : null },
        el("td", null, workerLink(v.cluster)),
        el("td", null, badge(verdict, verdict === "not feasible" ? "ev-bad" : "ev-ok")),
        el("td", { class: "num" }, typeof v.score === "number" ? v.score.toFixed(3) : ""),
        el("td", null, v.clusterQueue || ""),
        el("td", { class: "msg" }, v.reason || termsText(v.terms)));
    });
    out.push(el("table", { class: "verdicts" },
      el("thead", null, row([el("th", null, "Worker"), el("th", null, "Verdict"), el("th", { class: "num" }, "Score"),
        el("th", null, "ClusterQueue"), el("th", null, "Why")])),
      el("tbody", null, rows.length ? rows : [emptyRow(5, "no worker verdicts stored")])));
  }
  out.push(el("details", null, el("summary", null, "as `dispatcher explain` prints it"), el("pre", null, x.text)));
  return out;
}
function termsText(terms) {
  return Object.keys(terms || {}).map(function (k) { return k + " " + Number(terms[k]).toFixed(2); }).join(", ");
}

function copiesTable(placements) {
  var rows = placements.slice().reverse().map(function (p) {
    return el("tr", { "data-placement": String(p.id) },
      el("td", { class: "num" }, String(p.generation)),
      el("td", null, workerLink(p.cluster)),
      el("td", null, p.strategy),
      el("td", { class: "num" }, p.score === null ? "" : p.score.toFixed(3)),
      el("td", null, stateBadge(p.state)),
      el("td", { class: "msg" }, p.outcome || p.summary || ""),
      el("td", { title: when(p.createdAt) }, when(p.createdAt)),
      el("td", { title: when(p.admittedAt) }, p.admittedAt ? when(p.admittedAt) : "—"),
      el("td", { title: when(p.endedAt) }, p.endedAt ? when(p.endedAt) : "—"));
  });
  return rows.length ? rows : [emptyRow(9, "no copies yet: it was never placed")];
}

function refreshWorkload(r) {
  var base = "api/v1/workloads/" + encodeURIComponent(r.namespace) + "/" + encodeURIComponent(r.name);
  // The detail first: a workload that is not stored is one 404, not three.
  return api(base).then(function (w) {
    return Promise.all([
      w, api(base + "/explain"), api("api/v1/events?" + query({ workload: r.namespace + "/" + r.name, limit: 200 })),
    ]);
  }).then(function (x) {
    if (location.hash !== currentHash) return;
    var w = x[0];
    $("workload-missing").hidden = true;
    $("workload-body").hidden = false;
    $("workload-title").textContent = w.namespace + "/" + w.name;
    replace($("workload-meta"), [stateBadge(w.state),
      w.noFailover ? badge("no failover", "nofailover") : null,
      document.createTextNode(" " + w.kind + " · queue "), link(filterHref({ namespace: w.namespace, queue: w.queue }), w.queue),
      document.createTextNode(" · priority " + w.priority + (w.priorityClass ? " (" + w.priorityClass + ")" : "") +
        " · generation " + w.generation + " · on "), workerLink(w.cluster),
      w.excluded.length ? document.createTextNode(" · not again on " + w.excluded.join(", ")) : null]);
    replace($("workload-reason"), [w.problem ? el("p", { class: "problem" }, w.problem) : null,
      w.reason ? el("p", { class: "reason" }, w.reason) : null]);
    replace($("workload-timeline"), [timeline(w)]);
    replace($("workload-decision"), decisionView(x[1]));
    replace($("copies").tBodies[0], copiesTable(w.placements));
    var events = x[2].items.slice().reverse().map(function (e) { return eventRow(e, { noWorkload: true }); });
    replace($("workload-events").tBodies[0], events.length ? events : [emptyRow(4, "no events stored")]);
  }).catch(function (err) {
    if (!(err instanceof ApiError) || err.status !== 404) throw err;
    $("workload-body").hidden = true;
    $("workload-missing").hidden = false;
    $("workload-title").textContent = r.namespace + "/" + r.name;
    $("workload-missing").textContent = "no workload " + r.namespace + "/" + r.name + " is stored (a finished " +
      "workload's record is deleted after policy.recordRetention)";
  });
}

// -- one worker ------------------------------------------------------------------------------------------------
function refreshWorker(r) {
  var name = r.name;
  return Promise.all([
    api("api/v1/clusters/" + encodeURIComponent(name)),
    api("api/v1/events?" + query({ cluster: name, type: "WorkerHealth", limit: 50 })),
    api("api/v1/events?" + query({ cluster: name, type: WORKER_EVENT_TYPES, limit: 20 })),
    api("api/v1/workloads?" + query({ cluster: name, limit: 50 })),
    api("api/v1/summary").catch(function () { return null; }),
  ]).then(function (x) {
    if (location.hash !== currentHash) return;
    var counts = x[4] ? (x[4].clusters.filter(function (c) { return c.cluster === name; })[0] || {}).counts : null;
    $("worker-title").textContent = name;
    $("worker-missing").hidden = true;
    $("worker-body").hidden = false;
    var c = x[0];
    var queues = c.capacityKnown !== false && c.capacity ? c.capacity.localQueues.map(function (q) {
      return q.namespace + "/" + q.name + " → " + q.clusterQueue;
    }) : [];
    replace($("worker-card"), [workerCard(c, { counts: counts }),
      queues.length ? el("p", { class: "meta" }, "LocalQueues: " + queues.join(" · ")) : null,
      c.capacityKnown !== false ? legend() : null]);
    var rows = x[1].items.map(function (e) {
      var t = transition(e.message);
      return el("tr", { "data-to": t.to },
        agoCell(e.at), el("td", { title: when(e.at) }, when(e.at)),
        el("td", null, badge(t.from, "health-" + safeClass(t.from)), " → ", badge(t.to, "health-" + safeClass(t.to))),
        el("td", { class: "msg" }, t.why));
    });
    replace($("health-history").tBodies[0], rows.length ? rows : [emptyRow(4, "no health change recorded")]);
    var events = x[2].items.map(function (e) { return eventRow(e); });
    replace($("worker-events").tBodies[0], events.length ? events : [emptyRow(5, "no failovers or fencing here")]);
    var wl = x[3].items.map(workloadRow);
    replace($("worker-workloads").tBodies[0], wl.length ? wl : [emptyRow(8, "no workloads placed here")]);
    $("worker-all").setAttribute("href", filterHref({ cluster: name }));
  }).catch(function (err) {
    if (!(err instanceof ApiError) || err.status !== 404) throw err;
    $("worker-title").textContent = name;
    $("worker-body").hidden = true;
    $("worker-missing").hidden = false;
    $("worker-missing").textContent = "no worker " + name + " in this dispatcher's clusters.yaml";
  });
}

// -- the loop -------------------------------------------------------------------------------------------------
var currentHash = null;
var timer = null;
var running = false;
var again = false;

function setStatus(text, error) {
  var s = $("status");
  s.textContent = text;
  s.className = "status" + (error ? " error" : "");
}

function show(view) {
  ["overview", "workload", "worker"].forEach(function (v) { $("view-" + v).hidden = v !== view; });
}

// A page of another workload or worker: never show the previous one's data while the new one loads.
function clearStale(r) {
  if (r.view === "overview") return;
  var key = r.view + "/" + (r.namespace || "") + "/" + r.name;
  if (key === shownKey) return;
  shownKey = key;
  $(r.view + "-body").hidden = true;
  $(r.view + "-missing").hidden = true;
  $(r.view + "-title").textContent = (r.namespace ? r.namespace + "/" : "") + r.name;
}
var shownKey = "";

function refresh() {
  var r = route();
  currentHash = location.hash;
  show(r.view);
  clearStale(r);
  var work = r.view === "workload" ? refreshWorkload(r) : r.view === "worker" ? refreshWorker(r) : refreshOverview(r);
  return work.then(function () {
    $("token-form").hidden = true;
    $("forget").hidden = !token();
    document.body.setAttribute("data-refreshes", String(Number(document.body.getAttribute("data-refreshes")) + 1));
    setStatus("updated " + new Date().toLocaleTimeString() + " · every " + REFRESH_MS / 1000 + " s", false);
  }).catch(function (err) {
    if (err instanceof AuthError) {
      $("token-form").hidden = false;
      $("forget").hidden = !token();
      setStatus(err.message, true);
    } else {
      setStatus("cannot reach the dispatcher: " + (err && err.message ? err.message : String(err)), true);
    }
  });
}

// One refresh at a time; a new page (hash change) refreshes at once, else every REFRESH_MS.
function tick() {
  clearTimeout(timer);
  if (running) { again = true; return; }
  running = true;
  refresh().then(function () {
    running = false;
    if (again) { again = false; tick(); } else { timer = setTimeout(tick, REFRESH_MS); }
  });
}

$("token-form").addEventListener("submit", function (ev) {
  ev.preventDefault();
  var value = $("token").value.trim();
  $("token").value = "";
  try { sessionStorage.setItem(TOKEN_KEY, value); } catch (e) { /* storage off */ }
  tick();
});
$("forget").addEventListener("click", function () {
  try { sessionStorage.removeItem(TOKEN_KEY); } catch (e) { /* storage off */ }
  location.reload();
});
$("workloads-more").addEventListener("click", function () {
  workloadLimit = Math.min(workloadLimit + PAGE, MAX_LIMIT);
  tick();
});
window.addEventListener("hashchange", function () {
  var before = currentHash === null ? null : route(currentHash).view;
  takeTokenFromHash();
  if (location.hash !== currentHash) {
    // Other filters: the list they change is where the user looks; another page: its top.
    if (before === "overview" && route().view === "overview") $("workloads-section").scrollIntoView();
    else window.scrollTo(0, 0);
  }
  tick();
});

// For the browser tests (and the curious, in the console): the unit formatting.
window.kueueDispatcher = { formatAmount: formatAmount, scaled: scaled, unitOf: unitOf };

takeTokenFromHash();
tick();
