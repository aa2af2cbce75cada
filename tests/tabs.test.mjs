// Two tabs on one session, in real Chromium, on OPFS and on IndexedDB: two pages of one browser
// context (one origin, one storage) open the demo page on the same session while a reply
// streams from the real server. The first tab writes the cache (it holds the session's Web
// Lock); the second shows the same rows read-only. Half-way through the reply the writer's tab
// is closed: the second takes the lock over and brings the cache up to what it shows. Afterwards
// every chunk (read from OPFS or IndexedDB in the page) is exactly the server's answer for its
// own coverage, no seq is cached twice, and both tabs showed the same rows.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { launch } from './lib/browser.mjs';
import { ROOT, SERVER_BIN, startServer } from './lib/server.mjs';

const WAIT = { timeout: 90_000 };
let browser, template;

before(async () => {
  for (const file of ['pkg/index.js', 'pkg/scrollback_bg.wasm', SERVER_BIN]) {
    assert.ok(existsSync(path.resolve(ROOT, file)), `${file} is missing: run scripts/wasm.sh build and cargo build --release -p scrollback-server`);
  }
  const seeding = await startServer();
  await seeding.stop();
  template = seeding.dataDir;
  browser = await launch();
});

after(async () => {
  await browser?.close();
  if (template) await fs.rm(template, { recursive: true, force: true });
});

/** The open view's state in a tab. */
const state = (page) => page.evaluate(() => window.scrollbackDemo?.view()?.state ?? null);

/** The rows a tab draws: seq and text of each. */
const drawn = (page) => page.$$eval('#rows > li', (lis) => lis.map((li) => ({ seq: Number(li.dataset.seq), text: li.textContent })));

async function until(check, what, timeout = WAIT.timeout) {
  const deadline = Date.now() + timeout;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * The session's chunks as the tab's storage holds them: `[{ name, text }]`, read in the page
 * from OPFS (files, no lock needed) or IndexedDB (the store's `meta` and `seg` records).
 */
function readChunks(page, storage, port, id) {
  return page.evaluate(async ({ storage, port, id }) => {
    const dir = (server) => `transcripts/v1/${server}/${id}`;
    if (storage === 'opfs') {
      let d = await navigator.storage.getDirectory();
      for (const name of ['transcripts', 'v1']) d = await d.getDirectoryHandle(name);
      let server = null;
      for await (const [name] of d.entries()) if (name.endsWith(`_${port}`)) server = name;
      d = await (await d.getDirectoryHandle(server)).getDirectoryHandle(id);
      const out = [];
      for await (const [name, handle] of d.entries()) {
        if (handle.kind === 'file') out.push({ name, text: await (await handle.getFile()).text() });
      }
      return out;
    }
    const db = await new Promise((resolve, reject) => {
      const req = indexedDB.open('scrollback');
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    const all = (store, query) => new Promise((resolve, reject) => {
      const tx = db.transaction(store, 'readonly');
      const keys = tx.objectStore(store).getAllKeys(query);
      const values = tx.objectStore(store).getAll(query);
      tx.oncomplete = () => resolve(keys.result.map((k, i) => [k, values.result[i]]));
      tx.onerror = () => reject(tx.error);
    });
    const meta = (await all('meta')).filter(([k]) => typeof k === 'string' && k.startsWith('transcripts/v1/') && k.includes(`_${port}/${id}/`));
    const out = [];
    for (const [key, [blob, size]] of meta) {
      const segs = await all('seg', IDBKeyRange.bound([blob, 0], [blob, Infinity]));
      const bytes = new Uint8Array(size);
      let at = 0;
      for (const [, part] of segs) {
        const chunk = new Uint8Array(part.buffer ?? part);
        bytes.set(chunk.subarray(0, Math.min(chunk.length, size - at)), at);
        at += chunk.length;
        if (at >= size) break;
      }
      out.push({ name: key.slice(key.lastIndexOf('/') + 1), text: new TextDecoder().decode(bytes) });
    }
    db.close();
    void dir;
    return out;
  }, { storage, port, id });
}

/** Every chunk is the server's answer for its coverage; no seq is in two chunks. */
async function checkChunks(server, chunks, id) {
  const spans = [];
  for (const { name, text } of chunks) {
    const m = name.match(/^(\d+)-(\d+|open)\.(rows|raw)\.jsonl$/);
    if (!m) continue;
    assert.ok(text.endsWith('\n'), `${name} ends in a whole line`);
    const lines = text.split('\n').filter(Boolean);
    const first = Number(m[1]);
    const last = JSON.parse(lines.at(-1));
    const end = m[2] === 'open' ? (last.folded?.through ?? last.seq) + 1 : Number(m[2]);
    const q = new URLSearchParams({ before: end, after: first - 1, limit: 10000, coalesce: m[3] === 'rows' });
    const answer = await (await fetch(`${server.url}/sessions/${id}/transcript?${q}`)).text();
    // The server's page as the lines it is made of (each line's own text, byte for byte).
    const expected = JSON.parse(answer).map((l) => JSON.stringify(l));
    assert.deepEqual(lines.map((l) => JSON.stringify(JSON.parse(l))), expected, `${name} is the server's [${first}, ${end})`);
    assert.equal(JSON.parse(lines[0]).seq, first, `${name} starts at its first seq`);
    spans.push([first, end, name]);
  }
  assert.ok(spans.length > 0, 'the session is cached');
  spans.sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < spans.length; i += 1) {
    assert.ok(spans[i - 1][1] <= spans[i][0], `no seq cached twice: ${JSON.stringify(spans)}`);
  }
  return spans;
}

for (const storage of ['opfs', 'indexeddb']) {
  test(`two tabs on one session (${storage}): one writes, the other reads the same rows and takes over when the writer's tab closes mid-reply`, async (t) => {
    const data = await fs.mkdtemp(path.join(os.tmpdir(), 'scrollback-tabs-'));
    await fs.cp(template, data, { recursive: true });
    const server = await startServer({ data, args: ['--pace-ms', '60'] });
    const context = await browser.newContext();
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
    const live = (page) => page.waitForFunction(() => {
      const s = window.scrollbackDemo?.view()?.state;
      return s?.ready && s.live && document.querySelectorAll('#rows > li').length > 0;
    }, null, WAIT);

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
