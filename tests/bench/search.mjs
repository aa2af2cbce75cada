// `npm run bench:search`: the search index's costs in headless Chromium, OPFS and IndexedDB,
// with the real server (--sandbox) and the real package.
//
// Per storage, in a fresh browser profile on disk (as a user's browser has it: an incognito
// context keeps OPFS and IndexedDB in memory, where an OPFS write costs a round trip to the
// browser process, about 15x an on-disk one here):
// 1. the sandbox sessions are cached as a reader does: opened, then paged back to their start;
// 2. the append rate with the index and without it: BENCH_APPEND_MB (default 16) of generated
//    lines appended one per append (as streamed events arrive), alternating with and without
//    the index every 1 MB, each megabyte timed until it is stored (IndexedDB's buffered
//    appends committed);
// 3. the generated set: BENCH_SEARCH_MB (default 200) over 50 sessions, appended in runs of
//    1000 lines with the index (budgetBytes raised so nothing is evicted);
// 4. the first query of a worker that starts before any search segment is built (it loads
//    every index blob), then the segments built (`warmSearch()`, what a worker does in idle
//    time after it opens; the worker that cached the set builds what it wrote every minute);
// 5. the index's share of the cached bytes (blobs and segments);
// 6. queries for the first 20 results: 1, 2 and 3 words and a two-word phrase, at fixed
//    document frequencies (words at Zipf ranks 15000 / 300 / 1: rare, medium, common). The first
//    query after the worker starts (a new Scrollback, the page reloaded) is reported apart from
//    the later ones (median of 5). The first query is measured twice: right after the start
//    (it reads the segments' headers itself) and after `warmSearch()` (what the worker does by
//    itself in idle time after it opens), with how long that warm-up took from the open, each
//    over BENCH_STARTS starts (default 3: the median, and the range); and a query typed during a
//    warm-up (60% of the way through one as long as the last).
// Prints a table and writes tests/out/search-bench.json.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from '../lib/browser.mjs';
import { ROOT, startServer } from '../lib/server.mjs';

const MB = Number(process.env.BENCH_SEARCH_MB ?? 200);
const SESSIONS = Number(process.env.BENCH_SEARCH_SESSIONS ?? 50);
const APPEND_MB = Number(process.env.BENCH_APPEND_MB ?? 16);
const STORAGES = process.env.BENCH_STORAGES?.split(',') ?? ['opfs', 'indexeddb'];
// Starts per "first query" figure (the median is reported, with the range).
const STARTS = Number(process.env.BENCH_STARTS ?? 3);
const OUT = path.join(ROOT, 'tests/out');
const log = (...a) => console.error('[bench:search]', ...a);

// The generator, run in the page: seeded, words drawn from a Zipf law (s = 1) over 20,000
// ranks, `w<rank>x`; a session is a user message of 12 words then a reply of 20 deltas of 4
// words, repeated. The same shape as `cargo run --example search_bench`.
const GENERATOR = `
  const VOCAB = 20000;
  const cdf = new Float64Array(VOCAB);
  { let sum = 0; for (let r = 1; r <= VOCAB; r++) { sum += 1 / r; cdf[r - 1] = sum; } for (let i = 0; i < VOCAB; i++) cdf[i] /= sum; }
  let state = 0x9e3779b97f4a7c15n;
  const random = () => { state ^= state << 13n; state &= 0xffffffffffffffffn; state ^= state >> 7n; state ^= state << 17n; state &= 0xffffffffffffffffn; return Number(state >> 11n) / 2 ** 53; };
  const rank = () => { const x = random(); let lo = 0, hi = VOCAB - 1; while (lo < hi) { const m = (lo + hi) >> 1; if (cdf[m] < x) lo = m + 1; else hi = m; } return lo; };
  const text = (n) => { const w = []; for (let i = 0; i < n; i++) w.push('w' + rank() + 'x'); return w.join(' '); };
  /** One session of about \`bytes\` of JSONL, as an array of strings of about 1 MB each. */
  window.generate = (bytes) => {
    const parts = []; let part = []; let size = 0; let partSize = 0; let seq = 0;
    const push = (event) => {
      seq += 1;
      const line = JSON.stringify({ seq, ts: 1700000000 + seq, event });
      part.push(line); size += line.length + 1; partSize += line.length + 1;
      if (partSize > 1e6) { parts.push(part.join('\\n')); part = []; partSize = 0; }
    };
    while (size < bytes) {
      push({ type: 'userMessage', text: text(12) });
      const id = 'm' + (seq + 1);
      for (let i = 0; i < 20; i++) push({ type: 'assistantText', text: text(4) + ' ', messageId: id });
    }
    if (part.length) parts.push(part.join('\\n'));
    return { parts, size, lines: seq };
  };
`;

const word = (rank) => `w${rank}x`;
const FREQUENCIES = { rare: [15000, 15001, 15002], medium: [300, 301, 302], common: [1, 2, 3] };
const queries = (kind) => {
  const [a, b, c] = FREQUENCIES[kind].map(word);
  return { '1 word': `${a} `, '2 words': `${a} ${b} `, '3 words': `${a} ${b} ${c} `, phrase: `"${a} ${b}"` };
};

/** Opens Scrollback on the page (a new worker), with a budget nothing reaches. */
async function openScrollback(page, storage) {
  await page.evaluate(async (storage) => {
    window.sb?.close();
    const { Scrollback } = await import('/pkg/index.js');
    window.sb = await Scrollback.open({ server: location.origin, storage, budgetBytes: 2 ** 50 });
  }, storage);
}

/** Times `query` (the first 20 results) from the page: ms and the number of hits. */
const timeQuery = (page, q) => page.evaluate(async (q) => {
  const t = performance.now();
  const hits = await window.sb.search(q, { limit: 20 });
  return { ms: performance.now() - t, hits: hits.length };
}, q);

async function benchStorage(server, storage) {
  const profile = await fs.mkdtemp(path.join(os.tmpdir(), 'scrollback-search-profile-'));
  const context = await chromium.launchPersistentContext(profile, { executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
  try {
    return await benchIn(context, server, storage);
  } finally {
    await context.close();
    await fs.rm(profile, { recursive: true, force: true });
  }
}

async function benchIn(context, server, storage) {
  const page = await context.newPage();
  page.on('pageerror', (e) => log('page error:', e.message));
  await page.goto(`${server.url}/pkg/index.js`);
  await page.addScriptTag({ content: GENERATOR });
  await openScrollback(page, storage);
  const out = { storage };

  // 1. The sandbox sessions, cached as a reader caches them.
  let t = Date.now();
  out.sandbox = await page.evaluate(async () => {
    const list = await window.sb.sessions();
    for (const s of list) {
      const view = await window.sb.openSession(s.id);
      while (!view.state.live) await new Promise((r) => setTimeout(r, 20));
      while (await view.loadOlder()) { /* one page each, to the start */ }
      view.close();
    }
    return { sessions: list.map((s) => s.id), ...(await window.sb._bench('sizes')) };
  });
  out.sandbox.seconds = (Date.now() - t) / 1000;
  log(storage, `sandbox cached: ${(out.sandbox.cached / 1e6).toFixed(1)} MB in ${out.sandbox.seconds} s`);

  // 2. The append rate, one line per append, with and without the index (alternating), once
  //    the worker's warm-up is over (1.5 s after it opens, it builds segments and the server's
  //    pack: once, not in either half of the comparison).
  out.append = await page.evaluate(async (mb) => {
    await window.sb.warmSearch();
    const indexBefore = (await window.sb._bench('sizes')).index;
    const n = 4;
    const times = { plain: 0, indexed: 0 };
    let bytes = 0; let lines = 0;
    for (let i = 0; i < n; i++) {
      const s = window.generate(mb * 1e6 / n);
      bytes += s.size; lines += s.lines;
      // Alternating per 1 MB part, each pair in the other order from the one before: a few
      // seconds of load from elsewhere on the machine fall on both halves alike (alternating
      // per 4 MB session, the ratio moved between 0.57 and 1.19 from run to run).
      for (const [p, part] of s.parts.entries()) {
        const order = (i + p) % 2 ? ['indexed', 'plain'] : ['plain', 'indexed'];
        for (const kind of order) times[kind] += await window.sb._bench('append', `append-${kind}-${i}`, part, 1, kind === 'indexed');
      }
    }
    const indexGrew = (await window.sb._bench('sizes')).index - indexBefore;
    return { bytes, lines, plainMs: times.plain, indexedMs: times.indexed, indexGrew };
  }, APPEND_MB);
  const a = out.append;
  // The indexed sessions wrote their rows (the index grew by 39-51% of the lines' bytes in
  // the runs here): an index that stopped (a failed write stops it until the next open) would
  // make the indexed appends look as fast as the plain ones.
  if (a.indexGrew < 0.15 * a.bytes) {
    throw new Error(`${storage}: the index grew by ${a.indexGrew} bytes for ${a.bytes} bytes of indexed lines: it stopped, and the ratio would not measure it`);
  }
  a.plainMBs = a.bytes / 1e3 / a.plainMs;
  a.indexedMBs = a.bytes / 1e3 / a.indexedMs;
  a.ratio = a.plainMs / a.indexedMs;
  log(storage, `append ${(a.bytes / 1e6).toFixed(1)} MB line by line: ${a.plainMBs.toFixed(2)} MB/s without the index, ${a.indexedMBs.toFixed(2)} MB/s with it: ratio ${a.ratio.toFixed(2)}`);

  // 3. The generated set, with the index.
  t = Date.now();
  out.corpus = await page.evaluate(async ({ mb, n }) => {
    let bytes = 0; let lines = 0; let ms = 0;
    for (let i = 0; i < n; i++) {
      const s = window.generate(mb * 1e6 / n);
      bytes += s.size; lines += s.lines;
      for (const part of s.parts) ms += await window.sb._bench('append', `gen-${i}`, part, 1000, true);
    }
    return { bytes, lines, ms };
  }, { mb: MB, n: SESSIONS });
  out.corpus.seconds = (Date.now() - t) / 1000;
  log(storage, `generated ${SESSIONS} sessions, ${(out.corpus.bytes / 1e6).toFixed(1)} MB raw, ${out.corpus.lines} lines: cached in ${out.corpus.seconds} s (appends ${(out.corpus.ms / 1000).toFixed(1)} s)`);

  // 4. The first query of a worker that starts before any segment is built (it loads every
  //    blob), then the segments built, as the worker does in idle time.
  await page.reload();
  await openScrollback(page, storage);
  out.unbuilt = await timeQuery(page, queries('rare')['1 word']);
  log(storage, `first query right after start, no segments yet, rare word: ${out.unbuilt.ms.toFixed(1)} ms (${out.unbuilt.hits} hits)`);
  await page.reload();
  await openScrollback(page, storage);
  t = Date.now();
  await page.evaluate(() => window.sb.warmSearch());
  out.build = { seconds: (Date.now() - t) / 1000 };
  log(storage, `segments built in ${out.build.seconds} s`);

  // 5. Sizes.
  out.sizes = await page.evaluate(() => window.sb._bench('sizes'));
  out.sizes.share = out.sizes.index / out.sizes.cached;
  log(storage, `index ${(out.sizes.index / 1e6).toFixed(1)} MB (the server's pack ${(out.sizes.pack / 1e6).toFixed(1)} MB of it) = ${(100 * out.sizes.share).toFixed(1)}% of ${(out.sizes.cached / 1e6).toFixed(1)} MB cached (${out.sizes.sessions} sessions)`);

  // 6. Queries: the first after a fresh start, then the later ones. Each first query is the
  //    median of STARTS starts (a page reloaded, a new worker): one start moves by half its
  //    figure between runs here.
  out.first = {};
  out.warm = {};
  const median = (runs, key) => [...runs].sort((x, y) => x[key] - y[key])[runs.length >> 1];
  for (const kind of Object.keys(FREQUENCIES)) {
    const cold = [];
    const warmed = [];
    for (let i = 0; i < STARTS; i++) {
      await page.reload();
      await openScrollback(page, storage);
      cold.push(await timeQuery(page, queries(kind)['1 word']));
      await page.reload();
      await openScrollback(page, storage);
      const t = Date.now();
      await page.evaluate(() => window.sb.warmSearch());
      warmed.push({ ...(await timeQuery(page, queries(kind)['1 word'])), warmSeconds: (Date.now() - t) / 1000 });
    }
    const range = (runs) => `${Math.min(...runs.map((r) => r.ms)).toFixed(1)}-${Math.max(...runs.map((r) => r.ms)).toFixed(1)}`;
    out.first[kind] = { ...median(cold, 'ms'), runs: cold.map((r) => r.ms) };
    log(storage, `first query right after start, ${kind} word: ${out.first[kind].ms.toFixed(1)} ms, median of ${STARTS} (${range(cold)}; ${out.first[kind].hits} hits)`);
    out.warm[kind] = { ...median(warmed, 'ms'), runs: warmed.map((r) => r.ms), warmSeconds: median(warmed, 'warmSeconds').warmSeconds };
    log(storage, `first query after the warm-up (${out.warm[kind].warmSeconds} s from the open), ${kind} word: ${out.warm[kind].ms.toFixed(1)} ms, median of ${STARTS} (${range(warmed)})`);
  }
  // A query typed while the worker warms up, 60% of the way through a warm-up as long as the
  // last one above (it loads the segments after checking which to build): answered between two
  // of the warm-up's turns, not after all of them.
  await page.reload();
  await openScrollback(page, storage);
  const into = Math.round(0.6 * out.warm.medium.warmSeconds * 1000);
  out.during = await page.evaluate(async ({ q, into }) => {
    const t0 = performance.now();
    const warmed = window.sb.warmSearch().then(() => performance.now() - t0);
    await new Promise((r) => setTimeout(r, into));
    const t = performance.now();
    const hits = await window.sb.search(q, { limit: 20 });
    return { ms: performance.now() - t, hits: hits.length, at: t - t0, warmedAt: await warmed };
  }, { q: queries('medium')['1 word'], into });
  log(storage, `query ${out.during.at.toFixed(0)} ms into the warm-up, medium word: ${out.during.ms.toFixed(1)} ms (warm-up done at ${out.during.warmedAt.toFixed(0)} ms)`);
  out.later = {};
  for (const kind of Object.keys(FREQUENCIES)) {
    out.later[kind] = {};
    for (const [shape, q] of Object.entries(queries(kind))) {
      const runs = [];
      for (let i = 0; i < 5; i++) runs.push(await timeQuery(page, q));
      runs.sort((x, y) => x.ms - y.ms);
      out.later[kind][shape] = runs[2];
      log(storage, `${kind} ${shape}: ${runs[2].ms.toFixed(1)} ms (${runs[2].hits} hits)`);
    }
  }
  await page.evaluate(() => window.sb.close());
  return out;
}

function table(results) {
  const f = (x, d = 1) => x.toFixed(d);
  const rows = [
    ['', ...results.map((r) => r.storage)],
    ['sandbox sessions cached (MB, s)', ...results.map((r) => `${f(r.sandbox.cached / 1e6)} MB, ${f(r.sandbox.seconds)} s`)],
    ['append, line by line: without / with the index (MB/s)', ...results.map((r) => `${f(r.append.plainMBs, 2)} / ${f(r.append.indexedMBs, 2)}`)],
    ['append ratio (with / without)', ...results.map((r) => f(r.append.ratio, 2))],
    ['generated set cached (MB raw, s)', ...results.map((r) => `${f(r.corpus.bytes / 1e6)} MB, ${f(r.corpus.seconds)} s`)],
    ['index share of the cached bytes (blobs, segments, the server\'s pack)', ...results.map((r) => `${f(100 * r.sizes.share)}% (${f(r.sizes.index / 1e6)} of ${f(r.sizes.cached / 1e6)} MB; pack ${f(r.sizes.pack / 1e6)} MB)`)],
  ];
  rows.push(['first query right after start before any segment is built, rare word (ms)', ...results.map((r) => f(r.unbuilt.ms))]);
  rows.push(['segments built (warm-up after the set was cached, s)', ...results.map((r) => f(r.build.seconds))]);
  for (const kind of Object.keys(FREQUENCIES)) {
    rows.push([`first query right after start, ${kind} word (ms, median of ${STARTS} starts; range)`, ...results.map((r) => `${f(r.first[kind].ms)} (${f(Math.min(...r.first[kind].runs))}-${f(Math.max(...r.first[kind].runs))})`)]);
  }
  for (const kind of Object.keys(FREQUENCIES)) {
    rows.push([`first query after the idle warm-up, ${kind} word (ms, median of ${STARTS}; range; warm-up s)`, ...results.map((r) => `${f(r.warm[kind].ms)} (${f(Math.min(...r.warm[kind].runs))}-${f(Math.max(...r.warm[kind].runs))}; ${f(r.warm[kind].warmSeconds)} s)`)]);
  }
  rows.push(['a query typed during the warm-up, medium word (ms; typed at, warm-up done at)', ...results.map((r) => `${f(r.during.ms)} (${f(r.during.at / 1000, 2)} s, ${f(r.during.warmedAt / 1000, 2)} s)`)]);
  for (const kind of Object.keys(FREQUENCIES)) {
    for (const shape of Object.keys(queries(kind))) {
      rows.push([`later: ${kind}, ${shape} (ms, hits)`, ...results.map((r) => `${f(r.later[kind][shape].ms)} (${r.later[kind][shape].hits})`)]);
    }
  }
  return rows.map((r, i) => `| ${r.join(' | ')} |${i === 0 ? `\n|${r.map(() => ' --- |').join('')}` : ''}`).join('\n');
}

async function main() {
  const started = Date.now();
  const server = await startServer();
  const results = [];
  try {
    for (const storage of STORAGES) results.push(await benchStorage(server, storage));
  } finally {
    await server.dispose();
  }
  await fs.mkdir(OUT, { recursive: true });
  await fs.writeFile(path.join(OUT, 'search-bench.json'), JSON.stringify(results, null, 1));
  console.log(`Search in Chromium: ${MB} MB over ${SESSIONS} generated sessions plus the sandbox (${((Date.now() - started) / 1000).toFixed(0)} s)\n`);
  console.log(table(results));
}

main().catch((e) => { console.error(e); process.exit(1); });
