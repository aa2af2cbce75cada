// `node tests/bench/storage.mjs`: what the browser counts for the origin
// (`navigator.storage.estimate()`) against what Scrollback keeps, in a fresh on-disk Chromium
// profile per store, as the bench's contenders run. Session `fix-build` is opened, and six
// messages are posted, each answered by the sandbox's streamed reply. After each reply it prints
// the origin's usage, the session's own count (`view.cachedSize()`) and, for OPFS, the files'
// total size. It prints them again once Scrollback is closed and its sync handles are released.
// (An incognito context keeps both stores in memory, and its usage is close to the data.)
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from '../lib/browser.mjs';
import { ROOT, assertBuilt, startServer } from '../lib/server.mjs';

const REPLIES = Number(process.env.STORAGE_REPLIES ?? 6);

assertBuilt();
const server = await startServer({ www: path.join(ROOT, 'tests/lib') }); // a blank page
const kB = (n) => `${(n / 1000).toFixed(0)} kB`;
try {
  for (const storage of ['opfs', 'indexeddb']) {
    const profile = await fs.mkdtemp(path.join(os.tmpdir(), 'scrollback-storage-profile-'));
    const context = await chromium.launchPersistentContext(profile, { executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
    try {
      const page = await context.newPage();
      await page.goto(`${server.url}/blank.html`);
      const rows = await page.evaluate(async ({ server, storage, replies }) => {
        const usage = async () => (await navigator.storage.estimate()).usage;
        const files = async () => {
          let total = 0;
          const walk = async (dir) => {
            for await (const handle of dir.values()) {
              if (handle.kind === 'file') total += (await handle.getFile()).size;
              else await walk(handle);
            }
          };
          await walk(await navigator.storage.getDirectory());
          return total;
        };
        const until = async (done, what) => {
          const deadline = Date.now() + 120_000;
          while (!done()) {
            if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
            await new Promise((r) => setTimeout(r, 50));
          }
        };
        const { Scrollback } = await import('/pkg/index.js');
        const sb = await Scrollback.open({ server, storage });
        const view = await sb.openSession('fix-build');
        await until(() => view.state.live, 'live');
        const out = [];
        for (let i = 1; i <= replies; i++) {
          const asked = `storage question ${i}`;
          await sb.postMessage('fix-build', asked);
          const at = () => view.state.rows.findIndex((r) => r.kind === 'user' && r.text === asked);
          // The reply has ended once the session is idle again after the message.
          await until(() => at() >= 0 && view.state.status === 'idle' && view.state.rows.length > at() + 1, `reply ${i}`);
          out.push({ when: `after reply ${i}`, usage: await usage(), own: await view.cachedSize(), files: await files() });
        }
        const own = await view.cachedSize();
        view.close();
        await sb.close();
        out.push({ when: 'closed', usage: await usage(), own, files: await files() });
        return out;
      }, { server: server.url, storage, replies: REPLIES });
      console.log(`\n${storage}: origin usage (estimate) against the cache's own count`);
      for (const r of rows) {
        const files = storage === 'opfs' ? `, files ${kB(r.files)}` : '';
        console.log(`  ${r.when.padEnd(14)} usage ${kB(r.usage).padStart(8)}  own ${kB(r.own).padStart(8)}${files}  (usage/own ×${(r.usage / r.own).toFixed(2)})`);
      }
    } finally {
      await context.close();
      await fs.rm(profile, { recursive: true, force: true });
    }
  }
} finally {
  await server.stop();
}
