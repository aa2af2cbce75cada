// The Tauri example (examples/tauri) on Linux, driven through WebKitWebDriver (what
// `tauri-driver` wraps) in a virtual display: the app's window opens, its webview follows a
// session of the real server through the npm package and draws it; the app is quit and launched
// again, and the second launch draws the same rows from its on-disk IndexedDB cache (the server
// confirms them with one probe, and less is downloaded); the app's own chat is read (tail, an
// older page) and patched through the Rust commands, the file on disk checked byte for byte. Named .e2e.mjs so that the js layer's `node --test tests/` leaves it
// to the tauri layer, which runs it under xvfb-run.
//
// Needs: the app built (`cargo build` in examples/tauri, after scripts/wasm.sh build),
// WebKitWebDriver (webkit2gtk-driver) and a display (scripts/test.sh runs it under xvfb-run).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ROOT, startServer, freePort } from './lib/server.mjs';

const APP = path.join(ROOT, 'examples/tauri/target/debug/scrollback-tauri-example');
const DEADLINE_MS = 120_000;

let server, driver, driverUrl, home, sessionId;
// The driver's stderr (the app's own output goes there too), its last 5,000 characters.
let driverLog = '';

// The steps taken so far, each with its time since the start: a failure names the step it
// was in (a call that never answers fails at DEADLINE_MS, and says which one it was).
const started = Date.now();
const steps = [];
const step = (name) => steps.push(`${((Date.now() - started) / 1000).toFixed(1)} s: ${name}`);
const where = () => `\nsteps so far:\n  ${steps.join('\n  ')}\nWebKitWebDriver's stderr (last 5,000 characters):\n${driverLog}`;

const note = (i) => JSON.stringify({ mes: `note ${i}` });
const HEADER = JSON.stringify({ chat_metadata: { integrity: 'notes' } });

/** One WebDriver call; rejects with the driver's error, or its own, naming the call. */
async function wd(method, url, body) {
  let json;
  let ok;
  try {
    const res = await fetch(`${driverUrl}${url}`, {
      method,
      headers: { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(DEADLINE_MS),
    });
    ok = res.ok;
    json = await res.json();
  } catch (e) {
    throw new Error(`WebDriver ${method} ${url}: ${e.message}`);
  }
  if (!ok) throw new Error(`WebDriver ${method} ${url}: ${JSON.stringify(json.value)}`);
  return json.value;
}

/** Runs `body` (an async function's body, with `app` = window.app) in the app's webview. */
function inApp(body, ...args) {
  const script = `const done = arguments[arguments.length - 1];
    (async (app, ...args) => { ${body} })(window.app, ...Array.from(arguments).slice(0, -1))
      .then((value) => done({ value }), (e) => done({ error: String(e?.message ?? JSON.stringify(e)) }));`;
  return wd('POST', `/session/${sessionId}/execute/async`, { script, args }).then((r) => {
    if (r?.error) throw new Error(`in the app: ${r.error}`);
    return r?.value;
  });
}

/** Waits until the page has `window.app` with its two start-up promises. */
async function appReady() {
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    const ok = await wd('POST', `/session/${sessionId}/execute/sync`, {
      script: 'return !!(window.app && window.app.session && window.app.notes) || (window.app?.error ?? false);', args: [],
    }).catch(() => false);
    if (ok === true) return;
    if (typeof ok === 'string') throw new Error(ok);
    if (Date.now() > deadline) throw new Error('the app did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
}

before(async () => {
  assert.ok(existsSync(APP), `${APP} is missing: build it (cd examples/tauri && cargo build)`);
  home = await fs.mkdtemp(path.join(os.tmpdir(), 'scrollback-tauri-'));
  // The app's own chat, 60 notes, as an earlier run of the app would have left it.
  const chatsDir = path.join(home, 'chats-data');
  await fs.mkdir(path.join(chatsDir, 'chats'), { recursive: true });
  await fs.writeFile(path.join(chatsDir, 'chats/notes.jsonl'),
    [HEADER, ...Array.from({ length: 60 }, (_, i) => note(i))].join('\n') + '\n');
  server = await startServer({ args: ['--allow-origin', 'tauri://localhost'] });
  const port = await freePort();
  driverUrl = `http://127.0.0.1:${port}`;
  driver = spawn('WebKitWebDriver', [`--port=${port}`, '--host=127.0.0.1'], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: {
      ...process.env,
      TAURI_WEBVIEW_AUTOMATION: 'true',
      SCROLLBACK_SERVER: server.url,
      SCROLLBACK_CHATS_DIR: chatsDir,
      // The webview's storage (IndexedDB) in a fresh folder.
      HOME: home, XDG_DATA_HOME: path.join(home, 'data'), XDG_CACHE_HOME: path.join(home, 'cache'),
      XDG_CONFIG_HOME: path.join(home, 'config'),
    },
  });
  driver.stderr.on('data', (c) => { driverLog = (driverLog + c).slice(-5000); });
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    try { if ((await (await fetch(`${driverUrl}/status`)).json()).value.ready) break; } catch { /* starting */ }
    if (driver.exitCode !== null || Date.now() > deadline) throw new Error(`WebKitWebDriver did not start: ${driverLog}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  step('WebKitWebDriver ready');
});

/** Launches the app (a WebDriver session whose browser is the app's binary) and waits for its page. */
async function launch() {
  step('launching the app (a new WebDriver session)');
  const session = await wd('POST', '/session', {
    capabilities: { alwaysMatch: { 'webkitgtk:browserOptions': { binary: APP, args: [] }, timeouts: { script: DEADLINE_MS - 10_000 } } },
  });
  sessionId = session.sessionId;
  step('the app runs; waiting for its page to start');
  await appReady();
  step('the app\'s page started');
}

/** The live app processes WebKitWebDriver started (its children, or orphans, running APP). */
async function appPids() {
  const pids = [];
  for (const pid of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const exe = await fs.readlink(`/proc/${pid}/exe`).catch(() => null);
    const state = (await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '')).split(') ')[1]?.[0];
    const env = exe === APP && state && state !== 'Z'
      ? await fs.readFile(`/proc/${pid}/environ`, 'utf8').catch(() => '') : '';
    if (env.split('\0').includes(`HOME=${home}`)) pids.push(Number(pid));
  }
  return pids;
}

/**
 * Quits the app: the WebDriver session ends, and the test waits until the app's process is gone
 * (WebKitWebDriver closes its window; under load it may leave the process running, which is then
 * terminated), so the next launch is a new process reading the cache from disk.
 */
async function quit() {
  const id = sessionId;
  sessionId = null;
  assert.equal((await appPids()).length, 1, 'the app runs, as one process');
  step('quitting the app (the WebDriver session ends)');
  await wd('DELETE', `/session/${id}`);
  step('session ended; waiting for the app\'s process to exit');
  const deadline = Date.now() + 30_000;
  for (let pids = await appPids(); pids.length > 0; pids = await appPids()) {
    if (Date.now() > deadline) for (const pid of pids) process.kill(pid, 'SIGTERM');
    await new Promise((r) => setTimeout(r, 100));
  }
  step('the app\'s process exited');
}

after(async () => {
  if (sessionId) await quit().catch(() => {});
  driver?.kill();
  // (an app left running would keep the driver's stderr pipe, and this process, open)
  if (home) for (const pid of await appPids()) process.kill(pid, 'SIGKILL');
  await server?.dispose();
  if (home) await fs.rm(home, { recursive: true, force: true });
});

test('the Tauri app follows a session from the server, then from its cache, and edits a local chat through its commands', async () => {
  try {
    await scenario();
  } catch (e) {
    e.message += where();
    throw e;
  }
});

async function scenario() {
  await launch();
  // The session, drawn from the server (a cold cache: nothing to probe).
  const drawn = `await app.session;
    return { rows: app.view.state.rows.length, text: document.getElementById('rows').textContent,
      counters: await app.sb.counters(), storage: app.sb.storage, cached: await app.view.cachedSize() };`;
  step('waiting for the session drawn from the server');
  const first = await inApp(drawn);
  assert.ok(first.rows > 0, 'rows were drawn');
  assert.ok(first.text.length > 0);
  assert.equal(first.storage, 'indexeddb');
  assert.equal(first.counters.probesPassed, 0, 'the first open had no cache');
  assert.ok(first.counters.bytesDownloaded > 0);
  assert.ok(first.cached > 0, 'the session is in the cache');

  // Quit and launched again: the session opens from the webview's on-disk cache, confirmed by a
  // probe.
  await quit();
  // (WebKitGTK keeps the webview's IndexedDB under the app's data folder, by its identifier.)
  const idb = path.join(home, 'data/dev.scrollback.example/databases/indexeddb/v1/tauri_localhost_0');
  assert.ok((await fs.readdir(idb)).length > 0, `the cache is on disk in ${idb}`);
  await launch();
  step('waiting for the session drawn from the cache');
  const second = await inApp(drawn);
  assert.equal(second.counters.probesPassed, 1, `the cache was confirmed by the server: ${JSON.stringify(second.counters)}`);
  assert.equal(second.counters.probesFailed, 0);
  assert.equal(second.text, first.text, 'the same rows, drawn from the cache');
  assert.ok(second.counters.bytesDownloaded < first.counters.bytesDownloaded,
    `less was downloaded: ${second.counters.bytesDownloaded} < ${first.counters.bytesDownloaded}`);

  // The local chat through the commands: the tail (50 of 60), an older page, a patch each way.
  step('reading and patching the local chat');
  const notes = await inApp(`await app.notes;
    const tail = { lines: app.lines.length, first: app.lines[0], more: app.window.hasMoreBefore };
    const older = await app.showOlder();
    const added = await app.addNote('added in the app');
    const edited = await app.editNote(3, 'edited in the app');
    const prompt = await app.promptHistory(1e6);
    return { tail, older, added, edited, lines: app.lines, prompt };`);
  assert.deepEqual(notes.tail, { lines: 50, first: note(10), more: true });
  assert.equal(notes.older, 10);
  assert.deepEqual(notes.added.op, { append: [JSON.stringify({ mes: 'added in the app' })] });
  assert.deepEqual(notes.edited.op, {
    rewriteFromIndex: 3,
    lines: [JSON.stringify({ mes: 'edited in the app' }), ...notes.lines.slice(4)],
  });
  assert.equal(notes.prompt.stop, 'startOfChat');
  assert.deepEqual(notes.prompt.older, [], 'the whole chat is in the window');

  const expected = [HEADER, ...Array.from({ length: 60 }, (_, i) => note(i)), JSON.stringify({ mes: 'added in the app' })];
  expected[1 + 3] = JSON.stringify({ mes: 'edited in the app' });
  const onDisk = await fs.readFile(path.join(home, 'chats-data/chats/notes.jsonl'), 'utf8');
  assert.equal(onDisk, expected.join('\n') + '\n', 'the file the Rust side wrote');
}
