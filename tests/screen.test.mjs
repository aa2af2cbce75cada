// The last screens (js/screen.js) are kept per server the way the cache keys its folder: by
// host, port and path prefix. Two servers behind one origin (`https://gw/sandbox`,
// `https://gw/prod`) holding one session id keep two screens; a trailing slash, a query or a
// hash is the same server; a server at the root keeps the localStorage key it always had;
// `http://` and `https://` on their default ports are two servers. The screens kept leave
// the app's own localStorage most of its room, and a full one drops the least recently saved.
// Plain node, over an in-memory localStorage (with a quota where a test says so), and the
// same in the real localStorage of a browser: no build.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { lastScreen, saveScreen, forgetScreen } from '../js/screen.js';
import { launch, ENGINE } from './lib/engines.mjs';
import { serveStatic } from './lib/static.mjs';
import { ROOT } from './lib/server.mjs';

/**
 * A `localStorage` as the page has one, in memory: it throws as a browser does once its keys
 * and values would pass `quota` characters.
 */
class MemoryStorage {
  #items = new Map();
  constructor(quota = Infinity) { this.quota = quota; }
  get length() { return this.#items.size; }
  get chars() { return [...this.#items].reduce((n, [k, v]) => n + k.length + v.length, 0); }
  key(i) { return [...this.#items.keys()][i] ?? null; }
  getItem(k) { return this.#items.has(k) ? this.#items.get(k) : null; }
  setItem(k, v) {
    const was = this.#items.get(k);
    const grows = k.length + String(v).length - (was === undefined ? 0 : k.length + was.length);
    if (this.chars + grows > this.quota) {
      throw Object.assign(new Error('the quota has been exceeded'), { name: 'QuotaExceededError' });
    }
    this.#items.set(k, String(v));
  }
  removeItem(k) { this.#items.delete(k); }
  clear() { this.#items.clear(); }
  keys() { return [...this.#items.keys()]; }
}

beforeEach(() => { globalThis.localStorage = new MemoryStorage(); });

/** A drawn session state whose one row says `text`. */
function shown(id, text) {
  return { ready: true, id, cursor: 7, rows: [{ seq: 7, key: 'r7', kind: 'assistant', text }] };
}

const text = (screen) => screen?.rows[0].text ?? null;

test('two path prefixes of one origin keep two last screens of one session id', () => {
  saveScreen('https://gw.example.com/sandbox', 'shared', shown('shared', 'from the sandbox'));
  saveScreen('https://gw.example.com/prod', 'shared', shown('shared', 'from prod'));
  assert.equal(text(lastScreen('https://gw.example.com/sandbox', 'shared')), 'from the sandbox');
  assert.equal(text(lastScreen('https://gw.example.com/prod', 'shared')), 'from prod');
  assert.equal(lastScreen('https://gw.example.com', 'shared'), null, 'the root is a third server');

  forgetScreen('https://gw.example.com/prod', 'shared');
  assert.equal(lastScreen('https://gw.example.com/prod', 'shared'), null);
  assert.equal(text(lastScreen('https://gw.example.com/sandbox', 'shared')), 'from the sandbox',
    'forgetting one server\'s screen leaves the other\'s');
});

test('a trailing slash, a query or a hash is the same server', () => {
  saveScreen('https://gw.example.com/sandbox/', 'a', shown('a', 'one'));
  for (const same of ['https://gw.example.com/sandbox', 'https://gw.example.com/sandbox//?x=1#y',
    'https://GW.example.com:443/sandbox']) {
    assert.equal(text(lastScreen(same, 'a')), 'one', same);
  }
  assert.equal(lastScreen('https://gw.example.com/Sandbox', 'a'), null, 'paths are case-sensitive');
  assert.equal(lastScreen('https://gw.example.com:8443/sandbox', 'a'), null, 'another port');
});

test('a server at the root of its origin keeps the key it always had', () => {
  saveScreen('http://127.0.0.1:8080/', 'a b', shown('a b', 'root'));
  assert.deepEqual(localStorage.keys().filter((k) => k !== 'scrollback.screens.v1'),
    ['scrollback.screen.v1 127.0.0.1:8080 a b']);
  saveScreen('https://gw.example.com', 'c', shown('c', 'https'));
  assert.ok(localStorage.keys().includes('scrollback.screen.v1 gw.example.com:443 c'),
    'the default port is in the key');
  assert.equal(text(lastScreen('http://127.0.0.1:8080', 'a b')), 'root');
  saveScreen('http://127.0.0.1:8080/p', 'a b', shown('a b', 'prefixed'));
  assert.ok(localStorage.keys().includes('scrollback.screen.v1 127.0.0.1:8080/p a b'));
  assert.equal(text(lastScreen('http://127.0.0.1:8080', 'a b')), 'root');
});

test('http and https on their default ports are two servers', () => {
  saveScreen('https://gw.example.com/', 'a', shown('a', 'secure'));
  saveScreen('http://gw.example.com/', 'a', shown('a', 'plain'));
  assert.equal(text(lastScreen('https://gw.example.com', 'a')), 'secure');
  assert.equal(text(lastScreen('http://gw.example.com:80', 'a')), 'plain');
});

/**
 * A drawn state of session `id` whose 60 rows are tool calls with `output` characters of output
 * each (a file read, a diff): its screen is about 60 times that.
 */
function toolCalls(id, output) {
  return {
    ready: true, id, cursor: 120, cursorFingerprint: 'f', moreHistory: true, status: 'idle',
    rows: Array.from({ length: 60 }, (_, i) => ({
      kind: 'tool', seq: 61 + i, ts: 1.5, id: `t${i}`, name: 'read', input: {},
      result: { seq: 61 + i, ts: 1.5, output: `${id} `.padEnd(output, 'x'), isError: false },
    })),
  };
}

const SERVER = 'https://chat.example.com';
const kept = (n) => Array.from({ length: n }, (_, i) => Number(lastScreen(SERVER, `s${i}`) !== null)).join('');

test('the screens kept leave the app most of localStorage: at most a mebicharacter in all', () => {
  globalThis.localStorage = new MemoryStorage(5 * 1024 * 1024);
  for (let i = 0; i < 20; i += 1) saveScreen(SERVER, `s${i}`, toolCalls(`s${i}`, 4200));
  const screens = localStorage.keys().filter((k) => k.startsWith('scrollback.screen.v1 '));
  const chars = screens.reduce((n, k) => n + localStorage.getItem(k).length, 0);
  assert.ok(chars <= 1024 * 1024, `${screens.length} screens of ${chars} characters`);
  assert.equal(kept(20), '0'.repeat(16) + '1111', 'the least recently saved went first');
  localStorage.setItem('app.draft', 'a draft the user is typing'.repeat(4000)); // the app's own 100 kB
});

test('a localStorage the app has filled drops the least recently saved screens, not the one saved', () => {
  globalThis.localStorage = new MemoryStorage(1024 * 1024);
  localStorage.setItem('app.store', 'y'.repeat(600_000)); // the app's own data
  for (let i = 0; i < 5; i += 1) saveScreen(SERVER, `s${i}`, toolCalls(`s${i}`, 3000));
  assert.equal(kept(5), '00011', 'the newest two fit beside the app\'s data');
  assert.equal(localStorage.getItem('app.store').length, 600_000, 'the app\'s own data is untouched');
  // Too large to fit beside the app's data even alone: not kept, and nothing thrown.
  globalThis.localStorage = new MemoryStorage(1024 * 1024);
  localStorage.setItem('app.store', 'y'.repeat(900_000));
  saveScreen(SERVER, 's9', toolCalls('s9', 3000));
  assert.equal(lastScreen(SERVER, 's9'), null);
  assert.equal(localStorage.getItem('app.store').length, 900_000);
});

test('an index an older build wrote (the times alone) is read, its screens measured', () => {
  const older = 'scrollback.screen.v1 chat.example.com:443 old';
  saveScreen(SERVER, 'old', toolCalls('old', 4200));
  const json = localStorage.getItem(older);
  localStorage.setItem('scrollback.screens.v1', JSON.stringify({ [older]: 1 }));
  for (let i = 0; i < 4; i += 1) saveScreen(SERVER, `s${i}`, toolCalls(`s${i}`, 4200));
  assert.equal(localStorage.getItem(older), null, `the oldest (${json.length} characters) went to keep the total`);
  assert.equal(kept(4), '1111');
});

test(`${ENGINE}: in a browser's own localStorage, twenty large screens leave the app room to write`, async (t) => {
  const files = await serveStatic(ROOT);
  const browser = await launch();
  t.after(async () => { await browser.close(); await files.close(); });
  await browser.goto(`${files.url}/tests/lib/blank.html`);
  const out = await browser.run(async () => {
    localStorage.clear();
    const { saveScreen: save, lastScreen: last } = await import('/js/screen.js');
    const state = (id) => ({
      ready: true, id, cursor: 120, cursorFingerprint: 'f', moreHistory: true, status: 'idle',
      rows: Array.from({ length: 60 }, (_, i) => ({
        kind: 'tool', seq: 61 + i, ts: 1.5, id: `t${i}`, name: 'read', input: {},
        result: { seq: 61 + i, ts: 1.5, output: `${id} `.padEnd(4236, 'x'), isError: false },
      })),
    });
    for (let i = 0; i < 20; i += 1) save('https://chat.example.com', `s${i}`, state(`s${i}`));
    let write = 'ok';
    try {
      localStorage.setItem('app.draft', 'a draft the user is typing'.repeat(40_000)); // 1 MB
    } catch (e) {
      write = e.name;
    }
    const newest = last('https://chat.example.com', 's19') !== null;
    localStorage.clear();
    return { write, newest };
  });
  assert.deepEqual(out, { write: 'ok', newest: true });
});

test('a refused token keeps the last screen (the cache is kept too); a session gone forgets it', () => {
  saveScreen(SERVER, 'a', shown('a', 'kept'));
  const stopped = (kind) => ({ ...shown('a', 'kept'), error: { kind, status: kind === 'gone' ? 404 : 401, message: kind } });
  saveScreen(SERVER, 'a', stopped('unauthorized'));
  assert.equal(text(lastScreen(SERVER, 'a')), 'kept');
  saveScreen(SERVER, 'a', stopped('gone'));
  assert.equal(lastScreen(SERVER, 'a'), null);
});

test('a view whose cache stopped writing saves no screen past it', () => {
  saveScreen(SERVER, 'a', shown('a', 'cached'));
  saveScreen(SERVER, 'a', { ...shown('a', 'not cached'), cursor: 9, storageError: 'storage quota exceeded' });
  assert.equal(text(lastScreen(SERVER, 'a')), 'cached');
});
