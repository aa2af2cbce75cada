// Scrollback's page-side API. The engine runs in a module worker this file starts (worker.js);
// here every method is a message to it and back, so nothing the page does waits on storage.
// A session view's changes are pushed by the worker as patches (rows added or changed by seq,
// rows removed, the other fields that changed), applied here at once, and handed to `onChange`
// with what changed: at once when nothing was delivered since the last frame (the first rows
// do not wait for a frame, and then another for the app's own), else at the next animation
// frame, so at most once a frame while changes keep coming; `view.state` is always the newest,
// complete state. What a view shows is also kept as the session's last screen (screen.js), which
// `Scrollback.lastScreen` reads back at once on the next visit, before the worker is up.

import { lastScreen, saveScreen, forgetScreen, forgetScreens } from './screen.js';

/**
 * Calls `fn` at the page's next animation frame; in a page that draws none (a hidden one, a
 * background tab, or one hidden before its frame), on a timer instead: changes are still
 * delivered there, as often as the browser runs timers in the background.
 */
function frame(fn) {
  const doc = globalThis.document;
  if (typeof requestAnimationFrame !== 'function' || !doc || doc.visibilityState === 'hidden') {
    setTimeout(fn, 16);
    return;
  }
  let called = false;
  const once = () => {
    if (called) return;
    called = true;
    doc.removeEventListener('visibilitychange', hidden);
    fn();
  };
  const hidden = () => {
    if (doc.visibilityState === 'hidden') setTimeout(once, 16);
  };
  requestAnimationFrame(once);
  doc.addEventListener('visibilitychange', hidden);
}

/**
 * An error thrown by the app's own callback (`onChange`, `onOpeningScreen`): reported as an
 * uncaught error would be, without stopping what called it (the other views' changes).
 */
function report(err) {
  if (typeof reportError === 'function') reportError(err);
  else console.error(err);
}

/**
 * An error from the worker, rebuilt as a real `Error` with its name and message, its `kind`
 * (a chat's check, or the class of a server error) and, when the server answered, its HTTP
 * `status`.
 */
function rebuild({ name, message, kind, status }) {
  const Ctor = { TypeError, RangeError }[name] ?? Error;
  const err = new Ctor(message);
  if (err.name !== name) err.name = name;
  if (kind !== undefined) err.kind = kind;
  if (status !== undefined) err.status = status;
  return err;
}

/**
 * `value` as an options object: `{}` for nothing (undefined or null), the object itself, or a
 * `TypeError` naming `what` for anything else (a string, a number, an array).
 */
function optional(value, what) {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw new TypeError(`${what} must be an object`);
  return value;
}

/**
 * `options` (an object from `optional`), with every key one of `names`; else a `TypeError` as
 * the worker's check of its own options words it (`options has no "budget": it takes ...`).
 */
function known(options, names, what) {
  const stray = Object.keys(options).find((key) => !names.includes(key));
  if (stray !== undefined) throw new TypeError(`${what} has no ${JSON.stringify(stray)}: it takes ${names.join(', ')}`);
  return options;
}

/** `value`, a string, or a `TypeError` saying what `what` must be. */
function string(value, what) {
  if (typeof value !== 'string') throw new TypeError(`${what} must be a string`);
  return value;
}

/** The newest lines a first visit shows (the protocol's `OPENING_WINDOW`). */
const OPENING_WINDOW = 80;

/**
 * The first request an open of session `id` makes, asked now, from the page, while the worker,
 * the module and the store start (`Scrollback.open`'s `opening`): the catch-up from the cursor
 * of the session's last screen, or, with no last screen (a first visit), its newest window, at
 * the URL the engine asks it (`BrowserTransport::catch_up`, `transcript`). The engine takes the
 * answer only for that URL, treats it as its own (the cached tail compared with it), and asks
 * again for anything but a 2xx. `screen`: the last screen it checks (null on a first visit);
 * `answered`: set once the answer (or its failure) is in.
 */
function askEarly({ server, token }, id) {
  if (id === '' || id === '.' || id === '..') return null;
  const screen = lastScreen(server, id);
  const cursor = screen?.cursor;
  let base;
  try {
    const url = new URL(server);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
    url.search = '';
    url.hash = '';
    base = url.href.replace(/\/+$/, '');
  } catch {
    return null;
  }
  const firstVisit = !(Number.isSafeInteger(cursor) && cursor >= 1);
  const ask = firstVisit ? `transcript?limit=${OPENING_WINDOW}` : `catchup?cursor=${cursor}`;
  const url = `${base}/sessions/${encodeURIComponent(id)}/${ask}`;
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  // Never from the HTTP cache (see the worker's transport): the file may have been replaced.
  const answer = fetch(url, { headers, cache: 'no-store' })
    // `file`: the id of the file it was read from, which older pages must match.
    .then(async (res) => ({ status: res.status, file: res.headers.get('scrollback-file'), body: await res.arrayBuffer() }))
    .catch(() => null);
  const early = { url, answer, screen: firstVisit ? null : screen, answered: false };
  answer.then(() => { early.answered = true; });
  return early;
}

/** Resolves in a task of its own: what the page has received meanwhile (an answer) is in. */
function nextTask() {
  return new Promise((resolve) => { setTimeout(resolve, 0); });
}

/**
 * Resolves once the page's next frame has been drawn (what the app asked to draw before the
 * open call, the session's last screen, is then on screen), or at once in a page that draws no
 * frames (a hidden one), or when the page is hidden meanwhile.
 */
function frameDrawn() {
  const doc = globalThis.document;
  if (typeof requestAnimationFrame !== 'function' || !doc || doc.visibilityState === 'hidden') {
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    requestAnimationFrame(() => setTimeout(resolve, 0));
    doc.addEventListener('visibilitychange', resolve, { once: true });
  });
}

/**
 * The page's small module (`scrollback_screen.js`: the crate's fold and view alone, a third of
 * the worker's module), fetched and compiled now, beside the early request, so that the opening
 * session's first screen is folded here as soon as the answer is in, not when the worker's
 * module, the store and the session are up. Once up, while the answer is still on its way, it
 * warms up: the fold the opening screen will take (`early.screen`: a reopen's, else a first
 * visit's) runs once over a small session of its own, so that the engine compiles it (V8
 * compiles a function on its first call) meanwhile. When the answer is already in, the fold
 * itself compiles as it runs, and warming up first would only delay it. The warm-up holds the
 * page's thread for a few milliseconds, so on a reopen (`drawn`: the frame after the open call)
 * it waits for the frame that draws the last screen: that screen is what the user sees first,
 * and the check of its cursor usually brings nothing to fold. Resolves to its exports, or null
 * where it cannot load (the worker's view then comes first, as it would anyway).
 */
function loadScreenModule(drawn, early) {
  const wasm = fetch(new URL('./scrollback_screen_bg.wasm', import.meta.url));
  wasm.catch(() => {});
  return import('./scrollback_screen.js')
    .then(async (glue) => {
      await glue.default({ module_or_path: wasm });
      performance.mark('scrollback:screen-module');
      await drawn;
      if (!early.answered) glue.warmUp(early.screen !== null);
      performance.mark('scrollback:screen-warm');
      return glue;
    })
    .catch(() => null);
}

/**
 * The opening screen folded from the early request's answer: a first visit's newest window, or
 * the last screen with what the check of its cursor brought (nothing when it brought nothing new
 * or the screen is not the server's any more). A state's JSON, or undefined.
 */
function foldOpening(glue, id, early, answer) {
  if (!glue || !answer || answer.status < 200 || answer.status >= 300) return undefined;
  const bytes = new Uint8Array(answer.body);
  return early.screen === null
    ? glue.openingScreen(id, bytes)
    : glue.resumedScreen(JSON.stringify(early.screen), bytes);
}

/**
 * The opening screen (`foldOpening`'s JSON, or undefined) handed to the app's `onOpeningScreen`
 * (`handing.show`) once: not after `show` was taken back (the Scrollback closed), nor when a
 * view of the session already shows rows of its own (`handing.shown()`).
 */
function handOver(handing, json) {
  const { show } = handing;
  handing.show = null;
  if (!show || json === undefined || handing.shown()) return;
  let state;
  try {
    state = JSON.parse(json);
  } catch {
    return;
  }
  // What the app now shows: the session's view does not take it back (see `SessionView`).
  handing.cursor = state.cursor;
  handing.handed(state.cursor);
  try {
    show(state);
  } catch (err) {
    report(err);
  }
}

/**
 * How long the worker waits at most for the page's small module to be up, and then for its
 * fold (ms): a small module that neither loads nor fails never holds the worker back longer.
 */
const SCREEN_FIRST_MS = 1000;

/**
 * Starts the package's worker and, beside it, compiles the module here, while the worker
 * itself loads (its script and glue take as long as the module's download): the compiled
 * module is posted to the worker, which fetches the module itself only when it gets `null`
 * (a page whose policy forbids compiling, a browser that cannot post a module).
 * `compileStreaming` compiles as the bytes arrive and lets the browser cache the compiled code.
 */
function startWorker(name) {
  const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name });
  // (In a promise: where compileStreaming is missing, the call throws, and the worker fetches.)
  Promise.resolve()
    .then(() => WebAssembly.compileStreaming(fetch(new URL('./scrollback_bg.wasm', import.meta.url))))
    .catch(() => null)
    .then((module) => {
      try {
        worker.postMessage({ module });
      } catch {
        worker.postMessage({ module: null });
      }
    });
  return worker;
}

/**
 * A client-side transcript cache for one server. Make one with {@link Scrollback.open}.
 */
export class Scrollback {
  #worker;
  #storage = null;
  #calls = new Map();
  #nextCall = 1;
  #views = new Map();
  #nextView = 1;
  #dirty = new Set();
  #frameAsked = false;
  #quiet = true; // nothing delivered since the last animation frame
  #failure = null;
  #nextChats = 1;
  #server = null;
  #onPageHide = null;
  #closing = null;
  #opening = null; // who is told of the opening session's first screen (see `handOver`)

  /**
   * Starts the worker and opens the cache for `options.server`.
   * @param {import('./index.js').ScrollbackOptions} options
   * @returns {Promise<Scrollback>}
   */
  static async open(options) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError('Scrollback.open needs an options object: { server, token?, storage?, budgetBytes?, search?, opening?, onOpeningScreen? }');
    }
    const { opening, onOpeningScreen, ...engineOptions } = options;
    if (opening !== undefined && typeof opening !== 'string') throw new TypeError('opening must be a session id (a string)');
    if (onOpeningScreen !== undefined && typeof onOpeningScreen !== 'function') throw new TypeError('onOpeningScreen must be a function');
    const early = opening === undefined ? null : askEarly(options, opening);
    // Folded here by the small module, for the app's `onOpeningScreen`, once both the answer
    // and the module are in; the worker takes the same answer for the session's open.
    // (On a reopen, the app has just asked for the last screen to be drawn.)
    const screenModule = early && onOpeningScreen
      ? loadScreenModule(early.screen ? frameDrawn() : null, early)
      : null;
    // Who is told of the opening screen, once: the app, unless the Scrollback was closed
    // meanwhile (`show` taken back) or a view of the session already shows rows of its own.
    const handing = screenModule
      ? { id: opening, show: onOpeningScreen, shown: () => false, handed: () => {}, cursor: 0 }
      : null;
    // (The mark says when it was settled, handed over or not: for timelines and tests.)
    const handed = screenModule && Promise.all([early.answer, screenModule])
      .then(([answer, glue]) => handOver(handing, foldOpening(glue, opening, early, answer)))
      .catch(() => {})
      .finally(() => performance.mark('scrollback:opening-screen'));
    // The worker starts once the small module is up and warm, and when the answer is in by
    // then, once it is folded and handed over (each wait ends after a second at most): the
    // opening screen is needed first, and on a slow link or a machine of two cores the
    // worker's script, glue and module only slow its download, compile and fold (the worker's
    // rows came no later for the wait in the bench; README, JS API).
    if (screenModule) {
      const atMost = (promise) => Promise.race([promise,
        new Promise((resolve) => { setTimeout(resolve, SCREEN_FIRST_MS); })]);
      const settled = await atMost(screenModule.then(() => true)); // (not after a second)
      await nextTask(); // (an answer that came during the warm-up is taken in)
      if (settled && early.answered) await atMost(handed);
    }
    const worker = startWorker('scrollback');
    const sb = new Scrollback(worker);
    sb.#server = options.server;
    if (handing) {
      handing.shown = () => [...sb.#views.values()].some((view) => view.id === opening && view.state.ready);
      handing.handed = (cursor) => {
        for (const view of sb.#views.values()) if (view.id === opening) view._shown(cursor);
      };
      sb.#opening = handing;
    }
    early?.answer.then((answer) => sb.#call('early', answer)).catch(() => {});
    try {
      sb.#storage = await sb.#call('open', engineOptions, early?.url ?? null);
    } catch (err) {
      sb.close();
      // The worker names the options it takes; the page takes two more.
      if (err instanceof TypeError && /^options has no .*: it takes /.test(err.message)) {
        throw new TypeError(`${err.message}, opening, onOpeningScreen`);
      }
      throw err;
    }
    return sb;
  }

  /**
   * The last screen of session `id` of `server` shown in this browser, read at once (no worker,
   * no network): draw it while `Scrollback.open` and `openSession` start, and let the view's
   * first state replace it. A session state with `ready: true`, never `verified` nor `live`
   * (the server has not checked it), or null when none is kept. It is the newest rows the
   * session's views showed, saved as they change; a reload, a delete or a session gone from
   * the server forgets it.
   * @param {string} server the same `server` as given to {@link Scrollback.open}
   * @param {string} id
   * @returns {import('./index.js').SessionState | null}
   */
  static lastScreen(server, id) {
    return lastScreen(server, id);
  }

  /** @private Use {@link Scrollback.open}. */
  constructor(worker) {
    if (!(worker instanceof Worker)) throw new TypeError('use Scrollback.open(options)');
    this.#worker = worker;
    if (typeof addEventListener === 'function') {
      // Leaving the page: every view's screen is saved as it is.
      this.#onPageHide = () => { for (const view of this.#views.values()) view._saveScreen(); };
      addEventListener('pagehide', this.#onPageHide);
    }
    worker.onmessage = ({ data }) => this.#receive(data);
    worker.onerror = (event) => {
      event.preventDefault?.();
      this.#fail(new Error(`the Scrollback worker failed: ${event.message || 'it could not be loaded'}`));
    };
    worker.onmessageerror = () => this.#fail(new Error('a message from the Scrollback worker could not be read'));
  }

  #fail(err) {
    this.#failure = err;
    // Nothing more is asked of it: ended, its streams closed and its writer roles given up, so
    // that a Scrollback opened next (in this page or another tab) writes the sessions it held.
    this.#worker?.terminate();
    for (const { reject } of this.#calls.values()) reject(err);
    this.#calls.clear();
    // The views still open will hear nothing more: they say so, not live, with the reason.
    for (const view of this.#views.values()) {
      view._apply(JSON.stringify({ state: { live: false, banner: err.message } }));
      this.#dirty.add(view);
    }
    if (this.#dirty.size) queueMicrotask(() => this.#deliver());
  }

  #receive(data) {
    if (data.view !== undefined) {
      // A view's patch, alone or with the answer to a call on that view (applied first).
      const view = this.#views.get(data.view);
      if (view) {
        view._apply(data.patch);
        this.#dirty.add(view);
        if (!this.#frameAsked) {
          this.#frameAsked = true;
          if (this.#quiet) queueMicrotask(() => this.#deliver());
          else frame(() => this.#deliver());
        }
      }
      if (data.id === undefined) return;
    }
    const call = this.#calls.get(data.id);
    if (!call) return;
    this.#calls.delete(data.id);
    if (data.error) call.reject(rebuild(data.error));
    else call.resolve(data.value);
  }

  #deliver() {
    this.#frameAsked = false;
    if (this.#quiet) {
      this.#quiet = false;
      frame(() => { this.#quiet = true; });
    }
    const views = [...this.#dirty];
    this.#dirty.clear();
    for (const view of views) {
      try {
        view._deliver();
      } catch (err) {
        report(err);
      }
    }
  }

  #call(op, ...args) {
    if (this.#failure) return Promise.reject(this.#failure);
    if (!this.#worker) return Promise.reject(new Error('Scrollback is closed'));
    const id = this.#nextCall++;
    return new Promise((resolve, reject) => {
      this.#calls.set(id, { resolve, reject });
      try {
        this.#worker.postMessage({ id, op, args });
      } catch (err) {
        // An argument that cannot be posted (a function, a DOM node: a DataCloneError).
        this.#calls.delete(id);
        throw new TypeError(`arguments must be plain data (strings, numbers, arrays, objects): ${err.message}`);
      }
    });
  }

  /**
   * The server's sessions. Sessions the server no longer has are pruned from the cache, and the
   * list is remembered in the store. When the server cannot be reached: the cached sessions,
   * each marked `offline: true`.
   * @returns {Promise<import('./index.js').SessionSummary[]>}
   */
  sessions() {
    return this.#call('sessions');
  }

  /**
   * Opens a session without asking the network first: cached rows are drawn at once, one
   * request checks them and catches up (bringing the fresh summary), and the session is kept
   * live until `view.close()`.
   * @param {string} id
   * @param {import('./index.js').OpenSessionOptions} [options]
   * @returns {Promise<SessionView>}
   */
  async openSession(id, options) {
    if (typeof id !== 'string') throw new TypeError('openSession needs a session id (a string)');
    const what = 'openSession\'s options';
    const { onChange, anchor } = known(optional(options, what), ['onChange', 'anchor'], what);
    if (onChange !== undefined && typeof onChange !== 'function') throw new TypeError('onChange must be a function');
    const viewId = this.#nextView++;
    const server = this.#server;
    const screen = server === null ? null : {
      save: (state) => saveScreen(server, id, state),
      forget: () => forgetScreen(server, id),
      // Forgotten, and handed back to be put back (`save`) if what forgot it is refused.
      take: () => {
        const screen = lastScreen(server, id);
        forgetScreen(server, id);
        return screen;
      },
    };
    const view = new SessionView(id, onChange, screen, (op, ...args) => this.#call(op, viewId, ...args), () => {
      this.#views.delete(viewId);
      this.#dirty.delete(view);
      if (this.#worker && !this.#failure) this.#worker.postMessage({ id: 0, op: 'closeView', args: [viewId] });
    });
    // What the app may already show of the session: its last screen, its opening screen.
    if (server !== null) view._shown(lastScreen(server, id)?.cursor ?? 0);
    if (this.#opening?.id === id) view._shown(this.#opening.cursor);
    this.#views.set(viewId, view);
    try {
      view._apply(await this.#call('openSession', viewId, id, anchor ?? null));
      view._taken();
    } catch (err) {
      this.#views.delete(viewId);
      throw err;
    }
    return view;
  }

  /**
   * Posts a user message to a session.
   * @param {string} id
   * @param {string} text
   * @returns {Promise<void>}
   */
  async postMessage(id, text) {
    return this.#call('postMessage', string(id, 'a session id'), string(text, 'a message'));
  }

  /**
   * Full-text search over the cached sessions, in the worker, with no network: words and
   * `"quoted phrases"` (case- and accent-insensitive, the last word a prefix while typed),
   * ranked best first. Open a hit with `openSession(hit.session, { anchor: hit.seq })`.
   * Rejects when the Scrollback was opened with `search: false`.
   * @param {string} query
   * @param {import('./index.js').SearchOptions} [options]
   * @returns {Promise<import('./index.js').SearchHit[]>}
   */
  async search(query, options) {
    if (typeof query !== 'string') throw new TypeError('search needs a query (a string)');
    const what = 'search\'s options';
    const { limit = 20, sessions } = known(optional(options, what), ['limit', 'sessions'], what);
    if (!Number.isInteger(limit) || limit < 0) throw new TypeError('limit must be a whole number, 0 or more');
    if (sessions !== undefined && !(Array.isArray(sessions) && sessions.every((s) => typeof s === 'string'))) {
      throw new TypeError('sessions must be an array of session ids');
    }
    return this.#call('search', query, Math.min(limit, 2 ** 32 - 1), sessions ?? null);
  }

  /**
   * Readies search now: builds the search segments that are behind what was cached (the
   * built form a search reads a few kilobytes of per session) and loads each session's index
   * header, so the next `search` does not wait. The worker does this by itself a moment after
   * `open` (and builds the segments of what it wrote every minute); call it when a search box
   * appears to be sure. Resolves when done. With `search: false`, removes every session's
   * index instead.
   * @returns {Promise<void>}
   */
  warmSearch() {
    return this.#call('warmSearch');
  }

  /**
   * Benchmarks only (`npm run bench:search`), not the API: `('append', id, jsonl, batch,
   * indexing)` appends lines to a session's cache as the stream does and resolves to the
   * milliseconds it took; `('sizes')` resolves to `{cached, index, sessions, segments, pack}`
   * (bytes, but `sessions` and `segments`: counts).
   * @internal
   */
  _bench(what, ...args) {
    return this.#call(what === 'append' ? 'benchAppend' : 'benchSizes', ...args);
  }

  /**
   * Deletes a session on the server, then purges it from the cache.
   * @param {string} id
   * @returns {Promise<void>}
   */
  async deleteSession(id) {
    await this.#call('deleteSession', string(id, 'a session id'));
    if (this.#server !== null) forgetScreen(this.#server, id);
    // A view still open on it saves no screen of it any more.
    for (const view of this.#views.values()) if (view.id === id) view._dropScreen();
  }

  /**
   * Deletes everything this browser keeps of this server's transcripts (a sign-out): every
   * session's cache and search index, the remembered session list, and the last screens. The
   * chat files (`chats()`) are the app's and stay. Rejects while a view of this Scrollback is
   * open (close them first). A session another tab is showing is kept, with its last screen
   * (that tab still writes it).
   * @returns {Promise<string[]>} the ids kept because another tab is writing them
   */
  async clearCache() {
    const kept = await this.#call('clearCache');
    if (this.#server !== null) forgetScreens(this.#server, kept);
    return kept;
  }

  /**
   * The worker's start-up marks, as `performance.now()` times of this page: `start` (the
   * worker began), `module` (the wasm module was ready), `open` (the store was open), and,
   * once it made one, `request` and `response` (its first request to the server was sent, and
   * its answer had arrived), and `search-warm` (its own search warm-up, in idle time after the
   * open, was done).
   * @returns {Promise<Record<string, number>>}
   */
  async marks() {
    const marks = await this.#call('marks');
    return Object.fromEntries(Object.entries(marks).map(([k, at]) => [k, at - performance.timeOrigin]));
  }

  /**
   * Replaces the server's token (an access token refreshed; `null` or `''`: none) for every
   * request and stream from now on. A view the server had stopped for its token (`error.kind`
   * `'unauthorized'`) opens again: its rows are drawn from the cache again and checked, nothing
   * purged (unlike `reload()`). Resolves once the worker has the token.
   * @param {string | null} token
   * @returns {Promise<void>}
   */
  async setToken(token) {
    if (token !== null && typeof token !== 'string') throw new TypeError('setToken needs a token (a string, or null for none)');
    return this.#call('setToken', token);
  }

  /**
   * What the cache has saved and cost so far, over all sessions opened through this object.
   * @returns {Promise<import('./index.js').Counters>}
   */
  counters() {
    return this.#call('counters');
  }

  /**
   * The windowed chat files (`chats/<name>.jsonl`) and prompt backfill, in the same worker and
   * storage as the cache. Each call makes a handle with its own options and backfill cache;
   * bad options reject its calls with a `TypeError`.
   * @param {import('./index.js').ChatsOptions} [options]
   * @returns {Chats}
   */
  chats(options) {
    return this.#chats(options, () => {});
  }

  #chats(options, closed) {
    const handle = this.#nextChats++;
    const ready = this.#call('newChats', handle, options ?? null);
    ready.catch(() => {}); // each call on the handle reports it
    return new Chats(ready, (op, ...args) => this.#call(op, handle, ...args), () => {
      if (this.#worker && !this.#failure) this.#worker.postMessage({ id: 0, op: 'freeChats', args: [handle] });
      return closed();
    });
  }

  /**
   * Opens only the chat store, in a worker of its own, with no server: for an app that keeps
   * its chats locally. `chats.close()` stops the worker. Use one store per storage: beside a
   * server's cache, take `sb.chats()` instead.
   * @param {import('./index.js').ChatStoreOptions} [options]
   * @returns {Promise<Chats>}
   */
  static async chats(options = {}) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError('Scrollback.chats takes an options object: { storage?, windowLines?, backfillPages? }');
    }
    const worker = startWorker('scrollback-chats');
    const sb = new Scrollback(worker);
    try {
      // The worker opens the store (and checks every option); the handle takes the rest.
      const handleOptions = { ...options };
      delete handleOptions.storage;
      await sb.#call('openChats', { ...options });
      const chats = sb.#chats(handleOptions, () => sb.close());
      await chats.options();
      return chats;
    } catch (err) {
      sb.close();
      throw err;
    }
  }

  /**
   * The storage the cache opened on: 'opfs', 'indexeddb' or 'memory'. With `storage: 'auto'`,
   * the one that worked here (WebKitGTK's OPFS has no sync access handles: IndexedDB).
   */
  get storage() {
    return this.#storage;
  }

  /**
   * Closes every view and stops the worker once it has finished what it was writing (calls
   * under way answered, sessions stopped, buffered appends committed, the other tabs told what
   * it added to the search indexes), or after {@link CLOSE_WAIT_MS} if it does not answer. Calls made after `close` reject at once.
   * Resolves when the worker is gone; calling it again returns the same promise.
   * @returns {Promise<void>}
   */
  close() {
    if (this.#closing) return this.#closing;
    if (this.#opening) this.#opening.show = null;
    for (const view of [...this.#views.values()]) view.close();
    if (this.#onPageHide) removeEventListener('pagehide', this.#onPageHide);
    const worker = this.#worker;
    const healthy = !this.#failure;
    const finished = healthy ? this.#call('close').catch(() => {}) : Promise.resolve();
    this.#worker = null;
    this.#failure = new Error('Scrollback is closed');
    let timer;
    const late = new Promise((r) => {
      timer = setTimeout(() => {
        console.warn(`Scrollback: the worker did not finish closing within ${CLOSE_WAIT_MS} ms; it was ended`);
        r();
      }, CLOSE_WAIT_MS);
    });
    this.#closing = Promise.race([finished, late]).then(() => {
      clearTimeout(timer);
      worker.terminate();
      // Calls the worker never answered.
      this.#fail(this.#failure);
    });
    return this.#closing;
  }
}

/**
 * One open session. Its changes are pushed to `onChange(state, change)`; `state` is the newest.
 */
export class SessionView {
  #rows = [];
  #rowsShared = false; // whether #rows was handed out in a state (then it is copied, not changed)
  #fields = {};
  #state = null;
  #change = emptyChange();
  #onChange;
  #call;
  #closed;
  #screen;
  #screenTimer = null;
  #patched = false;
  // The newest seq of a screen the app was handed before this view's rows (its last screen,
  // its opening screen), while it matters: cached rows older than it are held back (`#held`).
  #floor = 0;

  /** @private Use {@link Scrollback#openSession}. */
  constructor(id, onChange, screen, call, closed) {
    /** The session's id. */
    this.id = id;
    this.#screen = screen;
    this.#onChange = onChange;
    this.#call = call;
    this.#closed = closed;
  }

  /** @private Applies a patch from the worker (a JSON string; see worker.js). */
  _apply(json) {
    if (typeof json !== 'string') return;
    const patch = JSON.parse(json);
    const change = this.#change;
    // A reset after the first patch: the screen was cleared (a replaced file, a gap): the saved
    // screen may hold what is not the server's any more, so it goes at once.
    if (patch.reset && this.#patched) {
      this.#screen?.forget();
      this.#floor = 0; // (and what the app was shown is not the server's either)
    }
    this.#patched = true;
    if (patch.reset) {
      Object.assign(change, emptyChange(), { reset: true });
      this.#rows = patch.rows ?? [];
      this.#rowsShared = false;
      this.#fields = {};
    } else if (patch.removed || patch.rows) {
      if (this.#rowsShared) {
        this.#rows = this.#rows.slice();
        this.#rowsShared = false;
      }
      if (patch.removed) this.#remove(patch.removed, change);
      if (patch.rows) this.#upsert(patch.rows, change);
    }
    if (patch.state) {
      Object.assign(this.#fields, patch.state);
      for (const k of Object.keys(patch.state)) change.state.add(k);
    }
    this.#state = null;
    if (this.#screen && this.#screenTimer === null) {
      this.#screenTimer = setTimeout(() => this._saveScreen(), SCREEN_SAVE_MS);
    }
  }

  /** @private The session is gone: its screen is forgotten and never saved again. */
  _dropScreen() {
    clearTimeout(this.#screenTimer);
    this.#screenTimer = null;
    this.#screen?.forget();
    this.#screen = null;
  }

  /** @private Saves what is shown as the session's last screen (see screen.js). */
  _saveScreen() {
    clearTimeout(this.#screenTimer);
    this.#screenTimer = null;
    if (this.#screen && this.#call) this.#screen.save(this.state);
  }

  #remove(seqs, change) {
    const gone = new Set(seqs);
    this.#rows = this.#rows.filter((r) => !gone.has(r.seq));
    if (change.reset) return;
    for (const seq of seqs) {
      if (change.added.delete(seq)) continue;
      change.updated.delete(seq);
      change.removed.add(seq);
    }
  }

  #upsert(rows, change) {
    const have = this.#rows;
    const inserts = [];
    for (const row of rows) {
      const last = have.length ? have[have.length - 1].seq : -Infinity;
      if (row.seq > last && inserts.length === 0) {
        have.push(row);
        if (!change.reset) change.added.add(row.seq);
        continue;
      }
      const i = indexOf(have, row.seq);
      if (i >= 0) {
        have[i] = row;
        if (!change.reset && !change.added.has(row.seq)) change.updated.add(row.seq);
      } else {
        inserts.push(row);
        if (!change.reset) change.added.add(row.seq);
      }
    }
    if (inserts.length) this.#rows = merge(have, inserts);
    if (!change.reset) for (const row of rows) change.removed.delete(row.seq);
  }

  /** @private The app was handed a screen of this session whose newest line is `cursor`. */
  _shown(cursor) {
    if (!Number.isSafeInteger(cursor) || cursor <= this.#floor) return;
    this.#floor = cursor;
    this.#state = null;
  }

  /**
   * Whether the view's rows are held back from the app: cached rows, not checked yet, older than
   * a screen the app already shows (a cache that stopped writing, or a last screen lost, while
   * the page's opening screen drew newer lines). Drawing them would take the user back to older
   * rows, then forward again once the check answers. Held until the check has answered (the
   * rows verified, or cleared), or it cannot be had (a banner, an error), or the rows reach
   * what was shown; until then the state says `ready: false`.
   */
  #held() {
    const f = this.#fields;
    if (this.#floor === 0) return false;
    if (!f.ready || f.verified || f.live || f.banner || f.error || (f.cursor ?? 0) >= this.#floor) {
      if (f.ready) this.#floor = 0; // delivered once: the view's own rows are what is shown
      return false;
    }
    return true;
  }

  /** @private The state was read whole: later changes are relative to it. */
  _taken() {
    this.#change = emptyChange();
  }

  /** @private */
  _deliver() {
    if (!this.#onChange || !this.#call) return;
    if (this.#held()) return; // (its changes are told with the first state not held)
    const c = this.#change;
    this.#change = emptyChange();
    const change = {
      reset: c.reset,
      added: [...c.added].sort((a, b) => a - b),
      updated: [...c.updated].sort((a, b) => a - b),
      removed: [...c.removed].sort((a, b) => a - b),
      state: [...c.state],
    };
    this.#onChange(this.state, change);
  }

  /**
   * The session's newest state: rows, status, banner, moreHistory, ready, ... A new object
   * after each change (its `rows` array too when rows changed); never changed once handed out.
   * @returns {import('./index.js').SessionState}
   */
  get state() {
    if (this.#state === null) {
      this.#rowsShared = true;
      this.#state = { ...this.#fields, rows: this.#rows };
      if (this.#held()) this.#state.ready = false;
    }
    return this.#state;
  }

  #op(op, ...args) {
    if (!this.#call) return Promise.reject(new Error('this session view is closed'));
    return this.#call(op, ...args);
  }

  /**
   * Loads one page of older history (from the cache when it has it).
   * @returns {Promise<boolean>} false when there is no more history
   */
  loadOlder() {
    return this.#op('loadOlder');
  }

  /**
   * Bytes cached for this session.
   * @returns {Promise<number>}
   */
  cachedSize() {
    return this.#op('cachedSize');
  }

  /**
   * Throws this session's cache away and reopens it cold, restoring the reader at `anchor`.
   * @param {number} [anchor] the seq of the row to show
   * @returns {Promise<void>}
   */
  reload(anchor) {
    if (!this.#call) return this.#op('reload'); // refused: the view is closed
    // Forgotten at once (a page gone mid-reload must not draw next time what was thrown away),
    // and put back when the worker refuses the call (a bad anchor): nothing was reloaded.
    const kept = this.#screen?.take();
    return this.#op('reload', anchor ?? null).catch((err) => {
      if (kept) this.#screen?.save(kept);
      throw err;
    });
  }

  /**
   * @private The worker's whole state of this view, parsed, taken just after it sent its
   * changes: what `state` must equal once they are applied (for tests).
   */
  async _snapshot() {
    return JSON.parse(await this.#op('snapshot'));
  }

  /** Stops following the session; `onChange` is not called again. */
  close() {
    if (!this.#call) return;
    this._saveScreen();
    this.#call = null;
    this.#closed();
  }
}

/**
 * How long `Scrollback.close` waits for the worker to finish its writes before ending it anyway
 * (a worker stuck on storage must not keep the page's close waiting).
 */
const CLOSE_WAIT_MS = 2000;

/** How long after a change a view's screen is saved: often enough, never on every delta. */
const SCREEN_SAVE_MS = 1000;

function emptyChange() {
  return { reset: false, added: new Set(), updated: new Set(), removed: new Set(), state: new Set() };
}

/** The index of the row at `seq` in `rows` (in seq order), or -1. */
function indexOf(rows, seq) {
  let lo = 0;
  let hi = rows.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const s = rows[mid].seq;
    if (s === seq) return mid;
    if (s < seq) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/** Two lists of rows in seq order, merged. */
function merge(a, b) {
  const out = new Array(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length) out[k++] = a[i].seq < b[j].seq ? a[i++] : b[j++];
  while (i < a.length) out[k++] = a[i++];
  while (j < b.length) out[k++] = b[j++];
  return out;
}

function chatName(name) {
  if (typeof name !== 'string') throw new TypeError('a chat name is a string');
  return name;
}

/**
 * The app's chats, each a JSONL file (a header line, then one message a line) of which the UI
 * holds a window: read backwards in pages, written as windowed saves and patches checked
 * against the window's cursor. Names are normalized by one rule (trimmed, without `.jsonl`:
 * `"notes.jsonl"` and `" notes"` are the chat `notes`), and a chat stored under an older
 * spelling is still found. Failures are `Error`s named `ChatError` whose `kind` says which
 * check refused (`signatureMismatch`, `integrityMismatch`, ...). Get it from
 * {@link Scrollback#chats} or {@link Scrollback.chats}.
 */
export class Chats {
  #ready;
  #call;
  #close;

  /** @private Use {@link Scrollback#chats} or {@link Scrollback.chats}. */
  constructor(ready, call, close) {
    this.#ready = ready;
    this.#call = call;
    this.#close = close;
  }

  async #op(op, name, ...args) {
    chatName(name);
    return this.#ask(op, name, ...args);
  }

  /** Asks the worker, once the handle is ready. */
  async #ask(op, ...args) {
    await this.#ready;
    if (!this.#call) throw new Error('these chats are closed');
    return this.#call(op, ...args);
  }

  /**
   * This handle's options as applied: `{windowLines, backfillPages}`.
   * @returns {Promise<{ windowLines: number, backfillPages: number }>}
   */
  async options() {
    return this.#ask('chatsInfo');
  }

  /**
   * A chat's stored name (trimmed, without `.jsonl`): the rule every call applies.
   * @param {string} name
   * @returns {Promise<string>}
   */
  normalizeName(name) {
    return this.#op('chatNormalizeName', name);
  }

  /**
   * The header and the newest lines (default: the handle's `windowLines`), with the window's
   * cursor.
   * @param {string} name
   * @param {import('./index.js').TailOptions} [options]
   * @returns {Promise<import('./index.js').ChatTail>}
   */
  tail(name, options) {
    return this.#op('chatTail', name, options ?? null);
  }

  /**
   * Up to `maxLines` (default: `windowLines`) lines just before `cursor`.
   * @returns {Promise<import('./index.js').ChatChunk>}
   */
  before(name, cursor, maxLines) {
    return this.#op('chatBefore', name, cursor, maxLines ?? null);
  }

  /**
   * Up to `maxPages` pages of `maxLines` going backwards from `cursor`, newest page first.
   * @returns {Promise<import('./index.js').ChatChunk[]>}
   */
  beforePages(name, cursor, maxLines, maxPages) {
    return this.#op('chatBeforePages', name, cursor, maxLines, maxPages);
  }

  /**
   * Windowed save: replaces everything from `cursor` on with `lines`. Resolves to the new cursor.
   * @returns {Promise<import('./index.js').Cursor>}
   */
  async save(name, cursor, header, lines, options) {
    return this.#op('chatSave', name, cursor, string(header, 'a chat header'), lines, options ?? null);
  }

  /**
   * Windowed patch: `{append: lines}` or `{rewriteFromIndex, lines}`. Resolves to the new cursor.
   * @returns {Promise<import('./index.js').Cursor>}
   */
  async patch(name, cursor, header, op, options) {
    return this.#op('chatPatch', name, cursor, string(header, 'a chat header'), op, options ?? null);
  }

  /**
   * Full save: the whole chat becomes `header` and `lines`, whatever lines the file held;
   * refused (`integrityMismatch`) when the header is another chat's, unless `options.force`.
   * Every earlier cursor is stale afterwards. Resolves to the cursor of a window holding all
   * `lines`.
   * @returns {Promise<import('./index.js').Cursor>}
   */
  async replace(name, header, lines, options) {
    return this.#op('chatReplace', name, string(header, 'a chat header'), lines, options ?? null);
  }

  /**
   * The chats of this store, sorted by name: `{name, size, modifiedMillis}` each.
   * @returns {Promise<import('./index.js').ChatEntry[]>}
   */
  async list() {
    return this.#ask('chatList');
  }

  /**
   * Deletes the chat, with its backup (it cannot be restored). Resolves to whether there was
   * one. Every cursor of it is stale afterwards.
   * @param {string} name
   * @returns {Promise<boolean>}
   */
  delete(name) {
    return this.#op('chatDelete', name);
  }

  /**
   * Undoes the last write to the chat (rejects with kind `notFound` when there is nothing to
   * undo). Every cursor is stale afterwards: reload the tail.
   * @returns {Promise<void>}
   */
  async restoreBackup(name) {
    await this.#op('chatRestoreBackup', name);
  }

  /**
   * Older messages behind the window for a prompt, up to a token budget.
   * @returns {Promise<import('./index.js').Backfill>}
   */
  backfill(name, request) {
    return this.#op('chatBackfill', name, request);
  }

  /**
   * Frees this handle (and, for {@link Scrollback.chats}, stops its worker once what it was
   * writing is committed). Resolves when done.
   * @returns {Promise<void>}
   */
  close() {
    if (!this.#call) return Promise.resolve();
    this.#call = null;
    return Promise.resolve(this.#close());
  }
}

/**
 * What an app saved of one chat's window and what it changed since (seed 003's window state:
 * `savedMessageCount`, `dirtyFromIndex`), turned into the smallest write: nothing, an append,
 * a rewrite from the first changed line, or, with no window read from the file, a full save.
 *
 * The app keeps its messages (`lines`, oldest first) as the window: a contiguous suffix of the
 * chat from `cursor` to its end. Tell the window what changed: {@link ChatWindow#markDirty} for
 * an edit, insertion or deletion at an index, {@link ChatWindow#prepended} after older lines were
 * put in front, {@link ChatWindow#markHeaderDirty} for a new header. Appending needs no call.
 */
export class ChatWindow {
  /**
   * @param {{ cursor?: import('./index.js').Cursor | null, hasMoreBefore?: boolean, savedMessageCount?: number }} [state]
   */
  constructor({ cursor = null, hasMoreBefore = false, savedMessageCount = 0 } = {}) {
    /** The window's cursor (null: nothing read from the file, the next save is a full save). */
    this.cursor = cursor;
    /** Whether the file has older lines before the window. */
    this.hasMoreBefore = hasMoreBefore;
    /** How many of the window's lines are on disk as the app has them. */
    this.savedMessageCount = savedMessageCount;
    /** The first window index changed since the last save, or null. */
    this.dirtyFromIndex = null;
    /** Whether the header changed since the last save. */
    this.headerDirty = false;
  }

  /**
   * The window of a tail just read.
   * @param {import('./index.js').ChatTail} tail
   */
  static fromTail(tail) {
    return new ChatWindow({ cursor: tail.cursor, hasMoreBefore: tail.hasMoreBefore, savedMessageCount: tail.lines.length });
  }

  /** The line at `index` was edited, inserted or deleted (lines after it may have moved). */
  markDirty(index) {
    if (!Number.isInteger(index) || index < 0) throw new RangeError('markDirty takes a line index (a whole number, 0 or more)');
    this.dirtyFromIndex = this.dirtyFromIndex === null ? index : Math.min(this.dirtyFromIndex, index);
  }

  /** The header changed: the next save writes it even if no line changed. */
  markHeaderDirty() {
    this.headerDirty = true;
  }

  /**
   * Older lines were put in front of the window (a page from `before`, read with the window's
   * cursor): indexes shift by their count, and the window starts at the page's cursor. A page
   * may come back while a save of this window is on its way, or after it landed (read with the
   * cursor the save replaced): it is kept either way, and the save, once landed, counts its lines
   * as saved and moves the window's start to them (a write keeps every byte before its window,
   * moved only by a new header's length).
   * @param {import('./index.js').ChatChunk} chunk
   */
  prepended(chunk) {
    const n = chunk.lines.length;
    this.savedMessageCount += n;
    if (this.dirtyFromIndex !== null) this.dirtyFromIndex += n;
    const cursor = this.#rebase(chunk);
    const writing = this.#writing;
    if (writing && !writing.front && n > 0 && this.cursor?.offset === writing.from.offset) {
      // The page just in front of the window being written (it ends where the write starts).
      writing.front = { offset: cursor.offset, lines: chunk.lines };
    }
    this.cursor = cursor;
    this.hasMoreBefore = chunk.hasMoreBefore;
    this.#prependedCount += n;
    // Saves called before this and not started yet: their lines have none of these.
    if (this.#waiting > 0) this.#prepends.push({ count: this.#prependedCount, lines: chunk.lines });
  }

  /**
   * A page's cursor in terms of the window's file as it is now: as it is when it was read with
   * the window's current signature; its offset moved by each of this window's own writes since,
   * when it was read before them; as it is otherwise (not read from this window: the next read
   * or write with it says it is stale).
   */
  #rebase(chunk) {
    const { cursor } = chunk;
    const now = this.cursor;
    if (now === null || sameFile(cursor, now)) return cursor;
    const writes = this.#writes;
    const from = writes.findIndex((w) => sameFile(cursor, w.from));
    if (from < 0 || !sameFile(writes[writes.length - 1].to, now)) return cursor;
    let offset = cursor.offset;
    for (const w of writes.slice(from)) offset += shiftOf(w, { offset, lines: chunk.lines });
    return { ...now, offset };
  }

  /**
   * The write that brings the file to `lines` (the app's whole window now).
   * @param {string[]} lines
   * @returns {import('./index.js').ChatWritePlan}
   */
  plan(lines) {
    return this.#plan(lines, this.dirtyFromIndex, this.headerDirty);
  }

  /** The plan for `lines` with these marks (a save's, taken when it was called). */
  #plan(lines, dirtyFromIndex, headerDirty) {
    if (!Array.isArray(lines)) throw new TypeError('plan takes the window\'s lines (an array of strings)');
    if (this.cursor === null) return { kind: 'replace' };
    const saved = this.savedMessageCount;
    let from = dirtyFromIndex ?? lines.length;
    if (lines.length < saved) from = Math.min(from, lines.length);
    // The baseline check: the file must still hold exactly the saved window after the cursor.
    const options = this.cursor.size > 0 ? { expectedWindowLineCount: saved } : {};
    if (from < saved) {
      return { kind: 'patch', op: { rewriteFromIndex: from, lines: lines.slice(from) }, options };
    }
    if (lines.length > saved || headerDirty) {
      return { kind: 'patch', op: { append: lines.slice(saved) }, options };
    }
    return { kind: 'none' };
  }

  /**
   * A write of `lines` succeeded with the new `cursor`: they are the saved window now.
   * @param {import('./index.js').Cursor} cursor
   * @param {string[]} lines
   * @param {boolean} [replaced] the write was a full save (the window is the whole chat)
   */
  saved(cursor, lines, replaced = false) {
    this.cursor = cursor;
    this.savedMessageCount = lines.length;
    this.dirtyFromIndex = null;
    this.headerDirty = false;
    if (replaced) this.hasMoreBefore = false;
  }

  /**
   * Plans and performs the write through `chats`, then records it. Resolves to the plan
   * performed (`kind: 'none'` wrote nothing). A refused write (a `ChatError`) changes nothing,
   * here or on disk. Saves called while one is on its way run one after the other, each
   * planned from what the one before left (an autosave per keystroke needs no queue of its
   * own); an edit marked meanwhile is saved by the next one. A page put in front meanwhile
   * ({@link ChatWindow#prepended}) is kept, whether the save lands or is refused.
   * @param {import('./index.js').ChatWriter} chats `Chats`, or anything with its `patch` and `replace`
   * @param {string} name
   * @param {string} header
   * @param {string[]} lines
   * @param {import('./index.js').WriteOptions} [options] e.g. `{force: true}`
   * @returns {Promise<import('./index.js').ChatWritePlan>}
   */
  save(chats, name, header, lines, options = {}) {
    // The lines as they are at the call. A save called while another is on its way waits for
    // it, then plans from what it left (the file changed by it: planned at once, this one
    // would be refused as stale, by this window's own write).
    // The marks too: they describe these lines. An edit marked after the call is the next
    // save's. Pages put in front after the call are put in front of these lines when it runs.
    const call = {
      lines: Array.isArray(lines) ? [...lines] : lines,
      dirty: this.dirtyFromIndex,
      header: this.headerDirty,
      prepended: this.#prependedCount,
    };
    this.dirtyFromIndex = null;
    this.headerDirty = false;
    this.#waiting++;
    const run = this.#saving.catch(() => {}).then(() => this.#save(chats, name, header, options, call));
    this.#saving = run;
    return run;
  }

  /** The saves of this window, one after the other: the last one asked. */
  #saving = Promise.resolve();
  /** Saves called and not started yet. */
  #waiting = 0;
  /** How many lines were put in front of the window, ever (a save counts the ones after its call). */
  #prependedCount = 0;
  /** The pages put in front while a save was waiting (`count`: `#prependedCount` after it). */
  #prepends = [];
  /** The patch on its way: the cursor it was planned from, the first page put in front meanwhile. */
  #writing = null;
  /**
   * This window's last patches (a few, one after the other), oldest first: the cursor each was
   * planned from (`from`) and the one it landed with (`to`), for pages read before them.
   */
  #writes = [];

  async #save(chats, name, header, options, call) {
    // The pages put in front since the call, oldest first, before the lines of the call.
    const moved = this.#prependedCount - call.prepended;
    let lines = call.lines;
    if (moved > 0 && Array.isArray(lines)) {
      const pages = this.#prepends.filter((p) => p.count > call.prepended).reverse();
      lines = [...pages.flatMap((p) => p.lines), ...lines];
    }
    if (--this.#waiting === 0) this.#prepends = [];
    let plan;
    try {
      plan = this.#plan(lines, call.dirty === null ? null : call.dirty + moved, call.header);
    } catch (err) {
      this.#unsaved(call);
      throw err;
    }
    if (plan.kind === 'none') {
      // Nothing before the saved count changed and the count is the same: the file holds
      // `lines` already (say, a line inserted and deleted again).
      return plan;
    }
    const from = this.cursor;
    const before = this.#prependedCount;
    if (plan.kind === 'patch') this.#writing = { from, front: null };
    try {
      if (plan.kind === 'replace') {
        this.cursor = await chats.replace(name, header, lines, { ...plan.options, ...options });
        this.hasMoreBefore = false;
        this.#writes = [];
        this.savedMessageCount = lines.length;
        // Lines put in front meanwhile are not in the file the full save made.
        if (this.#prependedCount > before) this.dirtyFromIndex = 0;
      } else {
        const to = await chats.patch(name, from, header, plan.op, { ...plan.options, ...options });
        this.#landed(from, to, plan.op);
        this.savedMessageCount = lines.length + (this.#prependedCount - before);
      }
    } catch (err) {
      this.#unsaved(call);
      throw err;
    } finally {
      this.#writing = null;
    }
    return plan;
  }

  /**
   * A patch planned from the cursor `from` landed with the cursor `to`: the window's cursor is
   * `to`, moved back to the pages put in front meanwhile if any (they were on disk before the
   * window, where the write kept them).
   */
  #landed(from, to, op) {
    // `open`: the window was empty at the end of the file and lines were written: if the file's
    // last line had no newline, the write put one in first, and the window moved one byte more
    // than the lines in front of it (see shiftOf).
    const write = { from, to, open: from.offset === from.size && (op.append ?? op.lines).length > 0 };
    const last = this.#writes[this.#writes.length - 1];
    this.#writes = [...(last && sameFile(last.to, from) ? this.#writes.slice(-7) : []), write];
    // A page not read from this window was put in front: its cursor is kept, and the next read
    // or write with it says it is stale.
    if (!sameFile(this.cursor, from)) return;
    const front = this.#writing.front;
    this.cursor = front ? { ...to, offset: this.cursor.offset + shiftOf(write, front) } : to;
  }

  /**
   * A save was refused, nothing written: the marks it took are still to be saved (moved by the
   * lines put in front since it was called).
   */
  #unsaved(call) {
    const moved = this.#prependedCount - call.prepended;
    const dirty = [call.dirty === null ? null : call.dirty + moved, this.dirtyFromIndex].filter((i) => i !== null);
    this.dirtyFromIndex = dirty.length ? Math.min(...dirty) : null;
    this.headerDirty ||= call.header;
  }
}

/** Whether two cursors are of the same version of the file (size and modification stamp). */
function sameFile(a, b) {
  return a.size === b.size && a.modifiedMillis === b.modifiedMillis;
}

/**
 * How far a window's write moved the bytes before the window (a new header's length), seen
 * from `page` (`offset`, `lines`), the lines just in front of the window: the window's own move,
 * less the newline the write put in after them when they were the file's last line without one.
 */
function shiftOf(write, page) {
  const moved = write.to.offset - write.from.offset;
  if (!write.open) return moved;
  const encoder = new TextEncoder();
  const bytes = page.lines.reduce((n, line) => n + encoder.encode(line).length + 1, 0);
  return write.from.offset - page.offset === bytes - 1 ? moved - 1 : moved;
}
