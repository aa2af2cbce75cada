// `node tests/bench/opfs-reads.mjs`: what one OPFS read and write cost in a dedicated worker of
// headless Chromium, by the calls they take (the figures the README's search section quotes).
// 64 folders of two 200 kB files; each folder read as a search's first query reads a session (a
// 64 kB header, an 8 kB tail of the other file, two 4 kB runs), all folders at once, three times
// each way: the whole path per read (file handle, `getFile()`, a slice's `arrayBuffer()`), one
// `File` snapshot per file, `getFile()` alone, `FileReaderSync`, four 4 kB reads, one whole-file
// read, and sync access handles; then 2,000 117-byte sync-handle writes appended and rewritten.
// In a fresh on-disk profile; INCOGNITO=1 for an incognito context (OPFS kept in memory).
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from '../lib/browser.mjs';

const WORKER = `
async function reads(N, SIZE) {
  const root = await navigator.storage.getDirectory();
  const top = await root.getDirectoryHandle('reads', { create: true });
  const dirs = [];
  for (let i = 0; i < N; i++) {
    const d = await top.getDirectoryHandle('s' + i, { create: true });
    for (const name of ['a', 'b']) {
      const h = await (await d.getFileHandle(name, { create: true })).createSyncAccessHandle();
      h.truncate(0); h.write(new Uint8Array(SIZE).fill(65 + i % 26), { at: 0 }); h.flush(); h.close();
    }
    dirs.push(d);
  }
  const out = {};
  const time = async (label, fn) => {
    const s = performance.now();
    await Promise.all(dirs.map(fn));
    (out[label] ??= []).push(Math.round(performance.now() - s));
  };
  const whole = async (d, name, at, len) => (await (await d.getFileHandle(name)).getFile()).slice(at, at + len).arrayBuffer();
  const file = async (d, name) => (await d.getFileHandle(name)).getFile();
  for (let rep = 0; rep < 3; rep++) {
    await time('whole path per read, 4 reads', async (d) => { await whole(d, 'a', 0, 65536); await whole(d, 'b', SIZE - 8192, 8192); await whole(d, 'a', 70000, 4096); await whole(d, 'a', 90000, 4096); });
    await time('one File per file, 4 reads', async (d) => { const a = await file(d, 'a'); await a.slice(0, 65536).arrayBuffer(); await (await file(d, 'b')).slice(SIZE - 8192).arrayBuffer(); await a.slice(70000, 74096).arrayBuffer(); await a.slice(90000, 94096).arrayBuffer(); });
    await time('getFile() alone, 4 times', async (d) => { for (const n of ['a', 'b', 'a', 'a']) await file(d, n); });
    await time('FileReaderSync, 4 reads', async (d) => { const r = new FileReaderSync(); const a = await file(d, 'a'); r.readAsArrayBuffer(a.slice(0, 65536)); r.readAsArrayBuffer((await file(d, 'b')).slice(SIZE - 8192)); r.readAsArrayBuffer(a.slice(70000, 74096)); r.readAsArrayBuffer(a.slice(90000, 94096)); });
    await time('four 4 kB reads of one File', async (d) => { const a = await file(d, 'a'); for (const at of [0, 10000, 70000, 90000]) await a.slice(at, at + 4096).arrayBuffer(); });
    await time('one read of the whole 200 kB file', async (d) => { await (await file(d, 'a')).arrayBuffer(); });
    await time('sync handles, 4 reads', async (d) => { const h = await (await d.getFileHandle('a')).createSyncAccessHandle(); const b = new Uint8Array(65536); h.read(b, { at: 0 }); h.read(b.subarray(0, 4096), { at: 70000 }); h.read(b.subarray(0, 4096), { at: 90000 }); h.close(); const hb = await (await d.getFileHandle('b')).createSyncAccessHandle(); hb.read(new Uint8Array(8192), { at: SIZE - 8192 }); hb.close(); });
  }
  await root.removeEntry('reads', { recursive: true });
  return out;
}
async function writes() {
  const root = await navigator.storage.getDirectory();
  const h = await (await root.getFileHandle('writes', { create: true })).createSyncAccessHandle();
  h.truncate(0);
  const line = new Uint8Array(117).fill(66);
  let s = performance.now(); let at = 0;
  for (let i = 0; i < 2000; i++) { h.write(line, { at }); at += line.length; }
  const append = (performance.now() - s) / 2000;
  s = performance.now();
  for (let i = 0; i < 2000; i++) h.write(line, { at: 0 });
  const rewrite = (performance.now() - s) / 2000;
  h.close();
  await root.removeEntry('writes');
  return { 'sync-handle write, appended (ms each)': +append.toFixed(3), 'sync-handle write, rewritten (ms each)': +rewrite.toFixed(3) };
}
onmessage = async () => postMessage({ reads: await reads(64, 200000), writes: await writes() });
`;

const server = http.createServer((req, res) => {
  const js = req.url === '/worker.js';
  res.writeHead(200, { 'content-type': js ? 'text/javascript' : 'text/html' });
  res.end(js ? WORKER : '<!doctype html><title>OPFS reads</title>');
}).listen(0, '127.0.0.1');
const profile = await fs.mkdtemp(path.join(os.tmpdir(), 'scrollback-opfs-reads-'));
const launch = { executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS };
const browser = process.env.INCOGNITO ? await chromium.launch(launch) : await chromium.launchPersistentContext(profile, launch);
try {
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  const out = await page.evaluate(() => new Promise((resolve) => {
    const w = new Worker('/worker.js');
    w.onmessage = (e) => resolve(e.data);
    w.postMessage(null);
  }));
  console.log(`OPFS in ${process.env.INCOGNITO ? 'an incognito context' : 'a fresh on-disk profile'}, 64 folders at once (ms, three runs):`);
  for (const [k, v] of Object.entries(out.reads)) console.log(`  ${k}: ${v.join(' / ')}`);
  for (const [k, v] of Object.entries(out.writes)) console.log(`  ${k}: ${v}`);
} finally {
  await browser.close();
  server.close();
  await fs.rm(profile, { recursive: true, force: true });
}
