// The demo page (www/) driven in headless Chromium exactly as a person would use it: the real
// server (sandbox data), the real package, real OPFS. Each test has its own server, data folder
// and browser context (so its own OPFS). Requests are counted by the browser itself: the
// context's 'request' events include the worker's fetches and its EventSource.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { ROOT, startServer } from './lib/server.mjs';
import { WAIT, live, sandboxCopies, until } from './lib/setup.mjs';
import { servePageOnly } from './lib/static.mjs';
import { readChunks, checkChunks, cachedPaths } from './lib/chunks.mjs';

const OUT = path.join(ROOT, 'tests/out');
// The sandbox is seeded once (the long session is 21 MB) and copied for each test.
const shared = sandboxCopies('scrollback-demo-');

before(() => fs.mkdir(OUT, { recursive: true }));

/** Session API requests (transcript pages, probes, streams, posts) as the browser sent them. */
function isApi(url) {
  return /^\/sessions\/[^/]+\/(transcript|events|messages|catchup)$/.test(url.pathname);
}

/**
 * A test's world: a server on a copy of the sandbox, a fresh browser context (its own OPFS)
 * with the demo page, every session API request the browser sends, and the console of the page
 * and of its worker.
 */
async function world(t, { args = [], locale } = {}) {
  const data = await shared.copy();
  let server = await startServer({ data, args });
  const port = server.port;
  const context = await shared.browser.newContext({ viewport: { width: 1200, height: 800 }, locale });
  const requests = [];
  context.on('request', (r) => {
    const url = new URL(r.url());
    if (url.origin === server.url && isApi(url)) requests.push({ url, type: r.resourceType(), method: r.method() });
  });
  const page = await context.newPage();
  const consoleLog = [];
  const listen = (who) => (m) => consoleLog.push({ who, type: m.type(), text: m.text() });
  page.on('console', listen('page'));
  page.on('pageerror', (e) => consoleLog.push({ who: 'page', type: 'pageerror', text: e.message }));
  page.on('worker', (w) => w.on('console', listen('worker')));
  t.after(async () => {
    await context.close();
    await server.stop();
    await fs.rm(data, { recursive: true, force: true });
  });
  return {
    get server() { return server; },
    context, page, requests, consoleLog,
    /** Stops the server (the port stays ours to restart on). */
    async stopServer() { await server.stop(); },
    /** Starts the server again on the same port and data folder. */
    async restartServer() { server = await startServer({ data, args, port }); },
    /** Opens a session by its address, as a bookmark would. */
    async goto(id) { await page.goto(`${server.url}/#/sessions/${encodeURIComponent(id)}`); },
    /** Errors on the page's or the worker's console. */
    errors() { return consoleLog.filter((m) => m.type === 'error' || m.type === 'pageerror'); },
  };
}

/** The open view's state, as the page has it (rows left out). */
const state = (page) => page.evaluate(() => {
  const s = window.scrollbackDemo?.view()?.state;
  return s ? { ...s, rows: s.rows.length } : null;
});

/** Scrolls the transcript to its top until the first line of the session is drawn. */
async function scrollToStart(page) {
  await page.waitForFunction(() => {
    const box = document.getElementById('transcript');
    box.scrollTop = 0;
    const s = window.scrollbackDemo?.view()?.state;
    return s?.ready && !s.moreHistory && document.querySelector('#rows > li[data-seq="1"]') !== null;
  }, null, { ...WAIT, timeout: 150_000, polling: 50 });
}

/** Leaves the session for the list (the view is closed). */
async function leave(page) {
  await page.evaluate(() => { location.hash = '#/'; });
  await page.waitForFunction(() => window.scrollbackDemo?.view() === null && document.getElementById('session').hidden);
}

/** Opens a session from the page (a hash change: the worker and its cache stay). */
async function reopen(page, id) {
  await page.evaluate((id) => { location.hash = `#/sessions/${encodeURIComponent(id)}`; }, id);
}

const describe = (reqs) => reqs.map((r) => `${r.method} ${r.url.pathname}${r.url.search} [${r.type}]`);
/** The reopen's check of the cached tail, which carries the catch-up (`/catchup?cursor=N`). */
const isProbe = (r) => r.url.pathname.endsWith('/catchup') && r.url.searchParams.has('cursor');
const isStream = (r) => r.url.pathname.endsWith('/events');
const isPage = (r) => r.url.pathname.endsWith('/transcript') && !isProbe(r);

/** A transcript line as the agent process writes it. */
const line = (seq, event) => JSON.stringify({ seq, ts: 1788600000 + seq / 10, event });

test('cold open: the opening window and the stream; the list, session and settings screenshots', async (t) => {
  const w = await world(t);
  const { page, requests } = w;
  await page.goto(`${w.server.url}/`);
  const listed = (await (await fetch(`${w.server.url}/sessions`)).json()).length;
  await page.waitForFunction((n) => document.querySelectorAll('#session-list li').length === n, listed, WAIT);
  await page.screenshot({ path: path.join(OUT, 'list.png') });

  await page.click('#session-list a[href="#/sessions/long"]');
  await live(page);
  const newest = (await w.server.lines('long')).at(-1).seq;
  const opening = requests.filter((r) => !r.url.searchParams.has('before'));
  assert.equal(opening.length, 2, `a cold open is two requests; all: ${describe(requests)}`);
  assert.ok(isPage(opening[0]) && opening[0].type === 'fetch', `first the opening window: ${describe(opening)}`);
  assert.ok(isStream(opening[1]) && opening[1].type === 'eventsource', `then the stream: ${describe(opening)}`);
  assert.equal(opening[1].url.searchParams.get('after'), String(newest), 'the stream starts after the newest line');
  assert.equal(requests.filter(isProbe).length, 0, 'a cold open has nothing to probe');
  // Anything else is an older page the page asked for to fill the screen.
  for (const r of requests.filter((r) => !opening.includes(r))) assert.ok(isPage(r), describe([r]));
  assert.equal(page.url(), `${w.server.url}/#/sessions/long`);
  await page.screenshot({ path: path.join(OUT, 'session.png') });

  await page.click('#open-settings');
  await page.waitForFunction(() => /cached$/.test(document.getElementById('cached-size').textContent));
  assert.match(await page.textContent('#cached-size'), /^\d+(\.\d)? (KB|MB) cached$/);
  assert.match(await page.textContent('#settings .caption'), /Reload throws away/);
  await page.screenshot({ path: path.join(OUT, 'settings.png') });
  assert.deepEqual(w.errors(), []);
});

test('reopen: one request before the stream (the probe), and the cached rows are drawn before it returns', async (t) => {
  const w = await world(t);
  const { page, context, requests } = w;
  await w.goto('welcome');
  await live(page);
  const firstRows = await page.locator('#rows > li').count();

  // A new page in the same context: a new worker on the same OPFS, as after a browser restart.
  await page.close();
  let release;
  const held = new Promise((resolve) => { release = resolve; });
  let probeSeen = false;
  await context.route((url) => url.pathname === '/sessions/welcome/catchup', async (route) => {
    if (isProbe({ url: new URL(route.request().url()) })) { probeSeen = true; await held; }
    await route.continue();
  });
  requests.length = 0;
  const again = await context.newPage();
  await again.goto(`${w.server.url}/#/sessions/welcome`);
  // The cache's rows are on screen while the probe is held unanswered (the last screen was
  // drawn before them: see the next test).
  await again.waitForFunction((n) => document.querySelectorAll('#rows > li').length === n
    && window.scrollbackDemo?.view()?.state.ready, firstRows, WAIT);
  // The rows may be drawn before the probe leaves (nothing on the network before them): it
  // follows, and is held.
  await until(() => probeSeen, 'the probe');
  assert.equal(await again.evaluate(() => window.scrollbackDemo.view().state.verified), false, 'not checked yet');
  assert.deepEqual(describe(requests).map((s) => s.replace(/\?.*/, '')), ['GET /sessions/welcome/catchup'],
    'while the probe is out nothing else was asked');
  release();
  await live(again);
  assert.equal(requests.length, 2, `a reopen is the probe and the stream: ${describe(requests)}`);
  assert.ok(isProbe(requests[0]) && isStream(requests[1]), describe(requests));
  const s = await state(again);
  assert.equal(s.cursor, 65);
  const counters = await again.evaluate(() => window.scrollbackDemo.sb.counters());
  assert.equal(counters.probesPassed, 1);
  assert.equal(counters.requests, 3, 'the session list, the probe, the stream');
  await again.waitForFunction(() => document.querySelector('[data-counter="requests"]').textContent === '3');
});

test('a reload draws the last screen before the worker has started, then the cache\'s rows replace it', async (t) => {
  const w = await world(t);
  const { page, context } = w;
  await w.goto('long');
  await live(page);
  let release;
  const held = new Promise((resolve) => { release = resolve; });
  let workerAsked = false;
  await context.route((url) => url.pathname.endsWith('/worker.js'), async (route) => {
    workerAsked = true;
    await held;
    await route.continue();
  });
  // The browser's reload: the view saves its screen as the page goes.
  const again = page;
  await again.reload();
  // Drawn while the worker's script is held: nothing of the engine runs yet.
  await again.waitForFunction(() => document.querySelectorAll('#rows > li').length > 0, null, WAIT);
  const drawn = await again.$$eval('#rows > li', (lis) => lis.map((li) => li.dataset.seq));
  assert.equal(await again.evaluate(() => window.scrollbackDemo?.view() ?? null), null, 'no view yet');
  await until(() => workerAsked, 'the worker was asked for');
  release();
  await live(again);
  // The view's rows replace the screen (and older pages follow as the demo fills the window).
  await again.waitForFunction(() => {
    const rows = window.scrollbackDemo.view().state.rows.map((r) => String(r.seq));
    const drawn = [...document.querySelectorAll('#rows > li')].map((li) => li.dataset.seq);
    return rows.length > 0 && rows.join() === drawn.join();
  }, null, WAIT);
  // Nothing changed on the server: the screen drawn first was the newest rows.
  const rows = await again.evaluate(() => window.scrollbackDemo.view().state.rows.map((r) => String(r.seq)));
  assert.ok(drawn.length > 0 && drawn.length <= 60, `${drawn.length} rows drawn at once`);
  // The oldest row drawn may have been the tail of a reply cut at the window's start; an older
  // page loaded since joins it to its first deltas, so it now starts at an older seq.
  const now = rows.slice(-drawn.length);
  assert.deepEqual(drawn.slice(1), now.slice(1), 'the last screen was the newest rows');
  assert.ok(Number(now[0]) <= Number(drawn[0]), `the oldest row drawn (${drawn[0]}) is the same row or its tail (${now[0]})`);
  assert.deepEqual(w.errors(), []);
});

test('a first visit on a session\'s address draws its newest rows before the view has any (the opening screen), the rows the view then shows', async (t) => {
  const w = await world(t);
  const { page } = w;
  // What is on screen when the view's first rows arrive from the worker (this listener runs
  // before the package's own).
  await page.addInitScript(() => {
    const PageWorker = window.Worker;
    window.atFirstRows = null;
    window.Worker = class extends PageWorker {
      constructor(...args) {
        super(...args);
        // The page's fold races the worker's start (whichever is first on this machine): the
        // worker gets its messages, in order, once the fold has settled, so that its view
        // cannot have rows first.
        const post = this.postMessage.bind(this);
        const held = [];
        const release = () => {
          if (!performance.getEntriesByName('scrollback:opening-screen').length) return setTimeout(release, 5);
          for (const args of held.splice(0)) post(...args);
          this.postMessage = post;
        };
        this.postMessage = (...args) => { held.push(args); };
        release();
        this.addEventListener('message', ({ data }) => {
          // A view's patch, or the answer to openSession (the view's first patch).
          const json = typeof data?.patch === 'string' ? data.patch : data?.value;
          if (window.atFirstRows !== null || typeof json !== 'string') return;
          let patch;
          try { patch = JSON.parse(json); } catch { return; }
          if (!patch?.state?.ready) return;
          window.atFirstRows = {
            drawn: [...document.querySelectorAll('#rows > li')].map((li) => Number(li.dataset.seq)),
            view: patch.rows.map((r) => r.seq),
          };
        });
      }
    };
  });
  await w.goto('long');
  await live(page);
  const at = await page.evaluate(() => window.atFirstRows);
  assert.ok(at.drawn.length > 0, 'rows were drawn before the view had any');
  assert.deepEqual(at.drawn, at.view, 'the opening screen is the rows the view then shows');
  assert.deepEqual(w.errors(), []);
});

test('scrolling the long session back to its first line after it was seen once: no request', async (t) => {
  const w = await world(t);
  const { page, requests } = w;
  await w.goto('long');
  await live(page);
  await scrollToStart(page);
  const cold = requests.filter(isPage).length;
  assert.ok(cold > 2, `the cold scroll back fetched pages (${cold})`);
  await leave(page);
  requests.length = 0;
  await reopen(page, 'long');
  await live(page);
  assert.deepEqual(requests.map((r) => (isProbe(r) ? 'probe' : isStream(r) ? 'stream' : describe([r])[0])), ['probe', 'stream']);
  const before = await page.evaluate(() => window.scrollbackDemo.sb.counters());
  await scrollToStart(page);
  assert.deepEqual(describe(requests.slice(2)), [], 'scrolling back asked the server nothing');
  const afterScroll = await page.evaluate(() => window.scrollbackDemo.sb.counters());
  assert.ok(afterScroll.pagesLocal > before.pagesLocal, 'the pages were served locally');
  assert.equal(afterScroll.requests, before.requests);
  // The first line drawn is the file's first line.
  const first = (await w.server.lines('long'))[0];
  assert.equal(await page.getAttribute('#rows > li:first-child', 'data-seq'), String(first.seq));
  assert.deepEqual(w.errors(), []);
});

test('older pages that fail are asked for again later, each time later, not every frame; the page loads once the server answers', async (t) => {
  const w = await world(t);
  const { page, context, requests } = w;
  let failing = true;
  await context.route((url) => url.pathname === '/sessions/long/transcript' && url.searchParams.has('before'), async (route) => {
    if (failing) await route.fulfill({ status: 500, body: 'a page that fails' });
    else await route.continue();
  });
  await w.goto('long');
  await live(page);
  const first = await page.evaluate(() => window.scrollbackDemo.view().state.rows.length);
  await page.evaluate(() => { document.getElementById('transcript').scrollTop = 0; });
  await page.waitForFunction(() => /Could not load older messages/.test(document.getElementById('banner').textContent), null, WAIT);
  const asked = () => requests.filter((r) => isPage(r) && r.url.searchParams.has('before')).length;
  // Two seconds of a view whose top is in sight: the first failure, then a retry after 1 s
  // (every animation frame, it was over a hundred).
  await new Promise((resolve) => setTimeout(resolve, 2000));
  assert.ok(asked() <= 3, `asked ${asked()} times in 2 s: ${describe(requests.slice(-5))}`);
  failing = false;
  await page.waitForFunction((n) => window.scrollbackDemo.view().state.rows.length > n, first, WAIT);
  // The browser logs each 500 it was answered; nothing else went wrong.
  assert.deepEqual(w.errors().filter((m) => !/status of 500/.test(m.text)), []);
});

test('a reply streaming while the session is closed and reopened continues in the same row, no delta missing or doubled', async (t) => {
  const w = await world(t, { args: ['--pace-ms', '80'] });
  const { page } = w;
  await w.goto('welcome');
  await live(page);
  const asked = 'Tell me how the cache survives a reload.';
  await page.fill('#message', asked);
  await page.press('#message', 'Enter');
  const file = () => w.server.lines('welcome');
  await until(async () => (await file()).some((l) => l.event.text === asked), 'the message was posted');
  const userSeq = (await file()).find((l) => l.event.type === 'userMessage' && l.event.text === asked).seq;
  // The page empties the composer once its own post resolved, which may be after the server wrote
  // the line: wait for it rather than look at once.
  await page.waitForFunction(() => document.getElementById('message').value === '', null, WAIT);
  const deltasIn = async () => (await file()).filter((l) => l.seq > userSeq && l.event.type === 'assistantText').length;
  // Wait for the reply to be drawn growing, then close while it streams.
  await page.waitForFunction((seq) => {
    const rows = [...document.querySelectorAll('#rows > li.assistant')].filter((li) => Number(li.dataset.seq) > seq);
    return rows.length === 1 && rows[0].querySelector('.text').textContent.split(' ').length > 5;
  }, userSeq, WAIT);
  await leave(page);
  const closedAt = await deltasIn();
  await until(async () => (await deltasIn()) >= closedAt + 15, '15 more deltas were written while closed');
  await reopen(page, 'welcome');
  await page.waitForFunction(() => document.querySelectorAll('#rows > li').length > 0, null, WAIT);
  const reopenedAt = await file();
  assert.ok(!reopenedAt.some((l) => l.seq > userSeq && l.event.type === 'status' && l.event.status === 'idle'),
    'the reply was still streaming when the session was reopened');
  // Wait for the reply to end in the file, then for the screen to have caught up with it.
  await until(async () => (await file()).some((l) => l.seq > userSeq && l.event.type === 'status' && l.event.status === 'idle'),
    'the reply ended', 120_000);
  const lines = await file();
  const reply = lines.filter((l) => l.seq > userSeq && l.event.type === 'assistantText');
  await page.waitForFunction((last) => window.scrollbackDemo.view()?.state.cursor >= last, lines.at(-1).seq, WAIT);
  const drawn = await page.$$eval('#rows > li.assistant', (lis) => lis.map((li) => ({ seq: Number(li.dataset.seq), text: li.querySelector('.text').textContent })));
  const replyRows = drawn.filter((r) => r.seq > userSeq);
  assert.equal(replyRows.length, 1, `one row for the reply: ${JSON.stringify(replyRows.map((r) => r.seq))}`);
  assert.equal(replyRows[0].seq, reply[0].seq, 'the row starts at the first delta');
  assert.equal(replyRows[0].text, reply.map((l) => l.event.text).join(''), 'the drawn text is every delta once, in order');
  assert.deepEqual(w.errors(), []);
});

test('falling past the catch-up bound (1 MiB of lines): the reset, then scrolling back fetches only the gap', async (t) => {
  const w = await world(t);
  const { page, requests } = w;
  await w.goto('welcome');
  await live(page);
  await leave(page);
  const long = 'x'.repeat(4000); // 300 of these pass CATCH_UP_BYTES
  const appended = Array.from({ length: 300 }, (_, i) => line(66 + i, { type: 'userMessage', text: `appended ${66 + i} ${long}` }));
  await w.server.append('welcome', appended);
  requests.length = 0;
  await reopen(page, 'welcome');
  await page.waitForFunction(() => [...document.querySelectorAll('#rows > li.user .text')].some((n) => n.textContent.startsWith('appended 365 ')), null, WAIT);
  await live(page);
  await scrollToStart(page);
  const counters = await page.evaluate(() => window.scrollbackDemo.view().state.counters);
  assert.ok(counters.resets >= 1, `the stream was reset: ${JSON.stringify(counters)}`);
  const pages = requests.filter((r) => isPage(r) && r.url.searchParams.has('before'));
  assert.ok(pages.length > 0, `older pages were fetched: ${describe(requests)}`);
  for (const r of pages) assert.equal(r.url.searchParams.get('after'), '65', `a page asks only for the gap: ${describe([r])}`);
  // Every line is drawn once: the cached 65 and the 300 new ones.
  const texts = await page.$$eval('#rows > li.user .text', (n) => n.map((x) => x.textContent));
  for (let seq = 66; seq <= 365; seq += 1) assert.equal(texts.filter((x) => x.startsWith(`appended ${seq} `)).length, 1, `appended ${seq}`);
  assert.equal(texts.filter((x) => x.startsWith('Hi! What can you help')).length, 1);
  assert.deepEqual(w.errors(), []);
});

test('the server replaces the file under the same id: the reopen shows the new content, not a splice', async (t) => {
  const w = await world(t);
  const { page } = w;
  await w.goto('welcome');
  await live(page);
  await leave(page);
  const body = Array.from({ length: 70 }, (_, i) => line(i + 1, { type: 'userMessage', text: `replaced ${i + 1}` })).join('\n');
  const res = await fetch(`${w.server.url}/sessions/welcome/transcript`, { method: 'PUT', body });
  assert.ok(res.ok, `PUT: ${res.status}`);
  await reopen(page, 'welcome');
  await page.waitForFunction(() => {
    const s = window.scrollbackDemo.view()?.state;
    return s?.live && s.cursor === 70 && !s.moreHistory;
  }, null, WAIT);
  await scrollToStart(page);
  const texts = await page.$$eval('#rows > li', (n) => n.map((x) => x.textContent));
  assert.deepEqual(texts, Array.from({ length: 70 }, (_, i) => `Youreplaced ${i + 1}`));
  const counters = await page.evaluate(() => window.scrollbackDemo.sb.counters());
  assert.equal(counters.probesFailed, 1, 'the probe caught the replaced file');
});

test('Reload: the cached size goes to zero, then the screen reopens cold at the same place', async (t) => {
  const w = await world(t);
  const { page, context, requests } = w;
  await w.goto('fix-build');
  await live(page);
  await scrollToStart(page);
  // Put a row in the middle at the top of the screen.
  const anchor = await page.evaluate(() => {
    const rows = [...document.querySelectorAll('#rows > li')];
    const row = rows[Math.floor(rows.length / 3)];
    row.scrollIntoView({ block: 'start' });
    return Number(row.dataset.seq);
  });
  await page.click('#open-settings');
  await page.waitForFunction(() => /cached$/.test(document.getElementById('cached-size').textContent));

  // Hold the cold window so the empty cache can be looked at.
  let release;
  const held = new Promise((resolve) => { release = resolve; });
  await context.route((url) => url.pathname === '/sessions/fix-build/transcript', async (route) => { await held; await route.continue(); });
  requests.length = 0;
  await page.click('#reload');
  await until(() => requests.length > 0, 'the cold window was sent');
  await page.click('#open-settings');
  await page.waitForFunction(() => document.getElementById('cached-size').textContent === 'nothing cached', null, WAIT);
  await page.screenshot({ path: path.join(OUT, 'settings-reloading.png') });
  await page.click('#settings button[value=close]');
  release();
  await page.waitForFunction((seq) => {
    const s = window.scrollbackDemo.view()?.state;
    const row = document.querySelector(`#rows > li[data-seq="${seq}"]`);
    if (!s?.live || !row) return false;
    const box = document.getElementById('transcript').getBoundingClientRect();
    const r = row.getBoundingClientRect();
    return r.top >= box.top - 2 && r.top < box.top + 40;
  }, anchor, WAIT).catch(async (e) => {
    console.log('the reader did not come back to', anchor, await state(page), await page.evaluate(() => { const box = document.getElementById('transcript'); return { st: box.scrollTop, sh: box.scrollHeight, rows: [...document.querySelectorAll('#rows > li')].slice(0, 50).map((li) => [li.dataset.seq, Math.round(li.getBoundingClientRect().top)]) }; }), describe(requests));
    throw e;
  });
  assert.ok(requests.length >= 2, describe(requests));
  assert.ok(!requests.some(isProbe), `a reload opens cold, no probe: ${describe(requests)}`);
  assert.ok(isPage(requests[0]) && !requests[0].url.searchParams.has('before'), describe(requests));
  assert.deepEqual(w.errors(), []);
});

test('Forget all (a sign-out): every session this browser cached of the server goes, its last screen too; the session shown is fetched again, cold', async (t) => {
  const w = await world(t);
  const { page, requests } = w;
  await w.goto('fix-build');
  await live(page);
  await reopen(page, 'welcome');
  await live(page);
  const storage = await page.evaluate(() => window.scrollbackDemo.sb.storage);
  const port = w.server.port;
  const sessionsCached = async () => [...new Set((await cachedPaths(page, storage))
    .filter((p) => p.includes(`_${port}/`)).map((p) => p.split('/')[3]))].sort();
  await until(async () => (await sessionsCached()).join() === 'fix-build,welcome', 'both sessions are cached');
  const lastScreen = (id) => page.evaluate(async (id) => (await import('/pkg/index.js')).Scrollback.lastScreen(location.origin, id), id);
  assert.notEqual(await lastScreen('fix-build'), null);

  await page.click('#open-settings');
  await page.waitForFunction(() => /cached$/.test(document.getElementById('cached-size').textContent));
  requests.length = 0;
  await page.click('#clear-cache');
  await page.waitForFunction(() => document.getElementById('cleared').textContent === 'all forgotten', null, WAIT);
  await page.click('#settings button[value=close]');
  await page.waitForFunction(() => window.scrollbackDemo.view()?.state.live, null, WAIT);
  assert.equal(await lastScreen('fix-build'), null, 'the other session\'s last screen went');
  assert.ok(requests.some((r) => isPage(r) && !r.url.searchParams.has('before')), `the newest window fetched again: ${describe(requests)}`);
  assert.ok(!requests.some(isProbe), `nothing cached to check: ${describe(requests)}`);
  await until(async () => (await sessionsCached()).join() === 'welcome', 'only the session shown is cached again');
  assert.deepEqual(w.errors(), []);
});

test('Reload while a reply streams and the reader follows it: the screen comes back at the newest rows and keeps following', async (t) => {
  const w = await world(t, { args: ['--pace-ms', '80'] });
  const { page } = w;
  await w.goto('fix-build');
  await live(page);
  const asked = 'Keep talking while I reload.';
  await page.fill('#message', asked);
  await page.press('#message', 'Enter');
  const file = () => w.server.lines('fix-build');
  await until(async () => (await file()).some((l) => l.event.text === asked), 'the message was posted');
  const userSeq = (await file()).find((l) => l.event.type === 'userMessage' && l.event.text === asked).seq;
  const replyWords = () => page.evaluate((seq) => {
    const row = [...document.querySelectorAll('#rows > li.assistant')].find((li) => Number(li.dataset.seq) > seq);
    return row ? row.querySelector('.text').textContent.split(' ').length : 0;
  }, userSeq);
  await page.waitForFunction((seq) => [...document.querySelectorAll('#rows > li.assistant')]
    .some((li) => Number(li.dataset.seq) > seq && li.querySelector('.text').textContent.split(' ').length > 5), userSeq, WAIT);
  const atBottom = () => page.evaluate(() => {
    const box = document.getElementById('transcript');
    return box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  });
  assert.ok(await atBottom(), 'following the reply before the reload');
  // The reload's cold window is held while the reply grows by more than a screen.
  let release;
  const held = new Promise((resolve) => { release = resolve; });
  await w.context.route((url) => url.pathname === '/sessions/fix-build/transcript', async (route) => { await held; await route.continue(); });
  const deltas = async () => (await file()).filter((l) => l.seq > userSeq && l.event.type === 'assistantText').length;
  const before = await deltas();
  await page.click('#open-settings');
  await page.click('#reload');
  await until(async () => (await deltas()) >= before + 40, 'the reply grew by 40 deltas during the reload');
  release();
  await page.waitForFunction(() => window.scrollbackDemo.view()?.state.live, null, WAIT);
  // The reply grows on after the reload: the screen follows it, as it did before.
  const after = await replyWords();
  await until(async () => (await replyWords()) >= after + 10, 'the reply grew by ten words after the reload');
  assert.ok(await atBottom(), 'still following the reply after the reload');
  assert.deepEqual(w.errors(), []);
});

test('a server that is down: the cached rows stay, the banner says so, the stream resumes when it is back', async (t) => {
  const w = await world(t);
  const { page } = w;
  await w.goto('welcome');
  await live(page);
  const rows = await page.$$eval('#rows > li', (n) => n.map((x) => x.textContent));
  await w.stopServer();
  await page.waitForFunction(() => !document.getElementById('banner').hidden, null, WAIT);
  const banner = await page.textContent('#banner');
  assert.match(banner, /Cannot reach the server: showing what is cached, retrying in \d+ s/);
  assert.equal(banner.match(/reach the server|cached/gi).length, 2, `said once: ${banner}`);
  assert.deepEqual(await page.$$eval('#rows > li', (n) => n.map((x) => x.textContent)), rows, 'the rows stay');
  // The list follows: asked again when the session stopped being live, it is the cached one.
  const listOffline = () => /Cannot reach the server/.test(document.getElementById('list-status').textContent)
    && document.querySelector('#session-list li[data-id="welcome"]')?.classList.contains('offline');
  await page.waitForFunction(listOffline, null, WAIT);
  await page.screenshot({ path: path.join(OUT, 'server-down.png') });
  await w.restartServer();
  await page.waitForFunction(() => document.getElementById('banner').hidden && window.scrollbackDemo.view()?.state.live, null, WAIT);
  // ...and live again with the session: no entry marked offline, nothing said.
  await page.waitForFunction(() => document.getElementById('list-status').textContent === ''
    && document.querySelectorAll('#session-list li').length > 1
    && document.querySelectorAll('#session-list li.offline').length === 0, null, WAIT);
  await w.server.append('welcome', [line(66, { type: 'userMessage', text: 'after the outage' })]);
  await page.waitForFunction(() => document.querySelector('#rows > li:last-child .text')?.textContent === 'after the outage', null, WAIT);
  assert.deepEqual((await page.$$eval('#rows > li', (n) => n.map((x) => x.textContent))).slice(0, -1), rows);
  // The outage shows on the console as failed requests; nothing else.
  assert.deepEqual(w.errors().filter((m) => !/ERR_CONNECTION_REFUSED|Failed to load resource|EventSource/.test(m.text)), []);
});

/** The drawn rows' texts. */
const texts = (page) => page.$$eval('#rows > li', (n) => n.map((x) => x.textContent));

test('offline start: the list and a session come from the cache, a session never cached needs the network, and the server coming back makes it live without a reload', async (t) => {
  const w = await world(t);
  const { page } = w;
  // Seen once, down to its first line (every page cached).
  await w.goto('fix-build');
  await live(page);
  await scrollToStart(page);
  const seen = await texts(page);
  await leave(page);

  // The page loads again (as from the browser's cache), its API cannot be reached.
  await w.stopServer();
  let pageOnly = await servePageOnly(w.server.port, { www: path.join(ROOT, 'www'), pkg: path.join(ROOT, 'pkg') });
  t.after(() => pageOnly?.close());
  await page.reload();
  await page.waitForFunction(() => /Cannot reach the server/.test(document.getElementById('list-status').textContent), null, WAIT);
  const listed = await page.$$eval('#session-list > li', (n) => n.map((li) => ({
    id: li.dataset.id, offline: li.classList.contains('offline'), sub: li.querySelector('.sub').textContent,
  })));
  assert.deepEqual(listed.map((s) => s.id), ['fix-build'], 'the cached sessions only');
  assert.ok(listed.every((s) => s.offline && /cached, offline/.test(s.sub)), JSON.stringify(listed));
  assert.match(await page.textContent('#list-status'), /showing the cached sessions \(not live\)/);
  await page.screenshot({ path: path.join(OUT, 'offline-list.png') });

  // The cached session: its rows, the banner, and back to its first line from the cache.
  await page.click('#session-list a[href="#/sessions/fix-build"]');
  await page.waitForFunction(() => {
    const s = window.scrollbackDemo.view()?.state;
    return s?.ready && !s.live && !document.getElementById('banner').hidden && document.querySelectorAll('#rows > li').length > 0;
  }, null, WAIT);
  assert.match(await page.textContent('#banner'), /Cannot reach the server: showing what is cached/);
  await scrollToStart(page);
  assert.deepEqual(await texts(page), seen, 'every row, as seen online');
  const counters = await page.evaluate(() => window.scrollbackDemo.sb.counters());
  assert.ok(counters.pagesLocal > 0, `older pages from the cache: ${JSON.stringify(counters)}`);
  assert.equal(await state(page).then((s) => s.live), false);
  await page.screenshot({ path: path.join(OUT, 'offline-session.png') });

  // Never cached: says it needs the network, draws nothing.
  await reopen(page, 'queued');
  await page.waitForFunction(() => /needs the network/.test(document.getElementById('banner').textContent)
    && !document.getElementById('banner').hidden, null, WAIT);
  assert.doesNotMatch(await page.textContent('#banner'), /showing what is cached/);
  assert.equal((await texts(page)).length, 0);
  assert.equal(await state(page).then((s) => s.ready), false);

  // Back to the cached one; the server returns on the same port and data: live, no reload.
  await reopen(page, 'fix-build');
  await page.waitForFunction(() => {
    const s = window.scrollbackDemo.view()?.state;
    return s?.ready && !document.getElementById('banner').hidden && document.querySelectorAll('#rows > li').length > 0;
  }, null, WAIT);
  await pageOnly.close();
  pageOnly = null;
  await w.restartServer();
  await page.waitForFunction(() => document.getElementById('banner').hidden && window.scrollbackDemo.view()?.state.live, null, WAIT);
  const res = await fetch(`${w.server.url}/sessions/fix-build/messages`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: 'posted after the outage' }),
  });
  assert.ok(res.ok, `POST: ${res.status}`);
  await page.waitForFunction(() => [...document.querySelectorAll('#rows > li.user .text')].some((n) => n.textContent === 'posted after the outage'), null, WAIT);
  assert.deepEqual(w.errors().filter((m) => !/ERR_CONNECTION|ERR_EMPTY_RESPONSE|Failed to load resource|EventSource/.test(m.text)), []);
});

for (const [kind, length] of [['shorter', 20], ['longer', 150]]) {
  test(`a file replaced by a ${kind} one (numbered from 1 again) while its session is open: only the new rows on screen, the cache is the server's`, async (t) => {
    const w = await world(t);
    const { page } = w;
    await w.goto('welcome');
    await live(page);
    const old = await texts(page);
    const lines = Array.from({ length }, (_, i) => line(i + 1, { type: 'userMessage', text: `${kind} ${i + 1}` }));
    const res = await fetch(`${w.server.url}/sessions/welcome/transcript`, { method: 'PUT', body: lines.join('\n') });
    assert.ok(res.ok, `PUT: ${res.status}`);
    const expected = Array.from({ length }, (_, i) => `You${kind} ${i + 1}`);
    // The newest row of the new file, live, and nothing drawn that is not the new file's.
    await page.waitForFunction(({ length, kind }) => {
      const s = window.scrollbackDemo.view()?.state;
      const rows = [...document.querySelectorAll('#rows > li')];
      return s?.live && s.cursor === length && rows.length > 0
        && rows.every((li) => li.textContent === `You${kind} ${li.dataset.seq}`);
    }, { length, kind }, WAIT);
    // The header names the new file's session (its first message), as the list does.
    await page.waitForFunction((title) => document.getElementById('session-title').textContent === title
      && document.querySelector('#session-list li[data-id="welcome"] .title')?.textContent === title, `${kind} 1`, WAIT);
    await scrollToStart(page);
    const shown = await texts(page);
    assert.deepEqual(shown, expected);
    assert.ok(!shown.some((text) => old.includes(text)), 'no old row remains');
    const storage = await page.evaluate(() => window.scrollbackDemo.sb.storage);
    // The writes behind the screen settle; then every chunk is the server's answer.
    const check = async () => checkChunks(w.server, await readChunks(page, storage, w.server.port, 'welcome'), 'welcome');
    await until(() => check().then(() => true, () => false), 'the cache is the server\'s');
    const spans = await check();
    assert.equal(spans.at(-1)[1], length + 1, `the newest chunk ends at the new file's end: ${JSON.stringify(spans)}`);
    assert.deepEqual(w.errors(), []);
  });
}

test('the header follows the list: a session made while the page is open gets its title, and keeps up with a server restarted on other data', async (t) => {
  const w = await world(t);
  const { page } = w;
  await w.goto('welcome');
  await live(page);
  const welcome = (await (await fetch(`${w.server.url}/sessions`)).json()).find((s) => s.id === 'welcome').title;
  await page.waitForFunction((title) => document.getElementById('session-title').textContent === title, welcome, WAIT);
  // A session made on the server after the page listed the sessions.
  const made = 'A session made while the page was open';
  const res = await fetch(`${w.server.url}/sessions/brandnew/transcript`, {
    method: 'PUT', body: [line(1, { type: 'userMessage', text: made }), line(2, { type: 'assistantText', text: 'Hello.' })].join('\n'),
  });
  assert.ok(res.ok, `PUT: ${res.status}`);
  assert.equal(await page.locator('#session-list li[data-id="brandnew"]').count(), 0, 'not listed yet');
  await reopen(page, 'brandnew');
  await live(page);
  const header = () => page.textContent('#session-title');
  await page.waitForFunction((title) => document.getElementById('session-title').textContent === title
    && document.querySelector('#session-list li[data-id="brandnew"] .title')?.textContent === title, made, WAIT)
    .catch(async (e) => { throw new Error(`${e.message}: the header says ${await header()}`); });
  // The server restarted on other data: the open session's file is another one.
  await w.stopServer();
  const other = 'The same id, another conversation';
  await fs.writeFile(w.server.transcriptPath('brandnew'), `${line(1, { type: 'userMessage', text: other })}\n`);
  await w.restartServer();
  await page.waitForFunction((other) => window.scrollbackDemo.view()?.state.live
    && [...document.querySelectorAll('#rows > li .text')].map((n) => n.textContent).join() === other, other, WAIT);
  await page.waitForFunction((title) => document.getElementById('session-title').textContent === title, other, WAIT)
    .catch(async (e) => { throw new Error(`${e.message}: the header says ${await header()}`); });
  assert.deepEqual(w.errors().filter((m) => !/ERR_CONNECTION_REFUSED|Failed to load resource|EventSource/.test(m.text)), []);
});

test('an address with an anchor no line can have (0, too big a number) opens the session as usual, and drops the anchor', async (t) => {
  const w = await world(t);
  const { page } = w;
  await w.goto('long');
  await live(page);
  /** The session is open as after a click on its entry: live, the message box, no banner, nothing marked, the newest row drawn last. */
  const opened = (id) => page.waitForFunction((id) => {
    const s = window.scrollbackDemo?.view()?.state;
    const last = document.querySelector('#rows > li:last-child');
    return location.hash === `#/sessions/${id}` && s?.id === id && s.ready && s.live
      && !document.getElementById('composer').hidden && document.getElementById('banner').hidden
      && document.querySelectorAll('#rows > li.hit').length === 0
      && last && Number(last.dataset.seq) === s.rows.at(-1).seq;
  }, id, WAIT).catch(async (e) => {
    throw new Error(`${e.message}: ${JSON.stringify(await page.evaluate(() => ({
      hash: location.hash, banner: document.getElementById('banner').textContent, composer: !document.getElementById('composer').hidden,
      hits: [...document.querySelectorAll('#rows > li.hit')].map((li) => li.dataset.seq),
    })))}`);
  });
  // Typed into the open page.
  await page.evaluate(() => { location.hash = '#/sessions/welcome/at/0'; });
  await opened('welcome');
  // Kept in the address and reloaded: the last screen drawn first, then the live session.
  await page.evaluate(() => { location.hash = '#/sessions/long/at/99999999999999999999'; });
  await opened('long');
  await page.evaluate(() => { location.hash = '#/sessions/long/at/99999999999999999999'; });
  await page.reload();
  await opened('long');
  assert.deepEqual(w.errors(), []);
});

test('an address at a line inside a reply: the row of the reply ends in view and marked, once the older page that folds it is drawn', async (t) => {
  const w = await world(t);
  const { page } = w;
  const lines = await w.server.lines('long');
  // A delta 100 deltas into a reply, past the middle of the session: the view opened there
  // begins at that line, and the next older page folds it into the reply's row.
  let seq = null;
  for (let i = Math.floor(lines.length / 2); i < lines.length && seq === null; i++) {
    const id = lines[i].event.messageId;
    if (lines[i].event.type === 'assistantText' && id && lines.slice(i - 100, i).every((l) => l.event.messageId === id)) seq = lines[i].seq;
  }
  assert.ok(seq !== null, 'the long session has a reply of more than 100 deltas');
  await page.goto(`${w.server.url}/#/sessions/long/at/${seq}`);
  await page.waitForFunction((seq) => {
    const hit = document.querySelector('#rows > li.hit');
    if (!window.scrollbackDemo?.view()?.state.ready || !hit || hit === document.querySelector('#rows > li')) return false;
    const box = document.getElementById('transcript').getBoundingClientRect();
    const r = hit.getBoundingClientRect();
    return Number(hit.dataset.seq) < seq - 100 && r.bottom > box.top + 20 && r.top < box.bottom - 20;
  }, seq, WAIT).catch(async (e) => {
    throw new Error(`${e.message}: ${JSON.stringify(await page.evaluate(() => {
      const box = document.getElementById('transcript');
      const hit = document.querySelector('#rows > li.hit');
      return { scrollTop: box.scrollTop, first: document.querySelector('#rows > li')?.dataset.seq, hit: hit?.dataset.seq, top: hit && Math.round(hit.getBoundingClientRect().top - box.getBoundingClientRect().top) };
    }))}`);
  });
  assert.deepEqual(w.errors(), []);
});

test('a message sent while the transcript is scrolled back: the view goes to the newest rows, the message and its reply in sight', async (t) => {
  const w = await world(t);
  const { page } = w;
  await w.goto('fix-build');
  await live(page);
  await scrollToStart(page);
  assert.ok(await page.evaluate(() => {
    const box = document.getElementById('transcript');
    return box.scrollHeight - box.scrollTop - box.clientHeight > 400;
  }), 'scrolled well above the newest rows');
  const sent = 'sent from the top of the conversation';
  await page.fill('#message', sent);
  await page.press('#message', 'Enter');
  // The message, then the reply after it, inside the transcript's box.
  const inSight = (kind, after) => page.waitForFunction(({ kind, sent, after }) => {
    const box = document.getElementById('transcript').getBoundingClientRect();
    const rows = [...document.querySelectorAll(`#rows > li.${kind}`)];
    const row = kind === 'user' ? rows.find((li) => li.querySelector('.text')?.textContent === sent)
      : rows.find((li) => Number(li.dataset.seq) > after);
    const r = row?.getBoundingClientRect();
    return r && r.top >= box.top - 1 && r.top < box.bottom ? Number(row.dataset.seq) : false;
  }, { kind, sent, after }, WAIT);
  const userSeq = await (await inSight('user', 0)).jsonValue();
  await inSight('assistant', userSeq);
  assert.deepEqual(w.errors(), []);
});

test('token counts are grouped the same in any language (a de-DE browser); a model name with no break in it wraps in its list entry', async (t) => {
  const w = await world(t, { locale: 'de-DE' });
  const { page } = w;
  const model = `model-${'x'.repeat(150)}`;
  const lines = [
    line(1, { type: 'userMessage', text: 'A session with a long model name' }),
    line(2, { type: 'settings', model }),
    line(3, { type: 'usageDelta', context: 1234567 }),
  ];
  const res = await fetch(`${w.server.url}/sessions/longmodel/transcript`, { method: 'PUT', body: lines.join('\n') });
  assert.ok(res.ok, `PUT: ${res.status}`);
  await w.goto('longmodel');
  await live(page);
  await page.waitForFunction(() => document.getElementById('session-meta').textContent.includes('tokens')
    && [...document.querySelectorAll('#rows > li .text')].some((n) => n.textContent.startsWith('context:')), null, WAIT);
  assert.match(await page.textContent('#session-meta'), / · 1,234,567 tokens$/);
  assert.ok((await page.$$eval('#rows > li .text', (n) => n.map((x) => x.textContent))).includes('context: 1,234,567 tokens'));
  // The entry's second line stays inside the entry, left of its ✕.
  await page.waitForFunction(() => document.querySelector('#session-list li[data-id="longmodel"]'), null, WAIT);
  const entry = await page.evaluate(() => {
    const li = document.querySelector('#session-list li[data-id="longmodel"]');
    const sub = li.querySelector('.sub');
    return { sub: sub.getBoundingClientRect().right, scroll: sub.scrollWidth, width: sub.clientWidth,
      del: li.querySelector('.delete').getBoundingClientRect().left, page: document.documentElement.scrollWidth };
  });
  assert.ok(entry.scroll <= entry.width && entry.sub <= entry.del + 1, `the model name wraps: ${JSON.stringify(entry)}`);
  assert.ok(entry.page <= 1200, `nothing wider than the window (the header's model too): ${JSON.stringify(entry)}`);
  assert.deepEqual(w.errors(), []);
});

test('a transcript line with HTML in its text renders as text, and no script runs', async (t) => {
  const w = await world(t);
  const { page } = w;
  const evil = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>';
  await w.server.append('welcome', [line(66, { type: 'userMessage', text: evil }), line(67, { type: 'assistantText', text: `<b>bold</b> ${evil}` })]);
  await w.goto('welcome');
  await live(page);
  await page.waitForFunction(() => document.querySelectorAll('#rows > li').length > 0 && window.scrollbackDemo.view().state.cursor === 67, null, WAIT);
  const texts = await page.$$eval('#rows > li .text', (n) => n.map((x) => x.textContent));
  assert.ok(texts.includes(evil), 'the user row shows the markup as text');
  assert.ok(texts.includes(`<b>bold</b> ${evil}`), 'the assistant row shows the markup as text');
  assert.equal(await page.locator('#rows img, #rows script, #rows b').count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
});

test('the list shows each session with its status and model, and deletes one on the server', async (t) => {
  const w = await world(t);
  const { page } = w;
  const listed = await (await fetch(`${w.server.url}/sessions`)).json();
  await page.goto(`${w.server.url}/#/sessions/queued`);
  await live(page);
  for (const s of listed) {
    const item = page.locator(`#session-list li[data-id="${s.id}"]`);
    assert.equal(await item.locator('.title').textContent(), s.title || s.id);
    assert.equal(await item.locator('.sub').textContent(), [s.status, s.model].filter(Boolean).join(' · '));
  }
  // Opened before the list came (a first visit on its address: its newest window carries no
  // summary, and its lines no model), the session takes its model from the list.
  const { model } = listed.find((s) => s.id === 'queued');
  assert.ok(model, 'the sandbox names a model');
  await page.waitForFunction((m) => window.scrollbackDemo.view().state.model === m
    && document.getElementById('session-meta').textContent.includes(m), model, WAIT);
  // While a reply streams, the open session's entry says so (the sandbox answers a message).
  const sub = (id) => page.textContent(`#session-list li[data-id="${id}"] .sub`);
  assert.doesNotMatch(await sub('queued'), /working/);
  await page.fill('#message', 'stream a reply');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => /working/.test(document.querySelector('#session-list li[data-id="queued"] .sub').textContent), null, WAIT);
  // What is typed stays with its session: another session's box is empty, and back, it is there.
  await page.fill('#message', 'half a thought');
  await reopen(page, 'welcome');
  await page.waitForFunction(() => location.hash === '#/sessions/welcome'
    && document.getElementById('message').value === '', null, WAIT);
  await reopen(page, 'queued');
  await page.waitForFunction(() => document.getElementById('message').value === 'half a thought', null, WAIT);

  // A search showing a hit in the session deleted: its hits go with it.
  await page.waitForFunction(() => window.scrollbackDemo.view()?.state.status === 'idle', null, WAIT);
  await page.fill('#search', 'stream a reply');
  await page.waitForFunction(() => document.querySelector('#search-results li[data-session="queued"]'), null, WAIT);
  page.once('dialog', (d) => d.accept());
  await page.click('#session-list li[data-id="queued"] .delete');
  await page.waitForFunction(() => !document.querySelector('#session-list li[data-id="queued"]') && location.hash === '#/' && document.getElementById('session').hidden, null, WAIT);
  const after = await (await fetch(`${w.server.url}/sessions`)).json();
  assert.deepEqual(after.map((s) => s.id).sort(), listed.map((s) => s.id).filter((id) => id !== 'queued').sort());
  await page.waitForFunction(() => !document.querySelector('#search-results li[data-session="queued"]'), null, WAIT);

  // A session the server does not have: said so, with nothing to write into and nothing loading.
  await reopen(page, 'does-not-exist');
  await page.waitForFunction(() => window.scrollbackDemo.view()?.state.error, null, WAIT);
  assert.match(await page.textContent('#banner'), /There is no such session on the server/);
  assert.equal(await page.isHidden('#composer'), true, 'no composer');
  assert.equal(await page.textContent('#history-edge'), '');
  assert.equal(await page.textContent('#session-meta'), '');
  // One no URL can hold: refused at once, said so, nothing loading.
  await reopen(page, '..');
  await page.waitForFunction(() => /Could not open this session: .*cannot be used in a URL/.test(document.getElementById('banner').textContent), null, WAIT);
  assert.equal(await page.textContent('#history-edge'), '');
  assert.equal(await page.isHidden('#composer'), true);
  assert.equal(await page.isHidden('#open-settings'), true, 'no settings for a session never opened');
  // The next session opened has them again.
  await reopen(page, 'welcome');
  await page.waitForFunction(() => window.scrollbackDemo.view()?.state.ready, null, WAIT);
  assert.equal(await page.isHidden('#open-settings'), false);
  assert.deepEqual(w.errors().filter((m) => !/status of 404/.test(m.text)), []);
});

test('a narrow window (a phone): the list above the session, nothing wider than the screen; Settings opens on Close; a failed tool says so', async (t) => {
  const w = await world(t);
  const { page } = w;
  await page.setViewportSize({ width: 400, height: 780 });
  await w.goto('fix-build');
  await live(page);
  const widths = await page.evaluate(() => ({
    page: document.documentElement.scrollWidth,
    message: document.getElementById('message').getBoundingClientRect().width,
    list: document.querySelector('nav.sessions').getBoundingClientRect(),
    session: document.getElementById('session').getBoundingClientRect(),
  }));
  assert.ok(widths.page <= 400, `no sideways scroll: ${JSON.stringify(widths)}`);
  assert.ok(widths.message > 250, `room to type: ${JSON.stringify(widths)}`);
  assert.ok(widths.list.bottom <= widths.session.top + 1, `the list above the session: ${JSON.stringify(widths)}`);
  await page.screenshot({ path: path.join(OUT, 'narrow.png') });
  // A tool call whose result is an error says it in words, not only in colour.
  await scrollToStart(page);
  const failed = await page.$$eval('#rows > li.tool', (n) => n.filter((li) => li.querySelector('pre.output.error'))
    .map((li) => li.querySelector('.who').textContent));
  assert.ok(failed.length > 0 && failed.every((who) => / · failed$/.test(who)), JSON.stringify(failed));
  // Settings: Enter right after opening closes it, it does not throw the cache away.
  await page.click('#open-settings');
  await page.waitForFunction(() => document.getElementById('settings').open);
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Close');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => !document.getElementById('settings').open);
  assert.equal(await state(page).then((s) => s.live), true, 'not reloaded');
  assert.deepEqual(w.errors(), []);
});

test('a phone (390×800, then 600×450): the list above the session, each scrolling in its own part; `long` opens at its newest rows and does not page through its history', async (t) => {
  const w = await world(t);
  const { page, requests } = w;
  await page.setViewportSize({ width: 390, height: 800 });
  // By its address: the session is drawn before the list comes and takes its room above it.
  await w.goto('long');
  const listed = (await (await fetch(`${w.server.url}/sessions`)).json()).length;
  await page.waitForFunction((n) => document.querySelectorAll('#session-list li').length === n, listed, WAIT);
  await live(page);
  /** Where things are: the list, its first entry, the transcript's box, the message box. */
  const layout = () => page.evaluate(() => {
    const rect = (node) => { const r = node.getBoundingClientRect(); return { top: Math.round(r.top), bottom: Math.round(r.bottom), height: Math.round(r.height) }; };
    const box = document.getElementById('transcript');
    const last = document.querySelector('#rows > li:last-child');
    return {
      window: innerHeight, page: document.documentElement.scrollHeight, pageScroll: scrollY,
      list: rect(document.querySelector('nav.sessions')), entry: rect(document.querySelector('#session-list li')),
      box: rect(box), scroll: [box.scrollTop, box.scrollHeight, box.clientHeight],
      message: rect(document.getElementById('message')), last: last && rect(last),
      rows: document.querySelectorAll('#rows > li').length,
      newest: window.scrollbackDemo?.view()?.state.rows.at(-1)?.seq ?? null, lastSeq: last ? Number(last.dataset.seq) : null,
    };
  });
  // The transcript scrolls in its own box, at its newest row; the page does not scroll; the
  // message box is on screen.
  const settled = async (width, height) => {
    await page.waitForFunction(() => {
      const box = document.getElementById('transcript');
      const last = document.querySelector('#rows > li:last-child')?.getBoundingClientRect();
      const message = document.getElementById('message').getBoundingClientRect();
      const b = box.getBoundingClientRect();
      return last && box.scrollHeight - box.scrollTop - box.clientHeight < 40
        && last.bottom <= b.bottom + 1 && last.bottom > b.top
        && message.bottom <= innerHeight && document.documentElement.scrollHeight <= innerHeight
        && document.getElementById('history-edge').textContent !== 'Loading older messages…';
    }, null, WAIT).catch(async (e) => { throw new Error(`${width}×${height}: ${e.message}: ${JSON.stringify(await layout())}`); });
    // It comes to rest: no page asked for over a few frames (a box whose top stays in sight
    // asks for one each frame, through the whole history).
    await until(() => page.evaluate(async () => {
      const loading = () => document.getElementById('history-edge').textContent === 'Loading older messages…';
      const n = document.querySelectorAll('#rows > li').length;
      for (let i = 0; i < 3; i++) await new Promise(requestAnimationFrame);
      return !loading() && document.querySelectorAll('#rows > li').length === n;
    }), `${width}×${height}: no older page asked for`);
    const l = await layout();
    assert.equal(l.lastSeq, l.newest, `${width}×${height}: the newest row is the last drawn: ${JSON.stringify(l)}`);
    assert.ok(l.scroll[1] - l.scroll[0] - l.scroll[2] < 40, `${width}×${height}: still at the newest row: ${JSON.stringify(l)}`);
    assert.ok(l.list.height >= 80 && l.list.bottom <= l.box.top, `${width}×${height}: the list above the session: ${JSON.stringify(l)}`);
    return l;
  };
  const phone = await settled(390, 800);
  const older = requests.filter((r) => isPage(r) && r.url.searchParams.has('before'));
  assert.ok(older.length <= 2, `a page or two of older rows, not the whole history: ${describe(older)}`);
  assert.ok(phone.rows < 150, `${phone.rows} rows drawn`);
  assert.ok(phone.scroll[1] > phone.scroll[2] * 2, `the transcript scrolls in its box: ${JSON.stringify(phone)}`);
  assert.ok(phone.list.height >= 150, `the list has room: ${JSON.stringify(phone)}`);
  assert.ok(phone.entry.top >= phone.list.top && phone.entry.bottom <= phone.list.bottom, `its first entry is in sight: ${JSON.stringify(phone)}`);
  await page.screenshot({ path: path.join(OUT, 'phone.png') });
  // The list scrolls in its part, and its entries open their session.
  const other = await page.evaluate(() => {
    const list = document.querySelector('nav.sessions');
    list.scrollTop = list.scrollHeight;
    return document.querySelector('#session-list li:last-child').dataset.id;
  });
  await page.waitForFunction(() => {
    const list = document.querySelector('nav.sessions').getBoundingClientRect();
    const entry = document.querySelector('#session-list li:last-child').getBoundingClientRect();
    return entry.top >= list.top && entry.bottom <= list.bottom + 1 && scrollY === 0;
  }, null, WAIT);
  await page.click(`#session-list li[data-id="${other}"] a`);
  await page.waitForFunction((id) => location.hash === `#/sessions/${id}`, other, WAIT);
  await live(page);
  await settled(390, 800);
  await page.click('#session-list a[href="#/sessions/long"]');
  await live(page);
  // A phone on its side: still at the newest row, the message box on screen.
  await page.setViewportSize({ width: 600, height: 450 });
  await settled(600, 450);
  assert.ok(requests.filter((r) => isPage(r) && r.url.searchParams.has('before')).length <= 3, describe(requests));
  assert.deepEqual(w.errors(), []);
});
