// The bench page: loads one contender (?c=nocache|handwritten|scrollback-opfs|scrollback-idb)
// for one session (?id=) and exposes `window.bench` for tests/bench/run.mjs to drive.
// Every contender shows the newest 80 rows as list items (200 characters each at most), drawn at
// most once per animation frame, so drawing costs the same everywhere. Times are performance.now() (ms since navigation).
const q = new URLSearchParams(location.search);
const contender = q.get('c');
const id = q.get('id');

const longtasks = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) longtasks.push({ start: e.startTime, duration: e.duration });
}).observe({ type: 'longtask', buffered: true });

const list = document.getElementById('rows');
let firstRowsAt = null;
let pending = null;
let drawn = []; // the texts of the rows on screen
let firstRows;
const firstRowsShown = new Promise((resolve) => { firstRows = resolve; });

/** Asks for `rows` (oldest first) to be drawn; `describe` turns one into text. */
function show(rows, describe) {
  const wasPending = pending !== null;
  pending = { rows, describe };
  if (wasPending) return;
  requestAnimationFrame(() => {
    const { rows: r, describe: d } = pending;
    pending = null;
    // At most 200 characters each: a row of Scrollback can hold a whole assistant message
    // (tens of kB in the long session) where the others draw one delta a line, and laying out
    // megabytes of text would time the browser's layout, not the contender.
    const texts = r.slice(-80).map((row) => d(row).slice(0, 200));
    // The same rows as drawn (older pages arriving leave the newest 80 as they were): nothing
    // to draw. Every contender's unchanged screen is free, not only theirs that never asks.
    if (texts.length !== drawn.length || texts.some((t, i) => t !== drawn[i])) {
      drawn = texts;
      list.replaceChildren(...texts.map((text) => {
        const li = document.createElement('li');
        li.textContent = text;
        return li;
      }));
    }
    if (r.length > 0 && firstRowsAt === null) {
      firstRowsAt = performance.now();
      firstRows(firstRowsAt);
    }
  });
}

const modules = {
  nocache: './nocache.js',
  handwritten: './handwritten.js',
  'scrollback-opfs': './scrollback.js',
  'scrollback-idb': './scrollback.js',
};
// What each contender imports, fetched beside it as a bundler's output loads it (Vite preloads
// a dynamic import's dependencies with `<link rel=modulepreload>` at the import; a bundle that
// puts them in one chunk does not even fetch them apart) rather than one after the other.
const pkg = q.get('v') ? `/pkg/${q.get('v')}` : '/pkg';
const imports = { 'scrollback-opfs': ['index.js', 'screen.js'], 'scrollback-idb': ['index.js', 'screen.js'] };
const preload = () => {
  for (const file of imports[contender] ?? []) {
    const link = document.createElement('link');
    link.rel = 'modulepreload';
    link.href = `${pkg}/${file}`;
    document.head.append(link);
  }
};
const storage = { 'scrollback-opfs': 'opfs', 'scrollback-idb': 'indexeddb' }[contender];

let app = null;
let openAt = null;
const until = (check, timeoutMs, what) => new Promise((resolve, reject) => {
  const deadline = performance.now() + timeoutMs;
  const poll = () => {
    if (check()) resolve(performance.now());
    else if (performance.now() > deadline) reject(new Error(`timed out waiting for ${what}`));
    else setTimeout(poll, 2);
  };
  poll();
});

window.bench = {
  /** Opens the session; resolves once the first rows are drawn. */
  async open() {
    preload();
    const mod = await import(modules[contender]);
    // The app's first call: on the slow link, times are taken from here (how the page itself
    // loads is the app's business).
    openAt = performance.now();
    app = await mod.open({ id, server: location.origin, storage, show });
    const at = await Promise.race([firstRowsShown,
      new Promise((_, reject) => setTimeout(() => reject(new Error('no rows drawn in 60 s')), 120_000))]);
    return { firstRowsMs: at, openAt, fromOpenMs: at - openAt, cursor: app.cursor() };
  },
  /** Resolves (performance.now()) once the newest line shown is at least `seq`. */
  waitCursor: (seq, timeoutMs = 60_000) => until(() => app && app.cursor() >= seq, timeoutMs, `seq ${seq}`),
  cursor: () => app.cursor(),
  /**
   * Scrollback only: the start-up timeline (ms after the open call), with the first rows and
   * the open call itself (ms after navigation).
   */
  timeline: async () => (app.timeline ? { ...(await app.timeline()), firstRows: firstRowsAt - openAt, openCall: openAt } : null),
  /** Scrollback only: loads older pages until `n` rows are loaded; the rows loaded. */
  loadRows: (n) => (app.loadRows ? app.loadRows(n) : null),
  rows: () => (app.rows ? app.rows() : null),
  /** Scrollback only: the bytes of each patch the worker posted since `since`. */
  patches: (since) => (app.patches ? app.patches(since) : null),
  /** The time a dedicated worker's GET /sessions takes (checks that the slow link covers workers). */
  workerFetchMs: () => new Promise((resolve) => {
    const w = new Worker('./probe-worker.js');
    w.onmessage = (e) => { resolve(e.data); w.terminate(); };
    w.postMessage(0);
  }),
  now: () => performance.now(),
  /** Loads older history until there is no more (or `capMs` passed). */
  async scrollBack(capMs) {
    const t0 = performance.now();
    const r = await app.scrollBack(t0 + capMs);
    return { ms: performance.now() - t0, ...r };
  },
  /** Waits for the contender's own background work (pending writes) to finish. */
  settled: () => app.settled(),
  /** The longest task and how many tasks over 50 ms began at or after `since`. */
  longtasks(since) {
    const mine = longtasks.filter((t) => t.start >= since);
    return { longest: Math.max(0, ...mine.map((t) => t.duration)), count: mine.length };
  },
  /** Storage used: the browser's estimate for the origin, and the contender's own count. */
  async storage() {
    const { usage } = await navigator.storage.estimate();
    return { usage, own: await app.storageBytes() };
  },
};
