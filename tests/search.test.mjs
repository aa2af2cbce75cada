// Search in the browser: sb.search over what the worker cached, with the network cut off.
// A session is opened (and scrolled back) online, the page goes offline, and the search still
// answers from the cache: typed hits, the matched words marked, a session filter, a limit; then
// from the search segment and the server's pack the warm-up built, in a worker that starts. And what another
// tab caches is found at once (its worker tells the others, and a tab that closes tells them as
// it closes), not at the next look at every session, 25 s later. And `search: false`: nothing
// indexed, the index removed, a search refused; search on again rebuilds it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { pageAt, sharedServer } from './lib/setup.mjs';

const shared = sharedServer();

for (const storage of ['opfs', 'indexeddb']) {
  test(`${storage}: sb.search finds what was read, with the API unreachable`, async (t) => {
    const { context, page } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
    await page.evaluate(async (storage) => {
      const { Scrollback } = await import('/pkg/index.js');
      const sb = await Scrollback.open({ server: location.origin, storage });
      window.sb = sb;
      const view = await sb.openSession('long');
      const deadline = Date.now() + 90_000;
      while (!view.state.live && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      for (let i = 0; i < 3 && view.state.moreHistory; i++) await view.loadOlder();
      view.close();
    }, storage);
    await context.setOffline(true);
    const result = await page.evaluate(async () => {
      // The context's offline state reaches the worker's requests a moment after the page's
      // (one run in a few saw the list still answered): ask until the list says offline.
      let sessions = await window.sb.sessions();
      for (const until = Date.now() + 10_000; !sessions.every((s) => s.offline) && Date.now() < until;) {
        await new Promise((r) => setTimeout(r, 50));
        sessions = await window.sb.sessions();
      }
      await window.sb.warmSearch(); // resolves once the indexes are loaded; the search needs none of it
      const hits = await window.sb.search('"row rule"', { limit: 3 });
      const none = await window.sb.search('"row rule"', { sessions: ['welcome'] });
      return { offline: sessions.every((s) => s.offline), hits, none };
    });
    assert.ok(result.offline, 'the API is unreachable');
    assert.ok(result.hits.length > 0 && result.hits.length <= 3, JSON.stringify(result.hits));
    for (const hit of result.hits) {
      assert.equal(hit.session, 'long');
      assert.ok(Number.isInteger(hit.seq) && hit.seq > 0 && hit.score > 0);
      const marked = hit.snippet.filter((p) => p.hit).map((p) => p.text.toLowerCase());
      assert.ok(marked.includes('row') && marked.includes('rule'), JSON.stringify(hit.snippet));
    }
    assert.deepEqual(result.none, []);

    // The warm-up built the session's search segment, and then the server's pack (every
    // session's index in one); a worker that starts (the page reloaded) answers from the
    // pack, before its own warm-up, as the first one did.
    const built = await page.evaluate(() => window.sb._bench('sizes'));
    assert.ok(built.segments >= 1 && built.pack > 0, JSON.stringify(built));
    await context.setOffline(false);
    await page.reload();
    const again = await page.evaluate(async (storage) => {
      const { Scrollback } = await import('/pkg/index.js');
      const sb = await Scrollback.open({ server: location.origin, storage });
      const hits = await sb.search('"row rule"', { limit: 3 });
      const some = await sb.search('row', { limit: 50 });
      await sb.warmSearch(); // the segment held in memory: the same answers
      const warm = await sb.search('"row rule"', { limit: 3 });
      const warmSome = await sb.search('row', { limit: 50 });
      return { hits, warm, some, warmSome };
    }, storage);
    assert.deepEqual(again.hits, result.hits);
    assert.deepEqual(again.warm, result.hits);
    assert.ok(again.some.length > 3, JSON.stringify(again.some.length));
    assert.deepEqual(again.warmSome, again.some);
  });
}

/**
 * Searches `word` in `page`'s `window.sb` until something is found, for 10 s at most (far less
 * than the 25 s until the worker would look at every session by itself): the hits, and the ms
 * it took.
 */
const searchUntilFound = (page, word) => page.evaluate(async (word) => {
  const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
  const started = performance.now();
  let hits = await window.sb.search(word);
  while (hits.length === 0 && performance.now() - started < 10_000) {
    await sleep(50);
    hits = await window.sb.search(word);
  }
  return { hits, ms: performance.now() - started };
}, word);

// (Each storage posts to a session of its own: a message posted while the other's reply streams
// would be queued.)
for (const [storage, session] of [['opfs', 'fix-build'], ['indexeddb', 'unicode']]) {
  test(`${storage}: what another tab caches is found at once, not at the next look at every session`, async (t) => {
    const url = `${shared.server.url}/pkg/index.js`;
    const { context, page: a } = await pageAt(t, shared.browser, url);
    const word = `okapi${storage}`;
    // Tab A caches a session and searches: it has looked at every session, and would not look
    // again for 30 s (25 s in idle time) by itself.
    const before = await a.evaluate(async ({ storage, word }) => {
      const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
      const { Scrollback } = await import('/pkg/index.js');
      const sb = await Scrollback.open({ server: location.origin, storage });
      window.sb = sb;
      const view = await sb.openSession('welcome');
      while (!view.state.live) await sleep(20);
      view.close();
      // The worker's own warm-up, in idle time after it opened, has listed every session.
      while (!(await sb.marks())['search-warm']) await sleep(50);
      return sb.search(word);
    }, { storage, word });
    assert.deepEqual(before, []);
    // Tab B, on the same store: a message posted to the session it shows is cached and
    // indexed there.
    const b = await context.newPage();
    await b.goto(url);
    await b.evaluate(async ({ storage, session, word }) => {
      const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
      const { Scrollback } = await import('/pkg/index.js');
      const sb = await Scrollback.open({ server: location.origin, storage });
      window.sb = sb;
      const view = await sb.openSession(session);
      window.view = view;
      while (!view.state.live) await sleep(20);
      await sb.postMessage(session, `what does an ${word} eat?`);
      while (!view.state.rows.some((r) => r.kind === 'user' && r.text.includes(word))) await sleep(20);
    }, { storage, session, word });
    // Tab A finds it as soon as B's worker has told it (its write committed), in far less
    // than the 25 s of its next look at every session.
    const found = await searchUntilFound(a, word);
    t.diagnostic(`found ${Math.round(found.ms)} ms after the other tab showed it`);
    assert.equal(found.hits.length, 1, `found within ${Math.round(found.ms)} ms: ${JSON.stringify(found.hits)}`);
    assert.equal(found.hits[0].session, session);
    assert.ok(found.hits[0].snippet.some((p) => p.hit && p.text.toLowerCase() === word), JSON.stringify(found.hits[0].snippet));

    // B posts again and closes as soon as the row is shown, before its worker would have
    // posted what it gathered (50 ms): it tells the other tabs as it closes.
    const last = `${word}s`;
    const closed = await b.evaluate(async ({ session, last }) => {
      const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
      const { view } = window;
      await window.sb.postMessage(session, `and ${last}?`);
      while (!view.state.rows.some((r) => r.text?.includes(last))) await sleep(5);
      const shown = performance.now();
      await window.sb.close();
      return performance.now() - shown;
    }, { session, last });
    const foundLast = await searchUntilFound(a, last);
    t.diagnostic(`B closed ${Math.round(closed)} ms after showing its last row; A found it ${Math.round(foundLast.ms)} ms after that`);
    assert.equal(foundLast.hits.length, 1, `found within ${Math.round(foundLast.ms)} ms: ${JSON.stringify(foundLast.hits)}`);
    assert.equal(foundLast.hits[0].session, session);
    await b.close();
  });
}

for (const storage of ['opfs', 'indexeddb']) {
  test(`${storage}: a session deleted while another tab writes it and this one searches is gone from search at once`, async (t) => {
    const url = `${shared.server.url}/pkg/index.js`;
    const session = `deleted-${storage}`;
    const data = shared.server.dataDir;
    await fs.mkdir(path.join(data, session), { recursive: true });
    await fs.copyFile(path.join(data, 'welcome', 'transcript.jsonl'), path.join(data, session, 'transcript.jsonl'));
    const word = `marmalade${storage}`;
    const { context, page: a } = await pageAt(t, shared.browser, url);
    // Tab A shows the session (its writer: on OPFS it holds the chunks' handles, so a remove
    // from another tab waits for them) and caches a message with the word.
    await a.evaluate(async ({ storage, session, word }) => {
      const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
      const { Scrollback } = await import('/pkg/index.js');
      const sb = await Scrollback.open({ server: location.origin, storage });
      const view = await sb.openSession(session);
      while (!view.state.live) await sleep(20);
      await sb.postMessage(session, `who likes ${word}?`);
      while (!view.state.rows.some((r) => r.kind === 'user' && r.text.includes(word))) await sleep(20);
      window.view = view;
    }, { storage, session, word });
    // Tab C searches every 100 ms, and deletes the session while its searches go on.
    const c = await context.newPage();
    await c.goto(url);
    const after = await c.evaluate(async ({ storage, session, word }) => {
      const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
      const { Scrollback } = await import('/pkg/index.js');
      const sb = await Scrollback.open({ server: location.origin, storage });
      while (!(await sb.search(word)).length) await sleep(50);
      const searching = setInterval(() => { sb.search(word); }, 100);
      await sleep(300);
      await sb.deleteSession(session);
      const hits = [];
      for (const wait of [0, 500, 1500]) {
        await sleep(wait);
        hits.push((await sb.search(word)).map((h) => h.session));
      }
      clearInterval(searching);
      return hits;
    }, { storage, session, word });
    assert.deepEqual(after, [[], [], []], 'the deleted session is found no more');
    await c.close();
  });
}

for (const storage of ['opfs', 'indexeddb']) {
  test(`${storage}: with search: false nothing is indexed, and turned on again the index is rebuilt`, async (t) => {
    const { page } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
    const result = await page.evaluate(async (storage) => {
      const { Scrollback } = await import('/pkg/index.js');
      /** Opens `welcome` in a Scrollback opened with `options`, until live; then `then(sb)`. */
      const visit = async (options, then) => {
        const sb = await Scrollback.open({ server: location.origin, storage, ...options });
        const view = await sb.openSession('welcome');
        const deadline = Date.now() + 30_000;
        while (!view.state.live && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        const size = await view.cachedSize();
        view.close();
        await sb.warmSearch(); // what the worker does by itself shortly after it opens
        try {
          return { live: view.state.live, size, ...(await then(sb)) };
        } finally {
          await sb.close();
        }
      };
      const hits = (sb) => sb.search('repository').then((h) => h.map((hit) => [hit.session, hit.seq]));
      const index = async (sb) => (await sb._bench('sizes')).index;
      const on = await visit({}, async (sb) => ({ hits: await hits(sb), index: await index(sb) }));
      const off = await visit({ search: false }, async (sb) => {
        const error = await sb.search('repository').then(() => null, (e) => ({ name: e.name, message: e.message }));
        return { error, index: await index(sb) };
      });
      const again = await visit({}, async (sb) => ({ hits: await hits(sb), index: await index(sb) }));
      return { on, off, again };
    }, storage);
    const { on, off, again } = result;
    assert.ok(on.live && off.live && again.live, JSON.stringify(result));
    assert.ok(on.hits.length > 0 && on.hits.every(([s]) => s === 'welcome'), JSON.stringify(on.hits));
    assert.ok(on.index > 0, 'indexed with search on');
    // Off: the session's index is removed (its bytes go back to the budget); a search says why
    // it cannot answer.
    assert.equal(off.index, 0);
    assert.ok(off.size < on.size, `the session's bytes: ${off.size} with search off, ${on.size} on`);
    assert.equal(off.error?.name, 'ScrollbackError');
    assert.match(off.error.message, /search is off/);
    // On again: rebuilt from the cached lines when the session opens; the same hits.
    assert.ok(again.index > 0);
    assert.deepEqual(again.hits, on.hits);
  });
}
