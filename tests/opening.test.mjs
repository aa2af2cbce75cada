// What an app following the README's reopen pattern draws: the last screen, then the opening
// screen (`onOpeningScreen`), then the view's ready states. Each drawn state reaches at least as
// far as the one before it: the view's cached rows never take the user back to older lines than
// a screen already drawn, whether the cache is behind that screen (its last screen lost, so the
// opening screen was a first visit's newest window; or the cache stopped writing on a full
// quota while the view went on showing, and saving, newer lines) or not.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WAIT, originQuota, pageAt, sharedServer } from './lib/setup.mjs';

const shared = sharedServer();

/** Opens `id`, waits until it is live, checked and saved as the last screen, and closes. */
async function visit(page, storage, id) {
  await page.evaluate(async ({ storage, id }) => {
    const { Scrollback } = await import('/pkg/index.js');
    const sb = await Scrollback.open({ server: location.origin, storage });
    const view = await sb.openSession(id);
    while (!(view.state.live && view.state.verified) || Scrollback.lastScreen(location.origin, id)?.cursor !== view.state.cursor) {
      await new Promise((r) => setTimeout(r, 20));
    }
    view.close();
    await sb.close();
  }, { storage, id });
}

/** Appends `n` user messages to `id` on the server; the newest seq. */
async function append(id, n, tag) {
  const last = (await shared.server.lines(id)).at(-1).seq;
  await shared.server.append(id, Array.from({ length: n }, (_, i) => JSON.stringify({
    seq: last + 1 + i, ts: 1788546972.5 + i, event: { type: 'userMessage', text: `${tag} ${i}` },
  })));
  return last + n;
}

/**
 * Reopens `id` as the README does, until the newest line `newest` is drawn and the view is
 * live: every state drawn, as [who, cursor, rows].
 */
function reopen(page, storage, id, newest) {
  return page.evaluate(async ({ storage, id, newest, timeout }) => {
    const { Scrollback } = await import('/pkg/index.js');
    const server = location.origin;
    const drawn = [];
    const draw = (who, s) => drawn.push([who, s.cursor, s.rows.length]);
    const last = Scrollback.lastScreen(server, id);
    if (last) draw('last', last);
    const opened = (s) => {
      draw('opening', s);
      window.openingDrawn?.(); // (a test that waits for it: see below)
    };
    const sb = await Scrollback.open({ server, storage, opening: id, onOpeningScreen: opened });
    const view = await sb.openSession(id, { onChange: (s) => { if (s.ready || s.error) draw('change', s); } });
    if (view.state.ready) draw('opened', view.state);
    const deadline = Date.now() + timeout;
    while (!(view.state.live && drawn.at(-1)?.[1] >= newest) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    view.close();
    await sb.close();
    return drawn;
  }, { storage, id, newest, timeout: WAIT.timeout });
}

function assertForwardOnly(drawn, newest) {
  const seen = JSON.stringify(drawn);
  for (let i = 1; i < drawn.length; i += 1) {
    assert.ok(drawn[i][1] >= drawn[i - 1][1],
      `state ${i} drawn (${drawn[i][0]}) goes back from line ${drawn[i - 1][1]} to ${drawn[i][1]}: ${seen}`);
  }
  assert.equal(drawn.at(-1)[1], newest, `the newest line is drawn last: ${seen}`);
}

for (const storage of ['opfs', 'indexeddb']) {
  test(`${storage}: a reopen with lines added meanwhile draws no older rows after the opening screen`, async (t) => {
    const { page } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
    await visit(page, storage, 'fix-build');
    const newest = await append('fix-build', 5, storage);
    assertForwardOnly(await reopen(page, storage, 'fix-build', newest), newest);
  });
}

// The session cached, its last screen gone from localStorage (the app's data pushed it out):
// the opening screen is a first visit's newest window, newer than the cache, and the cached
// rows, drawn before the view's check answers, took the user back (every run with the API 40 ms
// away, some at 0).
for (const ms of [0, 40]) {
  test(`opfs: a cached session whose last screen is gone, the API ${ms} ms away: no older rows after the opening screen`, async (t) => {
    const { context, page } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
    if (ms) await context.route(/\/sessions\//, async (route) => { await new Promise((r) => setTimeout(r, ms)); await route.continue(); });
    await visit(page, 'opfs', 'welcome');
    await page.evaluate(() => localStorage.clear());
    // The worker's module waits for the opening screen to be drawn: this case is the cached
    // rows coming after it, as they do wherever the page's small module is the quicker (on a
    // busy machine the worker's rows can come first, and then there is no opening screen).
    let drawnOpening;
    const openingDrawn = new Promise((resolve) => { drawnOpening = resolve; });
    await page.exposeFunction('openingDrawn', () => drawnOpening());
    await context.route(/\/scrollback_bg\.wasm$/, async (route) => {
      await openingDrawn;
      await route.continue();
    });
    const newest = await append('welcome', 4, `lost screen ${ms}`);
    const drawn = await reopen(page, 'opfs', 'welcome', newest);
    assert.equal(drawn[0][0], 'opening', JSON.stringify(drawn));
    assertForwardOnly(drawn, newest);
  });
}

// The cache stopped writing on a full quota (`storageError`) while the view went on showing the
// lines streamed after it; the next reopen's cache is behind what the page last showed.
test('opfs: after a full quota stopped the cache, the reopen draws no rows older than the last screen', async (t) => {
  const { context, page } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
  // The check 300 ms away (a phone's link): the cached rows are read long before it answers.
  await context.route(/\/catchup\?/, async (route) => { await new Promise((r) => setTimeout(r, 300)); await route.continue(); });
  const quota = await originQuota(t, context, page, shared.server.url);
  await page.evaluate(async () => {
    const { Scrollback } = await import('/pkg/index.js');
    window.sb = await Scrollback.open({ server: location.origin, storage: 'opfs' });
    window.view = await window.sb.openSession('long');
    while (!(view.state.live && view.state.verified)) await new Promise((r) => setTimeout(r, 20));
  });
  await quota(await page.evaluate(async () => (await navigator.storage.estimate()).usage));
  const error = await page.evaluate(async (timeout) => {
    for (let i = 0; i < 5 && !view.state.storageError; i++) await view.loadOlder();
    for (const until = Date.now() + timeout; !view.state.storageError && Date.now() < until;) {
      await new Promise((r) => setTimeout(r, 20));
    }
    return view.state.storageError;
  }, WAIT.timeout);
  assert.match(error ?? '', /quota/i, 'the cache stopped writing');
  await quota(null);
  const shown = await append('long', 6, 'streamed after the quota');
  await page.evaluate(async (seq) => {
    while (view.state.cursor < seq) await new Promise((r) => setTimeout(r, 20));
    view.close();
    await sb.close();
  }, shown);
  const newest = await append('long', 2, 'new');
  assertForwardOnly(await reopen(page, 'opfs', 'long', newest), newest);
});
