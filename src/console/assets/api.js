// The console's calls to the gateway: the admin token, JSON calls, and SSE streams read with
// fetch (EventSource cannot send the token) that resume with Last-Event-ID after a drop.

const TOKEN_KEY = 'wiregate.adminToken';

/** The admin token typed into this tab, or ''. Nothing else is stored. */
export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

let accessListener = () => {};

/** `fn({ok, status, message})` hears whether the last data call was let through. */
export function onAccess(fn) {
  accessListener = fn;
}

function headers(extra = {}) {
  const h = new Headers(extra);
  const t = token();
  if (t) h.set('Authorization', 'Bearer ' + t);
  return h;
}

/** A data call the admin rule refused (401 or 403). */
export class Refused extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** A call answered with an error (a JSON-RPC error or an HTTP failure). */
export class Failed extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function errorMessage(resp) {
  try {
    const body = await resp.json();
    return (body && body.error && body.error.message) || resp.statusText;
  } catch {
    return resp.statusText || ('HTTP ' + resp.status);
  }
}

async function checkAccess(resp) {
  if (resp.status === 401 || resp.status === 403) {
    const message = await errorMessage(resp);
    accessListener({ ok: false, status: resp.status, message });
    throw new Refused(resp.status, message);
  }
  accessListener({ ok: true });
}

/** GETs JSON from a console route. */
export async function getJson(path) {
  const resp = await fetch(path, { headers: headers({ Accept: 'application/json' }), cache: 'no-store' });
  await checkAccess(resp);
  if (!resp.ok) throw new Failed(resp.status, await errorMessage(resp));
  return resp.json();
}

let nextId = 1;

/** Calls a JSON-RPC method through the console's `/console/api/rpc`; the result or a Failed. */
export async function rpc(method, params) {
  const resp = await fetch('/console/api/rpc', {
    method: 'POST',
    headers: headers({ 'Content-Type': 'application/json', Accept: 'application/json' }),
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
    cache: 'no-store',
  });
  await checkAccess(resp);
  let body = null;
  try {
    body = await resp.json();
  } catch {
    throw new Failed(resp.status, 'HTTP ' + resp.status);
  }
  if (body && body.error) throw new Failed(resp.status, body.error.message, body.error.code);
  return body.result;
}

/** Splits an SSE body into events: `{event, id, data}` (data as text), per the SSE rules. */
async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let event = '';
  let data = [];
  let id = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let nl;
    while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
      // A lone \r at the end may be the first half of \r\n: wait for more.
      if (buf[nl] === '\r' && nl === buf.length - 1) break;
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
      if (line === '') {
        if (data.length) {
          if (onEvent({ event: event || 'message', id, data: data.join('\n') }) === false) {
            reader.cancel().catch(() => {});
            return;
          }
        }
        event = '';
        data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let val = colon < 0 ? '' : line.slice(colon + 1);
      if (val.startsWith(' ')) val = val.slice(1);
      if (field === 'event') event = val;
      else if (field === 'data') data.push(val);
      else if (field === 'id' && !val.includes('\0')) id = val;
    }
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Opens an SSE stream and keeps it open until `close()` or until `onEvent` returns `false`
 * (a final update). A drop (a cut connection, or a stream that ends early) is resumed with
 * `Last-Event-ID` at `resumePath()`, so nothing is missed and nothing arrives twice; events
 * whose numeric id is not past the last one seen are skipped and counted in `repeats`.
 *
 * opts: {body} to POST the first request (a streaming RPC call), resumePath(), onEvent(ev),
 * onState(state, detail) with state 'open' | 'reconnecting' | 'ended' | 'error'.
 */
export function openStream(path, opts) {
  const handle = { lastId: null, repeats: 0, resumes: 0, closed: false, controller: null };
  handle.close = () => {
    handle.closed = true;
    if (handle.controller) handle.controller.abort();
  };
  const state = opts.onState || (() => {});
  (async () => {
    let first = true;
    let backoff = 250;
    while (!handle.closed) {
      const controller = new AbortController();
      handle.controller = controller;
      let url = path;
      const init = { signal: controller.signal, cache: 'no-store' };
      if (first && opts.body) {
        init.method = 'POST';
        init.headers = headers({ 'Content-Type': 'application/json', Accept: 'text/event-stream' });
        init.body = JSON.stringify(opts.body);
      } else {
        init.headers = headers({ Accept: 'text/event-stream' });
        if (handle.lastId !== null) init.headers.set('Last-Event-ID', handle.lastId);
        if (!first && opts.resumePath) url = opts.resumePath();
        if (!url) {
          state('error', 'the stream dropped before its first update: nothing to resume from');
          return;
        }
      }
      if (!first) handle.resumes += 1;
      first = false;
      let finished = false;
      try {
        const resp = await fetch(url, init);
        await checkAccess(resp);
        const type = resp.headers.get('Content-Type') || '';
        if (!resp.ok || !type.startsWith('text/event-stream')) {
          let message = 'HTTP ' + resp.status;
          try {
            const body = await resp.json();
            message = (body.error && body.error.message) || message;
          } catch { /* not JSON */ }
          state('error', message);
          return;
        }
        state('open');
        backoff = 250;
        await readEvents(resp.body, (ev) => {
          if (ev.id !== null && handle.lastId !== null && /^\d+$/.test(ev.id) &&
              /^\d+$/.test(handle.lastId) && BigInt(ev.id) <= BigInt(handle.lastId)) {
            handle.repeats += 1;
            return true;
          }
          if (ev.id !== null) handle.lastId = ev.id;
          let data = ev.data;
          try {
            data = JSON.parse(ev.data);
          } catch { /* keep the text */ }
          if (opts.onEvent({ event: ev.event, id: ev.id, data }) === false) {
            finished = true;
            return false;
          }
          return true;
        });
      } catch (e) {
        if (e instanceof Refused) {
          state('error', e.message);
          return;
        }
        // A dropped connection: resumed below.
      }
      if (handle.closed) return;
      if (finished) {
        state('ended');
        return;
      }
      state('reconnecting', handle.lastId);
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 5000);
    }
  })();
  return handle;
}
