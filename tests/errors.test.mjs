// Errors that end, where an app and a person meet them: a rejected call keeps the server's
// status and the error's class through the worker, and a session deleted on the server stops
// (its cache purged, the page saying so) instead of being retried forever.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { WAIT, pageAt, sharedServer } from './lib/setup.mjs';

const shared = sharedServer();

test('a rejected call keeps the HTTP status and the error class through the worker', async (t) => {
  const { page } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
  const err = await page.evaluate(async () => {
    const { Scrollback } = await import('/pkg/index.js');
    const sb = await Scrollback.open({ server: location.origin, storage: 'memory' });
    try {
      await sb.deleteSession('no-such-session');
      return null;
    } catch (e) {
      return { isError: e instanceof Error, name: e.name, message: e.message, status: e.status, kind: e.kind };
    } finally {
      sb.close();
    }
  });
  assert.ok(err, 'deleting a session the server does not have is refused');
  assert.deepEqual({ ...err, message: undefined }, { isError: true, name: 'ScrollbackError', message: undefined, status: 404, kind: 'gone' });
  assert.match(err.message, /404/);
});

test('a session deleted on the server while cached: the reopen says it is gone, shows nothing of it and stops', async (t) => {
  const { browser, server } = shared;
  const context = await browser.newContext();
  t.after(() => context.close());
  const requests = [];
  context.on('request', (r) => {
    const url = new URL(r.url());
    if (url.pathname.startsWith('/sessions/queued/')) requests.push(`${r.method()} ${url.pathname}${url.search}`);
  });
  const page = await context.newPage();
  await page.goto(`${server.url}/#/sessions/queued`);
  await page.waitForFunction(() => window.scrollbackDemo?.view()?.state?.live, null, WAIT);
  await page.evaluate(() => { location.hash = '#/'; });
  await page.waitForFunction(() => window.scrollbackDemo?.view() === null, null, WAIT);

  // Deleted behind this page's back (another device, the agent's machine).
  await fs.rm(path.join(server.dataDir, 'queued'), { recursive: true, force: true });
  requests.length = 0;
  await page.evaluate(() => { location.hash = '#/sessions/queued'; });
  await page.waitForFunction(() => window.scrollbackDemo.view()?.state?.error, null, WAIT);
  const state = await page.evaluate(() => window.scrollbackDemo.view().state);
  assert.equal(state.error.kind, 'gone');
  assert.equal(state.error.status, 404);
  assert.equal(state.rows.length, 0, 'nothing of the deleted session stays shown');
  assert.equal(state.banner, null);
  assert.match(await page.textContent('#banner'), /no longer exists on the server/);
  assert.equal(await page.locator('#rows > li').count(), 0);
  assert.deepEqual(requests.map((r) => r.replace(/\?.*/, '')), ['GET /sessions/queued/catchup'], 'one check, no retry');
  const size = await page.evaluate(async () => {
    const { Scrollback } = await import('/pkg/index.js');
    void Scrollback;
    return window.scrollbackDemo.view().cachedSize();
  });
  assert.equal(size, 0, 'its cache is purged');
});
