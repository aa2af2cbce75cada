// `sb.clearCache()`, a sign-out, in headless Chromium on OPFS and on IndexedDB against the real
// server: it deletes every cached session of the server (what the storage holds is read in the
// page), their search hits, the remembered session list and the last screens, and a reopen is
// a first visit again; it is refused while a view of the Scrollback is open, deleting nothing;
// a session another worker (a tab) is showing is kept, with its last screen, and said; the app's
// chat files stay.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cachedPaths } from './lib/chunks.mjs';
import { pageAt, sharedServer } from './lib/setup.mjs';

const shared = sharedServer();

/** The cache's paths below the server's folder: `<session>/<file>`, and the server's own files. */
const ofServer = (paths, port) => paths
  .filter((p) => p.includes(`_${port}`))
  .map((p) => p.replace(/^transcripts\/v1\/[^/]*_\d+/, ''));

for (const storage of ['opfs', 'indexeddb']) {
  test(`${storage}: clearCache() deletes every cached session, its search hits, the remembered list and the last screens; refused while a view is open; a session another tab shows is kept`, async (t) => {
    const { page } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const port = shared.server.port;
    const ids = ['fix-build', 'welcome'];

    // Both sessions cached, listed and searched; their views closed (their last screens saved).
    const before = await page.evaluate(async ({ storage, ids }) => {
      const { Scrollback } = await import('/pkg/index.js');
      const server = location.origin;
      const live = async (view) => {
        const deadline = Date.now() + 60_000;
        while (!(view.state.live && view.state.verified)) {
          if (Date.now() > deadline) throw new Error(`not live: ${view.id}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      };
      const sb = await Scrollback.open({ server, storage });
      window.sb = sb;
      await sb.sessions(); // remembered in the store
      for (const id of ids) {
        const view = await sb.openSession(id);
        await live(view);
        // A word of one of fix-build's rows, to search for.
        const text = view.state.rows.map((r) => r.text).findLast((x) => typeof x === 'string' && /[a-z]{5}/i.test(x));
        if (id === 'fix-build') window.word = text.match(/[a-z]{5,}/i)[0];
        view.close();
      }
      await sb.warmSearch();
      // A chat file of the app's, in the same storage: not the cache's to delete.
      await sb.chats().replace('notes', '{}', ['{"text":"kept"}']);
      return {
        hits: (await sb.search(window.word, { sessions: ['fix-build'] })).length,
        screens: ids.map((id) => Scrollback.lastScreen(server, id) !== null),
      };
    }, { storage, ids });
    assert.ok(before.hits > 0, 'the word is found before');
    assert.deepEqual(before.screens, [true, true]);
    const cached = ofServer(await cachedPaths(page, storage), port);
    for (const id of ids) assert.ok(cached.some((p) => p.startsWith(`/${id}/`)), `${id} is cached: ${cached}`);
    assert.ok(cached.some((p) => p.endsWith('.sessions.json')), `the list is remembered: ${cached}`);

    // Refused while a view is open: nothing goes.
    const refused = await page.evaluate(async () => {
      const view = await window.sb.openSession('fix-build');
      const error = await window.sb.clearCache().then(() => null, (e) => ({ name: e.name, message: e.message }));
      const size = await view.cachedSize();
      view.close();
      return { error, size };
    });
    assert.equal(refused.error?.name, 'ScrollbackError');
    assert.match(refused.error.message, /close this Scrollback's 1 open session view/);
    assert.ok(refused.size > 0, 'the session is still cached');
    assert.deepEqual(ofServer(await cachedPaths(page, storage), port).filter((p) => p.startsWith('/fix-build/')),
      cached.filter((p) => p.startsWith('/fix-build/')), 'nothing of it was deleted');

    // Another worker on the same storage (as another tab) shows `welcome`: it is kept.
    const after = await page.evaluate(async ({ storage, ids }) => {
      const { Scrollback } = await import('/pkg/index.js');
      const server = location.origin;
      const tab = await Scrollback.open({ server, storage });
      const shown = await tab.openSession('welcome');
      while (!(shown.state.live && shown.state.writer)) await new Promise((r) => setTimeout(r, 20));
      const kept = await window.sb.clearCache();
      const out = {
        kept,
        chats: (await window.sb.chats().list()).map((e) => e.name),
        hits: (await window.sb.search(window.word, { sessions: ['fix-build'] })).length,
        screens: ids.map((id) => Scrollback.lastScreen(server, id) !== null),
      };
      shown.close();
      await tab.close();
      return out;
    }, { storage, ids });
    assert.deepEqual(after.kept, ['welcome'], 'the session the other tab shows is kept, and said');
    assert.deepEqual(after.chats, ['notes'], 'the app\'s chat file stays');
    assert.equal(after.hits, 0, 'no search hit of a cleared session');
    assert.deepEqual(after.screens, [false, true], 'the cleared session\'s last screen goes; the kept one\'s stays');
    // (The search pack, built again in idle time by either worker, holds only what is cached.)
    const left = ofServer(await cachedPaths(page, storage), port).filter((p) => p !== '.search.idx');
    assert.ok(left.length > 0 && left.every((p) => p.startsWith('/welcome/')), `only welcome stays: ${left}`);

    const reopened = await page.evaluate(async () => {
      // A reopen is a first visit: nothing cached to draw, nothing to check.
      const counted = await window.sb.counters();
      const view = await window.sb.openSession('fix-build');
      while (!(view.state.live && view.state.verified)) await new Promise((r) => setTimeout(r, 20));
      const now = await window.sb.counters();
      const out = { rows: view.state.rows.length, probes: now.probesPassed + now.probesFailed - counted.probesPassed - counted.probesFailed };
      view.close();
      await window.sb.close();
      return out;
    });
    assert.ok(reopened.rows > 0);
    assert.equal(reopened.probes, 0, 'opened cold: no cached tail to check');
    assert.deepEqual(errors, []);
  });
}
