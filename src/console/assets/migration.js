// Migration: per route its split (weights, sticky rule, calls per side), its rollback state and
// reason, its shadow's counts and last differences (each differing JSON pointer with the
// primary's and the shadow's values side by side, the differing part marked); the legacy share
// over the last 15 minutes (from the console's counters); the callers still on legacy.
//
// Everything comes from `/console/api/migration` (the `/migration` report) and
// `/console/api/stats`; data is written as text, never as HTML.

import { getJson, Refused } from './api.js';
import { lineChart, PALETTE } from './chart.js';

const $ = (id) => document.getElementById(id);
/** Differences shown per route, newest first (the report keeps 50). */
const DIFFS_SHOWN = 10;
let timers = [];
let lastReport = '';

/** An element with attributes and children; strings become text nodes. */
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else e.setAttribute(k, String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

const fmt = (n) => Number(n).toLocaleString();
const pct = (x) => (x === null || Number.isNaN(x) ? '–' : `${x < 10 && x > 0 ? x.toFixed(1) : Math.round(x)} %`);

function time(ms) {
  return ms ? new Date(ms).toLocaleString() : '–';
}

// --- routes -----------------------------------------------------------------------------------

function badge(text, cls) {
  return el('span', { class: `badge ${cls}` }, text);
}

function sidesTable(r, caption) {
  const totalCalls = r.sides.reduce((a, s) => a + s.calls, 0);
  const totalWeight = r.sides.reduce((a, s) => a + s.weight, 0);
  const rows = r.sides.map((s) => {
    const share = totalCalls ? (100 * s.calls) / totalCalls : 0;
    const bar = el('span', { class: 'bar', 'aria-hidden': 'true' }, el('span'));
    bar.firstChild.style.width = `${share}%`;
    let weight = r.split ? `${s.effective_weight}` : 'all';
    if (r.split && totalWeight) weight += ` (${pct((100 * s.effective_weight) / totalWeight)})`;
    if (s.effective_weight !== s.weight) weight += `, was ${s.weight}`;
    const state = el('td', { class: 'state-cell' });
    if (s.rolled_back) state.append(badge('rolled back', 'bad'));
    else if (s.primary && r.split) state.append(badge('primary', 'idle'));
    if (s.window) {
      const w = s.window;
      state.append(el('span', { class: 'muted small' },
        ` window: ${fmt(w.calls)} calls, ${fmt(w.errors)} errors, p99 ${fmt(w.p99_ms)} ms`));
    }
    return el('tr', { 'data-upstream': s.upstream, 'data-rolled-back': s.rolled_back ? 'true' : 'false' },
      el('th', { scope: 'row' }, s.upstream),
      el('td', {}, weight),
      el('td', { class: 'calls num', 'data-calls': s.calls }, fmt(s.calls)),
      el('td', { class: 'share' }, bar, ` ${pct(share)}`),
      state);
  });
  return el('div', { class: 'scroll' }, el('table', { class: 'data sides' },
    el('caption', { class: 'visually-hidden' }, caption),
    el('thead', {}, el('tr', {},
      ...['Upstream', 'Weight', 'Calls', 'Share of calls', 'State'].map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, ...rows)));
}

function rollbackLine(r) {
  const rb = r.rollback;
  const p = el('p', { class: 'rollback', 'data-state': rb.state });
  if (rb.state === 'off') {
    p.append(el('strong', {}, 'Rollback: '), 'off (no [routes.rollback])');
    p.classList.add('muted');
    return p;
  }
  const rule = rb.rule;
  let text = `error rate above ${rule.max_error_rate}`;
  if (rule.max_p99_ms !== undefined && rule.max_p99_ms !== null) text += ` or p99 above ${fmt(rule.max_p99_ms)} ms`;
  text += ` over ${fmt(rule.window_ms / 1000)} s, once a side has ${fmt(rule.min_calls)} calls`;
  if (rb.state === 'armed') {
    p.append(el('strong', {}, 'Rollback: '), badge('armed', 'ok'), ` a side other than the primary is taken out at ${text}`);
  } else {
    p.classList.add('error');
    const at = r.sides.map((s) => s.rollback && s.rollback.at).filter(Boolean).join(', ');
    p.append(el('strong', {}, 'Rollback: '), badge('rolled back', 'bad'), ' ',
      el('span', { class: 'reason' }, rb.reason), at ? ` (at ${at}; back only by a reload)` : '');
  }
  return p;
}

/** Marks where `a` differs from `b`: the part between their common prefix and suffix. */
function marked(a, b, cls) {
  const code = el('code', { class: 'value' });
  let pre = 0;
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
  let suf = 0;
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
  const middle = a.slice(pre, a.length - suf);
  if (!middle) {
    code.append(el('mark', { class: cls }, a));
    return code;
  }
  code.append(a.slice(0, pre), el('mark', { class: cls }, middle), a.slice(a.length - suf));
  return code;
}

function pointerCell(pointer) {
  const th = el('th', { scope: 'row' });
  const code = el('code', { class: 'pointer' });
  if (pointer === '') {
    code.append(el('mark', { class: 'ptr', 'data-pointer': '' }, '(the whole answer)'));
  } else {
    const cut = pointer.lastIndexOf('/');
    code.append(el('span', { class: 'muted' }, pointer.slice(0, cut + 1)),
      el('mark', { class: 'ptr', 'data-pointer': pointer, title: pointer }, pointer.slice(cut + 1)));
  }
  th.append(code);
  return th;
}

function diffTable(d, primaryName, shadowName) {
  const rows = d.pointers.map((p) => el('tr', { 'data-pointer': p.pointer },
    pointerCell(p.pointer),
    el('td', { class: 'primary' }, marked(p.primary, p.shadow, 'was')),
    el('td', { class: 'shadow' }, marked(p.shadow, p.primary, 'now'))));
  const when = d.at ? new Date(d.at).toLocaleTimeString() : '';
  return el('div', { class: 'scroll' }, el('table', { class: 'data diff', 'data-request-id': d.request_id, 'data-method': d.method },
    el('caption', {}, el('code', {}, d.method), ` · request ${d.request_id || '–'} · ${when}`),
    el('thead', {}, el('tr', {},
      el('th', { scope: 'col' }, 'JSON pointer'),
      el('th', { scope: 'col' }, `primary (${primaryName})`),
      el('th', { scope: 'col' }, `shadow (${shadowName})`))),
    el('tbody', {}, ...rows)));
}

function shadowSection(r) {
  const s = r.shadow;
  const primaryName = r.split ? 'the side that served' : (r.sides[0] ? r.sides[0].upstream : 'primary');
  const box = el('section', { class: 'shadow', 'data-shadow': s.upstream });
  let title = `Shadow: ${s.upstream}, ${pct(100 * s.sample)} of calls`;
  if (s.noise_upstream) title += `, noise from ${s.noise_upstream}`;
  box.append(el('h4', {}, title));
  const counts = [['match', 'match'], ['diff', 'differ'], ['noise', 'noise'], ['shadow_error', 'shadow error'], ['dropped', 'dropped']];
  box.append(el('ul', { class: 'counts', 'aria-label': 'Shadow comparisons' },
    ...counts.map(([k, label]) => el('li', { 'data-outcome': k, class: k === 'diff' && s.diff > 0 ? 'bad' : null },
      el('strong', {}, fmt(s[k])), ` ${label}`))));
  if (s.ignore && s.ignore.length) {
    box.append(el('p', { class: 'muted small' }, 'ignored: ', ...s.ignore.flatMap((p, i) => [i ? ' ' : '', el('code', {}, p)])));
  }
  const diffs = (s.last_diffs || []).slice(-DIFFS_SHOWN).reverse();
  if (diffs.length) {
    box.append(el('h5', {}, `Last differences, newest first (${diffs.length} of the ${s.last_diffs.length} kept)`));
    for (const d of diffs) box.append(diffTable(d, primaryName, s.upstream));
  } else {
    box.append(el('p', { class: 'muted' }, 'No differences so far.'));
  }
  return box;
}

function routeCard(r, i) {
  const id = `route-${i}`;
  const card = el('article', { class: 'card route', 'data-route': r.name, 'aria-labelledby': id });
  const h = el('h3', { id }, `${r.name} `);
  if (r.split) h.append(badge('split', 'idle'), ' ');
  if (r.shadow) h.append(badge('shadow', 'idle'), ' ');
  if (r.rollback.state === 'rolled_back') h.append(badge('rolled back', 'bad'));
  card.append(h);
  const methods = el('p', { class: 'muted' }, 'methods ', ...r.methods.flatMap((m, j) => [j ? ' ' : '', el('code', {}, m)]));
  if (r.split) methods.append(' · callers stick to a side by ', el('strong', { class: 'sticky' }, r.sticky));
  card.append(methods);
  card.append(sidesTable(r, `${r.name}: calls per side`));
  if (r.split) card.append(rollbackLine(r));
  if (r.shadow) card.append(shadowSection(r));
  return card;
}

function plainRoutes(routes) {
  const rows = routes.map((r) => el('tr', { 'data-route': r.name },
    el('th', { scope: 'row' }, r.name),
    el('td', {}, r.methods.join(' ')),
    el('td', {}, r.sides.map((s) => s.upstream).join(', ')),
    el('td', { class: 'num' }, fmt(r.sides.reduce((a, s) => a + s.calls, 0)))));
  return el('article', { class: 'card' }, el('h3', {}, 'Routes without a split or a shadow'),
    el('div', { class: 'scroll' }, el('table', { class: 'data' },
      el('thead', {}, el('tr', {}, ...['Route', 'Methods', 'Upstream', 'Calls'].map((x) => el('th', { scope: 'col' }, x)))),
      el('tbody', {}, ...rows))));
}

// --- callers ----------------------------------------------------------------------------------

function renderCallers(c) {
  const tracked = c.tracked || [];
  const legacy = tracked.filter((t) => (t.dialects.legacy || 0) > 0)
    .sort((a, b) => b.dialects.legacy - a.dialects.legacy);
  const box = $('legacy-callers');
  const summary = el('p', { class: 'muted', id: 'legacy-callers-summary' },
    `${legacy.length} of ${tracked.length} tracked callers (told apart by ${c.rule}) called in the legacy dialect.`);
  if (c.others && c.others.callers > 0) {
    summary.append(` ${fmt(c.others.callers)} more callers (${fmt(c.others.calls)} calls) beyond migration.max_callers are counted together.`);
  }
  if (!legacy.length) {
    box.replaceChildren(summary);
    return;
  }
  const rows = legacy.map((t) => {
    const others = Object.entries(t.dialects).filter(([d]) => d !== 'legacy').map(([d, n]) => `${d} ${fmt(n)}`);
    return el('tr', { 'data-caller': t.caller },
      el('th', { scope: 'row' }, el('code', {}, t.caller)),
      el('td', { class: 'num legacy-calls' }, fmt(t.dialects.legacy)),
      el('td', {}, others.length ? others.join(', ') : 'none'),
      el('td', {}, Object.keys(t.methods).join(' ') + (t.more_methods ? ` (+${fmt(t.more_methods)} calls of others)` : '')),
      el('td', {}, time(t.last_seen_ms)));
  });
  box.replaceChildren(summary, el('table', { class: 'data callers' },
    el('caption', { class: 'visually-hidden' }, 'Callers that called in the legacy dialect, most legacy calls first'),
    el('thead', {}, el('tr', {}, ...['Caller', 'Legacy calls', 'Other dialects', 'Methods', 'Last seen'].map((x) => el('th', { scope: 'col' }, x)))),
    el('tbody', {}, ...rows)));
}

// --- the report ---------------------------------------------------------------------------------

async function refreshReport() {
  const box = $('migration-body');
  let report;
  try {
    report = await getJson('/console/api/migration');
  } catch (e) {
    if (!(e instanceof Refused)) {
      box.replaceChildren(el('p', { class: 'error' }, `could not read the migration report: ${e.message}`));
      box.dataset.state = 'error';
    } else {
      box.dataset.state = 'refused';
    }
    lastReport = '';
    return;
  }
  // Re-rendered only when it changed, so reading (or selecting text) is not disturbed.
  const text = JSON.stringify(report);
  if (text === lastReport) return;
  lastReport = text;
  const routes = report.routes || [];
  const watched = routes.filter((r) => r.split || r.shadow);
  const plain = routes.filter((r) => !(r.split || r.shadow));
  const parts = watched.map(routeCard);
  if (!watched.length) {
    parts.push(el('p', { class: 'muted' }, 'No route has a split or a shadow: add `split` or `shadow` to a [[routes]] entry to start migrating it.'));
  }
  if (plain.length) parts.push(plainRoutes(plain));
  box.replaceChildren(...parts);
  box.dataset.state = 'shown';
  renderCallers(report.callers || { tracked: [], rule: '' });
}

// --- legacy share -----------------------------------------------------------------------------

async function refreshShare() {
  let s;
  try {
    s = await getJson('/console/api/stats');
  } catch {
    return;
  }
  const tMax = s.now;
  const tMin = s.now - s.window_secs + 1;
  const legacySeries = s.series.map((se, i) => (se.dialect === 'legacy' ? i : -1)).filter((i) => i >= 0);
  const legacyServed = s.served.findIndex((x) => x.dialect === 'legacy');
  const bySecond = new Map(s.samples.map((x) => [x.t, x]));
  const callers = [];
  const served = [];
  for (let t = tMin; t <= tMax; t++) {
    const x = bySecond.get(t);
    if (!x) {
      callers.push([t, null]);
      served.push([t, null]);
      continue;
    }
    const all = x.counts.reduce((a, n) => a + n, 0);
    const legacy = legacySeries.reduce((a, i) => a + (x.counts[i] || 0), 0);
    callers.push([t, all ? (100 * legacy) / all : null]);
    const routed = x.served.reduce((a, n) => a + n, 0);
    served.push([t, routed ? (100 * x.served[legacyServed]) / routed : null]);
  }
  const allCalls = s.series.reduce((a, se) => a + se.total, 0);
  const legacyCalls = legacySeries.reduce((a, i) => a + s.series[i].total, 0);
  const routedCalls = s.served.reduce((a, x) => a + x.total, 0);
  const servedLegacy = legacyServed >= 0 ? s.served[legacyServed].total : 0;
  const callersShare = allCalls ? (100 * legacyCalls) / allCalls : null;
  const servedShare = routedCalls ? (100 * servedLegacy) / routedCalls : null;
  const names = ['legacy callers', 'served by legacy upstreams'];
  lineChart($('legacy-chart'), {
    series: [
      { name: names[0], color: PALETTE[4], points: callers },
      { name: names[1], color: PALETTE[0], points: served },
    ],
    tMin, tMax, unit: ' %', max: 100, stroke: 3,
    label: `Legacy share per second over the last 15 minutes: ${pct(callersShare)} of calls made in the legacy dialect, ` +
      `${pct(servedShare)} of routed calls served by legacy upstreams`,
  });
  $('share-callers').textContent = pct(callersShare);
  $('share-served').textContent = pct(servedShare);
  const legend = [
    [names[0], PALETTE[4], `${pct(callersShare)} of ${fmt(allCalls)} calls made in the legacy dialect`, callersShare],
    [names[1], PALETTE[0], `${pct(servedShare)} of ${fmt(routedCalls)} routed calls served by a legacy upstream`, servedShare],
  ].map(([name, color, text, share]) => {
    const sw = el('span', { class: 'swatch' });
    sw.style.background = color;
    return el('li', { 'data-series': name, 'data-share': share === null ? '' : share.toFixed(2) }, sw, text);
  });
  $('legacy-legend').replaceChildren(...legend);
}

export function show() {
  lastReport = '';
  refreshReport();
  refreshShare();
  timers = [setInterval(refreshShare, 1000), setInterval(refreshReport, 2000)];
}

export function hide() {
  timers.forEach(clearInterval);
  timers = [];
}
