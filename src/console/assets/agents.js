// Agents: sid contexts and their tasks; one task's text streaming in (resumed with
// Last-Event-ID after a drop, no text shown twice); send a message; answer a prompt; cancel.

import { getJson, openStream, rpc, Failed, Refused } from './api.js';

const $ = (id) => document.getElementById(id);
let timer = null;
/** The open task: {id, contextId, stream, state, answered}. */
let open = null;

const TERMINAL = new Set(['completed', 'failed', 'canceled']);
const MAX_LOG = 200;

function shortId(id) {
  return id.length > 13 ? id.slice(0, 8) + '…' : id;
}

async function refreshContexts() {
  let body;
  try {
    body = await getJson('/console/api/agents');
  } catch (e) {
    if (!(e instanceof Refused)) $('contexts').textContent = `could not read: ${e.message}`;
    return;
  }
  const box = $('contexts');
  if (!body.enabled) {
    box.replaceChildren(p('The sid bridge is off (sid.enabled).'));
    return;
  }
  if (!body.contexts.length) {
    box.replaceChildren(p('No contexts yet: send a message to start one.'));
  } else {
    box.replaceChildren(...body.contexts.map(renderContext));
  }
  // The form's list changes only when contexts come or go, so a choice being made stays put.
  const select = $('send-context');
  const ids = body.contexts.map((c) => c.id);
  if (select.dataset.ids !== ids.join(' ')) {
    const chosen = select.value;
    const options = [new Option('a new context', '')];
    for (const id of ids) options.push(new Option(`context ${shortId(id)}`, id));
    select.replaceChildren(...options);
    select.value = ids.includes(chosen) ? chosen : '';
    select.dataset.ids = ids.join(' ');
  }
}

function p(text) {
  const e = document.createElement('p');
  e.className = 'muted';
  e.textContent = text;
  return e;
}

function renderContext(c) {
  const box = document.createElement('section');
  box.className = 'context';
  box.dataset.context = c.id;
  const h = document.createElement('h4');
  h.title = c.id;
  h.textContent = `context ${shortId(c.id)} `;
  const badge = document.createElement('span');
  badge.className = 'badge ' + (c.running ? 'ok' : 'idle');
  badge.textContent = c.running ? 'running' : 'stopped';
  h.append(badge);
  box.append(h);
  const list = document.createElement('ul');
  list.className = 'tasks';
  for (const t of c.tasks) {
    const item = document.createElement('li');
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'link';
    button.dataset.task = t.id;
    button.textContent = `task ${shortId(t.id)}`;
    button.title = `Open task ${t.id}`;
    button.addEventListener('click', () => openTask(t.id, c.id));
    const state = document.createElement('span');
    state.className = `state-badge s-${t.state}`;
    state.textContent = t.state;
    item.append(button, ' ', state);
    list.append(item);
  }
  if (!c.tasks.length) list.append(Object.assign(document.createElement('li'), { className: 'muted', textContent: 'no tasks' }));
  box.append(list);
  return box;
}

function setState(state) {
  if (!open) return;
  open.state = state;
  const el = $('task-state');
  el.textContent = state;
  el.className = `state s-${state}`;
  el.dataset.state = state;
  $('cancel-button').hidden = TERMINAL.has(state);
}

function log(text, cls) {
  const list = $('task-log');
  const item = document.createElement('li');
  if (cls) item.className = cls;
  item.textContent = text;
  list.prepend(item);
  while (list.children.length > MAX_LOG) list.lastChild.remove();
}

function showPrompt(prompt) {
  const box = $('task-prompt');
  $('prompt-message').textContent = prompt.message;
  const choices = (prompt.choices && prompt.choices.length ? prompt.choices : ['yes', 'no']).map((choice) => {
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = choice;
    b.dataset.choice = choice;
    b.addEventListener('click', () => answer(choice));
    return b;
  });
  $('prompt-choices').replaceChildren(...choices);
  box.hidden = false;
  choices[0].focus();
}

async function answer(choice) {
  if (!open) return;
  const task = open.id;
  for (const b of $('prompt-choices').querySelectorAll('button')) b.disabled = true;
  log(`answered “${choice}”`);
  try {
    // Answers the open prompt; returns when the task settles, while the stream shows the rest.
    await rpc('message/send', { message: { role: 'user', parts: [{ kind: 'text', text: choice }], taskId: task } });
  } catch (e) {
    if (!(e instanceof Refused)) log(`the answer failed: ${e.message}`, 'error');
    for (const b of $('prompt-choices').querySelectorAll('button')) b.disabled = false;
  }
}

/** Applies one SSE event of the open task; `false` once the task's final update is in. */
function onTaskEvent(ev) {
  if (!open) return false;
  if (ev.event === 'gap') {
    log('some earlier updates are no longer retained', 'error');
    return true;
  }
  const params = ev.data && ev.data.params;
  if (!params) return true;
  if (!open.id && params.taskId) {
    open.id = params.taskId;
    open.contextId = params.contextId;
    showTitle();
  }
  if (params.taskId && params.taskId !== open.id) return true;
  const text = $('task-text');
  text.dataset.events = String(Number(text.dataset.events || 0) + 1);
  text.dataset.lastEventId = ev.id || '';
  if (ev.event === 'TaskArtifactUpdateEvent') {
    if (params.artifact === 'response') {
      if (params.append === false) text.textContent = params.text || '';
      else text.append(params.text || '');
    } else if (params.text) {
      log(`${params.artifact}: ${params.text}`);
    }
    return true;
  }
  if (params.state) setState(params.state);
  if (params.prompt && params.state === 'input-required') showPrompt(params.prompt);
  else if (params.state && params.state !== 'input-required') $('task-prompt').hidden = true;
  if (params.tool) log(`tool ${params.tool.name}: ${params.tool.phase}`);
  if (params.message) log(params.message, params.level === 'error' ? 'error' : '');
  if (params.error) log(`error: ${params.error.message || JSON.stringify(params.error)}`, 'error');
  if (params.final) {
    refreshContexts();
    return false;
  }
  return true;
}

function showTitle() {
  $('task-title').textContent = open.id ? `Task ${shortId(open.id)}` : 'New task';
  $('task-title').title = open.id || '';
  $('task-meta').textContent = open.contextId ? `in context ${open.contextId}` : 'starting…';
  $('task-panel').dataset.task = open.id || '';
  $('task-panel').dataset.context = open.contextId || '';
}

function streamState(state, detail) {
  const panel = $('task-panel');
  panel.dataset.stream = state;
  if (state === 'reconnecting') log(`stream dropped; resuming after event ${detail ?? '(none)'}`);
  else if (state === 'error') log(`stream refused: ${detail}`, 'error');
  if (open && open.stream) {
    panel.dataset.resumes = String(open.stream.resumes);
    panel.dataset.repeats = String(open.stream.repeats);
  }
}

function resetPanel(id, contextId) {
  if (open && open.stream) open.stream.close();
  open = { id, contextId, stream: null, state: '' };
  showTitle();
  const text = $('task-text');
  text.textContent = '';
  text.dataset.events = '0';
  $('task-log').replaceChildren();
  $('task-prompt').hidden = true;
  $('task-state').textContent = '';
  delete $('task-state').dataset.state;
  $('cancel-button').hidden = true;
}

const resumePath = () => open && open.id && `/console/api/tasks/${encodeURIComponent(open.id)}/events`;

/** Opens a task: every retained update from the start, then live ones. */
export function openTask(id, contextId) {
  resetPanel(id, contextId);
  open.stream = openStream(resumePath(), { resumePath, onEvent: onTaskEvent, onState: streamState });
}

async function send(e) {
  e.preventDefault();
  const text = $('send-text').value.trim();
  if (!text) return;
  const contextId = $('send-context').value || undefined;
  const message = { role: 'user', parts: [{ kind: 'text', text }] };
  if (contextId) message.contextId = contextId;
  resetPanel(null, contextId);
  $('send-status').textContent = 'sent';
  const body = { jsonrpc: '2.0', id: Date.now(), method: 'message/stream', params: { message } };
  open.stream = openStream('/console/api/rpc', {
    body,
    resumePath,
    onEvent: onTaskEvent,
    onState: (state, detail) => {
      streamState(state, detail);
      if (state === 'error') $('send-status').textContent = `not sent: ${detail}`;
    },
  });
  $('send-text').value = '';
  setTimeout(refreshContexts, 300);
}

async function cancel() {
  if (!open || !open.id) return;
  try {
    const task = await rpc('tasks/cancel', { id: open.id });
    log(task.metadata && task.metadata.cancelNote ? `cancel asked: ${task.metadata.cancelNote}` : 'cancel asked');
  } catch (e) {
    if (e instanceof Failed) log(`cancel failed: ${e.message}`, 'error');
  }
}

let wired = false;

export function show() {
  if (!wired) {
    $('send-form').addEventListener('submit', send);
    $('send-text').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) $('send-form').requestSubmit();
    });
    $('cancel-button').addEventListener('click', cancel);
    wired = true;
  }
  refreshContexts();
  timer = setInterval(refreshContexts, 2000);
}

export function hide() {
  clearInterval(timer);
  timer = null;
}
