// Line charts drawn as plain SVG: no library, no canvas, readable by assistive technology
// through the figure's label and the legend beside it.

const NS = 'http://www.w3.org/2000/svg';
const PAD = { left: 44, right: 8, top: 8, bottom: 22 };

export const PALETTE = ['#2563eb', '#16a34a', '#dc2626', '#9333ea', '#ea580c', '#0891b2',
  '#ca8a04', '#db2777', '#4f46e5', '#65a30d', '#0d9488', '#be123c'];

function el(name, attrs = {}, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

/** A round number at or above `v` (1, 2, 5 × 10^n). */
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/**
 * Draws `series` ([{name, color, points: [[t, value|null], ...]}]) over [tMin, tMax] into
 * `figure`, replacing what was there. A null value breaks the line. `label` describes the
 * chart for screen readers; `unit` is appended to the y axis's top value; `max` fixes the y
 * axis's top (a share's 100 %) instead of rounding up the largest value.
 */
export function lineChart(figure, { series, tMin, tMax, label, unit = '', width = 600, height = 180, stroke = 2, max: fixed }) {
  const W = width;
  const H = height;
  let max = 0;
  for (const s of series) for (const [, v] of s.points) if (v !== null && v > max) max = v;
  const top = fixed || niceMax(max);
  const x = (t) => PAD.left + ((t - tMin) / Math.max(1, tMax - tMin)) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - (v / top) * (H - PAD.top - PAD.bottom);
  const svg = el('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label, class: 'chart-svg' });
  for (const frac of [0, 0.5, 1]) {
    const gy = y(top * frac);
    svg.append(el('line', { x1: PAD.left, x2: W - PAD.right, y1: gy, y2: gy, class: 'grid' }));
    const text = frac === 0 ? '0' : (top * frac).toLocaleString(undefined, { maximumFractionDigits: 2 }) + (frac === 1 ? unit : '');
    svg.append(el('text', { x: PAD.left - 4, y: gy + 4, class: 'axis', 'text-anchor': 'end' }, text));
  }
  const span = tMax - tMin;
  for (const frac of [0, 1 / 3, 2 / 3, 1]) {
    const ago = Math.round((span * (1 - frac)) / 60);
    svg.append(el('text', { x: x(tMin + span * frac), y: H - 6, class: 'axis',
      'text-anchor': frac === 0 ? 'start' : frac === 1 ? 'end' : 'middle' }, ago === 0 ? 'now' : `−${ago} min`));
  }
  for (const s of series) {
    let d = '';
    let pen = false;
    let sum = 0;
    let smax = 0;
    for (const [t, v] of s.points) {
      if (v === null) {
        pen = false;
        continue;
      }
      sum += v;
      smax = Math.max(smax, v);
      // A lone second still shows: a dot, from a round cap on a hair of a line.
      d += pen ? `L${x(t).toFixed(1)} ${y(v).toFixed(1)}` : `M${x(t).toFixed(1)} ${y(v).toFixed(1)}h0.01`;
      pen = true;
    }
    const path = el('path', { d: d || 'M0 0', fill: 'none', stroke: s.color, 'stroke-width': stroke, 'stroke-linecap': 'round', 'stroke-linejoin': 'round',
      'data-series': s.name, 'data-sum': sum, 'data-max': smax, 'vector-effect': 'non-scaling-stroke' });
    path.append(el('title', {}, s.name));
    svg.append(path);
  }
  figure.replaceChildren(svg);
}
