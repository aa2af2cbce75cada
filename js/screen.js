// The last screen of each session: its newest rows and fields as last shown in this browser,
// kept in localStorage so that a reopen draws them at once, before the worker, the wasm module
// and the store are ready (together ~80 ms on a fast machine, far more on a slow one). The
// session view replaces it with the cache's rows, checked by the server, as soon as they come.
//
// Only what the worker already showed is saved (rows are the fold's output: no rule is written
// twice), and a saved screen is never taken for verified: it comes back with `verified: false`
// and `live: false`. A screen goes when its session is reloaded, deleted, gone from the server
// or shown empty. At most SCREENS_KEPT screens of SCREENS_CHARS in all are kept per origin,
// the least recently saved first out: the app's own localStorage keeps most of its room.

const PREFIX = 'scrollback.screen.v1 ';
const INDEX = 'scrollback.screens.v1';
const SCREENS_KEPT = 20;
// (localStorage holds about 5 Mi characters per origin in Chromium, Firefox and WebKit.)
const SCREENS_CHARS = 1024 * 1024;
const SCREEN_ROWS = 60;
const SCREEN_CHARS = 256 * 1024;
// The fields a screen keeps besides its rows; the rest describe a connection, not the session.
const FIELDS = ['id', 'status', 'model', 'permissionMode', 'contextTokens', 'queued',
  'waitingCommands', 'compactingSince', 'moreHistory', 'oldest', 'cursor', 'cursorFingerprint'];

/** localStorage, or null where a page has none (or may not use it). */
function storage() {
  try {
    return typeof localStorage === 'undefined' ? null : localStorage;
  } catch {
    return null;
  }
}

/**
 * The server's part of a key: its host and port (the scheme's default when the URL names none,
 * so `http://gw` and `https://gw` are two servers, as they are two folders of the cache), and
 * its path prefix when it has one (without trailing slashes): two servers behind one origin
 * (`https://gw/sandbox`, `https://gw/prod`) keep two last screens of a session id both hold.
 * Neither a host nor a URL's (percent-encoded) path holds a space, so the key's space still
 * ends it.
 */
function serverKey(server) {
  try {
    const url = new URL(server);
    if (!url.host) return String(server);
    const port = url.port || { 'http:': '80', 'https:': '443' }[url.protocol];
    const host = port ? `${url.hostname}:${port}` : url.host;
    return host + url.pathname.replace(/\/+$/, '');
  } catch {
    return String(server);
  }
}

function key(server, id) {
  return `${PREFIX}${serverKey(server)} ${id}`;
}

/**
 * Saved keys: when each was saved (ms since the epoch) and its length in characters, as
 * `[savedAt, chars]`. (An index an older build wrote holds the time alone: the length is read
 * from the screen itself.)
 */
function readIndex(ls) {
  let index;
  try {
    index = JSON.parse(ls.getItem(INDEX) ?? '{}');
  } catch {
    return {};
  }
  if (!index || typeof index !== 'object' || Array.isArray(index)) return {};
  for (const [k, v] of Object.entries(index)) {
    if (typeof v === 'number') index[k] = [v, ls.getItem(k)?.length ?? 0];
    else if (!Array.isArray(v) || v.length !== 2 || !v.every(Number.isFinite)) delete index[k];
  }
  return index;
}

function writeIndex(ls, index) {
  try {
    ls.setItem(INDEX, JSON.stringify(index));
  } catch { /* the index is rebuilt as screens are saved */ }
}

/**
 * The last screen saved for session `id` of `server`, as a session state (`ready`, never
 * `verified` nor `live`), or null.
 */
export function lastScreen(server, id) {
  const ls = storage();
  if (!ls || typeof id !== 'string') return null;
  let saved;
  try {
    saved = JSON.parse(ls.getItem(key(server, id)));
  } catch {
    return null;
  }
  if (!saved || !Array.isArray(saved.rows) || !saved.rows.length || saved.fields?.id !== id) return null;
  return {
    ...saved.fields,
    rows: saved.rows,
    ready: true,
    verified: false,
    live: false,
    banner: null,
    error: null,
    writer: false,
    storageError: null,
    counters: { requests: 0, bytes: 0, localPages: 0, probesPassed: 0, probesFailed: 0, events: 0, caughtUp: 0, resets: 0 },
  };
}

/** Saves `state` as the last screen of session `id` (or forgets it when there is nothing to show). */
export function saveScreen(server, id, state) {
  const ls = storage();
  if (!ls) return;
  if (!state?.ready) return; // not drawn yet: what was saved stays
  // The cache stopped keeping rows (a full quota): a screen past what it kept would be newer
  // than what a reopen's cache shows. What was saved before stays.
  if (state.storageError) return;
  // A refused token keeps the cache (`setToken` opens it again): it keeps the screen too.
  if (state.error?.kind === 'unauthorized') return;
  if (!state.rows?.length || state.error) {
    forgetScreen(server, id);
    return;
  }
  const fields = {};
  for (const f of FIELDS) if (state[f] !== undefined) fields[f] = state[f];
  let rows = state.rows.slice(-SCREEN_ROWS);
  let json;
  for (;;) {
    json = JSON.stringify({ fields: { ...fields, oldest: rows[0].seq, moreHistory: fields.moreHistory || rows.length < state.rows.length }, rows });
    if (json.length <= SCREEN_CHARS || rows.length === 1) break;
    rows = rows.slice(Math.ceil(rows.length / 2));
  }
  const k = key(server, id);
  if (json.length > SCREEN_CHARS) {
    forgetScreen(server, id);
    return;
  }
  const index = readIndex(ls);
  index[k] = [Date.now(), json.length];
  // The least recently saved others, first out: past the count or the characters kept, and
  // then one by one while localStorage is too full for this one (the app's own data fills it).
  const others = Object.keys(index).filter((o) => o !== k).sort((a, b) => index[a][0] - index[b][0]);
  let chars = Object.values(index).reduce((n, [, c]) => n + c, 0);
  const drop = () => {
    const old = others.shift();
    ls.removeItem(old);
    chars -= index[old][1];
    delete index[old];
  };
  while (others.length && (others.length >= SCREENS_KEPT || chars > SCREENS_CHARS)) drop();
  for (;;) {
    try {
      ls.setItem(k, json);
      break;
    } catch {
      if (others.length) {
        drop();
        continue;
      }
      ls.removeItem(k); // full even so: the screen is only a head start
      delete index[k];
      break;
    }
  }
  writeIndex(ls, index);
}

/**
 * Forgets the last screen of every session of `server`, but those of the ids in `except`: each
 * key of the server in localStorage, whether or not the index still names it.
 */
export function forgetScreens(server, except = []) {
  const ls = storage();
  if (!ls) return;
  const prefix = `${PREFIX}${serverKey(server)} `;
  const kept = new Set(except.map((id) => key(server, id)));
  const gone = [];
  for (let i = 0; i < ls.length; i += 1) {
    const k = ls.key(i);
    if (k?.startsWith(prefix) && !kept.has(k)) gone.push(k);
  }
  const index = readIndex(ls);
  for (const k of gone) {
    ls.removeItem(k);
    delete index[k];
  }
  writeIndex(ls, index);
}

/** Forgets the last screen of session `id`. */
export function forgetScreen(server, id) {
  const ls = storage();
  if (!ls) return;
  const k = key(server, id);
  if (ls.getItem(k) === null) return;
  ls.removeItem(k);
  const index = readIndex(ls);
  delete index[k];
  writeIndex(ls, index);
}
