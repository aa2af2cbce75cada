// A stream that dies without closing, in the browser: the demo page, served through a TCP relay
// that goes silent on the event stream's connection while keeping it open (a phone changing
// networks, a NAT that forgot the connection, a proxy that holds it). The EventSource never
// errors on such a connection; the server's keep-alive, which names its interval, lets the
// worker tell it from a quiet session and reconnect.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './lib/browser.mjs';
import { startServer, assertBuilt } from './lib/server.mjs';
import { WAIT, until } from './lib/setup.mjs';
import { startRelay } from './lib/relay.mjs';

let relay;
let server;
let browser;
before(async () => {
  assertBuilt();
  relay = await startRelay();
  // Keep-alives every 300 ms: a silence of 0.9 s means a dead connection.
  server = await startServer({ args: ['--keep-alive-ms', '300', '--allow-host', `127.0.0.1:${relay.port}`] });
  relay.upstream = server.port;
  browser = await launch();
});
after(async () => {
  await browser?.close();
  relay?.close();
  await server?.dispose();
});

test('a stream gone silent without closing is reconnected, and what came meanwhile is shown', async (t) => {
  const context = await browser.newContext();
  t.after(() => context.close());
  const page = await context.newPage();
  const id = 'fix-build';
  await page.goto(`http://127.0.0.1:${relay.port}/#/sessions/${id}`);
  await page.waitForFunction(() => window.scrollbackDemo?.view()?.state?.live, null, WAIT);
  assert.equal(relay.streamsOpened(), 1);

  // The connection goes silent; the agent writes meanwhile. No error reaches the page.
  assert.equal(relay.goSilent(), 1);
  const seq = (await server.lines(id)).at(-1).seq + 1;
  await server.append(id, [JSON.stringify({ seq, ts: Date.now() / 1000, event: { type: 'userMessage', text: 'written while the stream was silent' } })]);

  await page.waitForFunction((s) => {
    const st = window.scrollbackDemo.view()?.state;
    return st?.live && st.cursor === s && st.banner === null;
  }, seq, WAIT);
  await until(async () => (await page.locator('#rows > li').last().textContent()).includes('written while the stream was silent'), 'the row is drawn');
  assert.ok(relay.streamsOpened() >= 2, 'a new stream replaced the silent one');
  const state = await page.evaluate(() => window.scrollbackDemo.view().state);
  assert.equal(state.rows.filter((r) => r.text === 'written while the stream was silent').length, 1, 'shown once');
});
