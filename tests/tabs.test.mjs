// Two tabs on one session, in real Chromium, on OPFS and on IndexedDB: two pages of one browser
// context (one origin, one storage) open the demo page on the same session while a reply
// streams from the real server. The first tab writes the cache (it holds the session's Web
// Lock); the second shows the same rows read-only. Half-way through the reply the writer's tab
// is closed: the second takes the lock over and brings the cache up to what it shows. Afterwards
// every chunk (read from OPFS or IndexedDB in the page) is exactly the server's answer for its
// own coverage, no seq is cached twice, and both tabs showed the same rows.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from './lib/browser.mjs';
import { startServer, freePort } from './lib/server.mjs';
import { readChunks, checkChunks } from './lib/chunks.mjs';
import { WAIT, live, sandboxCopies, until } from './lib/setup.mjs';

const shared = sandboxCopies('scrollback-tabs-');

/** The open view's state in a tab. */
const state = (page) => page.evaluate(() => window.scrollbackDemo?.view()?.state ?? null);

/** The rows a tab draws: seq and text of each. */
const drawn = (page) => page.$$eval('#rows > li', (lis) => lis.map((li) => ({ seq: Number(li.dataset.seq), text: li.textContent })));

for (const storage of ['opfs', 'indexeddb']) {
  test(`two tabs on one session (${storage}): one writes, the other reads the same rows and takes over when the writer's tab closes mid-reply`, async (t) => {
    const data = await shared.copy();
    const server = await startServer({ data, args: ['--pace-ms', '60'] });
    const context = await shared.browser.newContext();
    const errors = [];
    const watch = (page) => {
      page.on('pageerror', (e) => errors.push(e.message));
      page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    };
    t.after(async () => {
      await context.close();
      await server.stop();
      await fs.rm(data, { recursive: true, force: true });
    });
    const url = `${server.url}/?storage=${storage}#/sessions/welcome`;

    const first = await context.newPage();
    watch(first);
    await first.goto(url);
    await live(first);
    const second = await context.newPage();
    watch(second);
    await second.goto(url);
    await live(second);
    assert.equal((await state(first)).writer, true, 'the first tab writes');
    assert.equal((await state(second)).writer, false, 'the second tab only reads');

    const asked = `two tabs on ${storage}`;
    const posted = await fetch(`${server.url}/sessions/welcome/messages`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: asked }),
    });
    assert.ok(posted.ok, `POST: ${posted.status}`);
    const file = () => server.lines('welcome');
    const userSeq = (await file()).find((l) => l.event.text === asked).seq;
    // Half-way through the reply: at least ten deltas drawn in both tabs.
    for (const page of [first, second]) {
      await page.waitForFunction((seq) => (window.scrollbackDemo.view()?.state.cursor ?? 0) >= seq + 10, userSeq, WAIT);
    }
    const replyDone = async () => (await file()).some((l) => l.seq > userSeq && l.event.type === 'status' && l.event.status === 'idle');
    assert.ok(!(await replyDone()), 'the reply is still streaming when the writer goes');

    // Both tabs showed the same rows: every row the first drew is drawn by the second, the
    // growing reply's row as a prefix of the second's (which may be further along).
    const rowsFirst = await drawn(first);
    await second.waitForFunction((c) => window.scrollbackDemo.view().state.cursor >= c, (await state(first)).cursor, WAIT);
    const rowsSecond = await drawn(second);
    assert.deepEqual(rowsSecond.slice(0, rowsFirst.length - 1), rowsFirst.slice(0, -1), 'the same rows in both tabs');
    const growing = rowsFirst.at(-1);
    assert.equal(rowsSecond[rowsFirst.length - 1].seq, growing.seq);
    assert.ok(rowsSecond[rowsFirst.length - 1].text.startsWith(growing.text), 'the streaming row too');

    // The writer's tab closes (its worker dies, the browser releases its lock).
    await first.close();
    await second.waitForFunction(() => {
      const s = window.scrollbackDemo.view()?.state;
      return s?.writer && s.live;
    }, null, WAIT);

    await until(replyDone, 'the reply ended', 120_000);
    const lines = await file();
    await second.waitForFunction((last) => window.scrollbackDemo.view()?.state.cursor >= last, lines.at(-1).seq, WAIT);
    // The screen: the reply once, in one row, every delta in order.
    const reply = lines.filter((l) => l.seq > userSeq && l.event.type === 'assistantText');
    const rows = await second.$$eval('#rows > li.assistant', (lis) => lis.map((li) => ({ seq: Number(li.dataset.seq), text: li.querySelector('.text').textContent })));
    const replyRows = rows.filter((r) => r.seq > userSeq);
    assert.equal(replyRows.length, 1, JSON.stringify(replyRows));
    assert.equal(replyRows[0].text, reply.map((l) => l.event.text).join(''));

    // The cache, as the storage holds it once the new writer has caught up to the newest line,
    // read by a third page of the origin (the app's page is left alone).
    const newest = lines.at(-1).seq;
    const reader = await context.newPage();
    await reader.goto(`${server.url}/pkg/index.js`);
    let spans;
    await until(async () => {
      // A file being appended to may be unreadable for a moment (a snapshot that went stale).
      const chunks = await readChunks(reader, storage, server.port, 'welcome').catch(() => null);
      if (!chunks) return false;
      const open = chunks.map((c) => c.text.split('\n').filter(Boolean).at(-1)).filter(Boolean).map((l) => JSON.parse(l).seq);
      if (!open.includes(newest)) return false;
      spans = await checkChunks(server, chunks, 'welcome');
      return true;
    }, `the cache reaches seq ${newest}`);
    assert.ok(spans.some(([first, end]) => first <= userSeq && end > newest), `one run covers the reply: ${JSON.stringify(spans)}`);
    assert.deepEqual(errors.filter((e) => !/Failed to load resource/.test(e)), []);
  });
}

test('a tab whose session stopped (deleted on the server) holds no writer role: a tab opened later writes', async (t) => {
  const data = await shared.copy();
  const server = await startServer({ data });
  const context = await shared.browser.newContext();
  t.after(async () => {
    await context.close();
    await server.stop();
    await fs.rm(data, { recursive: true, force: true });
  });
  const url = `${server.url}/#/sessions/queued`;
  const lines = await fs.readFile(server.transcriptPath('queued'), 'utf8');
  const [first, second] = [await context.newPage(), await context.newPage()];
  await first.goto(url);
  await live(first);
  await second.goto(url);
  await live(second);
  assert.equal((await state(first)).writer, true);
  assert.equal((await state(second)).writer, false);

  // Deleted behind both tabs' backs: their streams end, their checks say it is gone, they stop.
  await fs.rm(`${data}/queued`, { recursive: true, force: true });
  for (const page of [first, second]) {
    await page.waitForFunction(() => window.scrollbackDemo.view()?.state.error?.kind === 'gone', null, WAIT);
  }
  // The session comes back (the same file put again); a third tab opens it while the two
  // stopped tabs stay open. Neither holds the role nor is handed it: the third writes.
  const put = await fetch(`${server.url}/sessions/queued/transcript`, { method: 'PUT', body: lines });
  assert.ok(put.ok, `PUT: ${put.status}`);
  const third = await context.newPage();
  await third.goto(url);
  await live(third);
  assert.equal((await state(third)).writer, true, 'the tab opened after the stop writes the cache');
  assert.equal((await state(first)).writer, false, 'the stopped writer gave its role up');
});

test('two tabs where no Web Locks keep the role one tab\'s (plain http from another host): one steps down, neither reports a storage error', async (t) => {
  // A page served over plain http from a host other than localhost is no secure context: no
  // navigator.locks, no OPFS ('auto' is IndexedDB). Both tabs take the writer role; the one
  // whose write finds the other's there reads from then on.
  const data = await shared.copy();
  const port = await freePort();
  const server = await startServer({ data, port, args: ['--pace-ms', '40', '--allow-host', 'lan.test'] });
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium', args: [...CHROMIUM_ARGS, '--host-resolver-rules=MAP lan.test 127.0.0.1'],
  });
  t.after(async () => {
    await browser.close();
    await server.dispose();
    await fs.rm(data, { recursive: true, force: true });
  });
  const context = await browser.newContext();
  const tab = async () => {
    const page = await context.newPage();
    await page.goto(`http://lan.test:${port}/pkg/index.js`);
    const info = await page.evaluate(async () => {
      const { Scrollback } = await import('/pkg/index.js');
      window.sb = await Scrollback.open({ server: location.origin, storage: 'auto' });
      window.view = await sb.openSession('welcome');
      while (!view.state.live) await new Promise((r) => setTimeout(r, 20));
      return { secure: isSecureContext, locks: 'locks' in navigator, storage: sb.storage };
    });
    return { page, info };
  };
  const a = await tab();
  const b = await tab();
  assert.deepEqual([a.info, b.info], Array(2).fill({ secure: false, locks: false, storage: 'indexeddb' }));
  const asked = 'two writers';
  const posted = await fetch(`${server.url}/sessions/welcome/messages`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: asked }),
  });
  assert.ok(posted.ok);
  const lines = () => server.lines('welcome');
  const userSeq = (await lines()).find((l) => l.event.text === asked).seq;
  await until(async () => (await lines()).some((l) => l.seq > userSeq && l.event.type === 'status' && l.event.status === 'idle'), 'the reply ended');
  const newest = (await lines()).at(-1).seq;
  const states = [];
  for (const { page } of [a, b]) {
    states.push(await page.evaluate(async (seq) => {
      while (view.state.cursor < seq) await new Promise((r) => setTimeout(r, 20));
      return { writer: view.state.writer, storageError: view.state.storageError, cursor: view.state.cursor };
    }, newest));
  }
  assert.deepEqual(states.map((s) => s.storageError), [null, null], `neither tab stopped keeping rows: ${JSON.stringify(states)}`);
  assert.deepEqual(states.map((s) => s.writer).sort(), [false, true], `one writer is left: ${JSON.stringify(states)}`);
  // The writer's tab closes last, its writes committed: the cache is the server's, every line once.
  const order = states[0].writer ? [b, a] : [a, b];
  for (const { page } of order) await page.evaluate(async () => { view.close(); await sb.close(); });
  const reader = await context.newPage();
  await reader.goto(`http://lan.test:${port}/pkg/index.js`);
  const chunks = await readChunks(reader, 'indexeddb', port, 'welcome');
  await checkChunks(server, chunks, 'welcome');
  const seqs = chunks.flatMap((c) => c.text.split('\n').filter(Boolean).map((l) => JSON.parse(l)))
    .map((l) => l.folded?.through ?? l.seq);
  assert.equal(Math.max(...seqs), newest, 'the cache holds the reply to its end');
});
