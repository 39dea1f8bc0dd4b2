// The squall UI page: reads the REST API every second and draws the summary, topology and
// component views (#/, #/topology/ID, #/topology/ID/component/C). Plain JS, no build step.
"use strict";

const REFRESH_MS = 1000;
const WINDOWS = [["600", "10 min"], ["10800", "3 h"], ["86400", "1 day"], [":all-time", "all time"]];
const state = {window: ":all-time", timer: null, open: new Set()};
const view = document.getElementById("view");
const enc = encodeURIComponent;

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] === "topology" && parts[1]) return {topology: parts[1], component: parts[3] || null};
  return {};
}
const topoLink = id => `#/topology/${enc(id)}`;
const compLink = (id, c) => `#/topology/${enc(id)}/component/${enc(c)}`;

async function api(path, method = "GET") {
  const r = await fetch(path, {method});
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function table(id, cols, rows) {
  const head = cols.map(c => `<th>${esc(c[1])}</th>`).join("");
  const body = rows.map(r => "<tr>" + cols.map(c => {
    const v = r[c[0]];
    if (c[2]) return `<td data-field="${c[0]}">${c[2](r)}</td>`;
    if (c[0] === "lastError") return `<td class="err" data-field="lastError">${esc(v)}</td>`;
    return `<td data-field="${c[0]}">${fmt(v)}</td>`;
  }).join("") + "</tr>").join("");
  return `<table id="${id}"><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

function windowLinks() {
  return `<span class="windows">window: ` + WINDOWS.map(([w, label]) =>
    `<a href="javascript:void 0" data-window="${w}" class="${w === state.window ? "on" : ""}">${label}</a>`).join("") +
    "</span>";
}

async function renderSummary() {
  const doc = await api("/api/v1/topology/summary");
  document.getElementById("crumbs").innerHTML = "";
  view.innerHTML = `<section><h1>Topologies</h1>` + table("summary-table", [
    ["name", "name", r => `<a href="${topoLink(r.id)}">${esc(r.name)}</a>`],
    ["status", "status", r => `<span class="status ${r.status}">${r.status}</span>`],
    ["engine", "engine"], ["uptimeSeconds", "uptime (s)"], ["tasksTotal", "tasks"],
  ], doc.topologies) + (doc.topologies.length ? "" : `<p class="muted">no topology is running</p>`) + `</section>`;
}

function errorsHtml(errors) {
  if (!errors.length) return `<p class="muted">no errors</p>`;
  return errors.map(e => {
    const key = `${e.component}|${e.task}|${e.time}`;
    return `<details data-key="${esc(key)}"${state.open.has(key) ? " open" : ""}><summary>` +
      `<b>${esc(e.component)}</b> task ${e.task} · ${esc(e.kind)} · ${new Date(e.time * 1000).toLocaleTimeString()}: ` +
      `<span class="err">${esc(e.error)}</span></summary>` +
      (e.values ? `<div>tuple values: <code>${esc(e.values)}</code></div>` : "") +
      (e.traceback ? `<pre>${esc(e.traceback)}</pre>` : "") + `</details>`;
  }).join("");
}

function metricsHtml(metrics) {
  const rows = [];
  for (const [comp, m] of Object.entries(metrics)) {
    for (const [n, v] of Object.entries(m.counters || {})) rows.push({comp, name: n, kind: "counter", value: v});
    for (const [n, v] of Object.entries(m.gauges || {})) rows.push({comp, name: n, kind: "gauge", value: v});
    for (const [n, h] of Object.entries(m.histograms || {}))
      rows.push({comp, name: n, kind: "histogram", value: `${fmt(h.count)} obs, mean ${fmt(h.count ? h.sum / h.count : null)}`});
  }
  if (!rows.length) return `<p class="muted">no user metrics registered</p>`;
  return table("metrics-table", [["comp", "component"], ["name", "metric"], ["kind", "kind"],
    ["value", "value", r => typeof r.value === "string" ? esc(r.value) : fmt(r.value)]], rows);
}

function failuresHtml(doc) {
  const reasons = Object.entries(doc.failuresByReason);
  const most = Math.max(1, ...reasons.map(r => r[1]));
  const bars = reasons.length ? reasons.map(([why, n]) =>
    `<div data-reason="${esc(why)}"><span class="bar" style="width:${Math.round(120 * n / most)}px"></span>` +
    `${esc(why)}: <b>${fmt(n)}</b></div>`).join("") : `<p class="muted">no failed trees</p>`;
  return bars + `<p>dead-lettered: <b id="dead-lettered">${fmt(doc.deadLettered)}</b> · lost waves: ` +
    `<b>${fmt(doc.lostWaves)}</b> · pending trees: <b id="pending">${fmt(doc.pending)}</b></p>`;
}

async function renderTopology(id) {
  const doc = await api(`/api/v1/topology/${enc(id)}?window=${enc(state.window)}`);
  document.getElementById("crumbs").innerHTML = `/ <a href="${topoLink(id)}">${esc(id)}</a>`;
  const spark = doc.sparkUiUrl ? ` · <a id="spark-ui" href="${esc(doc.sparkUiUrl)}" target="_blank">Spark UI</a>` : "";
  view.innerHTML = `<section><h1>${esc(doc.name)} <span id="status" class="status ${doc.status}">${doc.status}</span></h1>
    <div class="facts"><div>uptime<b>${fmt(doc.uptimeSeconds)} s</b></div><div>engine<b>${esc(doc.engine)}</b></div>
    <div>tasks<b>${doc.tasksTotal}</b></div><div>waves<b id="waves">${fmt(doc.waves)}</b></div></div>
    <button id="btn-activate" data-action="activate">Activate</button>
    <button id="btn-deactivate" data-action="deactivate">Deactivate</button>
    <button id="btn-kill" class="kill" data-action="kill">Kill</button>${spark}</section>
    <section><h2>Topology stats</h2>` + table("topology-stats", [
      ["window", "window", r => esc((WINDOWS.find(w => w[0] === r.window) || [0, r.window])[1])],
      ["emitted", "emitted"], ["transferred", "transferred"], ["acked", "acked"], ["failed", "failed"],
      ["completeLatency", "complete latency (ms)"]], doc.topologyStats) + `</section>
    <section><h2>Spouts</h2> ${windowLinks()}` + table("spouts-table", [
      ["spoutId", "id", r => `<a href="${compLink(id, r.spoutId)}">${esc(r.spoutId)}</a>`], ["tasks", "tasks"],
      ["emitted", "emitted"], ["transferred", "transferred"], ["acked", "acked"], ["failed", "failed"],
      ["completeLatency", "complete latency (ms)"], ["lastError", "last error"]], doc.spouts) + `</section>
    <section><h2>Bolts</h2>` + table("bolts-table", [
      ["boltId", "id", r => `<a href="${compLink(id, r.boltId)}">${esc(r.boltId)}</a>`], ["tasks", "tasks"],
      ["executed", "executed"], ["emitted", "emitted"], ["transferred", "transferred"], ["capacity", "capacity"],
      ["executeLatency", "execute latency (ms)"], ["processLatency", "process latency (ms)"], ["acked", "acked"],
      ["failed", "failed"], ["lastError", "last error"]], doc.bolts) + `</section>
    <section><h2>Topology</h2>${drawGraph(doc.graph, c => compLink(id, c))}</section>
    <div class="grid">
      <section><h2>Complete latency</h2>${lineChart("latency-chart", doc.history,
        [{key: "completeLatency", label: "complete latency", color: "#2458b3"}], "ms")}</section>
      <section><h2>Throughput</h2>${lineChart("throughput-chart", doc.history,
        [{key: "ackedPerSec", label: "acked", color: "#1a7f37"}, {key: "emittedPerSec", label: "emitted", color: "#7a5af8"},
         {key: "failedPerSec", label: "failed", color: "#b42318"}], "/s")}</section>
      <section><h2>Failures by reason</h2>${failuresHtml(doc)}</section>
      <section><h2>User metrics</h2>${metricsHtml(doc.userMetrics)}</section>
    </div>
    <section><h2>Last errors</h2><div id="errors">${errorsHtml(doc.errors)}</div></section>`;
}

async function renderComponent(id, comp) {
  const doc = await api(`/api/v1/topology/${enc(id)}/component/${enc(comp)}?window=${enc(state.window)}`);
  document.getElementById("crumbs").innerHTML =
    `/ <a href="${topoLink(id)}">${esc(id)}</a> / <a href="${compLink(id, comp)}">${esc(comp)}</a>`;
  const cols = doc.componentType === "spout"
    ? [["task", "task"], ["emitted", "emitted"], ["transferred", "transferred"], ["acked", "acked"],
       ["failed", "failed"], ["completeLatency", "complete latency (ms)"], ["errors", "errors"]]
    : [["task", "task"], ["executed", "executed"], ["emitted", "emitted"], ["transferred", "transferred"],
       ["capacity", "capacity"], ["executeLatency", "execute latency (ms)"], ["processLatency", "process latency (ms)"],
       ["acked", "acked"], ["failed", "failed"], ["errors", "errors"]];
  const perTask = {};
  for (const t of doc.tasks) perTask[`task ${t.task}`] = t.userMetrics;
  view.innerHTML = `<section><h1>${esc(comp)} <span class="muted">${doc.componentType} of ` +
    `<a href="${topoLink(id)}">${esc(id)}</a></span></h1>${windowLinks()}${table("tasks-table", cols, doc.tasks)}</section>
    <section><h2>User metrics per task</h2>${metricsHtml(perTask)}</section>
    <section><h2>Errors</h2><div id="errors">${errorsHtml(doc.errors)}</div></section>`;
}

async function render() {
  clearTimeout(state.timer);
  const r = route();
  try {
    if (r.component) await renderComponent(r.topology, r.component);
    else if (r.topology) await renderTopology(r.topology);
    else await renderSummary();
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    if (window.squallFirstRenderMs === undefined) window.squallFirstRenderMs = performance.now();  // for bench/ui.py
  } catch (e) {
    view.innerHTML = `<section><p class="err" id="error">${esc(e.message)}</p><a href="#/">all topologies</a></section>`;
  }
  state.timer = setTimeout(render, REFRESH_MS);
}

document.addEventListener("toggle", e => {
  const key = e.target.dataset && e.target.dataset.key;
  if (key) e.target.open ? state.open.add(key) : state.open.delete(key);
}, true);

document.addEventListener("click", async e => {
  const w = e.target.closest("[data-window]");
  if (w) { state.window = w.dataset.window; render(); return; }
  const b = e.target.closest("button[data-action]");
  if (!b) return;
  const what = b.dataset.action, id = route().topology;
  if (what === "kill" && !confirm(`Kill topology ${id}?`)) return;
  b.disabled = true;
  try {
    await api(`/api/v1/topology/${enc(id)}/${what}`, "POST");
    if (what === "kill") location.hash = "#/";
  } catch (err) {
    alert(err.message);
  }
  render();
});

window.addEventListener("hashchange", render);
render();
