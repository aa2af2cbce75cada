// The built package loads in a real headless Chromium from a plain <script type="module">.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { launch } from './lib/browser.mjs';
import { serveStatic } from './lib/static.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const { version } = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url)));
let server, browser;

before(async () => {
  server = await serveStatic(root);
  browser = await launch();
});
after(async () => { await browser?.close(); await server?.close(); });

test('the wasm package instantiates in Chromium and reports its version', async () => {
  const page = await browser.newPage();
  await page.goto(`${server.url}/tests/lib/blank.html`);
  const got = await page.evaluate(async () => {
    const mod = await import('/pkg/scrollback.js');
    await mod.default();
    return mod.version();
  });
  assert.equal(got, version);
});
