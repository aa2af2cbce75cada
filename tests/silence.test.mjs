// A stream that dies without closing, in the browser: the demo page, served through a TCP relay
// that goes silent on the event stream's connection while keeping it open (a phone changing
// networks, a NAT that forgot the connection, a proxy that holds it). The EventSource never
// errors on such a connection; the server's keep-alive, which names its interval, lets the
// worker tell it from a quiet session and reconnect.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { launch } from './lib/browser.mjs';
import { startServer, assertBuilt } from './lib/server.mjs';
import { WAIT, until } from './lib/setup.mjs';

/**
 * A TCP relay on a free loopback port in front of `port`. `goSilent()` stops relaying, both
 * ways, every open connection that carries an `/events` request, and keeps it open; later
 * connections are relayed as before.
 */
async function startRelay() {
  const streams = []; // { silent } of each event stream's connection
  const sockets = new Set();
  let upstreamPort = null;
  const relay = net.createServer((client) => {
    const server = net.connect(upstreamPort, '127.0.0.1');
    const conn = { silent: false, stream: false };
    sockets.add(client).add(server);
    client.on('data', (chunk) => {
      if (!conn.stream && chunk.toString('latin1').includes('/events?')) {
        conn.stream = true;
        streams.push(conn);
      }
      if (!conn.silent) server.write(chunk);
    });
    server.on('data', (chunk) => { if (!conn.silent) client.write(chunk); });
    const end = () => { client.destroy(); server.destroy(); };
    client.on('close', end).on('error', end);
    server.on('close', end).on('error', end);
  });
  await new Promise((resolve) => relay.listen(0, '127.0.0.1', resolve));
  return {
    port: relay.address().port,
    set upstream(port) { upstreamPort = port; },
    streamsOpened: () => streams.length,
    goSilent() {
      for (const s of streams) s.silent = true;
      return streams.length;
    },
    close() {
      for (const s of sockets) s.destroy();
      relay.close();
    },
  };
}

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
