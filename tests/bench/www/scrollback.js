// Contender "Scrollback": the package as an app uses it, loaded as a bundler would serve it:
// from the server's versioned path (/pkg/<version>/, Cache-Control: immutable; ?v= names the
// version), so a reopen takes the worker and the module from the HTTP cache.
const version = new URLSearchParams(location.search).get('v');

// The patches the worker posts to the page, counted as they arrive: [time, bytes].
const patches = [];
const PageWorker = globalThis.Worker;
globalThis.Worker = class extends PageWorker {
  constructor(...args) {
    super(...args);
    this.addEventListener('message', ({ data }) => {
      if (typeof data?.patch === 'string') patches.push([performance.now(), data.patch.length]);
    });
  }
};
const pkg = version ? `/pkg/${version}` : '/pkg';
// (The harness preloads index.js and the screen.js it imports beside this file, as a bundler's
// output loads them.)
const { Scrollback } = await import(`${pkg}/index.js`);

const describe = (r) => `${r.kind} ${r.text ?? ''}`;

export async function open({ id, server, storage, show }) {
  const t0 = performance.now();
  const at = {};
  // The last screen, drawn before anything starts; the view's first state replaces it.
  const screen = Scrollback.lastScreen(server, id);
  if (screen) {
    show(screen.rows, describe);
    at.screen = performance.now();
  }
  // The session is known at once (the app's URL names it): its check leaves with the open call,
  // and the opening screen is drawn as soon as the page's small module has folded its answer (a
  // first visit's newest window, or a reopen's last screen with the lines its check brought).
  let viewDrew = false;
  let screenCursor = screen?.cursor ?? 0; // the newest line of a screen drawn before the view's
  const opened = (state) => {
    if (viewDrew || !state.rows.length) return;
    show(state.rows, describe);
    screenCursor = state.cursor;
    at.opening = performance.now();
  };
  const draw = (state) => {
    if (state.ready && state.rows.length) {
      viewDrew = true;
      show(state.rows, describe);
      at.cached ??= performance.now();
    }
    if (state.verified) at.verified ??= performance.now();
    if (state.live) at.live ??= performance.now();
  };
  // Not awaited here: what is on screen (a last screen, an opening screen) counts from the
  // moment it is drawn, as the other contenders' rows do, not once the session's view exists.
  let sb = null;
  let view = null;
  let failed = null;
  const opening = (async () => {
    sb = await Scrollback.open({ server, storage, opening: id, onOpeningScreen: opened });
    view = await sb.openSession(id, { onChange: draw });
    draw(view.state);
  })();
  opening.catch((err) => { failed = err; });
  return {
    /** The newest line on screen: the view's, or that of a screen drawn before the view's rows. */
    cursor: () => {
      if (failed) throw failed;
      const shown = view?.state.cursor ?? 0;
      return viewDrew ? shown : Math.max(shown, screenCursor);
    },
    rows: async () => (await opening, view.state.rows.length),
    /** Loads older pages until `n` rows are loaded (or no more). */
    async loadRows(n) {
      await opening;
      while (view.state.rows.length < n && (await view.loadOlder()));
      return view.state.rows.length;
    },
    async scrollBack(deadline) {
      await opening;
      let pages = 0;
      while (performance.now() < deadline) {
        if (!(await view.loadOlder())) return { pages, done: true };
        pages += 1;
      }
      return { pages, done: false };
    },
    settled: async () => { await opening; },
    storageBytes: async () => (await opening, view.cachedSize()),
    /** The bytes of each patch posted since `since` (performance.now()). */
    patches: (since) => patches.filter(([t]) => t >= since).map(([, n]) => n),
    /**
     * ms after the open call: the last screen drawn, the worker started, the module ready, the
     * store open, the first request sent and answered (by the worker, or the page's `opening`),
     * the opening screen drawn, the first rows of the view, verified, live.
     */
    async timeline() {
      const deadline = performance.now() + 30_000;
      while ((at.verified === undefined || at.live === undefined) && performance.now() < deadline) {
        await new Promise((r) => setTimeout(r, 5));
      }
      await opening;
      const m = await sb.marks();
      // The session's first request, when the page asked it (`opening`), is in the page's timeline.
      const asked = performance.getEntriesByType('resource')
        .find((e) => new URL(e.name).pathname.startsWith('/sessions'));
      if (m.request === undefined && asked) {
        m.request = asked.startTime;
        m.response = asked.responseEnd;
      }
      // The page's own marks: its small module up, and warmed up (its folds compiled).
      const mark = (name) => performance.getEntriesByName(`scrollback:${name}`)[0]?.startTime;
      const rel = (t) => (t === undefined ? undefined : t - t0);
      return {
        screen: rel(at.screen), opening: rel(at.opening), screenModule: rel(mark('screen-module')), screenWarm: rel(mark('screen-warm')), cached: rel(at.cached), worker: rel(m.start), module: rel(m.module),
        store: rel(m.open), request: rel(m.request), response: rel(m.response),
        verified: rel(at.verified), live: rel(at.live),
      };
    },
  };
}
