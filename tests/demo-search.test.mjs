// The demo's search box (www/), driven in headless Chromium as a person would use it: the real
// server (sandbox data), the real package, real OPFS. Type words read in a cached session, see
// the hit, click it: the session opens at the hit's row (the engine's anchor restore), on
// screen and marked. A query with no match says so; markup in a snippet stays text.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WAIT, live, sharedServer } from './lib/setup.mjs';

const shared = sharedServer();

/** A fresh browser context (its own OPFS) on the demo page; page errors are collected. */
async function world(t) {
  const context = await shared.browser.newContext({ viewport: { width: 1200, height: 800 } });
  t.after(() => context.close());
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  return { page, errors };
}

/** Opens a session by its address and waits until it is drawn and streaming. */
async function openLive(page, id) {
  await page.goto(`${shared.server.url}/#/sessions/${encodeURIComponent(id)}`);
  await live(page);
}

/** Types `text` into the search box, as a person would (one key at a time). */
async function type(page, text) {
  await page.locator('#search').fill('');
  await page.locator('#search').pressSequentially(text);
}

/**
 * The result for (session, seq), once the results shown answer the whole query typed (while a
 * person types, the results of the query so far stay shown until the next ones arrive).
 */
async function result(page, session, seq) {
  const typed = await page.locator('#search').inputValue();
  await page.waitForFunction((q) => document.getElementById('search-results').dataset.query === q, typed, WAIT);
  const hit = page.locator(`#search-results li[data-session="${session}"][data-seq="${seq}"]`);
  await hit.waitFor(WAIT);
  return hit;
}

/** Waits until the row showing `seq` is marked as the hit and inside the transcript's box. */
async function hitOnScreen(page, seq) {
  const why = () => page.evaluate((seq) => {
    const rows = [...document.querySelectorAll('#rows > li')];
    const box = document.getElementById('transcript');
    const row = rows.filter((r) => Number(r.dataset.seq) <= seq).at(-1);
    return JSON.stringify({ first: rows[0]?.dataset.seq, last: rows.at(-1)?.dataset.seq, n: rows.length,
      row: row?.dataset.seq, cls: row?.className, hits: rows.filter((r) => r.classList.contains('hit')).map((r) => r.dataset.seq),
      rect: row?.getBoundingClientRect().top, box: box.getBoundingClientRect().top, scroll: [box.scrollTop, box.scrollHeight] });
  }, seq);
  await page.waitForFunction((seq) => {
    const rows = [...document.querySelectorAll('#rows > li')];
    const row = rows.filter((r) => Number(r.dataset.seq) <= seq).at(-1);
    if (!row?.classList.contains('hit') || document.querySelectorAll('#rows > li.hit').length !== 1) return false;
    const box = document.getElementById('transcript').getBoundingClientRect();
    const r = row.getBoundingClientRect();
    return r.top >= box.top - 1 && r.top < box.bottom && r.bottom > box.top;
  }, seq, WAIT).catch(async (e) => { throw new Error(`${e.message}: ${await why()}`); });
}

test('words read in a cached session are found; the hit opens the session at its row, marked', async (t) => {
  const { page, errors } = await world(t);
  await openLive(page, 'long');
  // Read back a few pages (cached as they are read), so the hit is far above the newest rows.
  const oldest = await page.evaluate(async (timeout) => {
    const view = window.scrollbackDemo.view();
    const deadline = Date.now() + timeout;
    while (view.state.rows[0].seq > view.state.cursor - 1500 && view.state.moreHistory && Date.now() < deadline) {
      await view.loadOlder();
    }
    return view.state.rows[0].seq;
  }, WAIT.timeout);
  const lines = await shared.server.lines('long');
  const newest = lines.at(-1).seq;
  const target = lines.find((l) => l.seq > oldest + 20 && l.event.type === 'userMessage'
    && (l.event.text.match(/[A-Za-z]{3,}/g) ?? []).length >= 4);
  assert.ok(target && target.seq < newest - 300, `a user message well above the newest rows (${oldest}..${newest})`);
  const words = target.event.text.match(/[A-Za-z]{3,}/g).slice(0, 4);
  // Leave the session: the list is shown, and the search runs over the cache.
  await page.evaluate(() => { location.hash = '#/'; });
  await page.waitForFunction(() => window.scrollbackDemo?.view() === null);

  await type(page, `"${words.join(' ')}"`);
  const hit = await result(page, 'long', target.seq);
  const marked = (await hit.locator('mark').allTextContents()).map((w) => w.toLowerCase());
  for (const w of words) assert.ok(marked.includes(w.toLowerCase()), `${w} marked in ${marked}`);
  assert.match(await page.locator('#search-status').textContent(), /match/);

  await hit.locator('a').click();
  await page.waitForFunction((seq) => location.hash === `#/sessions/long/at/${seq}`, target.seq);
  await hitOnScreen(page, target.seq);
  const shown = await page.locator(`#rows > li[data-seq="${target.seq}"] .text`).textContent();
  assert.equal(shown, target.event.text, 'the marked row is the hit');
  // The newest rows are not what is shown: the session opened at the hit.
  const bottom = await page.evaluate(() => {
    const box = document.getElementById('transcript');
    return box.scrollHeight - box.scrollTop - box.clientHeight;
  });
  assert.ok(bottom > 400, `opened at the hit, not at the newest rows (${bottom}px above the bottom)`);

  // A query that is nowhere says so, and shows no result.
  await type(page, 'zqxjvkw ');
  await page.waitForFunction(() => document.getElementById('search-status').textContent === 'No match in the cached sessions.', null, WAIT);
  assert.equal(await page.locator('#search-results li').count(), 0);
  assert.deepEqual(errors, []);
});

test('the newest lines of a session are found (a queued message, a reply with no line after it), and markup in a snippet is text', async (t) => {
  const { page, errors } = await world(t);
  const evil = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>';
  const line = (seq, event) => JSON.stringify({ seq, ts: 1788547020 + seq, event });
  // `welcome` ends at 65; its newest line is now a reply delta: nothing follows it.
  await shared.server.append('welcome', [
    line(66, { type: 'userMessage', text: `zebrafish ${evil}` }),
    line(67, { type: 'assistantText', text: `<b>bold</b> kingfisher ${evil}` }),
  ]);
  await openLive(page, 'queued');
  await openLive(page, 'welcome');
  await page.waitForFunction(() => window.scrollbackDemo.view().state.cursor === 67, null, WAIT);

  // The newest line of `queued` is a queued message: found.
  const queued = (await shared.server.lines('queued')).at(-1);
  assert.equal(queued.event.type, 'messageQueued');
  await type(page, queued.event.text);
  await result(page, 'queued', queued.seq);

  // The reply at 67 is the newest line of `welcome`: found, and its markup shown as text.
  await type(page, 'kingfisher');
  const hit = await result(page, 'welcome', 67);
  const snippet = await hit.locator('.snippet').textContent();
  assert.ok(snippet.includes('<b>bold</b>') && snippet.includes('<img src=x onerror='), snippet);
  assert.deepEqual(await hit.locator('mark').allTextContents(), ['kingfisher']);
  await type(page, 'zebrafish');
  const user = await result(page, 'welcome', 66);
  assert.ok((await user.locator('.snippet').textContent()).includes('<script>'));
  assert.equal(await page.locator('#search-results img, #search-results script, #search-results b').count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);

  // Clicking the hit in the session already open brings its row into view, marked.
  await user.locator('a').click();
  await hitOnScreen(page, 66);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(errors, []);
});

test('a word inside a Japanese sentence is found, across the seam of two deltas, and marked whole; so is an emoji', async (t) => {
  const { page, errors } = await world(t);
  await openLive(page, 'unicode');
  const lines = await shared.server.lines('unicode');
  // The reply streams "おはよう" then "ございます": "うござい" spans the seam, inside one run of
  // kana with no space in it; "本語" is the end of "日本語" in the user's message.
  assert.deepEqual(lines.slice(2, 4).map((l) => l.event.text), ['おはよう', 'ございます']);
  await page.evaluate(() => { location.hash = '#/'; });
  await page.waitForFunction(() => window.scrollbackDemo?.view() === null);
  // The sunrise emoji is in both the message and the reply: a word of its own.
  for (const [query, seq, marked] of [['うござい', 3, ['うござい']], ['本語', 1, ['本語']], ['🌅', 1, ['🌅']], ['🌅', 3, ['🌅']]]) {
    await type(page, query);
    const hit = await result(page, 'unicode', seq);
    assert.deepEqual(await hit.locator('mark').allTextContents(), marked);
  }
  // The same characters in another order are not the word.
  await type(page, '語本');
  await page.waitForFunction(() => document.getElementById('search-status').textContent === 'No match in the cached sessions.', null, WAIT);
  assert.deepEqual(errors, []);
});
