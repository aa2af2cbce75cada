// The npm package as a user gets it: `npm pack`, installed into fresh folders, run in headless
// Chromium against the real server (token required, CORS for the page's origin):
// - bundled by Vite 7 into a scratch app that opens a session and sees its rows;
// - loaded without a bundler (an import map) running the README's JS API example as written;
// - the banner while the server is away, and the session live again once it is back.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { launch } from './lib/browser.mjs';
import { ROOT, startServer, assertBuilt } from './lib/server.mjs';
import { serveStatic } from './lib/static.mjs';

const run = promisify(execFile);
const TOKEN = 'npm-test-token';
let tmp, tarball, packed, site, server, browser;

async function npm(cwd, ...args) {
  return run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, maxBuffer: 64 << 20 });
}

before(async () => {
  assertBuilt();
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'scrollback-npm-'));
  const { stdout } = await npm(ROOT, 'pack', '--json', '--pack-destination', tmp);
  packed = JSON.parse(stdout)[0];
  tarball = path.join(tmp, packed.filename);
  site = await serveStatic(tmp);
  server = await startServer({ args: ['--token', TOKEN, '--allow-origin', site.url] });
  browser = await launch();
});

after(async () => {
  await browser?.close();
  await server?.dispose();
  // A restarted server was given its data folder, so dispose leaves it: remove it here.
  if (server) await fs.rm(server.dataDir, { recursive: true, force: true });
  await site?.close();
  if (tmp) await fs.rm(tmp, { recursive: true, force: true });
});

/** A new page whose console and errors are collected. */
async function page() {
  const p = await browser.newPage();
  const log = [];
  p.on('console', (m) => log.push(`${m.type()}: ${m.text()}`));
  p.on('pageerror', (e) => log.push(`pageerror: ${e.message}`));
  return { p, log };
}

test('npm pack ships the JS API, the worker, the wasm and the types, and nothing else', () => {
  const files = packed.files.map((f) => f.path).sort();
  for (const f of ['pkg/index.js', 'pkg/screen.js', 'pkg/index.d.ts', 'pkg/worker.js', 'pkg/scrollback.js', 'pkg/scrollback_bg.wasm', 'pkg/scrollback_screen.js', 'pkg/scrollback_screen_bg.wasm', 'package.json']) {
    assert.ok(files.includes(f), `${f} is in the tarball: ${files}`);
  }
  assert.deepEqual(files.filter((f) => !/^(pkg\/|package\.json$|README\.md$|LICENSE)/.test(f)), []);
});

test('a Vite 7 app bundles the packed package and shows a session from the real server', async () => {
  const app = path.join(tmp, 'vite-app');
  await fs.mkdir(app);
  await fs.writeFile(path.join(app, 'package.json'), JSON.stringify({ name: 'scratch-vite-app', private: true, type: 'module' }));
  await npm(app, 'install', 'vite@7', 'typescript@5', tarball);
  // The types resolve through the package's `exports` and describe the API as used.
  await fs.writeFile(path.join(app, 'check.ts'), `
import { Scrollback, ChatWindow, type SessionState, type SessionChange, type Row, type Counters, type Chats, type ChatTail, type Cursor, type Backfill, type ChatError, type ChatErrorKind, type SearchHit, type ChatWritePlan, type ChatWriter, type ChatEntry } from 'scrollback';
const last: SessionState | null = Scrollback.lastScreen('http://127.0.0.1:1', 'id');
if (last) last.rows.length + (last.verified ? 1 : 0);
const sb: Scrollback = await Scrollback.open({ server: 'http://127.0.0.1:1', token: 't', storage: 'opfs', budgetBytes: 1, search: false });
const view = await sb.openSession('id', { onChange(state: SessionState, change: SessionChange) { state.banner?.toUpperCase(); change.added.concat(change.updated, change.removed).length + (change.reset ? 1 : 0); change.state.includes('status'); }, anchor: 3 });
const opened: Scrollback = await Scrollback.open({ server: 'x', opening: 'id', onOpeningScreen: (s: SessionState) => s.rows.length });
const hits: SearchHit[] = await opened.search('word "a phrase"', { limit: 5, sessions: ['id'] });
for (const h of hits) h.session.trim() + h.seq.toFixed() + h.score.toFixed() + h.snippet.map((p) => (p.hit ? p.text.toUpperCase() : p.text)).join('');
await opened.warmSearch();
const marks = await opened.marks(); marks.start.toFixed(); marks['search-warm']?.toFixed();
// @ts-expect-error: search's limit is a number
await opened.search('x', { limit: '5' });
const rows: Row[] = view.state.rows;
for (const row of rows) if (row.kind === 'assistant') row.lastSeq.toFixed(); else if (row.kind === 'tool') row.result?.isError;
const more: boolean = await view.loadOlder();
await sb.setToken('a refreshed token'); await sb.setToken(null);
// @ts-expect-error: a token is a string (or null for none)
await sb.setToken(42);
const c: Counters = await sb.counters();
c.probesPassed + c.pagesLocal + (await view.cachedSize());
await view.reload(); await view.reload(12); view.close();
const list = await sb.sessions(); list[0].permissionMode.trim();
await sb.postMessage('id', 'text'); await sb.deleteSession('id'); (await sb.clearCache()).map((id: string) => id.trim());
const chats: Chats = sb.chats();
const t: ChatTail = await chats.tail('c', { maxLines: 5, allowNotFound: true });
let cur: Cursor = await chats.patch('c', t.cursor, t.header ?? '{}', { rewriteFromIndex: 1, lines: ['x'] }, { force: true });
cur = await chats.save('c', cur, '{}', t.lines.concat((await chats.before('c', cur, 3)).lines));
const bf: Backfill = await chats.backfill('c', { window: t.lines, cursor: cur, hasMoreBefore: t.hasMoreBefore, budgetTokens: 10 });
if (bf.stop === 'staleCursor') bf.stale?.kind.trim();
try { await chats.beforePages('c', cur, 5, 2); } catch (e) { const k: ChatErrorKind = (e as ChatError).kind; k.trim(); }
// @ts-expect-error: a patch is an append or a rewrite
await chats.patch('c', cur, '{}', { rewriteFromIndex: 1 });
// A window saves through Chats, or anything with its patch and replace (a Tauri app's commands).
const win = ChatWindow.fromTail(t);
win.markDirty(0);
const plan: ChatWritePlan = await win.save(chats, 'c', '{}', ['y']);
const commands: ChatWriter = { patch: async () => cur, replace: async () => cur };
await win.save(commands, 'c', '{}', ['y', 'z'], { force: true });
if (plan.kind === 'patch') plan.op;
const local: Chats = await Scrollback.chats({ storage: 'indexeddb', windowLines: 20, backfillPages: 'mobile' });
// @ts-expect-error: a write check's name is spelt as declared
await local.save('c', cur, '{}', [], { expectedWindowLinecount: 3 });
const listed: ChatEntry[] = await local.list();
listed.map((e) => e.name.length + e.size + e.modifiedMillis);
const deleted: boolean = await local.delete('c');
await local.close();
sb.close();
// @ts-expect-error: storage is one of four names
await Scrollback.open({ server: 'x', storage: 'floppy' });
// @ts-expect-error: search is on or off
await Scrollback.open({ server: 'x', search: 'no' });
export { more };
`);
  await run(path.join(app, 'node_modules/.bin/tsc'), ['--noEmit', '--strict', '--target', 'es2022', '--module', 'esnext',
    '--moduleResolution', 'bundler', '--lib', 'es2022,dom', 'check.ts'], { cwd: app });
  await fs.writeFile(path.join(app, 'vite.config.js'), "export default { base: './', logLevel: 'warn' };\n");
  await fs.writeFile(path.join(app, 'index.html'), '<!doctype html><meta charset="utf-8"><title>app</title><script type="module" src="./main.js"></script>\n');
  await fs.writeFile(path.join(app, 'main.js'), `
import { Scrollback } from 'scrollback';
const q = new URLSearchParams(location.search);
const until = (view, check) => new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('timed out: ' + JSON.stringify({ ...view.state, rows: view.state.rows.length }))), 30000);
  const poll = () => (check(view.state) ? (clearTimeout(timer), resolve(view.state)) : setTimeout(poll, 20));
  poll();
});
window.result = (async () => {
  // A first visit that names its session: the page's small module folds its newest window.
  let opening = null;
  const sb = await Scrollback.open({ server: q.get('server'), token: q.get('token'), opening: 'long',
    onOpeningScreen: (s) => { opening = { rows: s.rows.length, cursor: s.cursor, verified: s.verified }; } });
  const sessions = await sb.sessions();
  let changes = 0;
  const cold = await sb.openSession('long', { onChange() { changes += 1; } });
  const first = await until(cold, (s) => s.ready && s.live);
  const older = await cold.loadOlder();
  const afterOlder = cold.state.rows.length;
  await sb.postMessage('long', 'hello from vite');
  const posted = await until(cold, (s) => s.rows.some((r) => r.kind === 'user' && r.text === 'hello from vite'));
  cold.close();
  const coldCounters = await sb.counters();
  const warm = await sb.openSession('long');
  const warmState = await until(warm, (s) => s.ready && s.live);
  const counters = await sb.counters();
  let refused = null;
  try { await Scrollback.open({ server: q.get('server'), storage: 'floppy' }); } catch (e) { refused = e.name + ': ' + e.message; }
  sb.close();
  return {
    ids: sessions.map((s) => s.id), listed: sessions.find((s) => s.id === 'long')?.seq, firstRows: first.rows.length, firstCursor: first.cursor, older, afterOlder,
    postedCursor: posted.cursor, changes, coldCounters, counters, warmRows: warmState.rows.length, refused, opening,
  };
})().catch((e) => ({ error: e.name + ': ' + e.message }));
`);
  await run(path.join(app, 'node_modules/.bin/vite'), ['build'], { cwd: app });
  const assets = await fs.readdir(path.join(app, 'dist/assets'));
  assert.equal(assets.filter((f) => f.endsWith('.wasm')).length, 2, `both modules (the worker's, the page's small one) are assets: ${assets}`);

  const { p, log } = await page();
  const q = new URLSearchParams({ server: server.url, token: TOKEN });
  await p.goto(`${site.url}/vite-app/dist/index.html?${q}`);
  const r = await p.evaluate(() => window.result);
  assert.equal(r.error, undefined, `${r.error}\n${log.join('\n')}`);
  assert.ok(r.ids.includes('long'));
  assert.ok(r.opening?.rows > 0 && r.opening.cursor >= r.listed && !r.opening.verified,
    `the opening screen was folded in the page from the bundled small module: ${JSON.stringify(r.opening)}`);
  assert.ok(r.firstRows > 0, 'rows are shown');
  assert.ok(r.firstCursor >= r.listed, `the newest line is shown (${r.firstCursor}, listed ${r.listed})`);
  assert.ok(r.older && r.afterOlder > r.firstRows, 'an older page adds rows');
  assert.ok(r.postedCursor > r.listed, 'the posted message arrived through the stream');
  assert.ok(r.changes > 0, 'onChange was called');
  assert.ok(r.coldCounters.requests >= 3 && r.coldCounters.bytesDownloaded > 0, JSON.stringify(r.coldCounters));
  assert.equal(r.counters.probesPassed, 1, `the warm reopen's probe passed: ${JSON.stringify(r.counters)}`);
  assert.equal(r.counters.probesFailed, 0);
  assert.ok(r.warmRows > 0);
  assert.match(r.refused, /^TypeError: unknown storage "floppy"/);
  assert.ok(!log.some((l) => l.startsWith('pageerror')), log.join('\n'));
});

test('the README example works as written, from a plain <script type="module">', async () => {
  const readme = await fs.readFile(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## JS API'));
  const example = section.match(/```js\n([\s\S]*?)```/)[1];
  assert.match(example, /from 'scrollback'/);
  const code = example.replace("'http://127.0.0.1:8080'", JSON.stringify(server.url)).replace("'secret'", JSON.stringify(TOKEN));

  const dir = path.join(tmp, 'plain');
  await fs.mkdir(dir);
  await fs.writeFile(path.join(dir, 'package.json'), JSON.stringify({ name: 'scratch-plain', private: true, type: 'module' }));
  await npm(dir, 'install', tarball);
  await fs.writeFile(path.join(dir, 'app.js'), code);
  await fs.writeFile(path.join(dir, 'index.html'), `<!doctype html><meta charset="utf-8"><title>readme</title>
<script type="importmap">{ "imports": { "scrollback": "/plain/node_modules/scrollback/pkg/index.js" } }</script>
<script type="module" src="/plain/app.js"></script>
`);
  const { p, log } = await page();
  const done = p.waitForEvent('console', { predicate: (m) => m.text().startsWith('counters'), timeout: 60_000 });
  await p.goto(`${site.url}/plain/index.html`);
  const counters = JSON.parse((await done).text().slice('counters '.length));
  const out = log.join('\n');
  assert.ok(!out.includes('pageerror'), out);
  // The example printed the list and opened its first session.
  const listed = await (await fetch(`${server.url}/sessions`, { headers: server.headers })).json();
  const first = out.match(/session (\S+): /)?.[1];
  assert.ok(listed.some((s) => s.id === first), `the example listed the server's sessions:\n${out}`);
  assert.match(out, /row \d+ \w+: /);
  assert.match(out, /\d+ rows, more history: (true|false)/);
  assert.match(out, /\d+ bytes cached/);
  assert.ok(counters.requests > 0 && counters.bytesDownloaded > 0, JSON.stringify(counters));
  // Posted while the agent works, a message is queued first: either way it is in the file.
  const lines = await server.lines(first);
  assert.ok(lines.some((l) => l.event.text === 'Hello from the README'), `the message was posted to ${first}`);
});

test('a server that goes away shows in the banner, and the session comes back live when it returns', async () => {
  // Uses the plain install of the README test, with a page of its own.
  const dir = path.join(tmp, 'plain');
  await fs.writeFile(path.join(dir, 'banner.js'), `
import { Scrollback } from 'scrollback';
const q = new URLSearchParams(location.search);
const sb = await Scrollback.open({ server: q.get('server'), token: q.get('token'), storage: 'memory' });
window.view = await sb.openSession('welcome');
`);
  await fs.writeFile(path.join(dir, 'banner.html'), `<!doctype html><meta charset="utf-8"><title>banner</title>
<script type="importmap">{ "imports": { "scrollback": "/plain/node_modules/scrollback/pkg/index.js" } }</script>
<script type="module" src="/plain/banner.js"></script>
`);
  const { p, log } = await page();
  const q = new URLSearchParams({ server: server.url, token: TOKEN });
  await p.goto(`${site.url}/plain/banner.html?${q}`);
  const state = (check) => p.waitForFunction(check, null, { timeout: 30_000, polling: 50 }).then((h) => h.jsonValue());
  await state(() => window.view?.state?.ready && window.view.state.live && window.view.state);

  const { port, dataDir } = server;
  await server.stop();
  const down = await state(() => window.view.state.banner && window.view.state);
  assert.equal(down.live, false);
  assert.ok(down.rows.length > 0, 'the rows stay on screen');

  server = await startServer({ port, data: dataDir, args: ['--token', TOKEN, '--allow-origin', site.url] });
  const back = await state(() => window.view.state.live && window.view.state.banner === null && window.view.state);
  assert.equal(back.rows.length, down.rows.length);
  assert.ok(!log.some((l) => l.startsWith('pageerror')), log.join('\n'));
  console.log(`banner while the server was down: ${JSON.stringify(down.banner)}`);
});
