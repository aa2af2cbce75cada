// The Scrollback demo: a small chat client on the npm package.
//
// Everything from the server or a transcript is inserted with textContent, never as HTML.
import { Scrollback } from '/pkg/index.js';

const $ = (id) => document.getElementById(id);
const query = new URLSearchParams(location.search);

const ui = {
  list: $('session-list'), listStatus: $('list-status'), session: $('session'), empty: $('empty'),
  title: $('session-title'), meta: $('session-meta'), banner: $('banner'),
  transcript: $('transcript'), rows: $('rows'), pending: $('pending'), edge: $('history-edge'),
  composer: $('composer'), message: $('message'),
  settings: $('settings'), openSettings: $('open-settings'), cachedSize: $('cached-size'), cleared: $('cleared'),
  search: $('search'), searchForm: $('search-form'), searchBox: $('search-box'),
  searchStatus: $('search-status'), searchResults: $('search-results'),
};

/** Creates an element with a class and text (text only: never HTML). */
function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

export function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  const units = ['KB', 'MB', 'GB'];
  let v = n / 1024; let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

/**
 * A count with its thousands grouped (151,665): the same in every browser (WebKitGTK's
 * toLocaleString() groups nothing) and whatever the browser's language.
 */
export function formatCount(n) {
  const x = Number(n);
  if (!Number.isFinite(x)) return String(n);
  return String(Math.trunc(x)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

const short = (value, max = 600) => {
  const s = typeof value === 'string' ? value : JSON.stringify(value, null, 1);
  return s.length > max ? `${s.slice(0, max)}…` : s;
};

/** One transcript row as DOM, by the fold's row kinds. */
function renderRow(row) {
  const li = el('li', `row ${row.kind}`);
  li.dataset.seq = row.seq;
  const who = (t) => li.append(el('div', 'who', t));
  const note = (t) => { li.classList.add('note'); li.append(el('span', 'text', t)); };
  switch (row.kind) {
    case 'user': who('You'); li.append(el('div', 'text', row.text)); break;
    case 'assistant': who('Assistant'); li.append(el('div', 'text', row.text)); break;
    case 'tool':
      who(`tool · ${row.name}${row.result?.isError ? ' · failed' : ''}`);
      li.append(el('pre', 'input', short(row.input)));
      if (row.result) li.append(el('pre', row.result.isError ? 'output error' : 'output', short(row.result.output)));
      break;
    case 'toolResult': who('tool result'); li.append(el('pre', 'output', short(row.output))); break;
    case 'command':
      who(row.done ? 'command' : 'command · waiting');
      li.append(el('div', 'text', row.command));
      if (row.output) li.append(el('pre', 'output', short(row.output)));
      break;
    case 'status': note(`status: ${row.status}`); break;
    case 'usage': note(`context: ${formatCount(row.context)} tokens`); break;
    case 'settings': note(['settings', row.model && `model ${row.model}`, row.permissionMode && `mode ${row.permissionMode}`].filter(Boolean).join(' · ')); break;
    case 'queued': note(`queued: ${row.text}`); break;
    case 'compacting': note(row.active ? 'compacting context…' : 'compaction done'); break;
    case 'error': who('error'); li.append(el('div', 'text', row.message)); break;
    case 'malformed': who(`malformed ${row.eventType} event · ${row.reason}`); li.append(el('pre', 'output', short(row.event))); break;
    default: who(`unknown event · ${row.eventType ?? row.kind}`); li.append(el('pre', 'output', short(row.event ?? row))); break;
  }
  return li;
}

// ---- the session screen --------------------------------------------------------------------

let sb;              // the Scrollback client
let view = null;     // the open session's view
let current = null;  // its id
let opens = 0;       // openSession calls made: only the newest one's view is kept
let loadingOlder = false;
let olderRetryMs = 1000; // the wait before asking again for a page that failed
let olderNotBefore = 0; // and until when
let olderAgain = false; // the state changed while a page was being loaded
let pendingAnchor = null; // a seq to bring back into view (after a reload, or a search hit)
let anchorBlock = 'start'; // where it is brought: the top after a reload, the middle for a hit
let highlight = null;     // a search hit's seq: its row is marked
let reloading = false;    // between Reload and the purge: the old rows are not drawn again
// A last screen, or the opening screen, is drawn: it stays until the view has rows
// of its own (or an error) to draw instead.
let screenDrawn = false;
let opening = null;       // the opening screen (onOpeningScreen), until the view draws
let shownLive = null;     // whether the view drawn last was live (null: nothing drawn yet)
const rendered = new Map(); // seq -> the row's node
const drafts = new Map();   // session id -> the message typed and not sent

function topVisibleSeq() {
  const top = ui.transcript.getBoundingClientRect().top;
  for (const node of ui.rows.children) {
    if (node.getBoundingClientRect().bottom > top) return Number(node.dataset.seq);
  }
  return null;
}

/** The index of the row at `seq` in `rows` (in seq order), or -1. */
function rowIndex(rows, seq) {
  let lo = 0; let hi = rows.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (rows[mid].seq === seq) return mid;
    if (rows[mid].seq < seq) lo = mid + 1; else hi = mid - 1;
  }
  return -1;
}

/** Draws every row anew (the first draw, a reset, a reload). */
function drawAll(rows) {
  rendered.clear();
  ui.rows.replaceChildren(...rows.map((row) => {
    const node = renderRow(row);
    rendered.set(row.seq, node);
    return node;
  }));
}

/**
 * Patches what is drawn by `change` (rows removed, added, updated by seq): a streamed delta
 * redraws the one row it grew. Falls back to drawing all when the patch does not add up.
 */
function patchRows(rows, change) {
  for (const seq of change.removed) { rendered.get(seq)?.remove(); rendered.delete(seq); }
  for (const seq of change.updated) {
    const i = rowIndex(rows, seq);
    const old = rendered.get(seq);
    if (i < 0 || !old) continue;
    const node = renderRow(rows[i]);
    old.replaceWith(node);
    rendered.set(seq, node);
  }
  // Newest first, so the row after each one added is already drawn.
  for (const seq of [...change.added].reverse()) {
    const i = rowIndex(rows, seq);
    if (i < 0) continue;
    const node = renderRow(rows[i]);
    rendered.get(seq)?.remove();
    rendered.set(seq, node);
    const next = i + 1 < rows.length ? rendered.get(rows[i + 1].seq) : null;
    ui.rows.insertBefore(node, next ?? null);
  }
  if (ui.rows.children.length !== rows.length) drawAll(rows);
}

/** The row showing `seq`: the last one starting at or before it (a tool result is drawn in its call's row). */
function rowAt(rows, seq) {
  for (let i = rows.length - 1; i >= 0; i--) if (rows[i].seq <= seq) return rows[i];
  return null;
}

/**
 * Whether the row showing `seq` is whole: a view opened at a line inside a reply begins at that
 * line, and the next older page folds its first row into the reply's (another row, higher up).
 */
function wholeAt(rows, seq) {
  if (!view?.state.moreHistory) return true;
  const row = rowAt(rows, seq);
  return row !== null && row !== rows[0];
}

/** Marks the row of the search hit being shown (and only it). */
function markHit(rows) {
  const target = highlight === null ? null : rowAt(rows, highlight);
  const node = target ? rendered.get(target.seq) : null;
  for (const old of ui.rows.querySelectorAll('li.hit')) if (old !== node) old.classList.remove('hit');
  node?.classList.add('hit');
}

/** Whether the transcript is scrolled to its newest rows (kept for when its box resizes). */
let stuckToBottom = true;
let boxHeight = null; // the box's height the resize observer last saw
/**
 * Whether the transcript is at its newest rows. Once its box has resized and the observer has
 * not yet seen it (the list above filled in, in the same frame), what the reader was at still
 * holds: the observer brings the box back to it.
 */
function atBottomNow() {
  const box = ui.transcript;
  if (boxHeight === null || box.clientHeight === boxHeight) {
    stuckToBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  }
  return stuckToBottom;
}
function toBottom() {
  ui.transcript.scrollTop = ui.transcript.scrollHeight;
  stuckToBottom = true;
}

function renderRows(rows, change) {
  const box = ui.transcript;
  const atBottom = atBottomNow();
  const anchorSeq = atBottom ? null : topVisibleSeq();
  const anchorNode = anchorSeq === null ? null : rendered.get(anchorSeq);
  const anchorTop = anchorNode?.getBoundingClientRect().top;

  if (!change || change.reset) drawAll(rows);
  else patchRows(rows, change);

  markHit(rows);
  if (pendingAnchor !== null && rows.length && view?.state.ready) {
    const target = rowAt(rows, pendingAnchor) ?? rows[0];
    rendered.get(target.seq)?.scrollIntoView({ block: anchorBlock });
    // Brought back into view until its row is whole (a page folding it moves it).
    if (wholeAt(rows, pendingAnchor)) pendingAnchor = null;
  } else if (atBottom) {
    toBottom();
  } else if (anchorNode?.isConnected) {
    box.scrollTop += anchorNode.getBoundingClientRect().top - anchorTop;
  }
  atBottomNow();
}

/** Draws the state; `change` (from onChange) says which rows to patch, else all are drawn. */
function renderState(state, change) {
  if (reloading) return;
  ui.meta.textContent = state.error ? '' : [state.status, state.model, state.permissionMode,
    state.contextTokens != null ? `${formatCount(state.contextTokens)} tokens` : null,
    // Shown and followed, but not kept for the next visit (the storage is full or failing).
    state.storageError ? `not saved in this browser (${state.storageError})` : null]
    .filter(Boolean).join(' · ');
  // Nothing to write to when the session is not there.
  ui.composer.hidden = !!state.error;
  ui.banner.hidden = !state.banner && !state.error;
  if (state.error) {
    // Gone: deleted since it was listed, or never there (an address typed or kept).
    const known = listedOnce.has(current);
    const gone = known ? 'This session no longer exists on the server.' : 'There is no such session on the server.';
    const why = { gone, unauthorized: 'The server refused the access token.' }[state.error.kind]
      ?? 'The server refused this session.';
    ui.banner.replaceChildren(el('strong', null, `${why} `), el('span', 'detail', state.error.message));
  } else if (state.banner) {
    // The library's words: what is wrong, whether the cached transcript is shown (or, never
    // cached here, the session needs the network), and when it tries again.
    ui.banner.textContent = state.banner;
  }
  ui.edge.textContent = state.error ? ''
    : !state.ready ? (state.banner ? '' : 'Loading…')
      : state.moreHistory ? '' : 'Start of the conversation';
  followList(state);
  // The file was replaced (the view started over): its title may be another; the list says.
  if (change?.reset) refreshList();
  renderRows(state.rows ?? [], change);
  ui.pending.replaceChildren(
    ...(state.queued ?? []).map((q) => el('li', null, `waiting: ${q.text}`)),
    ...(state.waitingCommands ?? []).map((c) => el('li', null, `running: ${c.command}`)),
  );
  queueMicrotask(maybeLoadOlder);
}

async function maybeLoadOlder() {
  const state = view?.state;
  if (loadingOlder) { olderAgain = true; return; } // asked again once this one ends
  if (!view || !state?.ready || !state.moreHistory) return;
  if (performance.now() < olderNotBefore) return; // a failed page's wait (its timer asks)
  if (ui.transcript.scrollTop > 300 && ui.transcript.scrollHeight > ui.transcript.clientHeight) return;
  loadingOlder = true;
  ui.edge.textContent = 'Loading older messages…';
  const opened = view;
  let next = null;
  try {
    // A page added: the next frame asks for another while the top is still in view. None
    // (not checked yet, or the view moved on): the next change of state asks again.
    if (await view.loadOlder()) next = () => requestAnimationFrame(maybeLoadOlder);
    olderRetryMs = 1000;
  } catch (err) {
    // (A session left meanwhile: its page is not this one's to report, nor to wait for.)
    if (opened === view) {
      ui.banner.hidden = false;
      ui.banner.textContent = `Could not load older messages: ${err.message}`;
      // Asked again later, and later each time it fails: never a request every frame.
      const wait = olderRetryMs;
      olderRetryMs = Math.min(olderRetryMs * 2, 30_000);
      olderNotBefore = performance.now() + wait;
      next = () => setTimeout(() => { olderNotBefore = 0; maybeLoadOlder(); }, wait);
    }
  } finally {
    loadingOlder = false;
    // Nothing loaded, but the view changed meanwhile (a reset, a reconnect): ask again.
    if (!next && olderAgain) next = () => requestAnimationFrame(maybeLoadOlder);
    olderAgain = false;
    // The session shown now may have asked while this one's page was loading: it asks again.
    if (opened === view) next?.();
    else queueMicrotask(maybeLoadOlder);
  }
}

/**
 * Shows session `id`'s frame, and at once (before the cache has started) its opening screen
 * when it came already, else its last screen when this browser kept one.
 */
function showSession(id, summary) {
  rendered.clear(); ui.rows.replaceChildren(); ui.pending.replaceChildren();
  olderRetryMs = 1000; olderNotBefore = 0; olderAgain = false;
  ui.empty.hidden = true; ui.session.hidden = false;
  showTitle(id, summary);
  ui.meta.textContent = '';
  ui.banner.hidden = true;
  ui.composer.hidden = false;
  ui.openSettings.hidden = false;
  ui.message.value = drafts.get(id) ?? '';
  shownLive = null;
  const screen = (opening?.id === id ? opening : null) ?? Scrollback.lastScreen(location.origin, id);
  if (screen) renderState(screen);
  screenDrawn = screen !== null;
}

/**
 * Opens session `id`; with `anchor` (a search hit's seq), at that row (the engine's anchor
 * restore), brought into view and marked.
 */
async function openSession(id, summary, anchor = null) {
  highlight = anchor;
  if (current === id && view) {
    if (anchor === null) return;
    const rows = view.state.rows;
    if (view.state.ready && rows.length && rows[0].seq <= anchor) {
      // Already drawn: brought into view and marked (and again when its row grows older).
      markHit(rows);
      rendered.get(rowAt(rows, anchor).seq)?.scrollIntoView({ block: 'center' });
      if (!wholeAt(rows, anchor)) { pendingAnchor = anchor; anchorBlock = 'center'; }
      return;
    }
  }
  view?.close();
  keepDraft();
  view = null; current = id;
  pendingAnchor = anchor; anchorBlock = 'center';
  showSession(id, summary);
  const draw = (state, change) => {
    if (screenDrawn) {
      if (!state.ready && !state.error) return;
      screenDrawn = false;
      opening = null;
      change = undefined;
    }
    renderState(state, change);
  };
  markCurrent();
  const mine = ++opens;
  try {
    const opened = await sb.openSession(id, {
      anchor: anchor ?? undefined,
      onChange: (state, change) => { if (view === opened) draw(state, change); },
    });
    // Another session (or this one again) was opened meanwhile: that one is shown.
    if (opens !== mine || current !== id) { opened.close(); return; }
    view = opened;
    draw(view.state);
  } catch (err) {
    if (opens !== mine) return;
    ui.banner.hidden = false;
    ui.banner.textContent = `Could not open this session: ${err.message}`;
    ui.edge.textContent = '';
    // Not opened: nothing is cached of it to measure or reload.
    ui.composer.hidden = true;
    ui.openSettings.hidden = true;
  }
}

/** Keeps what was typed for the session shown, for when it is shown again. */
function keepDraft() {
  if (current === null) return;
  if (ui.message.value) drafts.set(current, ui.message.value);
  else drafts.delete(current);
}

function closeSession() {
  view?.close();
  keepDraft();
  view = null; current = null; highlight = null;
  ui.session.hidden = true; ui.empty.hidden = false;
  markCurrent();
}

// ---- the session list ----------------------------------------------------------------------

let sessions = [];
let listOffline = false; // the list shown is the cached one: the server could not be reached
let listTimer = null;
let listDrawn = null;    // the list as last drawn (JSON): one that did not change is not redrawn
let listAsks = 0;        // refreshList calls made: only the newest one's answer is drawn
const listedOnce = new Set(); // every session a list of this page had

/** How often the list is asked again: soon while the server cannot be reached, else now and then. */
const LIST_EVERY_MS = 30_000;
const LIST_OFFLINE_EVERY_MS = 5_000;

/** A list entry's second line. */
const entrySub = (s) => [s.offline ? 'cached, offline' : s.status, s.model].filter(Boolean).join(' · ');

/**
 * The list follows the open session: its entry shows the status the view has (a reply
 * streaming: working), and the list is asked again at once when the view goes live after the
 * server could not be reached, or stops being live.
 */
function followList(state) {
  const live = !!state.live;
  const turned = shownLive !== null && live !== shownLive;
  if (!state.error && state.ready) shownLive = live;
  if (turned && live === listOffline) refreshList();
  const s = live && sessions.find((x) => x.id === current);
  const status = state.status || s?.status;
  const model = state.model || s?.model;
  if (!s || (s.status === status && s.model === model && !s.offline)) return;
  Object.assign(s, { status, model, offline: undefined });
  const sub = [...ui.list.children].find((li) => li.dataset.id === current)?.querySelector('.sub');
  if (sub) sub.textContent = entrySub(s);
}

/** The header's title: the session's entry in the list, else its id (a session the list has not named yet). */
function showTitle(id, summary) {
  ui.title.textContent = summary?.title || id;
}

function markCurrent() {
  for (const li of ui.list.children) li.classList.toggle('current', li.dataset.id === current);
}

async function refreshList() {
  clearTimeout(listTimer);
  const asked = ++listAsks;
  try {
    const answer = await sb.sessions();
    if (asked !== listAsks) return; // a newer ask is out: its answer is drawn
    sessions = answer;
    for (const s of sessions) listedOnce.add(s.id);
    listOffline = sessions.some((s) => s.offline);
    ui.listStatus.textContent = listOffline
      ? 'Cannot reach the server: showing the cached sessions (not live).'
      : sessions.length ? '' : 'No sessions.';
  } catch (err) {
    if (asked === listAsks) {
      // Unreachable with nothing cached: asked again as an offline list is, to go live.
      listOffline = err.kind === 'unavailable';
      ui.listStatus.textContent = `Could not list sessions: ${err.message}`;
    }
    return;
  } finally {
    if (asked === listAsks) {
      clearTimeout(listTimer);
      listTimer = setTimeout(refreshList, listOffline ? LIST_OFFLINE_EVERY_MS : LIST_EVERY_MS);
    }
  }
  // The header follows the open session's entry (its title once the list has it, a new one
  // when its file was replaced).
  if (current !== null) showTitle(current, sessions.find((s) => s.id === current));
  // The same list again (asked now and then): the links stay as they are, focus and all.
  const drawn = JSON.stringify(sessions);
  if (drawn === listDrawn) return;
  listDrawn = drawn;
  ui.list.replaceChildren(...sessions.map((s) => {
    const li = el('li');
    li.dataset.id = s.id;
    const a = el('a');
    a.href = `#/sessions/${encodeURIComponent(s.id)}`;
    a.title = s.title || s.id;
    a.append(el('span', 'title', s.title || s.id), el('span', 'sub', entrySub(s)));
    li.classList.toggle('offline', !!s.offline);
    const del = el('button', 'delete', '✕');
    del.type = 'button';
    del.title = `Delete ${s.title || s.id}`;
    del.addEventListener('click', async () => {
      if (!confirm(`Delete “${s.title || s.id}” on the server?`)) return;
      try {
        await sb.deleteSession(s.id);
        if (current === s.id) location.hash = '#/';
      } catch (err) { ui.listStatus.textContent = `Could not delete: ${err.message}`; }
      await refreshList();
      if (!ui.searchBox.hidden) runSearch(); // its hits there are gone
      drafts.delete(s.id);
    });
    li.append(a, del);
    return li;
  }));
  markCurrent();
}

/** A session's address; with `seq`, the address of a search hit in it. */
const sessionHash = (id, seq) => `#/sessions/${encodeURIComponent(id)}${seq == null ? '' : `/at/${seq}`}`;

/**
 * The session the address names and the search hit's seq in it, if any; or null. A seq no line
 * can have (0, or past what a number holds exactly) is no anchor: the address is the session's
 * (and is rewritten so).
 */
function routedAt() {
  const m = location.hash.match(/^#\/sessions\/(.+?)(?:\/at\/(\d+))?$/);
  if (!m) return null;
  let id;
  try { id = decodeURIComponent(m[1]); } catch { return null; }
  const seq = m[2] === undefined ? null : Number(m[2]);
  if (seq !== null && !(Number.isSafeInteger(seq) && seq >= 1)) {
    history.replaceState(history.state, '', sessionHash(id));
    return { id, anchor: null };
  }
  return { id, anchor: seq };
}

/** The session the address names, or null. */
function routed() {
  return routedAt()?.id ?? null;
}

function route() {
  const at = routedAt();
  if (at === null) { closeSession(); return; }
  const summary = sessions.find((s) => s.id === at.id);
  openSession(at.id, summary, at.anchor);
  // A session the list has not got (made since it was asked): the list is asked again, for its
  // entry and its title. (The first list is still on its way when the page opens its address.)
  if (!summary && listDrawn !== null) refreshList();
}

// ---- search: over every cached session, in the worker, offline -----------------------------

let searchGeneration = 0; // only the newest query's answer is drawn (answers can cross)
let searchTimer = null;

/** A hit's snippet as DOM: the matched words in <mark>, everything as text (never HTML). */
function renderSnippet(pieces) {
  const span = el('span', 'snippet');
  for (const piece of pieces) span.append(piece.hit ? el('mark', null, piece.text) : document.createTextNode(piece.text));
  return span;
}

function renderHit(hit) {
  const li = el('li');
  li.dataset.session = hit.session;
  li.dataset.seq = hit.seq;
  const a = el('a');
  a.href = sessionHash(hit.session, hit.seq);
  const title = sessions.find((s) => s.id === hit.session)?.title || hit.session;
  a.append(el('span', 'where', `${title} · #${hit.seq} · ${new Date(hit.ts * 1000).toLocaleString()}`), renderSnippet(hit.snippet));
  // The same hit clicked again (no hash change) is brought back into view too.
  a.addEventListener('click', () => { if (location.hash === a.getAttribute('href')) queueMicrotask(route); });
  li.append(a);
  return li;
}

async function runSearch() {
  const text = ui.search.value;
  const generation = ++searchGeneration;
  if (!text.trim()) {
    ui.searchBox.hidden = true;
    ui.searchResults.replaceChildren();
    return;
  }
  ui.searchBox.hidden = false;
  ui.searchStatus.textContent = 'Searching…';
  let hits;
  try {
    hits = await sb.search(text, { limit: 20 });
  } catch (err) {
    if (generation === searchGeneration) ui.searchStatus.textContent = `Search failed: ${err.message}`;
    return;
  }
  if (generation !== searchGeneration) return; // a newer query is on its way
  ui.searchResults.replaceChildren(...hits.map(renderHit));
  ui.searchResults.dataset.query = text; // what the results shown answer
  ui.searchStatus.textContent = hits.length
    ? `${hits.length === 20 ? 'The best 20' : hits.length} ${hits.length === 1 ? 'match' : 'matches'} in the cached sessions`
    : 'No match in the cached sessions.';
}

// ---- settings: the cached size and Reload --------------------------------------------------

async function showSettings() {
  if (!view) return;
  ui.cleared.textContent = '';
  const spinner = el('span', 'spinner');
  spinner.setAttribute('aria-label', 'measuring');
  ui.cachedSize.replaceChildren(spinner);
  ui.settings.showModal();
  try {
    const bytes = await view.cachedSize();
    ui.cachedSize.textContent = bytes > 0 ? `${formatBytes(bytes)} cached` : 'nothing cached';
  } catch (err) {
    ui.cachedSize.textContent = `unknown (${err.message})`;
  }
}

async function reload() {
  if (!view) return;
  ui.settings.close();
  // A reader at the newest rows (following a reply) comes back to the newest rows, which may
  // have grown meanwhile; one scrolled back comes back to the row at the top.
  const anchor = atBottomNow() ? null : topVisibleSeq();
  const reloaded = view;
  reloading = true;
  rendered.clear(); ui.rows.replaceChildren();
  ui.edge.textContent = 'Reloading…';
  try {
    await reloaded.reload(anchor ?? undefined);
  } catch (err) {
    ui.banner.hidden = false;
    ui.banner.textContent = `Reload failed: ${err.message}`;
  } finally {
    reloading = false;
    if (reloaded === view) {
      pendingAnchor = anchor; anchorBlock = 'start';
      renderState(view.state);
    }
  }
}

/**
 * Forgets every transcript this browser keeps of the server (`sb.clearCache()`, a sign-out),
 * then opens the session shown again, from the server.
 */
async function forgetAll() {
  const id = current;
  view?.close();
  view = null;
  ui.cleared.textContent = 'Forgetting…';
  try {
    const kept = await sb.clearCache();
    ui.cachedSize.textContent = 'nothing cached';
    ui.cleared.textContent = kept.length
      ? `forgotten, but for ${kept.length} shown in another tab`
      : 'all forgotten';
  } catch (err) {
    ui.cleared.textContent = `not forgotten (${err.message})`;
  }
  if (id !== null && current === id && view === null) openSession(id, sessions.find((s) => s.id === id));
}

// ---- network panel -------------------------------------------------------------------------

async function refreshCounters() {
  try {
    const c = await sb.counters();
    for (const dd of document.querySelectorAll('[data-counter]')) {
      const key = dd.dataset.counter;
      dd.textContent = key === 'bytesDownloaded' ? formatBytes(c.bytesDownloaded)
        : key === 'probes' ? `${c.probesPassed} / ${c.probesFailed}` : String(c[key]);
    }
  } catch { /* the panel is informational */ }
}

// ---- start ---------------------------------------------------------------------------------

async function main() {
  // The box resized (the list above it filled in a narrow window, the banner came, the window
  // turned): a reader at the newest rows stays there, else the box's top row stays where it is.
  new ResizeObserver(() => {
    boxHeight = ui.transcript.clientHeight;
    if (stuckToBottom) toBottom();
  }).observe(ui.transcript);
  // A reload on a session draws its last screen before anything has started.
  if (routed() !== null) showSession(routed());
  try {
    sb = await Scrollback.open({
      server: location.origin,
      token: query.get('token') ?? undefined,
      storage: query.get('storage') ?? 'auto',
      // Reloaded on a session: its check leaves now, while the worker starts, and what it brings
      // is drawn as soon as the page's small module has folded it (a first visit's newest rows,
      // or the last screen with the lines added meanwhile).
      opening: routed() ?? undefined,
      onOpeningScreen: (state) => {
        opening = state;
        if ((current ?? routed()) !== state.id || view?.state.ready) return;
        renderState(state);
        screenDrawn = true;
      },
    });
  } catch (err) {
    ui.listStatus.textContent = `Scrollback could not start: ${err.message}`;
    return;
  }
  window.scrollbackDemo = { sb, view: () => view };
  ui.transcript.addEventListener('scroll', () => { atBottomNow(); maybeLoadOlder(); }, { passive: true });
  ui.openSettings.addEventListener('click', showSettings);
  $('reload').addEventListener('click', reload);
  $('clear-cache').addEventListener('click', forgetAll);
  ui.composer.addEventListener('submit', async (e) => {
    e.preventDefault();
    const text = ui.message.value.trim();
    if (!text || !current) return;
    // What is sent, and the reply, show at the bottom: the reader is taken there (from a
    // search hit, or rows scrolled back to), and the rows that come keep it there.
    pendingAnchor = null;
    toBottom();
    // The session it goes to, and what was typed: another session may be shown by the time
    // the server answers, and more typed since.
    const [id, typed] = [current, ui.message.value];
    try {
      await sb.postMessage(id, text);
      if (current === id && ui.message.value === typed) ui.message.value = '';
      if (drafts.get(id) === typed) drafts.delete(id);
    } catch (err) {
      // Not sent: it stays typed (or as the draft of the session left), said where it was sent.
      if (current === id) {
        ui.banner.hidden = false;
        ui.banner.textContent = `Could not send: ${err.message}`;
      }
    }
  });
  ui.message.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); ui.composer.requestSubmit(); }
  });
  ui.search.addEventListener('input', () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(runSearch, 120);
  });
  ui.searchForm.addEventListener('submit', (e) => { e.preventDefault(); clearTimeout(searchTimer); runSearch(); });
  window.addEventListener('hashchange', route);
  setInterval(refreshCounters, 500);
  // The session opens at once: its title is the id until the list (from the network) names it.
  refreshList();
  route();
}

main();
