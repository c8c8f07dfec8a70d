// Overview: upstreams and their readiness, calls per second by dialect and outcome, latency.

import { getJson, Refused } from './api.js';
import { lineChart, PALETTE } from './chart.js';

const $ = (id) => document.getElementById(id);
let timers = [];

function fmtMs(v) {
  if (v === null || v === undefined) return '–';
  return v < 10 ? `${v.toFixed(2)} ms` : `${Math.round(v)} ms`;
}

async function refreshOverview() {
  let o;
  try {
    o = await getJson('/console/api/overview');
  } catch (e) {
    if (!(e instanceof Refused)) $('upstreams').replaceChildren(li(`could not read: ${e.message}`, 'muted'));
    return;
  }
  const items = o.upstreams.map((u) => {
    const item = li('', u.reachable ? 'up' : 'down');
    item.dataset.upstream = u.name;
    const badge = document.createElement('span');
    badge.className = 'badge ' + (u.reachable ? 'ok' : 'bad');
    badge.textContent = u.reachable ? 'reachable' : 'unreachable';
    item.append(badge, ` ${u.name} `);
    const dialect = document.createElement('span');
    dialect.className = 'muted';
    dialect.textContent = `(${u.dialect})`;
    item.append(dialect);
    const eps = document.createElement('ul');
    eps.className = 'endpoints';
    for (const e of u.endpoints || []) {
      const row = li('', e.state === 'healthy' ? 'up' : 'down');
      row.dataset.endpoint = e.endpoint;
      const state = document.createElement('span');
      state.className = 'badge ' + (e.state === 'healthy' ? 'ok' : 'bad');
      state.textContent = e.state;
      row.append(state, ` ${e.endpoint} · ${e.in_flight} in flight · ${e.errors} errors`);
      eps.append(row);
    }
    item.append(eps);
    return item;
  });
  $('upstreams').replaceChildren(...(items.length ? items : [li('no upstreams configured', 'muted')]));
  const parts = [];
  if (o.sid) parts.push(`sid bridge ${o.sid.healthy ? 'healthy' : 'unhealthy'}: ${o.sid.contexts} contexts, ${o.sid.running} running`);
  else parts.push('sid bridge off');
  parts.push(o.events ? `event feed ${o.events.connected ? 'connected' : 'disconnected'}` : 'no event feed');
  $('bridge-state').textContent = parts.join(' · ');
}

function li(text, cls) {
  const item = document.createElement('li');
  if (cls) item.className = cls;
  item.textContent = text;
  return item;
}

async function refreshStats() {
  let s;
  try {
    s = await getJson('/console/api/stats');
  } catch {
    return;
  }
  const tMax = s.now;
  const tMin = s.now - s.window_secs + 1;
  const bySecond = new Map(s.samples.map((x) => [x.t, x]));
  const series = s.series.map((se, i) => {
    const points = [];
    for (let t = tMin; t <= tMax; t++) {
      const sample = bySecond.get(t);
      points.push([t, sample ? sample.counts[i] || 0 : 0]);
    }
    return { name: `${se.dialect} · ${se.outcome}`, color: PALETTE[i % PALETTE.length], points };
  });
  const total = s.series.reduce((a, se) => a + se.total, 0);
  lineChart($('rate-chart'), { series, tMin, tMax, unit: '/s', width: 1200, height: 220,
    label: `Requests per second over the last 15 minutes: ${total} calls in ${s.series.length} series` });
  const legend = s.series.map((se, i) => {
    const item = document.createElement('li');
    item.dataset.dialect = se.dialect;
    item.dataset.outcome = se.outcome;
    item.dataset.total = se.total;
    const sw = document.createElement('span');
    sw.className = 'swatch';
    sw.style.background = PALETTE[i % PALETTE.length];
    const count = document.createElement('strong');
    count.textContent = se.total.toLocaleString();
    item.append(sw, `${se.dialect} · ${se.outcome} `, count, ' calls');
    return item;
  });
  $('rate-legend').replaceChildren(...(legend.length ? legend : [li('no calls in the last 15 minutes', 'muted')]));
  const lat = (key) => s.samples.map((x) => [x.t, x[key] === null ? null : x[key]]);
  // Seconds without calls break the lines.
  const gaps = (pts) => {
    const out = [];
    let prev = null;
    for (const p of pts) {
      if (prev !== null && p[0] - prev > 1) out.push([prev + 1, null]);
      out.push(p);
      prev = p[0];
    }
    return out;
  };
  lineChart($('latency-chart'), {
    series: [
      { name: 'p50', color: PALETTE[0], points: gaps(lat('p50_ms')) },
      { name: 'p99', color: PALETTE[2], points: gaps(lat('p99_ms')) },
    ],
    tMin, tMax, unit: ' ms', stroke: 4,
    label: `Latency per second over the last 15 minutes: p50 ${fmtMs(s.p50_ms)}, p99 ${fmtMs(s.p99_ms)}`,
  });
  $('p50').textContent = fmtMs(s.p50_ms);
  $('p99').textContent = fmtMs(s.p99_ms);
}

export function show() {
  refreshOverview();
  refreshStats();
  timers = [setInterval(refreshStats, 1000), setInterval(refreshOverview, 5000)];
}

export function hide() {
  timers.forEach(clearInterval);
  timers = [];
}
