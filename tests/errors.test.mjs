// Errors that end, where an app and a person meet them: a rejected call keeps the server's
// status and the error's class through the worker, and a session deleted on the server stops
// (its cache purged, the page saying so) instead of being retried forever.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { WAIT, pageAt, sharedServer, until } from './lib/setup.mjs';
import { startServer } from './lib/server.mjs';

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

test('the server unreachable and nothing cached: listing sessions is an error, not an empty list', async (t) => {
  const { page } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
  const err = await page.evaluate(async () => {
    const { Scrollback } = await import('/pkg/index.js');
    // Port 9 (discard): nothing listens there, the connection is refused.
    const sb = await Scrollback.open({ server: 'http://127.0.0.1:9', storage: 'memory' });
    try {
      return { list: await sb.sessions() };
    } catch (e) {
      return { name: e.name, kind: e.kind, message: e.message };
    } finally {
      sb.close();
    }
  });
  assert.equal(err.list, undefined, `not a list: ${JSON.stringify(err)}`);
  assert.deepEqual({ name: err.name, kind: err.kind }, { name: 'ScrollbackError', kind: 'unavailable' });
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

test('a bad argument is a TypeError that says what is wrong, a misspelt option is refused, and the Scrollback goes on', async (t) => {
  const { page } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const r = await page.evaluate(async () => {
    const { Scrollback } = await import('/pkg/index.js');
    const server = location.origin;
    const caught = async (call) => {
      let promise;
      try { promise = call(); } catch (e) { return { threw: e.name }; }
      try { await promise; return 'resolved'; } catch (e) { return { name: e.name, message: e.message, kind: e.kind }; }
    };
    const r = {};
    r.badServer = await caught(() => Scrollback.open({ server: 'not a url', storage: 'memory' }));
    r.ftpServer = await caught(() => Scrollback.open({ server: 'ftp://example.com', storage: 'memory' }));
    r.misspelt = await caught(() => Scrollback.open({ server, storage: 'memory', budget: 1 }));
    r.budgetNegative = await caught(() => Scrollback.open({ server, storage: 'memory', budgetBytes: -1 }));
    r.budgetFraction = await caught(() => Scrollback.open({ server, storage: 'memory', budgetBytes: 1.5 }));
    r.tokenOption = await caught(() => Scrollback.open({ server, storage: 'memory', token: 5 }));
    r.notData = await caught(() => Scrollback.open({ server, storage: 'memory', onChange: () => {} }));

    const sb = await Scrollback.open({ server, storage: 'memory' });
    r.postText = await caught(() => sb.postMessage('fix-build', 42));
    r.postId = await caught(() => sb.postMessage({}, 'hi'));
    r.deleteId = await caught(() => sb.deleteSession(42));
    r.emptyId = await caught(() => sb.openSession(''));
    r.dotDot = await caught(() => sb.openSession('..'));
    r.dot = await caught(() => sb.postMessage('.', 'hi'));
    r.longId = await caught(() => sb.openSession('x'.repeat(5000)));
    r.anchorString = await caught(() => sb.openSession('fix-build', { anchor: '5' }));
    r.anchorArray = await caught(() => sb.openSession('fix-build', { anchor: [7] }));
    r.openOptions = await caught(() => sb.openSession('fix-build', 'abc'));
    r.openMisspelt = await caught(() => sb.openSession('fix-build', { onchange() {} }));
    r.searchOptions = await caught(() => sb.search('build', 'abc'));
    r.searchLimit = await caught(() => sb.search('build', { limit: -1 }));
    r.searchMisspelt = await caught(() => sb.search('build', { limt: 2 }));
    r.tokenNumber = await caught(() => sb.setToken(42));

    r.chatsMisspelt = await caught(() => sb.chats({ windowLine: 5 }).options());
    r.chatsStorage = await caught(() => sb.chats({ storage: 'opfs' }).options());
    r.chatsStorageUnset = await sb.chats({ storage: undefined, windowLines: 5 }).options();
    const chats = sb.chats();
    r.header = await caught(() => chats.replace('notes', 42, []));
    const cursor = await chats.replace('notes', '{"chat":1}', ['{"m":1}']);
    r.writeMisspelt = await caught(() => chats.save('notes', cursor, '{"chat":1}', ['{"m":2}'], { expectedWindowLinecount: 9 }));
    r.writeRight = await caught(() => chats.save('notes', cursor, '{"chat":1}', ['{"m":2}'], { expectedWindowLineCount: 9 }));
    r.tailMisspelt = await caught(() => chats.tail('notes', { maxLine: 1 }));
    r.patchMisspelt = await caught(() => chats.patch('notes', cursor, '{"chat":1}', { apend: ['{"m":3}'] }));
    r.objectLine = await caught(() => chats.patch('notes', cursor, '{"chat":1}', { append: [{ m: 3 }] }));
    r.stringLines = await caught(() => chats.patch('notes', cursor, '{"chat":1}', { append: '{"m":3}' }));
    r.staleCursor = await caught(() => chats.patch('notes', { ...cursor, size: cursor.size + 1 }, '{"chat":1}', { append: ['{"m":3}'] }));
    r.lines = (await chats.tail('notes')).lines;
    r.names = await Promise.all(['..', 'a/../b', '/abs', 'a\\b', 'a:b', 'CON', 'x'.repeat(201)].map((n) => caught(() => chats.normalizeName(n))));
    r.callsAgree = await caught(() => chats.tail('a/../b'));
    const t = await chats.tail('notes');
    const request = { window: t.lines, cursor: t.cursor, hasMoreBefore: t.hasMoreBefore, budgetTokens: 100 };
    r.charsPerToken = await caught(() => chats.backfill('notes', { ...request, charsPerToken: 0 }));
    r.backfillMisspelt = await caught(() => chats.backfill('notes', { ...request, budgetToken: 100 }));

    // The same Scrollback still works: it lists, opens a session live, reloads it and searches.
    r.sessions = (await sb.sessions()).length;
    const view = await sb.openSession('fix-build', null);
    while (!view.state.live) await new Promise((resolve) => setTimeout(resolve, 20));
    r.rows = view.state.rows.length;
    r.reloadString = await caught(() => view.reload('7'));
    r.search = Array.isArray(await sb.search('build'));
    view.close();
    await sb.close();
    return r;
  });
  const typeError = (e, pattern, what) => {
    assert.equal(e?.name, 'TypeError', `${what}: ${JSON.stringify(e)}`);
    assert.match(e.message, pattern, what);
    assert.equal(e.kind, undefined, `${what}: nothing was sent, no retry class`);
  };
  typeError(r.badServer, /bad server URL "not a url"/, 'a server that is not a URL');
  typeError(r.ftpServer, /bad server URL .*http/, 'a server that is not http(s)');
  typeError(r.misspelt, /"budget": it takes server, token, storage, budgetBytes, search, opening, onOpeningScreen$/, 'a misspelt option, with the ones there are');
  typeError(r.notData, /plain data/, 'a function in the options');
  // Numbers in JS's words, not serde's (`floating point \`-1.0\`, expected u64`).
  typeError(r.budgetNegative, /budgetBytes.*the number -1, expected a whole number, 0 or more$|options: invalid type: the number -1, expected a whole number, 0 or more$/, 'a negative budget');
  typeError(r.budgetFraction, /the number 1\.5, expected a whole number, 0 or more$/, 'a budget that is not whole');
  typeError(r.tokenOption, /the number 5, expected a string$/, 'a token option that is a number');
  typeError(r.tokenNumber, /setToken needs a token \(a string, or null for none\)/, 'a token that is not a string');
  typeError(r.postText, /message must be a string/, 'a message that is not a string');
  typeError(r.postId, /session id must be a string/, 'an id that is not a string');
  typeError(r.deleteId, /session id must be a string/, 'deleting with an id that is not a string');
  typeError(r.emptyId, /session id/, 'an empty id');
  typeError(r.dotDot, /session id "\.\." cannot be used in a URL/, 'an id a URL resolves away');
  typeError(r.dot, /session id "\." cannot be used in a URL/, 'posting to an id a URL resolves away');
  typeError(r.longId, /session id "x{64}"… \(5000 bytes\) cannot be cached/, 'a long id, shown short');
  assert.ok(r.longId.message.length < 200, r.longId.message);
  typeError(r.anchorString, /anchor must be a whole number from 1, got a string/, 'an anchor that is a string');
  typeError(r.anchorArray, /got an array/, 'an anchor that is an array');
  typeError(r.openOptions, /options must be an object/, 'openSession options that are a string');
  typeError(r.openMisspelt, /^openSession's options has no "onchange": it takes onChange, anchor$/, 'a misspelt openSession option');
  typeError(r.searchOptions, /options must be an object/, 'search options that are a string');
  typeError(r.searchLimit, /limit must be a whole number, 0 or more/, 'a negative limit');
  typeError(r.searchMisspelt, /^search's options has no "limt": it takes limit, sessions$/, 'a misspelt search option');
  // A handle takes its window and backfill; the storage is the Scrollback's.
  typeError(r.chatsMisspelt, /^options has no "windowLine": it takes windowLines, backfillPages$/, 'a misspelt chats option');
  typeError(r.chatsStorage, /storage is chosen when the store opens/, 'a storage given to sb.chats');
  assert.equal(r.chatsStorageUnset.windowLines, 5, 'a storage left undefined is none');
  typeError(r.header, /header must be a string/, 'a chat header that is not a string');
  const invalid = (e, pattern, what) => {
    assert.deepEqual([e?.name, e?.kind], ['ChatError', 'invalidArgument'], `${what}: ${JSON.stringify(e)}`);
    assert.match(e.message, pattern, what);
  };
  invalid(r.writeMisspelt, /"expectedWindowLinecount".*expectedWindowLineCount/, 'a misspelt write check');
  assert.equal(r.writeRight?.kind, 'windowBaselineMismatch', 'the check, spelt right, refuses the write');
  invalid(r.tailMisspelt, /"maxLine".*maxLines/, 'a misspelt tail option');
  invalid(r.patchMisspelt, /"apend"/, 'a misspelt patch');
  // In JS's words, not the Rust glue's.
  invalid(r.objectLine, /: patch: invalid type: an object, expected a string$/, 'a line that is an object');
  invalid(r.stringLines, /: patch: expected an array or an object$/, 'lines that are a string');
  assert.equal(r.staleCursor?.kind, 'signatureMismatch');
  assert.doesNotMatch(r.staleCursor.message, /Cursor \{|modified_millis/, r.staleCursor.message);
  assert.deepEqual(r.lines, ['{"m":1}'], 'no refused write changed the chat');
  for (const e of r.names) invalid(e, /a chat name/, 'a name that is not a file\'s');
  invalid(r.callsAgree, /a chat name/, 'a call refuses what normalizeName refuses');
  invalid(r.charsPerToken, /charsPerToken must be at least 1/, 'charsPerToken 0');
  invalid(r.backfillMisspelt, /"budgetToken"/, 'a misspelt backfill request');
  assert.ok(r.sessions > 0 && r.rows > 0, 'the Scrollback lists and opens sessions after all that');
  typeError(r.reloadString, /anchor must be a whole number/, 'a reload anchor that is a string');
  assert.equal(r.search, true);
  assert.deepEqual(errors, []);
});

test('a token the server refuses stops the view; setToken with a good one opens it again from the cache, nothing purged', async (t) => {
  // The API on a server of its own that requires a token, called from the shared server's
  // origin: another origin, so that no cookie of the API's carries the token in its place.
  const api = await startServer({ args: ['--token', 'good-token', '--allow-origin', shared.server.url] });
  t.after(() => api.dispose());
  const { page, context } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
  // What the page asks the API (the worker's requests and its streams).
  const asked = [];
  context.on('request', (r) => {
    const url = new URL(r.url());
    if (url.origin === api.url) asked.push(`${r.method()} ${url.pathname}`);
  });
  // Opens Scrollback with `token` and the session (`window.sb`, `window.view`).
  const openWith = (token) => page.evaluate(async ({ server, token }) => {
    const { Scrollback } = await import('/pkg/index.js');
    window.sb = await Scrollback.open({ server, token, storage: 'indexeddb' });
    window.view = await window.sb.openSession('fix-build');
  }, { server: api.url, token });
  const shown = () => page.evaluate(async () => {
    const { error, rows, live } = window.view.state;
    return { error, live, rows: rows.map((r) => r.seq), size: await window.view.cachedSize() };
  });
  const close = () => page.evaluate(async () => { window.view.close(); await window.sb.close(); });

  await openWith('good-token');
  await page.waitForFunction(() => window.view.state.live, null, WAIT);
  const opened = await shown();
  await close();
  assert.ok(opened.rows.length > 0 && opened.size > 0, 'cached with the good token');

  // The app's token has expired: the reopen's check is refused and the view stops.
  await openWith('expired-token');
  await page.waitForFunction(() => window.view.state.error, null, WAIT);
  const stopped = await shown();
  assert.equal(stopped.error.kind, 'unauthorized');
  assert.equal(stopped.error.status, 401);
  assert.equal(stopped.live, false);
  assert.deepEqual(stopped.rows, opened.rows, 'the cached rows stay shown');
  const before = asked.length;

  // The app gets a fresh token: the view opens again from its cache. Its error goes at once (it
  // is trying again); a token refused again would bring the error back.
  await page.evaluate(() => window.sb.setToken('good-token'));
  await page.waitForFunction(() => {
    const s = window.view.state;
    if (!s.error) window.cleared = true;
    return (s.live && s.verified) || (window.cleared && s.error);
  }, null, WAIT);
  const resumed = await shown();
  await close();
  assert.equal(resumed.error, null);
  assert.deepEqual(resumed.rows, opened.rows, 'the same rows');
  assert.equal(resumed.size, opened.size, 'nothing purged, nothing stored again');
  assert.deepEqual(asked.slice(before), ['GET /sessions/fix-build/catchup', 'GET /sessions/fix-build/events'],
    'the check and the stream: no page fetched, the rows came from the cache');
});

test('a refused stream whose "why" request is never answered is still retried, and goes live', async (t) => {
  // A proxy in front of the server: the first event stream is refused (503); the request that
  // asks why (the same URL with fetch, as EventSource hides the status) is taken and never
  // answered; everything else, the later streams too, goes through.
  const upstream = new URL(shared.server.url);
  let streams = 0;
  const hung = [];
  const proxy = http.createServer((req, res) => {
    if (req.url.includes('/events?')) {
      streams += 1;
      if (streams === 1) {
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end('{"error":"busy"}');
        return;
      }
      if (streams === 2) {
        hung.push(res);
        return;
      }
    }
    const up = http.request({
      host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: { ...req.headers, host: upstream.host },
    }, (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise((resolve) => { proxy.listen(0, '127.0.0.1', resolve); });
  t.after(() => {
    for (const res of hung) res.destroy();
    proxy.closeAllConnections();
    proxy.close();
  });
  const { page } = await pageAt(t, shared.browser, `http://127.0.0.1:${proxy.address().port}/pkg/index.js`);
  await page.evaluate(async () => {
    const { Scrollback } = await import('/pkg/index.js');
    window.sb = await Scrollback.open({ server: location.origin, storage: 'memory' });
    window.view = await sb.openSession('fix-build');
  });
  await until(() => page.evaluate(() => view.state.live), 'the session is live through a third stream');
  const state = await page.evaluate(() => ({ ready: view.state.ready, error: view.state.error, rows: view.state.rows.length }));
  await page.evaluate(() => sb.close());
  assert.ok(streams >= 3, `the refused stream was asked again (${streams} streams)`);
  assert.deepEqual({ ...state, rows: state.rows > 0 }, { ready: true, error: null, rows: true });
});

test('offline, past what is cached: loadOlder says older history needs the server, instead of "more" with nothing added', async (t) => {
  const { context, page } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
  // Online: the newest rows and one older page cached.
  await page.evaluate(async () => {
    const { Scrollback } = await import('/pkg/index.js');
    const sb = await Scrollback.open({ server: location.origin, storage: 'opfs' });
    const view = await sb.openSession('long');
    while (!(view.state.live && view.state.verified)) await new Promise((r) => setTimeout(r, 20));
    await view.loadOlder();
    view.close();
    await sb.close();
  });
  // Offline: every request to the API fails (the package is loaded already).
  await context.route(/\/sessions/, (route) => route.abort('internetdisconnected'));
  const out = await page.evaluate(async (timeout) => {
    const { Scrollback } = await import('/pkg/index.js');
    const sb = await Scrollback.open({ server: location.origin, storage: 'opfs' });
    const view = await sb.openSession('long');
    for (const end = Date.now() + timeout; !(view.state.ready && view.state.banner) && Date.now() < end;) {
      await new Promise((r) => setTimeout(r, 20));
    }
    // "Load everything older", as an app may write it.
    const answers = [];
    for (let more = true; more && answers.length < 100;) {
      const before = view.state.rows.length;
      try {
        more = await view.loadOlder();
        answers.push({ more, added: view.state.rows.length > before });
      } catch (e) {
        answers.push({ error: e.message, kind: e.kind, added: view.state.rows.length > before });
        break;
      }
    }
    const moreHistory = view.state.moreHistory;
    await sb.close();
    return { answers, moreHistory };
  }, WAIT.timeout);
  const last = out.answers.at(-1);
  assert.ok(out.answers.length < 100, `loadOlder was answered "more" ${out.answers.length} times`);
  assert.ok(out.answers.slice(0, -1).every((a) => a.more && a.added), `each "more" added rows: ${JSON.stringify(out.answers)}`);
  assert.deepEqual(last, { error: 'network error: older history is not cached here, and the server has not answered yet', kind: 'unavailable', added: false });
  assert.equal(out.moreHistory, true, 'the history above is still there, for when the server is back');
});

test('a token set while a request with the old one is on its way: the refusal of the old one does not stop the view', async (t) => {
  const api = await startServer({ args: ['--token', 'good-token', '--allow-origin', shared.server.url] });
  t.after(() => api.dispose());
  const { context, page } = await pageAt(t, shared.browser, `${shared.server.url}/pkg/index.js`);
  // The view's first request to the API is held until the app has its new token.
  let first = true;
  let release;
  const held = new Promise((resolve) => { release = resolve; });
  let asked;
  const seen = new Promise((resolve) => { asked = resolve; });
  t.after(() => release());
  await context.route((url) => url.origin === api.url, async (route) => {
    if (first) {
      first = false;
      asked();
      await held;
    }
    await route.continue().catch(() => {});
  });
  await page.evaluate(async ({ server }) => {
    const { Scrollback } = await import('/pkg/index.js');
    // The app starts with the token it kept, expired, while its refresh is on its way.
    window.sb = await Scrollback.open({ server, token: 'expired-token', storage: 'memory' });
    window.view = await sb.openSession('fix-build');
  }, { server: api.url });
  await seen;
  await page.evaluate(() => sb.setToken('good-token'));
  release(); // the request sent with the expired token is answered: 401
  await until(() => page.evaluate(() => view.state.live || view.state.error !== null), 'the view is live or stopped');
  const out = await page.evaluate(async () => {
    const { live, error, rows } = view.state;
    await sb.close();
    return { live, error, rows: rows.length > 0 };
  });
  assert.deepEqual(out, { live: true, error: null, rows: true });
});
