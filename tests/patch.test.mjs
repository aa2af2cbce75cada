// The worker posts a view's changes, not its whole state (js/worker.js, crate/src/wasm/session.rs),
// and the page applies them (js/index.js). In headless Chromium against the real server, over
// OPFS and IndexedDB: the page's `view.state` must equal the worker's whole state after the
// opening window, older pages, a reply streaming in, and a reload (a reset); and a UI that
// patches its own copy of the rows by `onChange`'s `change` (added, updated, removed, reset)
// must end with the same rows. The patches a streamed delta posts stay small however many rows
// are loaded.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { launch } from './lib/browser.mjs';
import { ROOT, startServer } from './lib/server.mjs';

let server, browser;

before(async () => {
  assert.ok(existsSync(path.join(ROOT, 'pkg/index.js')), 'pkg/ is missing: run scripts/wasm.sh build (npm test does)');
  server = await startServer({ www: path.join(ROOT, 'tests/lib') });
  browser = await launch();
});
after(async () => { await browser?.close(); await server?.dispose(); });

/** Resolves once the session is idle with a newest seq above `after`. */
async function idleAfter(id, after) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const s = (await (await fetch(`${server.url}/sessions`)).json()).find((x) => x.id === id);
    if (s.status === 'idle' && s.seq > after + 2) return s.seq;
    if (Date.now() > deadline) throw new Error(`no reply on ${id}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

for (const storage of ['opfs', 'indexeddb']) {
  test(`${storage}: the patched state equals the worker's whole state, and onChange's changes rebuild the rows`, async () => {
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${server.url}/blank.html`);
    await page.evaluate(async ({ storage }) => {
      const { Scrollback } = await import('/pkg/index.js');
      const sb = await Scrollback.open({ server: location.origin, storage });
      // A UI's own copy of the rows, kept only by what onChange says changed.
      const mirror = new Map();
      const t = { sb, mirror, changes: [], patches: 0, bad: [] };
      const byseq = (rows) => new Map(rows.map((r) => [r.seq, r]));
      const view = await sb.openSession('long', {
        onChange(state, change) {
          t.changes.push({ ...change, added: change.added.length, updated: change.updated.length, removed: change.removed.length });
          const rows = byseq(state.rows);
          if (change.reset) {
            mirror.clear();
            for (const r of state.rows) mirror.set(r.seq, r);
            return;
          }
          for (const seq of change.removed) {
            if (rows.has(seq)) t.bad.push(`removed ${seq} is still a row`);
            mirror.delete(seq);
          }
          for (const seq of change.added) {
            if (mirror.has(seq)) t.bad.push(`added ${seq} was already drawn`);
            mirror.set(seq, rows.get(seq));
          }
          for (const seq of change.updated) {
            if (!mirror.has(seq)) t.bad.push(`updated ${seq} was not drawn`);
            mirror.set(seq, rows.get(seq));
          }
        },
      });
      for (const r of view.state.rows) mirror.set(r.seq, r);
      t.view = view;
      /** What the page holds against the worker's whole state, and the mirror against the rows. */
      t.check = async () => {
        const whole = await view._snapshot();
        // Compared at once: the answer comes right after the patches sent before it.
        const canon = (v) => (Array.isArray(v) ? v.map(canon) : v && typeof v === 'object'
          ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canon(v[k])])) : v);
        const same = JSON.stringify(canon(view.state)) === JSON.stringify(canon(whole));
        await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0))); // onChange delivered
        const mirrored = [...mirror.values()].sort((a, b) => a.seq - b.seq);
        return {
          same,
          // (Only meaningful when nothing is streaming: rows may arrive after the frame.)
          mirrored: JSON.stringify(mirrored) === JSON.stringify(view.state.rows),
          rows: view.state.rows.length,
          bad: t.bad.splice(0),
        };
      };
      t.until = (check, what) => new Promise((resolve, reject) => {
        const deadline = performance.now() + 60_000;
        const poll = () => {
          if (check(view.state)) resolve();
          else if (performance.now() > deadline) reject(new Error(`timed out waiting for ${what}`));
          else setTimeout(poll, 10);
        };
        poll();
      });
      window.t = t;
    }, { storage });

    // The opening window, then live.
    await page.evaluate(() => t.until((s) => s.ready && s.live && s.verified && s.rows.length > 0, 'live with rows'));
    let c = await page.evaluate(() => t.check());
    assert.ok(c.same && c.mirrored && c.rows > 0, JSON.stringify(c));
    const opening = c.rows;

    // Older pages: rows added at the oldest end.
    await page.evaluate(async () => { for (let i = 0; i < 3; i++) await t.view.loadOlder(); });
    c = await page.evaluate(() => t.check());
    assert.ok(c.same && c.mirrored, JSON.stringify(c));
    assert.ok(c.rows > opening, `older pages added rows: ${c.rows} after ${opening}`);
    assert.deepEqual(c.bad, []);

    // A reply streams in: rows grow and are added; checked mid-stream and at the end.
    const from = await page.evaluate(() => t.view.state.cursor);
    const res = await fetch(`${server.url}/sessions/long/messages`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: 'And the tests?' }),
    });
    assert.equal(res.status, 200, await res.text());
    await page.evaluate((from) => t.until((s) => s.cursor > from + 3, 'the reply'), from);
    c = await page.evaluate(() => t.check());
    assert.ok(c.same, `mid-stream: ${JSON.stringify(c)}`);
    const newest = await idleAfter('long', from);
    await page.evaluate((seq) => t.until((s) => s.cursor >= seq, `seq ${seq}`), newest);
    c = await page.evaluate(() => t.check());
    assert.ok(c.same && c.mirrored, `after the reply: ${JSON.stringify(c)}`);
    assert.deepEqual(c.bad, []);
    const grew = await page.evaluate(() => t.changes.filter((x) => !x.reset && x.updated > 0).length);
    assert.ok(grew > 0, 'the streamed reply grew a row (an update, not a redraw)');

    // Reload: everything is cleared (a reset), then reopened cold.
    await page.evaluate(() => { t.changes.length = 0; return t.view.reload(); });
    await page.evaluate(() => t.until((s) => s.ready && s.live && s.rows.length > 0, 'the reload'));
    c = await page.evaluate(() => t.check());
    assert.ok(c.same && c.mirrored, `after the reload: ${JSON.stringify(c)}`);
    assert.ok(await page.evaluate(() => t.changes.some((x) => x.reset)), 'the reload was reported as a reset');

    await page.evaluate(() => t.sb.close());
    assert.deepEqual(errors, []);
    await page.close();
  });
}
