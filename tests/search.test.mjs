// Search in the browser: sb.search over what the worker cached, with the network cut off.
// A session is opened (and scrolled back) online, the page goes offline, and the search still
// answers from the cache: typed hits, the matched words marked, a session filter, a limit; then
// from the search segment the warm-up built, in a worker that starts offline.
import { test } from 'node:test';
import assert from 'node:assert/strict';
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

    // The warm-up built the session's search segment; a worker that starts (the page reloaded)
    // answers from it, before its own warm-up, as the first one did.
    const built = await page.evaluate(() => window.sb._bench('sizes'));
    assert.ok(built.segments >= 1, JSON.stringify(built));
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
