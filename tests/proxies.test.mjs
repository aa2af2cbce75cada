// What may stand between the client and the server, in headless Chromium against the real server:
// an HTTP proxy in front of it (a CDN, a corporate proxy) that marks every answer of the API
// cacheable. The browser must still never answer the client from its HTTP cache: a file
// replaced on the server would otherwise be shown as the old one again, for as long as the
// kept answer lives.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { pageAt, sharedServer } from './lib/setup.mjs';

const shared = sharedServer();

/**
 * An HTTP proxy in front of `upstream` that forwards everything (streams too) and rewrites the
 * `Cache-Control` of the API's answers (`/sessions...`, not the event stream) to an hour of
 * `max-age`. Counts the requests it forwards, by path and query.
 */
function cachingProxy(upstream) {
  const asked = [];
  const server = http.createServer((req, res) => {
    asked.push(req.url);
    // As a reverse proxy does: the server is asked under its own name.
    const headers = { ...req.headers, host: new URL(upstream).host };
    const forward = http.request(`${upstream}${req.url}`, { method: req.method, headers }, (answer) => {
      const kept = { ...answer.headers };
      if (req.url.startsWith('/sessions') && !req.url.includes('/events')) {
        kept['cache-control'] = 'max-age=3600';
      }
      res.writeHead(answer.statusCode, kept);
      answer.pipe(res);
    });
    forward.on('error', () => res.destroy());
    res.on('close', () => forward.destroy());
    req.pipe(forward);
  });
  return {
    asked,
    listen: () => new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}`))),
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

let proxy;
let proxyUrl;
/** The proxy, started in front of the shared server on first use. */
async function started() {
  if (!proxy) {
    proxy = cachingProxy(shared.server.url);
    proxyUrl = await proxy.listen();
  }
}
after(() => proxy?.close());

for (const storage of ['opfs', 'indexeddb']) {
  test(`${storage}: a file replaced on the server is shown as the new one, though a proxy marks every answer cacheable`, async (t) => {
    await started();
    const id = `proxied-${storage}`;
    const server = shared.server;
    // A session of its own: the sandbox's fix-build, copied.
    const original = await (await fetch(`${server.url}/sessions/fix-build/transcript?limit=1000`, { headers: server.headers })).text();
    const lines = JSON.parse(original);
    const put = (body) => fetch(`${server.url}/sessions/${id}/transcript`, { method: 'PUT', headers: server.headers, body });
    assert.ok((await put(lines.map((l) => `${JSON.stringify(l)}\n`).join(''))).ok);

    const { page } = await pageAt(t, shared.browser, `${proxyUrl}/pkg/index.js`);
    const open = (storage, id) => page.evaluate(async ([storage, id]) => {
      const { Scrollback } = await import('/pkg/index.js');
      const sb = await Scrollback.open({ server: location.origin, storage });
      const view = await sb.openSession(id);
      const deadline = Date.now() + 60_000;
      while (!(view.state.live && view.state.verified) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
      }
      const texts = view.state.rows.map((r) => `${r.kind}: ${r.text ?? ''}`);
      const { live, verified } = view.state;
      await sb.close();
      return { live, verified, texts };
    }, [storage, id]);

    const first = await open(storage, id);
    assert.ok(first.live && first.verified, 'first visit: live');
    assert.ok(first.texts.length > 0 && !first.texts.some((x) => x.startsWith('user: replaced')));

    // Replaced on the server, same seqs, other messages.
    const other = lines.map((l) => ({ ...l, event: { type: 'userMessage', text: `replaced ${l.seq}` } }));
    assert.ok((await put(other.map((l) => `${JSON.stringify(l)}\n`).join(''))).ok);
    const windows = proxy.asked.filter((u) => u.startsWith(`/sessions/${id}/transcript?limit=`)).length;

    const again = await open(storage, id);
    assert.ok(again.live && again.verified, 'the reopen went live on the new file');
    assert.ok(again.texts.length > 0, 'rows shown');
    assert.deepEqual(again.texts.filter((x) => !x.startsWith('user: replaced')), [],
      'nothing of the old file is shown (an answer from the HTTP cache would be the old file)');
    assert.ok(proxy.asked.filter((u) => u.startsWith(`/sessions/${id}/transcript?limit=`)).length > windows,
      'the newest window was asked of the server again, not taken from the browser\'s cache');
  });
}
