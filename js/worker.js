// The package's worker: the engine (Rust, wasm) runs here, off the page's thread, where OPFS
// sync access handles are allowed. index.js starts it; every message is one call:
//   page -> worker  { module } (first: the compiled module, or null) | { id, op, args }
//   worker -> page  { id, value } | { id, error: { name, message, kind?, status? } } | { view, patch }
//                   | { id, value, view, patch } (an answer with its view's patch, applied first)
// `patch` is what changed in a view since the last one, as a JSON string (one string crosses
// cheaply): `{reset?, removed?, rows?, state?}` (crate/src/wasm/session.rs, applied by
// index.js), so a streamed delta posts the row it grew, not every row loaded. A view's patch is
// sent at most every STATE_INTERVAL_MS, and always with or before the answer to a call on that
// view, so an awaited call sees its own effect: a successful call's answer carries it, one message
// where two would let the page draw in between (every `loadOlder` would wait for a frame).
//
// Start-up: the page compiles the module (compileStreaming, as it downloads, which also lets the
// browser cache the compiled code) while this worker loads its script and glue, and posts it
// here as its first message, `{ module }`; the module starts as soon as both are here. The
// worker leaves performance marks (`scrollback:module`, `scrollback:open`) and answers `marks`
// with them and its first API request's start and end (`request`, `response`, from resource
// timing), for the bench's timelines. The glue is a static import: bundlers build a worker as
// one file (Vite's default worker format cannot split it).
import init, { Client, Chats } from './scrollback.js';

const STATE_INTERVAL_MS = 16;

// The page compiles the module while this worker loads (index.js `startWorker`) and posts it
// first, `{ module }`; `null` when it could not, and the module is fetched from here.
let given;
const module = new Promise((resolve) => { given = resolve; });
const ready = module
  .then((m) => init({ module_or_path: m ?? new URL('./scrollback_bg.wasm', import.meta.url) }))
  .then(() => performance.mark('scrollback:module'));
let client = null;
let closing = false; // `close` has begun: a session opened meanwhile is closed, not kept
let chatStore = null; // `Scrollback.chats`: the chat store alone, no client
const chatHandles = new Map(); // handle id -> the page's Chats object's wasm Chats
const views = new Map(); // view id -> { session, timer, last, dirty }

function need() {
  if (!client) throw new Error('Scrollback is closed');
  return client;
}

function chat(handle) {
  const c = chatHandles.get(handle);
  if (!c) throw new Error('these chats are closed');
  return c;
}

function newChats(handle, options) {
  if (chatStore) chatHandles.set(handle, chatStore.withOptions(options));
  else chatHandles.set(handle, need().chats(options));
}

function freeChats(handle) {
  chatHandles.get(handle)?.free();
  chatHandles.delete(handle);
}

function view(viewId) {
  const v = views.get(viewId);
  if (!v) throw new Error('this session view is closed');
  return v;
}

/** Takes the view's patch, if it changed: posted on its own, or returned when `take`. */
function flush(viewId, take = false) {
  const v = views.get(viewId);
  if (!v || !v.dirty) return undefined;
  clearTimeout(v.timer);
  v.timer = null;
  v.dirty = false;
  v.last = performance.now();
  const patch = v.session.changesJson();
  if (patch === undefined || take) return patch;
  self.postMessage({ view: viewId, patch });
  return undefined;
}

/**
 * An answer to a call on a view (see `onView`): its patch is taken when the answer is posted,
 * in the same turn, so that no other patch of the view can be posted between the two.
 */
class OnView {
  constructor(value, view) {
    Object.assign(this, { value, view });
  }

  message(id) {
    const patch = flush(this.view, true);
    return patch === undefined ? { id, value: this.value } : { id, value: this.value, view: this.view, patch };
  }
}

function changed(viewId) {
  const v = views.get(viewId);
  if (!v || v.dirty) return;
  v.dirty = true;
  const wait = Math.max(0, v.last + STATE_INTERVAL_MS - performance.now());
  v.timer = setTimeout(() => flush(viewId), wait);
}

/** Runs `work` on a view; its answer carries what changed (or, on failure, it is sent first). */
async function onView(viewId, work) {
  let value;
  try {
    value = await work(view(viewId).session);
  } catch (err) {
    flush(viewId);
    throw err;
  }
  return new OnView(value, viewId);
}

function closeView(viewId) {
  const v = views.get(viewId);
  if (!v) return;
  views.delete(viewId);
  clearTimeout(v.timer);
  v.session.close();
  v.session.free();
}

/** How long after the open the search indexes start loading (a search before then loads them). */
const WARM_AFTER_MS = 1500;
/** How often the search segments of the sessions this worker wrote are brought up to date. */
const BUILD_EVERY_MS = 60_000;
/**
 * How often the search indexes are looked at again for what another tab wrote, in idle time:
 * more often than a search would do it itself (every 30 s: `RECHECK_MS` in
 * crate/src/search/reader.rs), so that a search does not.
 */
const RECHECK_EVERY_MS = 25_000;

// The first request the page asked before this worker was up (`opening`): its answer comes
// in an `early` message, and the engine's first request of that session awaits it. (The page
// folds the same answer into the session's opening screen with its own small module.)
let answerEarly;
const early = new Promise((resolve) => { answerEarly = resolve; });

const ops = {
  async open(options, earlyUrl) {
    if (client) throw new Error('Scrollback is already open');
    client = await Client.open(options);
    if (earlyUrl) client.expect(earlyUrl, early);
    performance.mark('scrollback:open');
    // The search indexes are loaded in idle time, once the first screen had its turn.
    const opened = client;
    // (Marked once done: `sb.marks()['search-warm']`.)
    setTimeout(() => {
      if (client === opened) {
        opened.warmSearch().then(() => performance.mark('scrollback:search-warm'), () => {});
      }
    }, WARM_AFTER_MS);
    const building = setInterval(() => {
      if (client === opened) opened.buildSearch().catch(() => {});
      else clearInterval(building);
    }, BUILD_EVERY_MS);
    const rechecking = setInterval(() => {
      if (client === opened) opened.recheckSearch().catch(() => {});
      else clearInterval(rechecking);
    }, RECHECK_EVERY_MS);
    return client.storage;
  },
  /** The worker's marks, by name: ms since the epoch (the page subtracts its timeOrigin). */
  marks() {
    const at = (t) => performance.timeOrigin + t;
    const api = performance.getEntriesByType('resource')
      .find((e) => new URL(e.name).pathname.startsWith('/sessions'));
    return Object.fromEntries(performance.getEntriesByType('mark')
      .filter((m) => m.name.startsWith('scrollback:'))
      .map((m) => [m.name.slice(11), at(m.startTime)])
      .concat([['start', performance.timeOrigin]])
      .concat(api ? [['request', at(api.startTime)], ['response', at(api.responseEnd)]] : []));
  },
  early(answer) {
    answerEarly(answer);
  },
  sessions: () => need().sessions(),
  async openSession(viewId, id, anchor) {
    const session = await need().openSession(id, anchor, () => changed(viewId));
    if (closing) {
      // Closed while it opened: its run must not outlive the close (which waits for it).
      session.close();
      session.free();
      throw new Error('Scrollback is closed');
    }
    views.set(viewId, { session, timer: null, last: 0, dirty: false });
    return session.changesJson();
  },
  loadOlder: (viewId) => onView(viewId, (s) => s.loadOlder()),
  cachedSize: (viewId) => onView(viewId, (s) => s.cachedSize()),
  reload: (viewId, anchor) => onView(viewId, (s) => s.reload(anchor)),
  /** The whole state, after sending what changed: the page's patched state must equal it. */
  snapshot(viewId) {
    view(viewId).dirty = true;
    flush(viewId);
    return view(viewId).session.stateJson();
  },
  closeView,
  postMessage: (id, text) => need().postMessage(id, text),
  deleteSession: (id) => need().deleteSession(id),
  clearCache: () => need().clearCache(),
  warmSearch: () => need().warmSearch(),
  search: (query, limit, sessions) => need().search(query, limit, sessions ?? undefined),
  benchAppend: (id, jsonl, batch, indexing) => need().benchAppend(id, jsonl, batch, indexing),
  benchSizes: () => need().benchSizes(),
  counters: () => need().counters(),
  setToken: (token) => need().setToken(token),
  async openChats(options) {
    if (client || chatStore) throw new Error('Scrollback is already open');
    chatStore = await Chats.open(options);
  },
  newChats,
  freeChats,
  chatsInfo: (h) => ({ windowLines: chat(h).windowLines, backfillPages: chat(h).backfillPages }),
  chatNormalizeName: (h, name) => Chats.normalizeName(name),
  chatTail: (h, name, options) => chat(h).tail(name, options),
  chatBefore: (h, name, cursor, maxLines) => chat(h).before(name, cursor, maxLines),
  chatBeforePages: (h, name, cursor, maxLines, maxPages) => chat(h).beforePages(name, cursor, maxLines, maxPages),
  chatSave: (h, name, cursor, header, lines, options) => chat(h).save(name, cursor, header, lines, options),
  chatPatch: (h, name, cursor, header, op, options) => chat(h).patch(name, cursor, header, op, options),
  chatReplace: (h, name, header, lines, options) => chat(h).replace(name, header, lines, options),
  chatRestoreBackup: (h, name) => chat(h).restoreBackup(name),
  chatList: (h) => chat(h).list(),
  chatDelete: (h, name) => chat(h).delete(name),
  chatBackfill: (h, name, request) => chat(h).backfill(name, request),
  /**
   * Ends everything before the page terminates this worker: the views closed, the calls still
   * running answered (but those on the network, `UNWAITED`), then the sessions' runs ended and
   * the store's buffered writes committed.
   * (A worker ended with IndexedDB transactions in flight loses its buffered appends, and in
   * WebKit can leave the database unable to run another transaction: bug 324094.)
   */
  async close() {
    closing = true;
    for (const viewId of [...views.keys()]) closeView(viewId);
    for (const handle of [...chatHandles.keys()]) freeChats(handle);
    await Promise.allSettled([...running]);
    const [ending, chats] = [client, chatStore];
    client = null;
    chatStore = null;
    try {
      await ending?.close();
      await chats?.flush();
    } finally {
      ending?.free();
      chats?.free();
    }
  },
};

/** The calls being answered, for a close that lets them finish. */
const running = new Set();

/**
 * The calls a close does not wait for: each waits on the network (up to a request's timeout, a
 * minute, on a server that takes a request and never answers) or on a search, and a close that
 * waited for them would run out of time and end the worker before its store is closed. None
 * keeps anything a close would lose: a session list is remembered again by the next listing, a
 * message posted or a session deleted is the server's to keep (a deleted session's cache goes
 * at its next open), and the next worker redoes an idle search build. The page answers them
 * "Scrollback is closed".
 */
const UNWAITED = new Set(['sessions', 'postMessage', 'deleteSession', 'warmSearch', 'search']);

self.onmessage = async ({ data }) => {
  if ('module' in data) {
    given(data.module);
    return;
  }
  const { id, op, args } = data;
  let call;
  try {
    await ready;
    const run = ops[op];
    if (!run) throw new Error(`unknown operation ${op}`);
    // (A close's own call joins the set after it took the calls it waits for.)
    call = Promise.resolve(run(...args));
    if (!UNWAITED.has(op)) running.add(call);
    const value = await call;
    self.postMessage(value instanceof OnView ? value.message(id) : { id, value });
  } catch (err) {
    const error = err instanceof Error
      ? {
        name: err.name,
        message: err.message,
        ...(typeof err.kind === 'string' && { kind: err.kind }),
        ...(typeof err.status === 'number' && { status: err.status }),
      }
      : { name: 'Error', message: String(err) };
    self.postMessage({ id, error });
  } finally {
    running.delete(call);
  }
};
