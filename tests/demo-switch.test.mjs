// The demo when the session shown changes while a call made for the one left is still under way,
// in headless Chromium against the real server: a message whose send is answered once another
// session is shown clears neither that session's draft nor its composer, and is not kept as the
// draft of the session it went to; an older page of the session left that fails says nothing in
// the banner of the session shown now.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WAIT, sharedServer } from './lib/setup.mjs';

const shared = sharedServer();

/** Opens the demo at session `id` and waits until it is live. */
async function show(page, id) {
  await page.evaluate((id) => { location.hash = `#/sessions/${id}`; }, id);
  await page.waitForFunction((id) => {
    const view = window.scrollbackDemo?.view();
    return view?.id === id && view.state.live;
  }, id, WAIT);
}

test('a send answered after another session is shown: that session\'s draft stays, the message sent is no draft', async (t) => {
  const { browser, server } = shared;
  const context = await browser.newContext();
  t.after(() => context.close());
  // The send's request is held until the test lets it go.
  let release;
  const held = new Promise((r) => { release = r; });
  let posted;
  const posting = new Promise((r) => { posted = r; });
  await context.route((url) => url.pathname === '/sessions/welcome/messages', async (route) => {
    posted();
    await held;
    await route.continue();
  });
  const page = await context.newPage();
  await page.goto(`${server.url}/#/sessions/waiting`);
  await show(page, 'waiting');
  await page.fill('#message', 'my draft for waiting');
  await show(page, 'welcome');
  // The app's handler of the send has run once this settles (a task after the answer).
  await page.evaluate(() => {
    const { sb } = window.scrollbackDemo;
    const send = sb.postMessage.bind(sb);
    sb.postMessage = (...args) => {
      const sent = send(...args);
      window.sendHandled = sent.catch(() => {}).then(() => new Promise((r) => setTimeout(r, 0)));
      return sent;
    };
  });
  await page.fill('#message', 'hello from welcome');
  await page.press('#message', 'Enter');
  await posting;
  await show(page, 'waiting');
  assert.equal(await page.inputValue('#message'), 'my draft for waiting');
  release();
  await page.evaluate(() => window.sendHandled);
  assert.equal(await page.inputValue('#message'), 'my draft for waiting', 'the draft of the session shown is kept');
  await show(page, 'welcome');
  assert.equal(await page.inputValue('#message'), '', 'a message sent is not kept as a draft');
});

test('an older page of a session left behind that fails: the session shown now says nothing of it', async (t) => {
  const { browser, server } = shared;
  const context = await browser.newContext();
  t.after(() => context.close());
  // The page before `long`'s newest is held, then fails.
  let fail;
  const failing = new Promise((r) => { fail = r; });
  let asked;
  const asking = new Promise((r) => { asked = r; });
  await context.route((url) => url.pathname === '/sessions/long/transcript' && url.searchParams.has('before'), async (route) => {
    asked();
    await failing;
    await route.abort('connectionreset');
  });
  const page = await context.newPage();
  await page.goto(`${server.url}/#/sessions/long`);
  await show(page, 'long');
  // The demo's handler of the page has run once this settles (a task after the answer).
  await page.evaluate(() => {
    const view = window.scrollbackDemo.view();
    const load = view.loadOlder.bind(view);
    view.loadOlder = () => {
      const loaded = load();
      window.olderHandled = loaded.catch(() => {}).then(() => new Promise((r) => setTimeout(r, 0)));
      return loaded;
    };
  });
  // Scrolled to the top: the demo asks for the page before (held). It may have asked before
  // the hook above: scrolled until the hooked call asks too.
  await page.waitForFunction(() => {
    document.getElementById('transcript').scrollTop = 0;
    return !!window.olderHandled;
  }, null, { ...WAIT, polling: 50 });
  await asking;
  await show(page, 'welcome');
  fail();
  await page.evaluate(() => window.olderHandled);
  const banner = await page.evaluate(() => ({ hidden: document.getElementById('banner').hidden, text: document.getElementById('banner').textContent }));
  assert.ok(banner.hidden || !/older messages/.test(banner.text), `welcome's banner: ${JSON.stringify(banner)}`);
});
