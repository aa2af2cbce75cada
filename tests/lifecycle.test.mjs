// The page's API when the app leaves early or its own code throws, in headless Chromium against
// the real server: `close()` while a session is still opening ends the worker cleanly (not by
// its time limit) and leaves the session free for the next open; an `onChange` or
// `onOpeningScreen` that throws is reported as an uncaught error would be and stops nothing
// else, and one whose screen is folded after `close()` is not called; a full quota is said in the
// view (`storageError`) while the rows go on, and evicts the least recently opened session so
// that the next open writes again; a reopen's small module
// warms up (holding the page's thread) only after the frame that draws the last screen; a chat
// store's `close()` resolves once its worker is gone; bad arguments reject (a promise-returning
// call never throws at the caller); an older page still on its way when its view closes is not
// waited for (the call rejects, the worker's close ends cleanly); a page that draws no frames
// still hears `onChange`; a refused `reload()` keeps the session's last screen.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { originQuota, pageAt, sharedServer, until } from './lib/setup.mjs';

const shared = sharedServer();

/** A page of the server that records its uncaught errors and console warnings. */
async function page(t) {
  const { page } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
  const seen = { warnings: [], errors: [] };
  page.on('console', (m) => { if (m.type() === 'warning') seen.warnings.push(m.text()); });
  page.on('pageerror', (e) => seen.errors.push(e.message));
  return { page, seen };
}

for (const storage of ['opfs', 'indexeddb']) {
  test(`${storage}: close() while a session is still opening ends the worker cleanly, and the session opens again`, async (t) => {
    const { page: p, seen } = await page(t);
    const out = await p.evaluate(async (storage) => {
      const { Scrollback } = await import('/pkg/index.js');
      const live = async (sb) => {
        const view = await sb.openSession('fix-build');
        while (!(view.state.live && view.state.verified)) await new Promise((r) => setTimeout(r, 20));
        return view.state.rows.length;
      };
      // Cached first, so that opening it again reads the store.
      const cached = await Scrollback.open({ server: location.origin, storage });
      await live(cached);
      await cached.close();

      const sb = await Scrollback.open({ server: location.origin, storage });
      const ids = (await sb.sessions()).map((s) => s.id);
      // Posted to the worker right before the close: some are still being read from the store
      // when the close comes in.
      const opening = ids.map((id) => sb.openSession(id).then(() => 'opened', (e) => e.message));
      await sb.close();
      const first = await Promise.all(opening);
      const again = await Scrollback.open({ server: location.origin, storage });
      const rows = await live(again);
      await again.close();
      return { first, rows };
    }, storage);
    for (const r of out.first) assert.ok(r === 'opened' || r === 'Scrollback is closed', r);
    assert.ok(out.rows > 0, 'the session opened again, live, with its rows');
    assert.deepEqual(seen.warnings.filter((w) => /did not finish closing/.test(w)), [],
      'the worker finished its close (a session left open would keep it waiting until it is ended)');
    assert.deepEqual(seen.errors, []);
  });
}

test('a worker that fails: every open view says so; an onChange that throws is reported and keeps no other view from hearing it', async (t) => {
  const { page: p, seen } = await page(t);
  const out = await p.evaluate(async () => {
    const { Scrollback } = await import('/pkg/index.js');
    // A stand-in worker (this test is about the page, not the engine) that opens two views,
    // then fails on the next call, as a worker whose engine panicked does.
    const script = `onmessage = ({ data: { id, op } }) => {
      if (op === 'openSession') postMessage({ id, value: JSON.stringify({ reset: true, rows: [], state: { ready: true, live: true, banner: null } }) });
      if (op === 'counters') throw new Error('the engine panicked');
    };`;
    const worker = new Worker(URL.createObjectURL(new Blob([script], { type: 'text/javascript' })));
    const sb = new Scrollback(worker);
    let heard = null;
    // Opened first, so told first.
    await sb.openSession('a', { onChange: () => { throw new Error('a bug in the app'); } });
    const good = await sb.openSession('b', { onChange: (state) => { heard = state; } });
    const failed = await sb.counters().then(() => null, (e) => e.message);
    // Told at once (a microtask after the failure); a few frames at most.
    for (let i = 0; heard === null && i < 10; i += 1) await new Promise((r) => requestAnimationFrame(r));
    worker.terminate();
    return { failed, heard: heard && { live: heard.live, banner: heard.banner }, state: { live: good.state.live } };
  });
  assert.match(out.failed, /the Scrollback worker failed: .*the engine panicked/);
  assert.ok(out.heard, 'the good view heard of it');
  assert.equal(out.heard.live, false, 'the view is no longer live');
  assert.match(out.heard.banner, /the Scrollback worker failed/);
  assert.equal(out.state.live, false);
  assert.ok(seen.errors.some((e) => /a bug in the app/.test(e)), `reported: ${JSON.stringify(seen.errors)}`);
});

test('an onOpeningScreen that throws is reported, and the session opens', async (t) => {
  const { page: p, seen } = await page(t);
  const out = await p.evaluate(async () => {
    const { Scrollback } = await import('/pkg/index.js');
    let shown = 0;
    const sb = await Scrollback.open({
      server: location.origin,
      storage: 'memory',
      opening: 'fix-build',
      onOpeningScreen: () => { shown += 1; throw new Error('a bug in the app draw'); },
    });
    while (!performance.getEntriesByName('scrollback:opening-screen').length) await new Promise((r) => setTimeout(r, 20));
    const view = await sb.openSession('fix-build');
    while (!view.state.live) await new Promise((r) => setTimeout(r, 20));
    const rows = view.state.rows.length;
    await sb.close();
    return { shown, rows };
  });
  assert.equal(out.shown, 1, 'the opening screen was handed over');
  assert.ok(out.rows > 0);
  assert.ok(seen.errors.some((e) => /a bug in the app draw/.test(e)), `reported: ${JSON.stringify(seen.errors)}`);
});

test('an opening screen folded after close() is not handed over', async (t) => {
  const { page: p } = await page(t);
  const out = await p.evaluate(async () => {
    // The small module's download is held until the Scrollback is closed (it opens without
    // it after a second), so its fold can only come after the close.
    let release;
    const held = new Promise((resolve) => { release = resolve; });
    const pageFetch = globalThis.fetch;
    globalThis.fetch = (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      return url.endsWith('/scrollback_screen_bg.wasm') ? held.then(() => pageFetch(input, init)) : pageFetch(input, init);
    };
    const { Scrollback } = await import('/pkg/index.js');
    let shown = 0;
    const sb = await Scrollback.open({
      server: location.origin,
      storage: 'memory',
      opening: 'fix-build',
      onOpeningScreen: () => { shown += 1; },
    });
    const settledBefore = performance.getEntriesByName('scrollback:opening-screen').length;
    await sb.close();
    release();
    while (!performance.getEntriesByName('scrollback:opening-screen').length) await new Promise((r) => setTimeout(r, 20));
    globalThis.fetch = pageFetch;
    return { shown, settledBefore };
  });
  assert.equal(out.settledBefore, 0, 'the fold had not settled when the Scrollback closed');
  assert.equal(out.shown, 0, 'nothing handed over after close()');
});

test('a reopen warms the small module up only after the frame that draws the last screen', async (t) => {
  const { page: p } = await page(t);
  const out = await p.evaluate(async () => {
    const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
    const { Scrollback } = await import('/pkg/index.js');
    const server = location.origin;
    // A first visit leaves the session's last screen.
    let sb = await Scrollback.open({ server, storage: 'memory' });
    const view = await sb.openSession('fix-build');
    while (!view.state.live || Scrollback.lastScreen(server, 'fix-build') === null) await sleep(20);
    await sb.close();
    // The reopen, as an app does it: the last screen asked to be drawn, then the open call.
    // The page's frames are held, so that the small module is up before the frame comes.
    const held = [];
    const pageFrame = window.requestAnimationFrame;
    window.requestAnimationFrame = (fn) => held.push(fn);
    let drawnAt = null;
    requestAnimationFrame(() => { drawnAt = performance.now(); });
    performance.clearMarks();
    const opening = Scrollback.open({ server, storage: 'memory', opening: 'fix-build', onOpeningScreen: () => {} });
    const marked = (name) => performance.getEntriesByName(name).length > 0;
    while (!marked('scrollback:screen-module')) await sleep(5);
    const warmBeforeFrame = marked('scrollback:screen-warm');
    window.requestAnimationFrame = pageFrame;
    for (const fn of held.splice(0)) fn(performance.now());
    while (!marked('scrollback:screen-warm')) await sleep(5);
    const warmAt = performance.getEntriesByName('scrollback:screen-warm')[0].startTime;
    sb = await opening;
    await sb.close();
    return { warmBeforeFrame, drawnAt, warmAt };
  });
  assert.equal(out.warmBeforeFrame, false, 'the small module did not warm up while the frame was held');
  assert.ok(out.drawnAt !== null && out.warmAt >= out.drawnAt, `warmed up after the frame: ${JSON.stringify(out)}`);
});

test('a chat store closes once its worker is gone; bad arguments reject rather than throw', async (t) => {
  const { page: p, seen } = await page(t);
  const out = await p.evaluate(async () => {
    const { Scrollback } = await import('/pkg/index.js');
    let ended = 0;
    const terminate = Worker.prototype.terminate;
    Worker.prototype.terminate = function () { ended += 1; return terminate.call(this); };
    const rejected = async (call) => {
      let promise;
      try { promise = call(); } catch (e) { return `threw: ${e.name}`; }
      try { await promise; return 'resolved'; } catch (e) { return `rejected: ${e.name}`; }
    };
    const chats = await Scrollback.chats({ storage: 'indexeddb' });
    const r = {
      tailNull: await chats.tail('notes', null).then((t) => t.lines.length, (e) => e.message),
      tailNumber: await rejected(() => chats.tail(5)),
    };
    const closing = chats.close();
    await closing;
    r.endedWhenClosed = ended;

    const sb = await Scrollback.open({ server: location.origin, storage: 'memory' });
    r.searchNumber = await rejected(() => sb.search(5));
    r.searchLimit = await rejected(() => sb.search('x', { limit: -1 }));
    r.searchNull = await sb.search('anything', null).then((hits) => Array.isArray(hits), (e) => e.message);
    await sb.close();
    return r;
  });
  assert.equal(out.endedWhenClosed, 1, 'close() resolved after the chat worker was ended');
  assert.match(out.tailNull, /^chat not found: /, 'tail(name, null) is tail(name)');
  assert.equal(out.tailNumber, 'rejected: TypeError');
  assert.equal(out.searchNumber, 'rejected: TypeError');
  assert.equal(out.searchLimit, 'rejected: TypeError');
  assert.equal(out.searchNull, true, 'search(query, null) is search(query)');
  assert.deepEqual(seen.errors, []);
});

test('indexeddb: the database deleted while a reply streams is no uncaught error, and the view streams on', async (t) => {
  const session = 'wiped-idb';
  const data = shared.server.dataDir;
  await fs.mkdir(path.join(data, session), { recursive: true });
  await fs.copyFile(path.join(data, 'welcome', 'transcript.jsonl'), path.join(data, session, 'transcript.jsonl'));
  const { page: p, seen } = await page(t);
  const out = await p.evaluate(async (session) => {
    const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
    const { Scrollback } = await import('/pkg/index.js');
    const sb = await Scrollback.open({ server: location.origin, storage: 'indexeddb' });
    const view = await sb.openSession(session);
    while (!view.state.live) await sleep(20);
    const rows = view.state.rows.length;
    await sb.postMessage(session, 'a question asked while the store goes');
    // The reply has started streaming into its row.
    while (!view.state.rows.slice(rows).some((r) => r.kind === 'assistant')) await sleep(10);
    const deleted = await new Promise((resolve) => {
      const r = indexedDB.deleteDatabase('scrollback');
      r.onsuccess = () => resolve('deleted');
      r.onerror = () => resolve('failed');
    });
    while (view.state.status !== 'idle') await sleep(20);
    // A moment for what the worker does after the reply (its buffered writes' commits).
    const cursor = view.state.cursor;
    await sb.postMessage(session, 'and one after');
    while (!(view.state.cursor > cursor && view.state.status === 'idle')) await sleep(20);
    const { live, error } = view.state;
    await sb.close();
    return { deleted, live, error };
  }, session);
  assert.deepEqual(out, { deleted: 'deleted', live: true, error: null });
  assert.deepEqual(seen.errors, [], 'nothing uncaught in the page or its worker');
});

// OPFS only: Chromium's IndexedDB does not hold to a quota set through the DevTools protocol
// (its writes went on at a quota of 1,000 bytes); the wasm store suite checks IndexedDB's quota
// failures through its write limit, and server/tests/engine/storage.rs the view's report.
test('opfs: a full quota is said in the view, the rows go on; a reload once there is room keeps them again', async (t) => {
  const { context, page: p } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
  const quota = await originQuota(t, context, p, shared.server.url);
  const errors = [];
  p.on('pageerror', (e) => errors.push(e.message));
  await p.evaluate(async (storage) => {
    const { Scrollback } = await import('/pkg/index.js');
    window.sb = await Scrollback.open({ server: location.origin, storage });
    window.view = await window.sb.openSession('long');
    while (!(view.state.live && view.state.verified)) await new Promise((r) => setTimeout(r, 20));
  }, 'opfs');
  // No room left beyond what the origin uses now.
  await quota(await p.evaluate(async () => (await navigator.storage.estimate()).usage));
  const full = await p.evaluate(async () => {
    const rows = view.state.rows.length;
    for (let i = 0; i < 5 && !view.state.storageError; i++) await view.loadOlder();
    // A page is answered once shown; its write (and so the error) follows.
    for (const until = Date.now() + 30_000; !view.state.storageError && Date.now() < until;) {
      await new Promise((r) => setTimeout(r, 20));
    }
    return { before: rows, after: view.state.rows.length, error: view.state.storageError, live: view.state.live };
  });
  assert.ok(full.after > full.before, `older pages are shown: ${full.before} -> ${full.after}`);
  assert.match(full.error ?? '', /quota/i, 'the view says the rows are not kept');
  assert.equal(full.live, true, 'still following the session');

  await quota(null);
  const again = await p.evaluate(async () => {
    await view.reload();
    // The error clears once the reload's purge has removed the chunks; then the cold open.
    const ok = () => view.state.storageError === null && view.state.live && view.state.verified;
    while (!ok() || !(await view.cachedSize())) await new Promise((r) => setTimeout(r, 20));
    const kept = await view.cachedSize();
    await view.loadOlder();
    return { error: view.state.storageError, kept, more: await view.cachedSize() };
  });
  assert.equal(again.error, null, 'storing again after the reload');
  assert.ok(again.kept > 0 && again.more > again.kept, `the window and the next page are kept: ${again.kept} -> ${again.more}`);
  await p.evaluate(() => sb.close());
  assert.deepEqual(errors, []);
});

for (const storage of ['opfs', 'indexeddb']) {
  test(`${storage}: close() while an older page is on its way ends the worker cleanly; the page is not waited for`, async (t) => {
    const { context, page: p } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
    const warnings = [];
    p.on('console', (m) => { if (m.type() === 'warning') warnings.push(m.text()); });
    // A link that never answers the page before the newest.
    let asked;
    const asking = new Promise((r) => { asked = r; });
    await context.route((url) => url.pathname === '/sessions/long/transcript' && url.searchParams.has('before'), () => asked());
    await p.evaluate(async (storage) => {
      const { Scrollback } = await import('/pkg/index.js');
      const sb = await Scrollback.open({ server: location.origin, storage });
      const view = await sb.openSession('long');
      while (!view.state.live) await new Promise((r) => setTimeout(r, 20));
      const older = view.loadOlder().then((more) => `resolved ${more}`, (e) => `rejected: ${e.message}`);
      window.t = { sb, view, older };
    }, storage);
    await asking;
    const out = await p.evaluate(async () => {
      // The view closed alone first: its call ends at once, as the whole close's would.
      t.view.close();
      const older = await t.older;
      await t.sb.close();
      return { older };
    });
    assert.equal(out.older, 'rejected: this session view is closed');
    assert.deepEqual(warnings.filter((w) => /did not finish closing/.test(w)), [],
      'the worker finished its close (a page on its way would keep it waiting until it is ended)');
  });
}

test('a page that draws no frames (a background tab) still hears a view\'s changes through onChange', async (t) => {
  const { context } = await pageAt(t, shared.browser, 'about:blank');
  // Hidden, as Chromium runs a background tab: no animation frame callback ever runs.
  await context.addInitScript(() => {
    window.requestAnimationFrame = () => 0;
    Object.defineProperty(document, 'visibilityState', { get: () => 'hidden' });
    Object.defineProperty(document, 'hidden', { get: () => true });
  });
  const p = await context.newPage();
  await p.goto(`${shared.server.url}/pkg/index.js`);
  const out = await p.evaluate(async () => {
    const { Scrollback } = await import('/pkg/index.js');
    const sb = await Scrollback.open({ server: location.origin, storage: 'memory' });
    let heard = null;
    const view = await sb.openSession('welcome', { onChange(state) { heard = state; } });
    const until = async (check) => {
      for (const end = Date.now() + 60_000; !check() && Date.now() < end;) await new Promise((r) => setTimeout(r, 20));
    };
    await until(() => view.state.live);
    const before = view.state.cursor;
    await sb.postMessage('welcome', 'are you there?');
    // What onChange heard catches up with the view's state as the reply streams in.
    await until(() => view.state.cursor > before + 3 && heard?.cursor === view.state.cursor);
    const result = { before, state: view.state.cursor, heard: heard?.cursor ?? null };
    await sb.close();
    return result;
  });
  assert.ok(out.state > out.before + 3, `a reply streamed into view.state: ${JSON.stringify(out)}`);
  assert.equal(out.heard, out.state, `onChange heard the newest state: ${JSON.stringify(out)}`);
});

test('a reload that is refused (a bad anchor, a closed view) keeps the session\'s last screen', async (t) => {
  const { page: p } = await page(t);
  const out = await p.evaluate(async () => {
    const { Scrollback } = await import('/pkg/index.js');
    const server = location.origin;
    const sb = await Scrollback.open({ server, storage: 'memory' });
    const view = await sb.openSession('fix-build');
    // Saved a moment after the view shows its rows.
    while (Scrollback.lastScreen(server, 'fix-build') === null) await new Promise((r) => setTimeout(r, 20));
    const r = {};
    r.badAnchor = await view.reload('7').then(() => 'resolved', (e) => e.name);
    r.afterBadAnchor = Scrollback.lastScreen(server, 'fix-build') !== null;
    view.close();
    r.closedReload = await view.reload().then(() => 'resolved', (e) => e.message);
    r.afterClosedReload = Scrollback.lastScreen(server, 'fix-build') !== null;
    await sb.close();
    return r;
  });
  assert.deepEqual(out, {
    badAnchor: 'TypeError',
    afterBadAnchor: true,
    closedReload: 'this session view is closed',
    afterClosedReload: true,
  });
});

test('a worker that failed is ended: a Scrollback opened next writes the sessions it held', async (t) => {
  const { page } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
  const out = await page.evaluate(async (timeout) => {
    // The package's worker, as the page sees it; its failure is what the page is told of it
    // (an uncaught error in the worker, a wasm trap in a task, reaches the page as this event).
    const workers = [];
    const PageWorker = globalThis.Worker;
    globalThis.Worker = class extends PageWorker {
      constructor(...args) {
        super(...args);
        workers.push(this);
      }
    };
    const { Scrollback } = await import('/pkg/index.js');
    const until = async (check) => {
      for (const end = Date.now() + timeout; !check() && Date.now() < end;) await new Promise((r) => setTimeout(r, 10));
      return check();
    };
    const sb = await Scrollback.open({ server: location.origin, storage: 'opfs' });
    const view = await sb.openSession('long');
    await until(() => view.state.live && view.state.writer);
    workers[0].dispatchEvent(new ErrorEvent('error', { message: 'Uncaught RuntimeError: unreachable' }));
    await until(() => view.state.banner);
    const failed = { live: view.state.live, banner: view.state.banner };
    // The app opens a new one (the failed one's calls all reject now).
    const next = await Scrollback.open({ server: location.origin, storage: 'opfs' });
    const again = await next.openSession('long');
    const writes = await until(() => again.state.live && again.state.writer);
    await next.close();
    await sb.close();
    return { failed, writes };
  }, 60_000);
  assert.deepEqual(out, {
    failed: { live: false, banner: 'the Scrollback worker failed: Uncaught RuntimeError: unreachable' },
    writes: true,
  });
});

test('a close does not wait for a listing the server never answers: the store is closed, the listing told it is closed', async (t) => {
  const { context, page } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
  const warnings = [];
  page.on('console', (m) => { if (m.type() === 'warning') warnings.push(m.text()); });
  // The second listing is taken and never answered (until the test ends).
  let listings = 0;
  let release;
  const held = new Promise((resolve) => { release = resolve; });
  t.after(() => release());
  await context.route(/\/sessions$/, async (route) => {
    listings += 1;
    if (listings > 1) await held;
    await route.continue().catch(() => {});
  });
  await page.evaluate(async () => {
    const { Scrollback } = await import('/pkg/index.js');
    window.sb = await Scrollback.open({ server: location.origin, storage: 'opfs' });
    await sb.sessions();
    window.listing = sb.sessions().then(() => 'listed', (e) => e.message);
  });
  await until(() => listings === 2, 'the second listing is on its way');
  const out = await page.evaluate(async () => {
    await sb.close();
    return { listing: await listing };
  });
  assert.deepEqual({ ...out, warnings }, { listing: 'Scrollback is closed', warnings: [] });
});

// OPFS only, as above. The quota stays full throughout: what lets the next open write is the
// eviction its refused write set off (the least recently opened session, `long`), not room made
// by the test.
test('opfs: a full quota evicts the least recently opened session, and the next open writes again', async (t) => {
  const { context, page: p } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
  const quota = await originQuota(t, context, p, shared.server.url);
  const errors = [];
  p.on('pageerror', (e) => errors.push(e.message));
  const held = await p.evaluate(async () => {
    const { Scrollback } = await import('/pkg/index.js');
    window.sb = await Scrollback.open({ server: location.origin, storage: 'opfs' });
    const old = await sb.openSession('long');
    while (!(old.state.live && old.state.verified)) await new Promise((r) => setTimeout(r, 20));
    for (let i = 0; i < 10; i++) await old.loadOlder();
    while ((await old.cachedSize()) < 100_000) await new Promise((r) => setTimeout(r, 20));
    const size = await old.cachedSize();
    old.close();
    return size;
  });
  // No room left beyond what the origin uses now.
  const usage = await p.evaluate(async () => (await navigator.storage.estimate()).usage);
  await quota(usage);
  const refused = await p.evaluate(async (pinned) => {
    const view = await sb.openSession('fix-build');
    for (const until = Date.now() + 30_000; !view.state.storageError && Date.now() < until;) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const error = view.state.storageError;
    // The eviction runs beside the stream (it may be done already): wait for the usage to fall
    // below what it was when the quota was pinned.
    const start = pinned;
    let now = (await navigator.storage.estimate()).usage;
    for (const until = Date.now() + 30_000; now >= start && Date.now() < until;) {
      await new Promise((r) => setTimeout(r, 50));
      now = (await navigator.storage.estimate()).usage;
    }
    view.close();
    return { error, start, now };
  }, usage);
  assert.match(refused.error ?? '', /quota/i, 'the open\'s write was refused');
  assert.ok(refused.now < refused.start, `the eviction freed room: ${refused.start} -> ${refused.now} (long held ${held})`);
  const again = await p.evaluate(async () => {
    const view = await sb.openSession('fix-build');
    const ok = () => view.state.live && view.state.verified;
    while (!ok()) await new Promise((r) => setTimeout(r, 20));
    const kept = await view.cachedSize();
    const out = { error: view.state.storageError, kept };
    view.close();
    await sb.close();
    return out;
  });
  assert.equal(again.error, null, 'the next open writes, the quota unchanged');
  assert.ok(again.kept > 0, `its rows are kept: ${again.kept}`);
  assert.deepEqual(errors, []);
});
