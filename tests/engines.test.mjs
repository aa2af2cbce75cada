// The package in each engine a user meets (SCROLLBACK_ENGINE: chromium, webkitgtk, firefox; see
// tests/lib/engines.mjs), against the real server: `Scrollback.open` on the storage `auto`
// picks there, a cold open, a reopen after a page reload with one probe and the rows from the
// cache, scrolling back through cached pages without a request, a reply streaming while the
// page is reloaded continuing in one row, search (from the blob, then from the segment the
// warm-up built; what another worker on the store caches, found at once, also when it closes
// right after), `view.reload()`, and
// a stream that goes silent without closing (through a relay) reconnected by the server's
// keep-alive; `clearCache()` (a sign-out); a token refused, then renewed with `setToken`. One
// description for all engines.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { ENGINE, FACTS, launch, unavailable } from './lib/engines.mjs';
import { ROOT, SERVER_BIN, startServer, assertBuilt } from './lib/server.mjs';
import { startRelay } from './lib/relay.mjs';

const missing = unavailable();
let server, browser;

before(async () => {
  if (missing) return;
  assertBuilt(['pkg/index.js', SERVER_BIN]);
  // The page and the package from the server itself: one origin, as an app ships them.
  server = await startServer({ args: ['--pace-ms', '80'], www: path.join(ROOT, 'tests/lib') });
  browser = await launch();
});
after(async () => { await browser?.close(); await server?.dispose(); });

const it = (name, fn) => test(`${ENGINE}: ${name}`, missing ? { skip: missing } : {}, fn);

/** Loads the blank page afresh (a reload: the worker and its memory go, storage stays). */
async function reload() {
  await browser.goto(`${server.url}/blank.html?${Math.random()}`);
}

/**
 * Opens Scrollback in the page (`window.sb`) and the session `id` (`window.view`), and waits until
 * it is ready and live. Resolves to `{ storage, rowsAtReady, counters }`.
 */
async function open(id) {
  const streamsBefore = (await server.stats()).events.requests;
  try {
    return await openIn(id);
  } catch (e) {
    e.message += `\n${await notLive(id, streamsBefore)}`;
    throw e;
  }
}

/**
 * Why a session did not go live, for the failure message: whether the server answered a stream
 * request since, what it logged for the session, and whether a stream to it from the page's own
 * thread opens (the server and the network, not the worker).
 */
async function notLive(id, streamsBefore) {
  const streams = (await server.stats()).events.requests - streamsBefore;
  const logged = server.log().split('\n').filter((l) => l.includes(`/sessions/${id}/`)).slice(-8);
  const fromPage = await browser.run(async ({ id }) => new Promise((resolve) => {
    const t0 = performance.now();
    const es = new EventSource(`/sessions/${encodeURIComponent(id)}/events?after=999999999`);
    const done = (what) => { es.close(); resolve(`${what} after ${Math.round(performance.now() - t0)} ms`); };
    es.onopen = () => done('opened');
    es.onerror = () => done('failed');
    setTimeout(() => done('still connecting'), 10_000);
  }), { id }).catch((e) => `could not try: ${e.message}`);
  return `server: ${streams} stream request(s) received since the open; its log for ${id}:\n  ${logged.join('\n  ') || '(nothing)'}\n`
    + `an EventSource from the page itself: ${fromPage}`;
}

function openIn(id) {
  return browser.run(async ({ server, id }) => {
    const { Scrollback } = await import('/pkg/index.js');
    const sb = await Scrollback.open({ server, storage: 'auto' });
    window.sb = sb;
    const view = await sb.openSession(id);
    window.view = view;
    const deadline = Date.now() + 60_000;
    let rowsAtReady = null;
    while (!(view.state.ready && view.state.live)) {
      if (view.state.ready && rowsAtReady === null) rowsAtReady = view.state.rows.length;
      if (Date.now() > deadline) throw new Error(`not live: ${JSON.stringify({ ...view.state, rows: view.state.rows.length })}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return { storage: sb.storage, rowsAtReady: rowsAtReady ?? view.state.rows.length, counters: await sb.counters() };
  }, { server: server.url, id });
}

/** Pages back `n` times; resolves to the counters after, and the rows' first seq. */
function older(n) {
  return browser.run(async (n) => {
    for (let i = 0; i < n; i += 1) if (!(await window.view.loadOlder())) break;
    const seqs = window.view.state.rows.map((r) => r.seq).filter((s) => typeof s === 'number');
    return { counters: await window.sb.counters(), rows: window.view.state.rows.length, first: Math.min(...seqs) };
  }, n);
}

/** Waits in the page until `check(view.state)` holds (its source is sent as text). */
function until(check, arg) {
  return browser.run(async ({ check, arg }) => {
    const f = new Function(`return (${check})`)();
    const deadline = Date.now() + 120_000;
    while (!f(window.view.state, arg)) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${check}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return null;
  }, { check: check.toString(), arg });
}

const closeAll = () => browser.run(async () => { window.view?.close(); await window.sb?.close(); });

it('opens a session cold from the server, on the storage auto picks here', async () => {
  await reload();
  const cold = await open('long');
  assert.equal(cold.storage, FACTS.autoStorage, `auto picked ${cold.storage}`);
  assert.ok(cold.rowsAtReady > 0, 'rows are drawn');
  assert.equal(cold.counters.probesPassed, 0, 'nothing cached yet: no probe');
  const back = await older(3);
  assert.ok(back.rows > cold.rowsAtReady, `three older pages were added: ${back.rows} rows`);
  assert.ok(back.counters.requests > cold.counters.requests, 'the older pages came from the server');
  await closeAll();
});

it('a page that cannot compile the module (a policy without wasm-unsafe-eval) still opens: the worker fetches it', async () => {
  await copySession('nocompile', 'fix-build');
  await reload();
  const opened = await browser.run(async ({ server }) => {
    // Refused as a policy without wasm-unsafe-eval refuses it (a browser without it throws).
    WebAssembly.compileStreaming = () => { throw new WebAssembly.CompileError('refused by the page\'s policy'); };
    const { Scrollback } = await import('/pkg/index.js');
    const sb = await Scrollback.open({ server, storage: 'auto' });
    const view = await sb.openSession('nocompile');
    const deadline = Date.now() + 60_000;
    while (!(view.state.ready && view.state.live)) {
      if (Date.now() > deadline) throw new Error(`not live: ${JSON.stringify({ ...view.state, rows: view.state.rows.length })}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const rows = view.state.rows.length;
    view.close();
    await sb.close();
    return { rows };
  }, { server: server.url });
  assert.ok(opened.rows > 0, 'rows are drawn');
});

it('reopens after a reload with one probe, draws from the cache, and scrolls back without a request', async () => {
  await reload();
  const warm = await open('long');
  assert.equal(warm.counters.probesPassed, 1, `one probe: ${JSON.stringify(warm.counters)}`);
  assert.equal(warm.counters.probesFailed, 0);
  assert.equal(warm.counters.pagesLocal, 0, 'no page was asked for yet');
  assert.ok(warm.rowsAtReady > 0, 'the cached rows are there once ready');
  const back = await older(3);
  assert.equal(back.counters.requests, warm.counters.requests, `the pages seen before came from the cache: ${JSON.stringify(back.counters)}`);
  assert.ok(back.counters.pagesLocal >= 3, `pages read locally: ${JSON.stringify(back.counters)}`);
  await closeAll();
});

it('search finds what was read; a worker that starts answers the same from the segment the warm-up built', async () => {
  const ask = () => browser.run(async ({ server }) => {
    const { Scrollback } = await import('/pkg/index.js');
    const sb = await Scrollback.open({ server, storage: 'auto' });
    const hits = await sb.search('"row rule"', { limit: 3 });
    await sb.warmSearch(); // builds the segments that are behind, then holds them
    const warm = await sb.search('"row rule"', { limit: 3 });
    const { segments } = await sb._bench('sizes');
    await sb.close();
    return { hits, warm, segments };
  }, { server: server.url });
  await reload();
  const first = await ask();
  assert.ok(first.hits.length > 0 && first.hits.every((h) => h.session === 'long'), JSON.stringify(first));
  assert.deepEqual(first.warm, first.hits);
  assert.ok(first.segments >= 1, 'the warm-up built the segment of what was read');
  await reload();
  const again = await ask();
  assert.deepEqual(again.hits, first.hits, 'read from the segment, before the warm-up');
  assert.deepEqual(again.warm, first.hits);
});

it('two workers on one store, as two tabs have: what one caches, the other\'s next search finds', async () => {
  await copySession('tab-a', 'welcome');
  await copySession('tab-b', 'fix-build');
  await reload();
  const out = await browser.run(async ({ server }) => {
    const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
    const { Scrollback } = await import('/pkg/index.js');
    // The first: a session cached, then its own warm-up has looked at every session (it would
    // not look again for 25 s by itself).
    const a = await Scrollback.open({ server, storage: 'auto' });
    const seen = await a.openSession('tab-a');
    while (!seen.state.live) await sleep(20);
    seen.close();
    while (!(await a.marks())['search-warm']) await sleep(50);
    const before = await a.search('okapiengine');
    // The second, on the same store: a message posted to the session it shows.
    const b = await Scrollback.open({ server, storage: 'auto' });
    const shown = await b.openSession('tab-b');
    while (!shown.state.live) await sleep(20);
    await b.postMessage('tab-b', 'what does an okapiengine eat?');
    while (!shown.state.rows.some((r) => r.kind === 'user' && r.text.includes('okapiengine'))) await sleep(20);
    // The first's search, asked until it finds something (10 s at most): sessions and ms.
    const find = async (word) => {
      const started = performance.now();
      let hits = await a.search(word);
      while (hits.length === 0 && performance.now() - started < 10_000) {
        await sleep(50);
        hits = await a.search(word);
      }
      return { sessions: hits.map((h) => h.session), ms: Math.round(performance.now() - started) };
    };
    const found = await find('okapiengine');
    // Another message, and the second closes as soon as it shows it (before its gathered
    // notice would go): it tells the first as it closes.
    await b.postMessage('tab-b', 'and okapiclose?');
    while (!shown.state.rows.some((r) => r.text?.includes('okapiclose'))) await sleep(5);
    shown.close();
    await b.close();
    const last = await find('okapiclose');
    await a.close();
    return { before, found, last };
  }, { server: server.url });
  assert.deepEqual(out.before, []);
  assert.deepEqual(out.found.sessions, ['tab-b'], `found ${out.found.ms} ms after the other worker showed it`);
  assert.deepEqual(out.last.sessions, ['tab-b'], `found ${out.last.ms} ms after the other worker closed`);
});

it('a reply streaming across a page reload continues in one row, no delta missing or doubled', async () => {
  await reload();
  await open('welcome');
  const asked = `Across a reload in ${ENGINE}?`;
  await browser.run(async (text) => { await window.sb.postMessage('welcome', text); }, asked);
  const file = () => server.lines('welcome');
  const waitFile = async (check, what) => {
    const deadline = Date.now() + 120_000;
    while (!(await check(await file()))) {
      if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  await waitFile((ls) => ls.some((l) => l.event.text === asked), 'the message was written');
  const userSeq = (await file()).find((l) => l.event.type === 'userMessage' && l.event.text === asked).seq;
  const deltas = async () => (await file()).filter((l) => l.seq > userSeq && l.event.type === 'assistantText').length;
  // The reply is drawn growing, then the page goes away while it streams.
  await until((s, seq) => s.rows.some((r) => r.kind === 'assistant' && r.seq > seq && r.text.split(' ').length > 5), userSeq);
  await closeAll();
  await reload();
  const gone = await deltas();
  await waitFile(async () => (await deltas()) >= gone + 10, '10 more deltas while the page was away');
  await open('welcome');
  const ended = (ls) => ls.some((l) => l.seq > userSeq && l.event.type === 'status' && l.event.status === 'idle');
  assert.ok(!ended(await file()), 'the reply was still streaming when the page came back');
  await waitFile(ended, 'the reply ended');
  const lines = await file();
  await until((s, last) => s.cursor >= last, lines.at(-1).seq);
  const reply = lines.filter((l) => l.seq > userSeq && l.event.type === 'assistantText');
  const rows = await browser.run(async (seq) => window.view.state.rows
    .filter((r) => r.kind === 'assistant' && r.seq > seq).map((r) => ({ seq: r.seq, text: r.text })), userSeq);
  assert.equal(rows.length, 1, `one row for the reply: ${JSON.stringify(rows.map((r) => r.seq))}`);
  assert.equal(rows[0].seq, reply[0].seq, 'the row starts at the first delta');
  assert.equal(rows[0].text, reply.map((l) => l.event.text).join(''), 'every delta once, in order');
  await closeAll();
});

it('view.reload() purges the session and draws it again from the server', async () => {
  await reload();
  await open('long');
  const out = await browser.run(async () => {
    const view = window.view;
    const before = await view.cachedSize();
    const requests = (await window.sb.counters()).requests;
    await view.reload();
    const deadline = Date.now() + 60_000;
    while (!(view.state.ready && view.state.live)) {
      if (Date.now() > deadline) throw new Error('not live after reload');
      await new Promise((r) => setTimeout(r, 20));
    }
    return { before, after: await view.cachedSize(), rows: view.state.rows.length, requests, counters: await window.sb.counters() };
  });
  assert.ok(out.before > 0, 'the session was cached');
  assert.ok(out.rows > 0, 'rows are drawn after the reload');
  assert.ok(out.counters.requests > out.requests, 'the reload asked the server again');
  assert.ok(out.after > 0 && out.after < out.before, `the older cached pages went: ${out.before} -> ${out.after} bytes`);
  await closeAll();
});

it('a token the server refuses stops the view with its cached rows; setToken with a fresh one reopens it from the cache, nothing purged', async () => {
  await reload();
  // An API that requires a token, on another origin than the page's (no cookie of its stands in
  // for the token).
  const api = await startServer({ args: ['--token', 'good-token', '--allow-origin', server.url] });
  try {
    const out = await browser.run(async ({ api }) => {
      const { Scrollback } = await import('/pkg/index.js');
      const wait = async (check, what) => {
        const deadline = Date.now() + 60_000;
        while (!check()) {
          if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      };
      const seqs = (view) => view.state.rows.map((r) => r.seq);
      let sb = await Scrollback.open({ server: api, token: 'good-token', storage: 'auto' });
      let view = await sb.openSession('fix-build');
      await wait(() => view.state.live, 'live');
      const cached = { rows: seqs(view), size: await view.cachedSize() };
      view.close();
      await sb.close();

      // The token has expired: the reopen's check is refused.
      sb = await Scrollback.open({ server: api, token: 'expired-token', storage: 'auto' });
      view = await sb.openSession('fix-build');
      await wait(() => view.state.error, 'the error');
      const stopped = { error: view.state.error, live: view.state.live, rows: seqs(view) };
      const requests = (await sb.counters()).requests;

      // A fresh one: the error goes at once, and the view is checked and live again.
      await sb.setToken('good-token');
      let cleared = false;
      await wait(() => {
        if (!view.state.error) cleared = true;
        return (view.state.live && view.state.verified) || (cleared && view.state.error);
      }, 'live again');
      const resumed = {
        error: view.state.error, rows: seqs(view), size: await view.cachedSize(),
        requests: (await sb.counters()).requests - requests,
      };
      view.close();
      await sb.close();
      return { cached, stopped, resumed };
    }, { api: api.url });
    assert.ok(out.cached.rows.length > 0 && out.cached.size > 0, 'cached with the good token');
    assert.deepEqual({ kind: out.stopped.error?.kind, status: out.stopped.error?.status }, { kind: 'unauthorized', status: 401 });
    assert.equal(out.stopped.live, false);
    assert.deepEqual(out.stopped.rows, out.cached.rows, 'the cached rows stay shown');
    assert.equal(out.resumed.error, null);
    assert.deepEqual(out.resumed.rows, out.cached.rows, 'the same rows');
    assert.equal(out.resumed.size, out.cached.size, 'nothing purged, nothing stored again');
    assert.equal(out.resumed.requests, 2, 'the check and the stream: the rows came from the cache');
  } finally {
    await api.dispose();
  }
});

/** `Scrollback.lastScreen` in a fresh page: the screen's rows' seqs and flags, or null. */
function lastScreen(id) {
  return browser.run(async ({ server, id }) => {
    const { Scrollback } = await import('/pkg/index.js');
    const s = Scrollback.lastScreen(server, id);
    return s && { id: s.id, seqs: s.rows.map((r) => r.seq), texts: s.rows.map((r) => r.text ?? null), ready: s.ready, verified: s.verified, live: s.live };
  }, { server: server.url, id });
}

/** A session of its own for the tests that change or delete it: a copy of `from`'s file. */
async function copySession(id, from) {
  const fs = await import('node:fs/promises');
  await fs.mkdir(path.join(server.dataDir, id), { recursive: true });
  await fs.copyFile(server.transcriptPath(from), server.transcriptPath(id));
}

it('a reload draws the last screen at once, unverified; reload() and deleteSession() forget it', async () => {
  await copySession('screen', 'fix-build');
  await reload();
  assert.equal(await lastScreen('screen'), null, 'never shown here: no last screen');
  await open('screen');
  const shown = await browser.run(async () => window.view.state.rows.map((r) => r.seq));
  await closeAll(); // the view saves what it shows as it closes
  await reload();
  const screen = await lastScreen('screen');
  assert.deepEqual(screen?.seqs, shown.slice(-60), 'the newest rows shown, read back with no worker started');
  assert.deepEqual({ id: screen.id, ready: screen.ready, verified: screen.verified, live: screen.live },
    { id: 'screen', ready: true, verified: false, live: false }, 'drawable, and never taken for checked');
  // The view's own rows are the same; its reload() forgets the screen at once.
  await open('screen');
  const forgotten = await browser.run(async ({ server }) => {
    const { Scrollback } = await import('/pkg/index.js');
    const reloading = window.view.reload();
    const gone = Scrollback.lastScreen(server, 'screen') === null;
    await reloading;
    return gone;
  }, { server: server.url });
  assert.ok(forgotten, 'reload() forgets the last screen');
  await browser.run(async () => { await window.sb.deleteSession('screen'); });
  assert.equal(await lastScreen('screen'), null, 'a deleted session has no last screen');
  await closeAll();
  assert.equal(await lastScreen('screen'), null, 'closing a view of a deleted session saves nothing');
});

it('a file replaced while the page was away: the old last screen goes as the check fails, the new rows are saved', async () => {
  await copySession('replaced', 'long');
  await reload();
  await open('replaced');
  await closeAll();
  await reload();
  const old = await lastScreen('replaced');
  assert.ok(old?.seqs.length > 0, 'the old conversation is the last screen');
  // Another conversation under the same id: three lines of fix-build's, numbered from 1.
  const fs = await import('node:fs/promises');
  const other = (await server.lines('fix-build')).slice(0, 3);
  await fs.writeFile(server.transcriptPath('replaced'), other.map((l, i) => JSON.stringify({ ...l, seq: i + 1 })).join('\n') + '\n');
  await open('replaced');
  const fresh = await browser.run(async () => window.view.state.rows.map((r) => r.seq));
  assert.ok(Math.max(...fresh) <= 3, `the view shows the new file: ${fresh}`);
  const now = await lastScreen('replaced');
  assert.ok(now === null || now.seqs.every((s) => fresh.includes(s)), `the old screen is gone once the check failed: ${JSON.stringify(now?.seqs)}`);
  await closeAll();
  assert.deepEqual((await lastScreen('replaced'))?.seqs, fresh, 'the new rows are the last screen');
});

it('close() lets the worker commit what it drew: closed the moment a line is drawn, the reopen catches up only what came after', async () => {
  // IndexedDB in every engine: its appends are buffered for a few ms, which a worker ended at
  // once would lose (OPFS writes through).
  await reload();
  const asked = `Closed at once in ${ENGINE}?`;
  const shown = await browser.run(async ({ server, asked }) => {
    const { Scrollback } = await import('/pkg/index.js');
    const sb = await Scrollback.open({ server, storage: 'indexeddb' });
    let drawn = null;
    let ready;
    const closed = new Promise((resolve) => { ready = resolve; });
    const view = await sb.openSession('welcome', {
      onChange(state) {
        if (drawn !== null || !state.rows.some((r) => r.kind === 'user' && r.text === asked)) return;
        drawn = state.cursor;
        ready(sb.close()); // in the callback that drew the line, before anything else runs
      },
    });
    while (!view.state.live) await new Promise((r) => setTimeout(r, 20));
    await sb.postMessage('welcome', asked);
    await closed;
    return drawn;
  }, { server: server.url, asked });
  // The reply goes on on the server; once it ended, what the reopen catches up is what the
  // cache lacked.
  const deadline = Date.now() + 120_000;
  const ended = (ls) => {
    const at = ls.findIndex((l) => l.event.type === 'userMessage' && l.event.text === asked);
    return at >= 0 && ls.slice(at).some((l) => l.event.type === 'status' && l.event.status === 'idle');
  };
  while (!ended(await server.lines('welcome'))) {
    if (Date.now() > deadline) throw new Error('the reply never ended');
    await new Promise((r) => setTimeout(r, 50));
  }
  const last = (await server.lines('welcome')).at(-1).seq;
  const reopened = await browser.run(async ({ server, last }) => {
    const { Scrollback } = await import('/pkg/index.js');
    const sb = await Scrollback.open({ server, storage: 'indexeddb' });
    const view = await sb.openSession('welcome');
    const deadline = Date.now() + 60_000;
    while (!(view.state.live && view.state.cursor >= last)) {
      if (Date.now() > deadline) throw new Error(`not caught up: ${JSON.stringify({ ...view.state, rows: view.state.rows.length })}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const { counters } = view.state;
    view.close();
    await sb.close();
    return counters;
  }, { server: server.url, last });
  assert.equal(reopened.probesPassed, 1, `the cached tail was checked: ${JSON.stringify(reopened)}`);
  const cachedTail = last - reopened.caughtUp;
  assert.ok(cachedTail >= shown, `the cache held every line drawn before the close (drawn up to ${shown}, cached up to ${cachedTail})`);
});

it('an open that names its session (`opening`) takes the request the page asked at once: a first visit\'s newest window, a reopen\'s check with the lines added meanwhile; a stale last screen costs one more, never a wrong row', async () => {
  await copySession('early', 'fix-build');
  const checks = () => server.log().split('\n').filter((l) => l.includes('/sessions/early/catchup')).length;
  const windows = () => server.log().split('\n')
    .filter((l) => l.includes('/sessions/early/transcript') && !l.includes('before=')).length;
  const reopen = (cursorShift) => browser.run(async ({ server, cursorShift }) => {
    const { Scrollback } = await import('/pkg/index.js');
    if (cursorShift) {
      // A last screen that is not the cache's tail (saved by a tab the cache lagged behind).
      const key = Object.keys(localStorage).find((k) => k.endsWith(' early') && k.startsWith('scrollback.screen'));
      const saved = JSON.parse(localStorage.getItem(key));
      saved.fields.cursor += cursorShift;
      localStorage.setItem(key, JSON.stringify(saved));
    }
    const sb = await Scrollback.open({ server, storage: 'auto', opening: 'early' });
    window.sb = sb;
    const view = await sb.openSession('early');
    window.view = view;
    const deadline = Date.now() + 60_000;
    while (!view.state.live) {
      if (Date.now() > deadline) throw new Error(`not live: ${JSON.stringify({ ...view.state, rows: view.state.rows.length })}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    // What the page itself asked (the worker's requests are not in the page's timeline).
    const asked = performance.getEntriesByType('resource').map((e) => new URL(e.name))
      .filter((u) => u.pathname.startsWith('/sessions/early/')).map((u) => u.pathname + u.search);
    return { seqs: view.state.rows.map((r) => r.seq), cursor: view.state.cursor, counters: view.state.counters, asked };
  }, { server: server.url, cursorShift });
  const grow = async (n) => {
    const lines = await server.lines('early');
    const next = lines.at(-1).seq + 1;
    await server.append('early', lines.slice(-n).map((l, i) => JSON.stringify({ ...l, seq: next + i })));
    return next + n - 1;
  };

  // A first visit (no last screen): the page asks the newest window, the engine takes it.
  await reload();
  let before = windows();
  let r = await reopen(0);
  const lines = await server.lines('early');
  assert.equal(r.cursor, lines.at(-1).seq, 'the newest line is shown');
  assert.equal(r.counters.probesPassed, 0, 'nothing cached: nothing to check');
  assert.deepEqual(r.asked, ['/sessions/early/transcript?limit=80'], 'the page asked the newest window');
  assert.equal(windows() - before, 1, 'one newest window: the page\'s, taken by the engine');
  assert.equal(checks(), 0, 'no check');
  await closeAll(); // the last screen saved: its cursor is the cached tail

  let newest = await grow(4);
  before = checks();
  await reload();
  r = await reopen(0);
  assert.equal(r.cursor, newest, 'the lines added while away are shown');
  assert.equal(r.counters.probesPassed, 1, `the cached tail was checked: ${JSON.stringify(r.counters)}`);
  assert.equal(r.counters.caughtUp, 4, 'caught up from the cached tail, not reopened cold');
  assert.deepEqual(r.asked, [`/sessions/early/catchup?cursor=${newest - 4}`], 'the page asked the check');
  assert.equal(checks() - before, 1, 'one check: the page\'s, taken by the engine');
  await closeAll();

  newest = await grow(3);
  before = checks();
  await reload();
  r = await reopen(-1);
  assert.equal(r.cursor, newest, 'the lines added while away are shown');
  assert.equal(r.counters.probesPassed, 1, `the cached tail was checked: ${JSON.stringify(r.counters)}`);
  assert.equal(r.counters.caughtUp, 3, 'caught up from the cached tail');
  assert.equal(checks() - before, 2, 'the page asked from the stale cursor; the engine asked from its own tail');
  assert.equal(new Set(r.seqs).size, r.seqs.length, `no row twice: ${r.seqs}`);
  await closeAll();
});

it('the opening screen (`onOpeningScreen`, folded in the page) comes before the view\'s first rows and holds the rows the view then shows: a first visit\'s newest window, a reopen\'s last screen with the lines added meanwhile; nothing new, or a replaced file, gets none', async () => {
  await copySession('opener', 'fix-build');
  const visit = () => browser.run(async ({ server }) => {
    const { Scrollback } = await import('/pkg/index.js');
    const seen = []; // in order: the opening screen, the view's first ready state
    const sb = await Scrollback.open({
      server,
      storage: 'auto',
      opening: 'opener',
      onOpeningScreen: (state) => seen.push({ from: 'opening', state }),
    });
    window.sb = sb;
    // The page's fold races the worker's open (whichever is first on this machine): the view is
    // opened once the fold has settled, so that a view with rows never hides an opening screen.
    while (!performance.getEntriesByName('scrollback:opening-screen').length) await new Promise((r) => setTimeout(r, 5));
    // What the app has been shown: openSession's answer, then each state onChange delivers (on
    // the next frame after the worker's patch, so `view.state` may be ahead of it).
    let shown = null;
    const viewReady = (state) => {
      shown = state;
      if (state.ready && !seen.some((s) => s.from === 'view')) seen.push({ from: 'view', state });
    };
    const view = await sb.openSession('opener', { onChange: viewReady });
    viewReady(view.state); // (rows shown before openSession answered come with its answer)
    window.view = view;
    const deadline = Date.now() + 60_000;
    while (!shown.live) {
      if (Date.now() > deadline) throw new Error(`not live: ${JSON.stringify({ ...view.state, rows: view.state.rows.length })}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const brief = ({ rows, ready, verified, live, cursor, oldest, moreHistory, contextTokens }) => ({ rows, ready, verified, live, cursor, oldest, moreHistory, contextTokens });
    // When the worker started (its time origin), after the small module was up and warm.
    const workerStart = (await sb.marks()).start;
    const warm = performance.getEntriesByName('scrollback:screen-warm')[0]?.startTime;
    return { seen: seen.map(({ from, state }) => ({ from, ...brief(state) })), now: brief(view.state), workerStart, warm };
  }, { server: server.url });

  await reload();
  let r = await visit();
  const lines = await server.lines('opener');
  assert.deepEqual(r.seen.map((s) => s.from), ['opening', 'view'], 'the opening screen first, then the view\'s own rows');
  const [screen] = r.seen;
  assert.equal(screen.ready, true);
  assert.equal(screen.verified, false, 'not taken for checked');
  assert.equal(screen.live, false);
  assert.equal(screen.cursor, lines.at(-1).seq, 'the newest line is on it');
  assert.ok(screen.rows.length > 0);
  assert.deepEqual(screen.rows, r.now.rows, 'the rows the view shows, folded by the same rule');
  assert.deepEqual([screen.oldest, screen.moreHistory, screen.contextTokens], [r.now.oldest, r.now.moreHistory, r.now.contextTokens]);
  // (Two clocks, the page's and the worker's, each rounded to the engine's timer resolution:
  // Firefox's is 1 ms, so they may disagree by up to 2 ms. A worker started beside the small
  // module starts at the open call, before the module is even up.)
  assert.ok(r.warm !== undefined && r.workerStart >= r.warm - 2,
    `the worker started once the small module was warm (at ${r.warm} ms), not beside it (at ${r.workerStart} ms)`);
  await closeAll(); // the view's last screen saved

  await reload();
  r = await visit();
  assert.deepEqual(r.seen.map((s) => s.from), ['view'], 'a reopen with nothing new draws its last screen: no opening screen');
  await closeAll();

  // Lines added while away: the last screen with them folded on, before the view's rows.
  let now = await server.lines('opener');
  await server.append('opener', now.slice(-5).map((l, i) => JSON.stringify({ ...l, seq: now.at(-1).seq + 1 + i })));
  now = await server.lines('opener');
  await reload();
  r = await visit();
  assert.deepEqual(r.seen.map((s) => s.from), ['opening', 'view'], 'the resumed screen first, then the view\'s own rows');
  const [resumed] = r.seen;
  assert.deepEqual([resumed.ready, resumed.verified, resumed.live], [true, false, false], 'ready, not taken for checked');
  assert.equal(resumed.cursor, now.at(-1).seq, 'the lines added meanwhile are on it');
  assert.deepEqual(resumed.rows, r.now.rows.slice(-resumed.rows.length), 'the newest rows the view shows, folded by the same rule');
  await closeAll();

  // The file replaced by another as long: the saved screen is not the server's, so
  // nothing is folded onto it; the view shows the new file.
  const other = now.map((l) => ({ ...l, event: { type: 'userMessage', text: `replaced ${l.seq}` } }));
  const put = await fetch(`${server.url}/sessions/opener/transcript`, {
    method: 'PUT', headers: server.headers, body: other.map((l) => `${JSON.stringify(l)}\n`).join(''),
  });
  assert.ok(put.ok, `PUT: ${put.status}`);
  await reload();
  r = await visit();
  assert.deepEqual(r.seen.map((s) => s.from), ['view'], 'no opening screen from a replaced file');
  assert.ok(r.now.rows.every((row) => row.kind === 'user'), 'only the new file\'s rows');
  await closeAll();

  // A session the server does not have: no screen, and the view says it is gone.
  await reload();
  const missing = await browser.run(async ({ server }) => {
    const { Scrollback } = await import('/pkg/index.js');
    let screens = 0;
    const sb = await Scrollback.open({ server, storage: 'auto', opening: 'no-such-session', onOpeningScreen: () => { screens += 1; } });
    window.sb = sb;
    const view = await sb.openSession('no-such-session');
    window.view = view;
    const deadline = Date.now() + 60_000;
    while (!view.state.error) {
      if (Date.now() > deadline) throw new Error(`no error: ${JSON.stringify(view.state)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return { screens, error: view.state.error.kind };
  }, { server: server.url });
  assert.deepEqual(missing, { screens: 0, error: 'gone' });
  await closeAll();
});

it('a small module that never arrives holds neither the session nor its opening: the worker waits for it a moment, then starts', async () => {
  await copySession('stalled', 'fix-build');
  await reload();
  const r = await browser.run(async ({ server }) => {
    // The page's small module is asked and never answered (a stalled download); the rest of
    // the page's requests go through.
    const fetched = [];
    const pageFetch = globalThis.fetch;
    globalThis.fetch = (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      fetched.push(url.replace(/^.*\//, ''));
      return url.endsWith('/scrollback_screen_bg.wasm') ? new Promise(() => {}) : pageFetch(input, init);
    };
    const { Scrollback } = await import('/pkg/index.js');
    let screens = 0;
    const deadline = Date.now() + 60_000;
    const late = new Promise((_, reject) => { setTimeout(() => reject(new Error('not open after 60 s')), 60_000); });
    const sb = await Promise.race([late,
      Scrollback.open({ server, storage: 'auto', opening: 'stalled', onOpeningScreen: () => { screens += 1; } })]);
    window.sb = sb;
    const view = await Promise.race([late, sb.openSession('stalled')]);
    window.view = view;
    while (!(view.state.ready && view.state.live)) {
      if (Date.now() > deadline) throw new Error(`not live: ${JSON.stringify({ ...view.state, rows: view.state.rows.length })}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    globalThis.fetch = pageFetch;
    return { screens, rows: view.state.rows.length, fetched };
  }, { server: server.url });
  assert.ok(r.fetched.includes('scrollback_screen_bg.wasm'), `the small module was asked: ${r.fetched}`);
  assert.ok(r.rows > 0, 'the view draws its rows');
  assert.equal(r.screens, 0, 'no opening screen without the small module');
  const windows = server.log().split('\n')
    .filter((l) => l.includes('/sessions/stalled/transcript') && !l.includes('before=')).length;
  assert.equal(windows, 1, 'one newest window: the page\'s, taken by the engine');
  await closeAll();
});

it('a stream gone silent without closing is reconnected, and what came meanwhile is shown', async () => {
  // A server of its own, its keep-alive every 300 ms, behind a relay that can go silent.
  const relay = await startRelay();
  const quick = await startServer({
    args: ['--keep-alive-ms', '300', '--allow-host', `127.0.0.1:${relay.port}`],
    www: path.join(ROOT, 'tests/lib'),
  });
  relay.upstream = quick.port;
  const origin = `http://127.0.0.1:${relay.port}`;
  try {
    await browser.goto(`${origin}/blank.html`);
    await browser.run(async ({ server }) => {
      const { Scrollback } = await import('/pkg/index.js');
      window.sb = await Scrollback.open({ server, storage: 'auto' });
      window.view = await window.sb.openSession('fix-build');
    }, { server: origin });
    await until((s) => s.ready && s.live);
    assert.equal(relay.streamsOpened(), 1);
    assert.equal(relay.goSilent(), 1);
    const seq = (await quick.lines('fix-build')).at(-1).seq + 1;
    const text = 'written while the stream was silent';
    await quick.append('fix-build', [JSON.stringify({ seq, ts: Date.now() / 1000, event: { type: 'userMessage', text } })]);
    await until((s, seq) => s.live && s.cursor === seq && s.banner === null, seq);
    const shown = await browser.run(async ({ text }) => window.view.state.rows.filter((r) => r.text === text).length, { text });
    assert.equal(shown, 1, 'shown once');
    assert.ok(relay.streamsOpened() >= 2, 'a new stream replaced the silent one');
    await closeAll();
  } finally {
    relay.close();
    await quick.dispose();
  }
});

it('clearCache() (a sign-out): the session\'s cache, search hits and last screen go; a reopen is a first visit', async () => {
  await copySession('signout', 'fix-build');
  await reload();
  await open('signout');
  // A word of one of its rows, to search for.
  const word = await browser.run(async () => window.view.state.rows.map((r) => r.text)
    .findLast((x) => typeof x === 'string' && /[a-z]{5}/i.test(x)).match(/[a-z]{5,}/i)[0]);
  await closeAll();
  await reload();
  const r = await browser.run(async ({ server, word }) => {
    const { Scrollback } = await import('/pkg/index.js');
    const sb = await Scrollback.open({ server, storage: 'auto' });
    window.sb = sb;
    await sb.warmSearch();
    const seen = async () => ({
      hits: (await sb.search(word, { sessions: ['signout'] })).length,
      screen: Scrollback.lastScreen(server, 'signout') !== null,
    });
    const before = await seen();
    const kept = await sb.clearCache();
    const after = await seen();
    const counted = await sb.counters();
    const view = await sb.openSession('signout');
    window.view = view;
    const deadline = Date.now() + 60_000;
    while (!(view.state.live && view.state.verified)) {
      if (Date.now() > deadline) throw new Error(`not live: ${JSON.stringify({ ...view.state, rows: view.state.rows.length })}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const now = await sb.counters();
    const since = (k) => now[k] - counted[k];
    return { before, kept, after, probes: since('probesPassed') + since('probesFailed'), rows: view.state.rows.length };
  }, { server: server.url, word });
  assert.ok(r.before.hits > 0 && r.before.screen, `before: ${JSON.stringify(r.before)} (${word})`);
  assert.deepEqual(r.kept, [], 'nothing kept: no other tab shows it');
  assert.deepEqual(r.after, { hits: 0, screen: false }, 'no hit and no last screen after');
  assert.equal(r.probes, 0, 'the reopen had nothing cached to check');
  assert.ok(r.rows > 0);
  await closeAll();
});
