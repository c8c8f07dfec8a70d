// The console's shell: which view is shown (from the URL's hash), and the access banner that
// says why data calls are refused and takes an admin token once.

import { onAccess, setToken, token } from './api.js';
import * as overview from './overview.js';
import * as migration from './migration.js';
import * as agents from './agents.js';
import * as events from './events.js';

const VIEWS = { overview, migration, agents, events };
const $ = (id) => document.getElementById(id);
let current = null;

function route() {
  const name = (location.hash || '#overview').slice(1);
  const next = VIEWS[name] ? name : 'overview';
  if (current === next) return;
  if (current) {
    VIEWS[current].hide();
    $(`view-${current}`).hidden = true;
  }
  for (const a of document.querySelectorAll('.tabs a')) {
    if (a.dataset.view === next) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  $(`view-${next}`).hidden = false;
  document.title = `${next[0].toUpperCase()}${next.slice(1)} · wiregate console`;
  const wasShown = current !== null;
  current = next;
  VIEWS[next].show();
  // Moving between views moves the focus to the view, for keyboard and screen-reader users.
  if (wasShown) $(`h-${next}`).focus({ preventScroll: true });
}

function access({ ok, status, message }) {
  const banner = $('access');
  document.body.dataset.access = ok ? 'granted' : 'refused';
  if (ok) {
    banner.hidden = true;
    return;
  }
  const form = $('token-form');
  let text;
  if (status === 401 && token()) {
    text = `Refused (401): the admin token was not accepted (${message}). Type another.`;
    form.hidden = false;
  } else if (status === 401) {
    text = `Refused (401): this gateway sets server.admin_tokens, so the console needs an admin token (${message}).`;
    form.hidden = false;
  } else {
    text = `Refused (403): the console's data answers loopback clients only (${message}); ` +
      'set server.admin_tokens to use it from elsewhere.';
    form.hidden = true;
  }
  $('access-message').textContent = text;
  banner.dataset.status = String(status);
  if (banner.hidden) {
    banner.hidden = false;
    if (!form.hidden) $('token-input').focus();
  }
}

function restart() {
  if (current) {
    VIEWS[current].hide();
    VIEWS[current].show();
  }
}

onAccess(access);
$('token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  setToken($('token-input').value.trim());
  $('token-input').value = '';
  $('access').hidden = true;
  restart();
});
for (const h of document.querySelectorAll('.view h2')) h.tabIndex = -1;
window.addEventListener('hashchange', route);
route();
