// SVG drawings for the squall UI: the topology graph and line charts. No libraries.
"use strict";

function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}

// The topology as a left-to-right graph: one column per level (spouts first), arrows labelled by grouping.
function drawGraph(graph, link) {
  const cols = {};
  for (const n of graph.nodes) (cols[n.level] = cols[n.level] || []).push(n);
  const levels = Object.keys(cols).map(Number).sort((a, b) => a - b);
  const W = 150, H = 40, GX = 90, GY = 24, pos = {};
  let height = 0;
  levels.forEach((lv, i) => {
    cols[lv].forEach((n, j) => { pos[n.id] = {x: 10 + i * (W + GX), y: 10 + j * (H + GY)}; });
    height = Math.max(height, cols[lv].length * (H + GY));
  });
  const width = 20 + levels.length * (W + GX) - GX;
  let svg = `<svg id="graph" width="${width}" height="${height + 10}" role="img" aria-label="topology graph">` +
    `<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto">` +
    `<path d="M0,0L10,5L0,10z" fill="#98a2b3"/></marker></defs>`;
  for (const e of graph.edges) {
    const a = pos[e.source], b = pos[e.target];
    if (!a || !b) continue;
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
    svg += `<path class="edge" d="M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}"/>` +
      `<text x="${mx}" y="${(y1 + y2) / 2 - 4}" text-anchor="middle" class="muted">${esc(e.grouping)}` +
      `${e.stream !== "default" ? " · " + esc(e.stream) : ""}</text>`;
  }
  for (const n of graph.nodes) {
    const p = pos[n.id];
    svg += `<a href="${link(n.id)}"><g class="node ${n.type}" data-component="${esc(n.id)}">` +
      `<rect x="${p.x}" y="${p.y}" width="${W}" height="${H}" rx="6"/>` +
      `<text x="${p.x + W / 2}" y="${p.y + 17}" text-anchor="middle">${esc(n.id)}</text>` +
      `<text x="${p.x + W / 2}" y="${p.y + 32}" text-anchor="middle" class="muted">${n.type} × ${n.parallelism}</text>` +
      `</g></a>`;
  }
  return svg + "</svg>";
}

// A line chart of points[i][key] for each series {key, label, color} over points[i].time.
function lineChart(id, points, series, unit) {
  const W = 520, H = 170, L = 52, B = 22, T = 10;
  const xs = points.map(p => p.time);
  const vals = series.flatMap(s => points.map(p => p[s.key]).filter(v => v !== null && v !== undefined));
  if (points.length < 2 || !vals.length) {
    return `<svg id="${id}" width="${W}" height="${H}"><text x="${W / 2}" y="${H / 2}" text-anchor="middle" ` +
      `class="muted">collecting…</text></svg>`;
  }
  const x0 = Math.min(...xs), x1 = Math.max(...xs), top = Math.max(...vals) * 1.1 || 1;
  const sx = t => L + (W - L - 10) * (t - x0) / ((x1 - x0) || 1), sy = v => T + (H - T - B) * (1 - v / top);
  let svg = `<svg id="${id}" width="${W}" height="${H}" role="img">` +
    `<line class="axis" x1="${L}" y1="${H - B}" x2="${W - 10}" y2="${H - B}"/>` +
    `<line class="axis" x1="${L}" y1="${T}" x2="${L}" y2="${H - B}"/>` +
    `<text x="${L - 4}" y="${T + 8}" text-anchor="end">${fmt(top)}</text>` +
    `<text x="${L - 4}" y="${H - B}" text-anchor="end">0</text>` +
    `<text x="${L}" y="${H - 6}">${new Date(x0 * 1000).toLocaleTimeString()}</text>` +
    `<text x="${W - 10}" y="${H - 6}" text-anchor="end">${new Date(x1 * 1000).toLocaleTimeString()}</text>`;
  series.forEach((s, i) => {
    const pts = points.filter(p => p[s.key] !== null && p[s.key] !== undefined)
      .map(p => `${sx(p.time).toFixed(1)},${sy(p[s.key]).toFixed(1)}`).join(" ");
    svg += `<polyline points="${pts}" fill="none" stroke="${s.color}" stroke-width="1.8" data-series="${s.key}"/>` +
      `<text x="${L + 8 + i * 130}" y="${T + 10}" fill="${s.color}" style="fill:${s.color}">${esc(s.label)} (${unit})</text>`;
  });
  return svg + "</svg>";
}

function fmt(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v !== "number") return esc(v);
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  if (Math.abs(v) >= 100) return v.toFixed(0);
  if (Math.abs(v) >= 1) return v.toFixed(2);
  return v.toPrecision(3);
}
