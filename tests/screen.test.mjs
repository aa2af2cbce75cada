// The last screens (js/screen.js) are kept per server the way the cache keys its folder: by
// host, port and path prefix. Two servers behind one origin (`https://gw/sandbox`,
// `https://gw/prod`) holding one session id keep two screens; a trailing slash, a query or a
// hash is the same server; a server at the root keeps the localStorage key it always had.
// Plain node, over an in-memory localStorage: no browser, no build.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { lastScreen, saveScreen, forgetScreen } from '../js/screen.js';

/** A `localStorage` as the page has one, in memory. */
class MemoryStorage {
  #items = new Map();
  get length() { return this.#items.size; }
  key(i) { return [...this.#items.keys()][i] ?? null; }
  getItem(k) { return this.#items.has(k) ? this.#items.get(k) : null; }
  setItem(k, v) { this.#items.set(k, String(v)); }
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
  assert.equal(text(lastScreen('http://127.0.0.1:8080', 'a b')), 'root');
  saveScreen('http://127.0.0.1:8080/p', 'a b', shown('a b', 'prefixed'));
  assert.ok(localStorage.keys().includes('scrollback.screen.v1 127.0.0.1:8080/p a b'));
  assert.equal(text(lastScreen('http://127.0.0.1:8080', 'a b')), 'root');
});
