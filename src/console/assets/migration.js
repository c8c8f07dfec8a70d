// Migration: a placeholder until the gateway serves GET /migration (the migrate-safely work);
// then its JSON, as it comes.

import { token } from './api.js';

const $ = (id) => document.getElementById(id);

function para(text, cls) {
  const p = document.createElement('p');
  if (cls) p.className = cls;
  p.textContent = text;
  return p;
}

export async function show() {
  const box = $('migration-body');
  const headers = { Accept: 'application/json' };
  if (token()) headers.Authorization = 'Bearer ' + token();
  let resp;
  try {
    resp = await fetch('/migration', { headers, cache: 'no-store' });
  } catch (e) {
    box.replaceChildren(para(`could not reach the gateway: ${e.message}`, 'error'));
    return;
  }
  if (resp.status === 404) {
    box.replaceChildren(para('Migration view not available: this gateway does not serve /migration ' +
      '(splits, shadow comparison and rollback come with the migrate-safely work).', 'muted'));
    box.dataset.state = 'unavailable';
    return;
  }
  if (resp.status === 401 || resp.status === 403) {
    box.replaceChildren(para('Refused: the migration report needs admin access.', 'error'));
    box.dataset.state = 'refused';
    return;
  }
  let body;
  try {
    body = await resp.json();
  } catch {
    box.replaceChildren(para(`/migration answered ${resp.status}, not JSON`, 'error'));
    return;
  }
  const pre = document.createElement('pre');
  pre.className = 'stream';
  pre.textContent = JSON.stringify(body, null, 2);
  box.replaceChildren(para('The gateway’s migration report:'), pre);
  box.dataset.state = 'shown';
}

export function hide() {}
