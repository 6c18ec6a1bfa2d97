// The kueue-dispatcher dashboard: plain JS, no build step. It fetches the API every 2 s and renders with
// text nodes only (never markup strings), so nothing the API returns is interpreted as markup.
"use strict";
(function () {
  var REFRESH_MS = 2000;
  var TOKEN_KEY = "kueue-dispatcher-token";
  var ACTIVE = ["Pending", "Placing", "Placed", "Admitted", "Running"];
  var STATES = ACTIVE.concat(["Succeeded", "Failed", "Cancelled"]);
  var MAX_ROWS = 100;

  function $(id) { return document.getElementById(id); }

  // el("div", {class: "x"}, "text", child, ...): strings become text nodes.
  function el(tag, attrs) {
    var node = document.createElement(tag);
    var key;
    for (key in attrs || {}) {
      if (key === "class") node.className = attrs[key];
      else if (key === "title") node.title = attrs[key];
      else node.setAttribute(key, attrs[key]);
    }
    for (var i = 2; i < arguments.length; i++) {
      var child = arguments[i];
      if (child === null || child === undefined) continue;
      node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function replace(parent, children) {
    while (parent.firstChild) parent.removeChild(parent.firstChild);
    children.forEach(function (c) { parent.appendChild(c); });
  }

  function safeClass(value) { return String(value).replace(/[^A-Za-z0-9_-]/g, ""); }

  // -- the token ----------------------------------------------------------------------------------------
  function takeTokenFromHash() {
    var m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
    if (!m) return;
    try { sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1])); } catch (e) { /* storage off */ }
    history.replaceState(null, "", location.pathname + location.search);  // keep it out of the address bar
  }
  function token() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ""; } catch (e) { return ""; }
  }

  function AuthError(message) { this.message = message; }

  function api(path) {
    var headers = { Accept: "application/json" };
    var t = token();
    if (t) headers.Authorization = "Bearer " + t;
    return fetch(path, { headers: headers, cache: "no-store", credentials: "omit" }).then(function (resp) {
      return resp.json().catch(function () { return null; }).then(function (body) {
        var message = body && body.error ? body.error.message : "HTTP " + resp.status;
        if (resp.status === 401) throw new AuthError(message);
        if (!resp.ok) throw new Error(path + ": " + message);
        return body;
      });
    });
  }

  // -- formatting -----------------------------------------------------------------------------------------
  function pct(part, whole) {
    if (!(whole > 0)) return part > 0 ? 100 : 0;
    return Math.max(0, Math.min(100, (100 * part) / whole));
  }
  function ago(iso) {
    if (!iso) return "";
    var s = Math.round((Date.now() - Date.parse(iso)) / 1000);
    if (!isFinite(s)) return "";
    if (s < 0) s = 0;
    if (s < 60) return s + "s ago";
    if (s < 3600) return Math.floor(s / 60) + "m ago";
    if (s < 86400) return Math.floor(s / 3600) + "h ago";
    return Math.floor(s / 86400) + "d ago";
  }
  function when(iso) {
    var d = new Date(iso);
    return isNaN(d.getTime()) ? "" : d.toLocaleString();
  }

  function bar(used, reserved, total, label) {
    var u = pct(used, total);
    var r = Math.min(pct(reserved, total), 100 - u);
    var usedPart = el("div", { class: "used" });
    var reservedPart = el("div", { class: "reserved" });
    usedPart.style.width = u.toFixed(2) + "%";  // CSSOM, which the page's CSP allows (style attributes it does not)
    reservedPart.style.width = r.toFixed(2) + "%";
    return el("div", { class: "bar", title: label, role: "img", "aria-label": label }, usedPart, reservedPart);
  }

  // -- workers --------------------------------------------------------------------------------------------
  function quotaGroups(quota) {
    var groups = [];
    var byKey = {};
    quota.forEach(function (row) {
      var key = row.clusterQueue + " / " + row.flavor;
      if (!byKey[key]) { byKey[key] = { title: key, rows: [] }; groups.push(byKey[key]); }
      byKey[key].rows.push(row);
    });
    return groups;
  }

  function workerCard(c) {
    var head = el("div", { class: "card-head" },
      el("span", { class: "name" }, c.name),
      el("span", { class: "badge health-" + safeClass(c.health) }, c.health),
      c.cordoned ? el("span", { class: "badge cordoned" }, "cordoned") : null,
      c.synced ? null : el("span", { class: "badge unsynced" }, "not synced"));
    var meta = el("div", { class: "meta" },
      "in flight " + c.inFlight + "/" + c.maxInFlight +
      " · latency " + Math.round((c.latencySeconds || 0) * 1000) + " ms" +
      " · weight " + c.weight +
      " · API errors " + c.apiErrors + "/" + c.apiCalls);
    var card = el("div", { class: "card", "data-cluster": c.name }, head, meta);
    if (c.reason) {  // NotReady: the worker refuses the dispatcher (401/403), and how
      card.appendChild(el("div", { class: "meta reason" }, c.reason));
    }
    var cap = c.capacity;
    if (cap) {
      card.appendChild(el("div", { class: "meta" },
        "nodes " + cap.nodes.schedulable + "/" + cap.nodes.total + " schedulable"));
      quotaGroups(cap.quota).forEach(function (g) {
        var group = el("div", { class: "group" }, el("div", { class: "group-title" }, g.title));
        g.rows.forEach(function (row) {
          var q = row.quantities;
          var label = row.resource + ": used " + q.used + ", reserved " + q.reserved + " of " + q.nominal +
            " (free " + q.free + ")";
          group.appendChild(el("div", { class: "row" },
            el("span", { class: "res" }, row.resource),
            bar(row.used, row.reserved, row.nominal, label),
            el("span", { class: "nums", title: label }, q.used + " + " + q.reserved + " / " + q.nominal)));
        });
        card.appendChild(group);
      });
      if (!cap.quota.length) card.appendChild(el("div", { class: "hint" }, "no ClusterQueue quota"));
    }
    var g = c.vgpu;
    if (g) {
      var t = g.total;
      var free = Math.max(t.vgpuSlots - t.vgpuSlotsUsed, 0);
      var group = el("div", { class: "group" },
        el("div", { class: "group-title" }, "HAMi vGPUs · " + t.healthyGpus + "/" + t.gpus + " GPUs healthy"));
      var slots = "vGPU slots: " + free + " free of " + t.vgpuSlots;
      group.appendChild(el("div", { class: "row" }, el("span", { class: "res" }, "slots"),
        bar(t.vgpuSlotsUsed, 0, t.vgpuSlots, slots), el("span", { class: "nums" }, free + " free / " + t.vgpuSlots)));
      var mem = "GPU memory: " + t.memoryFreeMiB + " MiB free of " + t.memoryTotalMiB;
      group.appendChild(el("div", { class: "row" }, el("span", { class: "res" }, "memory"),
        bar(t.memoryUsedMiB, 0, t.memoryTotalMiB, mem),
        el("span", { class: "nums" }, (t.memoryFreeMiB / 1024).toFixed(0) + " GiB free")));
      group.appendChild(el("div", { class: "row" }, el("span", { class: "res" }, "cores"),
        bar(t.coresUsed, 0, t.coresTotal, "GPU cores used " + t.coresUsed + " of " + t.coresTotal),
        el("span", { class: "nums" }, t.coresUsed + " / " + t.coresTotal + " %")));
      card.appendChild(group);
    }
    return card;
  }

  function renderWorkers(clusters) {
    $("workers-count").textContent = "(" + clusters.length + ")";
    var cards = clusters.map(workerCard);
    if (cards.length) {
      cards[cards.length - 1].appendChild(el("div", { class: "legend" }, "bars:",
        el("i", { class: "used" }), "used", el("i", { class: "reserved" }), "reserved by the dispatcher",
        " · of the nominal quota"));
    }
    replace($("workers"), cards.length ? cards : [el("p", { class: "hint" }, "no workers")]);
  }

  // -- workloads ------------------------------------------------------------------------------------------
  function renderWorkloads(list) {
    var items = list.items.slice();
    var counts = {};
    items.forEach(function (w) { counts[w.state] = (counts[w.state] || 0) + 1; });
    replace($("states"), STATES.filter(function (s) { return counts[s]; }).map(function (s) {
      return el("span", { class: "badge state-" + s }, s + " " + counts[s]);
    }));
    $("workloads-count").textContent = "(" + items.length + (list["continue"] ? "+" : "") + ")";
    items.sort(function (a, b) {
      var aa = ACTIVE.indexOf(a.state) >= 0 ? 0 : 1;
      var bb = ACTIVE.indexOf(b.state) >= 0 ? 0 : 1;
      if (aa !== bb) return aa - bb;
      return String(b.updatedAt).localeCompare(String(a.updatedAt)) || b.id - a.id;  // stable between refreshes
    });
    var rows = items.slice(0, MAX_ROWS).map(function (w) {
      return el("tr", { "data-workload": w.namespace + "/" + w.name },
        el("td", null, w.namespace + "/" + w.name),
        el("td", null, w.kind),
        el("td", null, w.queue),
        el("td", { class: "num" }, w.priority + (w.priorityClass ? " (" + w.priorityClass + ")" : "")),
        el("td", null, el("span", { class: "badge state-" + safeClass(w.state) }, w.state)),
        el("td", { class: "cluster" }, w.cluster || "—"),
        el("td", { title: when(w.updatedAt) }, ago(w.updatedAt)),
        el("td", { class: "msg" }, w.problem || w.reason || ""));
    });
    if (!rows.length) rows = [el("tr", null, el("td", { class: "empty", colspan: "8" }, "no workloads"))];
    replace($("workloads").tBodies[0], rows);
    var more = $("workloads-more");
    more.hidden = !(items.length > MAX_ROWS || list["continue"]);
    more.textContent = "showing " + Math.min(items.length, MAX_ROWS) + " of the first " + items.length +
      " workloads; GET /api/v1/workloads pages through all of them";
  }

  function renderEvents(list) {
    var rows = list.items.map(function (e) {
      return el("tr", null,
        el("td", { title: when(e.at) }, ago(e.at)),
        el("td", null, el("span", { class: "badge state-" + (e.type === "FailedOver" ? "Failed" : "Placed") }, e.type)),
        el("td", null, e.workload || (e.workloadId !== null ? "#" + e.workloadId : "—")),
        el("td", null, e.cluster || "—"),
        el("td", { class: "msg" }, e.message));
    });
    if (!rows.length) rows = [el("tr", null, el("td", { class: "empty", colspan: "5" }, "no failovers, fencing or timeouts"))];
    replace($("events").tBodies[0], rows);
  }

  // -- the loop -------------------------------------------------------------------------------------------
  function setStatus(text, error) {
    var s = $("status");
    s.textContent = text;
    s.className = "status" + (error ? " error" : "");
  }

  function refresh() {
    var clusters = api("api/v1/clusters").then(function (list) {
      return Promise.all(list.items.map(function (c) {
        return api("api/v1/clusters/" + encodeURIComponent(c.name)).catch(function () { return c; });
      }));
    });
    return Promise.all([
      clusters,
      api("api/v1/workloads?limit=500"),
      api("api/v1/events?type=FailedOver,Fenced,TimedOut&limit=20"),
    ]).then(function (r) {
      renderWorkers(r[0]);
      renderWorkloads(r[1]);
      renderEvents(r[2]);
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

  function loop() {
    refresh().then(function () { setTimeout(loop, REFRESH_MS); });
  }

  $("token-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var value = $("token").value.trim();
    $("token").value = "";
    try { sessionStorage.setItem(TOKEN_KEY, value); } catch (e) { /* storage off */ }
    refresh();
  });
  $("forget").addEventListener("click", function () {
    try { sessionStorage.removeItem(TOKEN_KEY); } catch (e) { /* storage off */ }
    location.reload();
  });

  takeTokenFromHash();
  loop();
})();
