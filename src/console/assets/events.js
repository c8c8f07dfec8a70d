// Events: the legacy server's domain events as they arrive, filterable by task id.

import { getJson, openStream } from './api.js';

const $ = (id) => document.getElementById(id);
const MAX_ROWS = 500;
let stream = null;
let wired = false;
let visible = false;

function cell(text) {
  const td = document.createElement('td');
  td.textContent = text;
  return td;
}

function onEvent(ev) {
  const params = (ev.data && ev.data.params) || {};
  const row = document.createElement('tr');
  row.dataset.task = params.taskId || '';
  const rest = Object.fromEntries(Object.entries(params).filter(([k]) => k !== 'taskId'));
  row.append(cell(ev.id || ''), cell(ev.event), cell(params.taskId || ''), cell(JSON.stringify(rest)));
  const rows = $('events-rows');
  rows.prepend(row);
  while (rows.children.length > MAX_ROWS) rows.lastChild.remove();
  return true;
}

function start() {
  if (stream) stream.close();
  $('events-rows').replaceChildren();
  const task = $('events-task').value.trim();
  const path = '/console/api/events' + (task ? `?taskId=${encodeURIComponent(task)}` : '');
  const status = $('events-status');
  status.textContent = 'connecting…';
  stream = openStream(path, {
    onEvent,
    onState: (state, detail) => {
      status.dataset.state = state;
      status.textContent = state === 'open' ? `live${task ? ` for task ${task}` : ''}`
        : state === 'reconnecting' ? 'dropped; resuming…'
        : state === 'error' ? detail : state;
    },
  });
}

export async function show() {
  visible = true;
  if (!wired) {
    $('events-filter').addEventListener('submit', (e) => {
      e.preventDefault();
      start();
    });
    wired = true;
  }
  // Without a feed there is nothing to open (and a 404 would be a console error).
  try {
    const o = await getJson('/console/api/overview');
    if (!o.events) {
      $('events-status').textContent = 'no event feed is configured (events.source)';
      $('events-status').dataset.state = 'unconfigured';
      return;
    }
  } catch {
    return;
  }
  if (visible) start();
}

export function hide() {
  visible = false;
  if (stream) stream.close();
  stream = null;
}
