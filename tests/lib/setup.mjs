// Set-up shared by the end-to-end test files: the node:test hooks that check the builds and start
// what a file's tests share (a server, a seeded sandbox to copy, a browser), a fresh page for a
// test, and a polling wait with a deadline.
import { before, after } from 'node:test';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { launch } from './browser.mjs';
import { startServer, assertBuilt } from './server.mjs';

/** How long a wait may take before the test fails (a slow shared machine). */
export const WAIT = { timeout: Number(process.env.DEMO_WAIT ?? 90_000) };

/**
 * Registers the file's hooks for tests that share one server: before them, checks the builds
 * and starts the server (sandbox data) and the browser; after them, stops both. The returned
 * object holds `server` and `browser` once the tests run.
 */
export function sharedServer() {
  const shared = { server: null, browser: null };
  before(async () => {
    assertBuilt();
    shared.server = await startServer();
    shared.browser = await launch();
  });
  after(async () => {
    await shared.browser?.close();
    await shared.server?.dispose();
  });
  return shared;
}

/**
 * Registers the file's hooks for tests that each run their own server on a copy of the sandbox:
 * before them, checks the builds, seeds the sandbox once (the long session is 21 MB) and starts
 * the browser; after them, closes it and removes the seed. The returned object holds `browser`
 * and `copy()`, which makes a fresh copy of the seed in a temp folder (the caller removes it).
 */
export function sandboxCopies(prefix) {
  const shared = {
    browser: null,
    template: null,
    async copy() {
      const data = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
      await fs.cp(shared.template, data, { recursive: true });
      return data;
    },
  };
  before(async () => {
    assertBuilt();
    const seeding = await startServer();
    await seeding.stop();
    shared.template = seeding.dataDir;
    shared.browser = await launch();
  });
  after(async () => {
    await shared.browser?.close();
    if (shared.template) await fs.rm(shared.template, { recursive: true, force: true });
  });
  return shared;
}

/** A fresh browser context (its own storage, closed when test `t` ends) with a page at `url`. */
export async function pageAt(t, browser, url) {
  const context = await browser.newContext();
  t.after(() => context.close());
  const page = await context.newPage();
  await page.goto(url);
  return { context, page };
}

/**
 * Chromium's storage quota for `origin`, set through the DevTools protocol on `page`'s
 * context: `set(bytes)` pins it, `set(null)` gives the real one back, as the end of test `t`
 * does. (Chromium's IndexedDB does not hold to it; OPFS does.)
 */
export async function originQuota(t, context, page, origin) {
  const cdp = await context.newCDPSession(page);
  const set = (quotaSize) => cdp.send('Storage.overrideQuotaForOrigin', quotaSize == null ? { origin } : { origin, quotaSize });
  t.after(() => set(null).catch(() => {}));
  return set;
}

/** Waits (polling every 50 ms) until `check()` holds; fails naming `what` after `timeout` ms. */
export async function until(check, what, timeout = WAIT.timeout) {
  const deadline = Date.now() + timeout;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits until the demo page shows its session, drawn, with the stream connected. */
export async function live(page, wait = WAIT) {
  await page.waitForFunction(() => {
    const s = window.scrollbackDemo?.view()?.state;
    return s?.ready && s.live && document.querySelectorAll('#rows > li').length > 0;
  }, null, wait);
}
