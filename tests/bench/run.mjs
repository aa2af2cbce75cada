// `npm run bench`: Scrollback against what teams write instead, side by side in one run.
// The real server (--sandbox) on loopback, headless Chromium with a fresh on-disk profile per
// contender and session, the bench page tests/bench/www/index.html driving one contender.
// Requests and bytes are counted at the server (GET /stats: API routes only, response bodies as
// sent, compressed; the page's own files and the driver's POST are not counted).
// Each timed step (first visit, reopen and its scroll back, catch-up) runs BENCH_REPEATS times
// (default 3) and its times are the medians.
// Writes tests/out/bench.md, tests/out/bench.json, tests/out/bench.png (and, on a full run, the
// README's chart tests/bench/bench.png); prints the table.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from '../lib/browser.mjs';
import { ROOT, startServer } from '../lib/server.mjs';
import { table, chart } from './report.mjs';

const CONTENDERS = [
  { key: 'nocache', label: 'no cache' },
  { key: 'handwritten', label: 'hand-written cache (one IndexedDB record)' },
  { key: 'scrollback-opfs', label: 'Scrollback, OPFS' },
  { key: 'scrollback-idb', label: 'Scrollback, IndexedDB' },
];
const SESSIONS = process.env.BENCH_SESSIONS?.split(',') ?? ['long', 'fix-build'];
const ONLY = process.env.BENCH_CONTENDERS?.split(',');
const NEW_EVENTS = 300;
// BENCH_SESSIONS, BENCH_CONTENDERS: comma-separated subsets; BENCH_SERVER_LOG=1: print the server's request log.
const SCROLL_CAP_MS = 90_000;
// The emulated slow link (Chromium's Network.emulateNetworkConditions; bytes per second).
const SLOW = { offline: false, latency: 150, downloadThroughput: 1.6e6 / 8, uploadThroughput: 750e3 / 8 };
const SLOW_LINK = process.env.BENCH_SLOW !== '0'; // BENCH_SLOW=0: loopback only
// Runs per timed step (first visit, reopen and its scroll back, catch-up; on the slow link,
// reopen and catch-up): each time figure is their median, with every run kept in bench.json
// (`<figure>Runs`). One run moved by up to ×2 on this shared machine.
const REPEATS = Math.max(1, Number(process.env.BENCH_REPEATS ?? 3));
const API_ROUTES = ['sessions', 'transcript', 'events'];
const OUT = path.join(ROOT, 'tests/out');

const log = (...a) => console.error('[bench]', ...a);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The median of `runs` (the middle one; the lower middle of an even count). */
const median = (runs) => [...runs].sort((a, b) => a - b)[(runs.length - 1) >> 1];

/** Sets `f[key]` to the median of `runs` and keeps them as `f[key + 'Runs']`. */
function medianOf(f, key, runs) {
  f[key] = median(runs);
  f[`${key}Runs`] = runs;
}

/** A browser on a fresh on-disk profile (a user's browser has one), removed by `dispose`. */
async function freshContext() {
  const profile = await fs.mkdtemp(path.join(os.tmpdir(), 'scrollback-bench-profile-'));
  const context = await chromium.launchPersistentContext(profile, { executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
  context.dispose = async () => {
    await context.close();
    await fs.rm(profile, { recursive: true, force: true });
  };
  return context;
}

/** Requests and bytes of the API routes since `before` (a /stats answer). */
function diff(before, after) {
  let requests = 0;
  let bytes = 0;
  for (const r of API_ROUTES) {
    requests += after[r].requests - before[r].requests;
    bytes += after[r].bytes - before[r].bytes;
  }
  return { requests, bytes };
}

/** Waits until the server has sent nothing more for `quietMs` (streams may still be open). */
async function quiet(server, quietMs = 300) {
  const api = (s) => JSON.stringify(API_ROUTES.map((r) => s[r]));
  let last = await server.stats();
  for (let i = 0; i < 100; i++) {
    await sleep(quietMs);
    const now = await server.stats();
    if (api(now) === api(last)) return now;
    last = now;
  }
  return last;
}

/** The session's newest seq and status, from the list. */
async function summary(server, id) {
  const list = await (await fetch(`${server.url}/sessions`)).json();
  return list.find((s) => s.id === id);
}

/**
 * `n` lines a writer appends while the page is closed: the session's own newest lines (cycled
 * when it has fewer), renumbered from `from + 1` with fresh timestamps, so the payload is as
 * compressible as real traffic.
 */
async function newLines(server, id, from, n) {
  const own = (await server.lines(id)).slice(-n);
  const ts = Date.now() / 1000;
  return Array.from({ length: n }, (_, i) => JSON.stringify({
    seq: from + 1 + i, ts: ts + i * 0.01, event: own[i % own.length].event,
  }));
}

/** Throttles `page` (and the dedicated workers it starts, whose requests Chromium counts as the page's). */
async function slowLink(context, page) {
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', SLOW);
}

async function openPage(context, server, key, id, { slow = false } = {}) {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  if (slow) await slowLink(context, page);
  await page.goto(`${server.url}/index.html?c=${key}&id=${encodeURIComponent(id)}&v=${server.pkgVersion}`);
  try {
    const r = await page.evaluate(() => window.bench.open());
    return { page, ...r };
  } catch (e) {
    throw new Error(`${key} ${id}: ${e.message}\n${errors.join('\n')}`);
  }
}

/**
 * Appends 300 new events (as a writer does while the page is closed), opens the page with
 * `open()` and waits until the newest is on screen: the page, with `at`, when (from navigation).
 */
async function catchUp(server, id, open) {
  const before = (await summary(server, id)).seq;
  await server.append(id, await newLines(server, id, before, NEW_EVENTS));
  const p = await open();
  const at = await p.page.evaluate((seq) => window.bench.waitCursor(seq), before + NEW_EVENTS);
  return { ...p, at };
}

/**
 * Waits, before a page of a catch-up run besides the measured one closes, for what the measured
 * run waits for before the next step: the contender settled (Scrollback verified and live) and
 * the server quiet, so that what it fetched is stored and the next run does not fetch it again.
 */
async function finished(server, p) {
  await p.page.evaluate(() => window.bench.timeline());
  await p.page.evaluate(() => window.bench.settled());
  await quiet(server);
}

/** `step()` run `REPEATS - 1` times: the runs of a timed step besides the one measured whole. */
async function moreRuns(step) {
  const out = [];
  for (let i = 1; i < REPEATS; i++) out.push(await step());
  return out;
}

/** Every figure for one contender on one session, in a fresh browser profile. */
async function measure(server, contender, id) {
  const { key } = contender;
  const f = {};
  // The first visits besides the measured one, each in a profile of its own (nothing cached).
  const colds = await moreRuns(async () => {
    const context = await freshContext();
    try {
      const p = await openPage(context, server, key, id);
      await p.page.evaluate(() => window.bench.settled());
      return p;
    } finally {
      await context.dispose();
    }
  });
  const context = await freshContext();
  try {
    // First visit, then scroll back through everything.
    let s0 = await quiet(server);
    let p = await openPage(context, server, key, id);
    medianOf(f, 'coldFirstRowsMs', [...colds, p].map((r) => r.firstRowsMs));
    medianOf(f, 'coldFromOpenMs', [...colds, p].map((r) => r.fromOpenMs));
    f.coldTimeline = await p.page.evaluate(() => window.bench.timeline());
    await p.page.evaluate(() => window.bench.settled());
    let s1 = await quiet(server);
    Object.assign(f, prefix('cold', diff(s0, s1)));
    const back1 = await p.page.evaluate((cap) => window.bench.scrollBack(cap), SCROLL_CAP_MS);
    await p.page.evaluate(() => window.bench.settled());
    let s2 = await quiet(server);
    f.scrollColdMs = back1.ms; f.scrollColdDone = back1.done; f.scrollColdPages = back1.pages;
    Object.assign(f, prefix('scrollCold', diff(s1, s2)));
    await p.page.close();

    // Reopen: nothing changed on the server, then scroll back through everything. The runs
    // besides the measured one come first. (The driver's own GET /sessions stays outside the
    // counted spans.)
    const newest = (await summary(server, id)).seq;
    const reopen = async (p) => {
      await p.page.evaluate((seq) => window.bench.waitCursor(seq), newest);
      await p.page.evaluate(() => window.bench.settled());
    };
    const scrollBack = async (p) => {
      const back = await p.page.evaluate((cap) => window.bench.scrollBack(cap), SCROLL_CAP_MS);
      await p.page.evaluate(() => window.bench.settled());
      return back;
    };
    const reopens = await moreRuns(async () => {
      const q = await openPage(context, server, key, id);
      await reopen(q);
      await quiet(server); // as the measured run waits before its scroll back
      const back = await scrollBack(q);
      await q.page.close();
      return { ...q, back };
    });
    s0 = await quiet(server);
    p = await openPage(context, server, key, id);
    await reopen(p);
    f.timeline = await p.page.evaluate(() => window.bench.timeline());
    s1 = await quiet(server);
    Object.assign(f, prefix('reopen', diff(s0, s1)));
    const back2 = await scrollBack(p);
    s2 = await quiet(server);
    const allReopens = [...reopens, { ...p, back: back2 }];
    medianOf(f, 'reopenFirstRowsMs', allReopens.map((r) => r.firstRowsMs));
    medianOf(f, 'reopenFromOpenMs', allReopens.map((r) => r.fromOpenMs));
    medianOf(f, 'scrollWarmMs', allReopens.map((r) => r.back.ms));
    f.scrollWarmDone = allReopens.every((r) => r.back.done);
    f.scrollWarmPages = back2.pages;
    Object.assign(f, prefix('scrollWarm', diff(s1, s2)));
    await p.page.close();

    // 300 new events while closed, then reopen: until the newest is on screen (the runs
    // besides the measured one first, each with 300 events of its own).
    const catchUps = await moreRuns(async () => {
      const q = await catchUp(server, id, () => openPage(context, server, key, id));
      await finished(server, q);
      await q.page.close();
      return q;
    });
    p = await catchUp(server, id, async () => {
      s0 = await quiet(server);
      return openPage(context, server, key, id);
    });
    medianOf(f, 'catchUpMs', [...catchUps, p].map((r) => r.at));
    f.catchUpTimeline = await p.page.evaluate(() => window.bench.timeline());
    await p.page.evaluate(() => window.bench.settled());
    s1 = await quiet(server);
    Object.assign(f, prefix('catchUp', diff(s0, s1)));

    // A reply streams in with a few rows loaded (Scrollback: at least 20), then again with
    // every row loaded: the bytes of each patch the worker posts, and the main thread's longest
    // task during the second reply (and the writes it causes).
    const rows20 = await p.page.evaluate(() => window.bench.loadRows(20));
    const reply1 = await reply(server, p.page, id);
    f.patchRows20 = rows20;
    Object.assign(f, prefix2('patch20', reply1.patches));
    await p.page.evaluate((cap) => window.bench.scrollBack(cap), SCROLL_CAP_MS);
    await p.page.evaluate(() => window.bench.settled());
    const reply2 = await reply(server, p.page, id);
    f.replyEvents = reply2.events;
    f.patchRowsAll = await p.page.evaluate(() => window.bench.rows());
    Object.assign(f, prefix2('patchAll', reply2.patches));
    f.streamLongestTaskMs = reply2.longest;
    f.streamLongTasks = reply2.count;
    const st = await p.page.evaluate(() => window.bench.storage());
    f.storageEstimate = st.usage;
    f.storageOwn = st.own;
    await p.page.close();
  } finally {
    await context.dispose();
  }
  return f;
}

/** Posts a message and waits for the sandbox's reply on screen; what the page saw meanwhile. */
async function reply(server, page, id) {
  const since = await page.evaluate(() => window.bench.now());
  const res = await fetch(`${server.url}/sessions/${id}/messages`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: 'Summarize the last hour.' }),
  });
  if (!res.ok) throw new Error(`POST messages: ${res.status} ${await res.text()}`);
  const posted = JSON.parse(await res.text()).seq;
  let s;
  for (;;) {
    s = await summary(server, id);
    if (s.status === 'idle' && s.seq > posted + 2) break;
    await sleep(100);
  }
  await page.evaluate((seq) => window.bench.waitCursor(seq), s.seq);
  await page.evaluate(() => window.bench.settled());
  await sleep(300);
  const lt = await page.evaluate((t) => window.bench.longtasks(t), since);
  const patches = await page.evaluate((t) => window.bench.patches(t), since);
  return { events: s.seq - posted, longest: lt.longest, count: lt.count, patches };
}

/** The median and largest patch, in bytes. */
function prefix2(p, sizes) {
  if (!sizes || !sizes.length) return {};
  const sorted = [...sizes].sort((a, b) => a - b);
  return { [`${p}Median`]: sorted[sorted.length >> 1], [`${p}Max`]: sorted[sorted.length - 1], [`${p}Count`]: sizes.length };
}

/**
 * The figures on the emulated slow link, in a fresh profile: first visit, reopen, catch-up after
 * 300 new events. Times are from the app's first call (the contender's `open`).
 */
async function measureSlow(server, contender, id) {
  const context = await freshContext();
  const f = {};
  const { key } = contender;
  const open = (opts) => openPage(context, server, key, id, { slow: true, ...opts });
  try {
    let s0 = await quiet(server);
    let p = await open();
    f.slowColdFirstRowsMs = p.fromOpenMs;
    await p.page.evaluate(() => window.bench.settled());
    let s1 = await quiet(server);
    Object.assign(f, prefix('slowCold', diff(s0, s1)));
    await p.page.close();

    // Reopen and catch-up, the runs besides the measured one first (as on loopback).
    const newest = (await summary(server, id)).seq;
    const reopen = async () => {
      const q = await open();
      await q.page.evaluate((seq) => window.bench.waitCursor(seq), newest);
      await q.page.evaluate(() => window.bench.settled());
      return q;
    };
    const reopens = await moreRuns(async () => {
      const q = await reopen();
      await q.page.close();
      return q;
    });
    s0 = await quiet(server);
    p = await reopen();
    medianOf(f, 'slowReopenFirstRowsMs', [...reopens, p].map((r) => r.fromOpenMs));
    f.slowTimeline = await p.page.evaluate(() => window.bench.timeline());
    s1 = await quiet(server);
    Object.assign(f, prefix('slowReopen', diff(s0, s1)));
    await p.page.close();

    const catchUps = await moreRuns(async () => {
      const q = await catchUp(server, id, open);
      await finished(server, q);
      await q.page.close();
      return q;
    });
    p = await catchUp(server, id, async () => {
      s0 = await quiet(server);
      return open();
    });
    medianOf(f, 'slowCatchUpMs', [...catchUps, p].map((r) => r.at - r.openAt));
    await p.page.evaluate(() => window.bench.settled());
    s1 = await quiet(server);
    Object.assign(f, prefix('slowCatchUp', diff(s0, s1)));
    await p.page.close();
  } finally {
    await context.dispose();
  }
  return f;
}

/** A dedicated worker's request time, on loopback and on the slow link: the link must slow it. */
async function workerThrottleCheck(server) {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
  try {
    const context = await browser.newContext();
    const time = async (slow) => {
      const page = await context.newPage();
      if (slow) await slowLink(context, page);
      await page.goto(`${server.url}/index.html`);
      const ms = await page.evaluate(() => window.bench.workerFetchMs());
      await page.close();
      return ms;
    };
    return { loopbackMs: await time(false), slowMs: await time(true) };
  } finally {
    await browser.close();
  }
}

function prefix(p, { requests, bytes }) {
  return { [`${p}Requests`]: requests, [`${p}Bytes`]: bytes };
}

async function sizes() {
  const files = ['pkg/scrollback_bg.wasm', 'pkg/scrollback.js', 'pkg/scrollback_screen_bg.wasm', 'pkg/scrollback_screen.js', 'pkg/index.js', 'pkg/screen.js', 'pkg/worker.js', 'tests/bench/www/handwritten.js'];
  const out = [];
  for (const f of files) {
    const buf = await fs.readFile(path.join(ROOT, f)).catch(() => null);
    if (!buf) { log(`${f} is missing: run scripts/wasm.sh build`); continue; }
    out.push({ file: f, raw: buf.length, gzip: gzipSync(buf, { level: 9 }).length });
  }
  return out;
}

async function main() {
  const started = Date.now();
  const load = os.loadavg()[0];
  await fs.mkdir(OUT, { recursive: true });
  const results = {};
  let throttle = null;
  for (const contender of CONTENDERS.filter((c) => !ONLY || ONLY.includes(c.key))) {
    // A fresh server (and freshly seeded data) per contender: every one starts from the same files.
    const t0 = Date.now();
    const server = await startServer({ www: path.join(ROOT, 'tests/bench/www') });
    server.pkgVersion = (await (await fetch(`${server.url}/pkg/version`)).text()).trim();
    if (SLOW_LINK && !throttle) {
      throttle = await workerThrottleCheck(server);
      log(`a worker's request: ${throttle.loopbackMs.toFixed(0)} ms on loopback, ${throttle.slowMs.toFixed(0)} ms on the slow link`);
      if (!(throttle.slowMs >= SLOW.latency)) throw new Error('the slow link does not throttle the worker\'s requests');
    }
    log(`server for ${contender.label}: seeded and listening in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    try {
      for (const id of SESSIONS) {
        const t = Date.now();
        const events = (await summary(server, id)).seq;
        (results[id] ??= { events, bytes: (await fs.stat(server.transcriptPath(id))).size, by: {} });
        results[id].by[contender.key] = await measure(server, contender, id);
        if (SLOW_LINK) Object.assign(results[id].by[contender.key], await measureSlow(server, contender, id));
        log(`${contender.label} on ${id}: ${((Date.now() - t) / 1000).toFixed(1)} s`, JSON.stringify(results[id].by[contender.key]));
      }
    } finally {
      if (process.env.BENCH_SERVER_LOG) console.error(server.log()); // each request: method, path, status, bytes
      await server.dispose();
    }
  }
  const meta = {
    date: new Date().toISOString(),
    load: Math.max(load, os.loadavg()[0]),
    machine: `${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.type()} ${os.release()}`,
    chromium: await (async () => { const b = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS }); const v = b.version(); await b.close(); return v; })(),
    sizes: await sizes(),
    contenders: CONTENDERS.filter((c) => !ONLY || ONLY.includes(c.key)),
    slow: SLOW_LINK ? { ...SLOW, worker: throttle } : null,
    seconds: (Date.now() - started) / 1000,
    repeats: REPEATS,
  };
  await fs.writeFile(path.join(OUT, 'bench.json'), JSON.stringify({ meta, results }, null, 2));
  const md = table(meta, results);
  await fs.writeFile(path.join(OUT, 'bench.md'), md);
  const svg = chart(meta, results);
  await fs.writeFile(path.join(OUT, 'bench.svg'), svg);
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
  try {
    const page = await browser.newPage({ viewport: { width: 900, height: 100 } });
    await page.setContent(`<body style="margin:0;background:#fff">${svg}</body>`);
    const png = await page.locator('svg').screenshot();
    await fs.writeFile(path.join(OUT, 'bench.png'), png);
    // The README's chart is replaced by full runs only, never by a subset.
    if (!ONLY && !process.env.BENCH_SESSIONS) await fs.writeFile(path.join(ROOT, 'tests/bench/bench.png'), png);
  } finally {
    await browser.close();
  }
  console.log(md);
  log(`done in ${((Date.now() - started) / 1000).toFixed(0)} s: tests/out/bench.md, tests/out/bench.json, tests/bench/bench.png`);
}

main().catch((e) => { console.error(e); process.exit(1); });
