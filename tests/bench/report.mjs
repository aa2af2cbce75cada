// The bench's Markdown table and SVG chart, from run.mjs's results. Lower is better everywhere.

/**
 * The figures, in table order: [key, label, unit, goal]. A goal (issue #14's Must show, or for
 * storage DESIGN's bar against the one alternative that stores anything) is checked for each
 * Scrollback backend (a figure with none against DESIGN_BAR): `{ vs, max, abs }` means at most `max` times `vs`'s figure
 * ('nocache', 'handwritten') or at most `abs`, whichever is larger.
 */
export const FIGURES = [
  ['reopenRequests', 'Reopen: requests', 'n', { vs: 'nocache', max: 1, cap: 2 }],
  ['reopenBytes', 'Reopen: bytes downloaded', 'bytes', { vs: 'nocache', max: 0.5 }],
  ['reopenFirstRowsMs', 'Reopen: time to first rows on screen (from navigation)', 'ms', { vs: 'nocache', max: 1 }],
  ['reopenFromOpenMs', 'Reopen: time to first rows on screen (from the open call)', 'ms'],
  ['coldFirstRowsMs', 'First visit: time to first rows on screen (from navigation)', 'ms', { vs: 'nocache', max: 1.25 }],
  ['coldBytes', 'First visit: bytes until settled', 'bytes'],
  ['scrollWarmMs', 'Scroll back through everything (after a reopen): time', 'ms', { vs: 'nocache', max: 0.25, abs: 5 }],
  ['scrollWarmRequests', 'Scroll back through everything (after a reopen): requests', 'n', { abs: 0 }],
  ['scrollWarmBytes', 'Scroll back through everything (after a reopen): bytes', 'bytes'],
  ['scrollColdMs', 'Scroll back through everything (first visit): time', 'ms'],
  ['scrollColdRequests', 'Scroll back through everything (first visit): requests', 'n'],
  ['catchUpBytes', 'Catch up after 300 new events: bytes', 'bytes', { vs: 'handwritten', max: 1.05 }],
  ['catchUpMs', 'Catch up after 300 new events: time to the newest on screen', 'ms', { vs: 'nocache', max: 1 }],
  ['catchUpRequests', 'Catch up after 300 new events: requests', 'n', { vs: 'nocache', max: 1 }],
  ['streamLongestTaskMs', 'Longest main-thread task while a reply streams in, every row loaded', 'ms', { abs: 50 }],
  ['patch20Median', 'Bytes posted to the page per patch while a reply streams, some rows loaded (median)', 'bytes'],
  ['patchAllMedian', 'Bytes posted to the page per patch while a reply streams, every row loaded (median)', 'bytes', { flat: 'patch20Median' }],
  // Only a cache stores anything: storage is weighed against the hand-written one.
  ['storageEstimate', 'Storage used (navigator.storage.estimate)', 'bytes', { vs: 'handwritten', max: 1 }],
  ['storageOwn', "Storage used (the contender's own count)", 'bytes', { vs: 'handwritten', max: 1 }],
  ['slowReopenRequests', 'Slow link: reopen: requests', 'n', { vs: 'nocache', max: 1, cap: 2 }],
  ['slowReopenBytes', 'Slow link: reopen: bytes', 'bytes', { vs: 'nocache', max: 0.5 }],
  ['slowReopenFirstRowsMs', 'Slow link: reopen: time to first rows (from the open call)', 'ms', { vs: 'nocache', max: 0.5 }],
  ['slowColdFirstRowsMs', 'Slow link: first visit: time to first rows (from the open call; Scrollback downloads its module)', 'ms'],
  ['slowCatchUpMs', 'Slow link: catch up after 300 new events: time to the newest (from the open call)', 'ms', { vs: 'nocache', max: 1.1 }],
  ['slowCatchUpBytes', 'Slow link: catch up after 300 new events: bytes', 'bytes'],
  ['slowCatchUpRequests', 'Slow link: catch up after 300 new events: requests', 'n', { vs: 'nocache', max: 1 }],
];

const SCROLLBACK = ['scrollback-opfs', 'scrollback-idb'];
const ALTERNATIVES = ['nocache', 'handwritten'];

export function fmt(v, unit) {
  if (v === undefined || v === null || Number.isNaN(v)) return 'n/a';
  if (unit === 'bytes') {
    if (v >= 1e6) return `${(v / 1e6).toFixed(2)} MB`;
    if (v >= 1e3) return `${(v / 1e3).toFixed(1)} kB`;
    return `${v} B`;
  }
  if (unit === 'ms') return v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${Math.round(v)} ms`;
  return String(v);
}

function ratio(v, base) {
  if (base === 0) return v === 0 ? '×1' : '(base 0)';
  const r = v / base;
  return `×${r >= 10 ? r.toFixed(0) : r >= 0.1 ? r.toFixed(2) : r.toPrecision(1)}`;
}

/**
 * The bar of a figure issue #14 names no goal for: DESIGN's, ahead of no cache and of the
 * hand-written cache (at most the better of the two).
 */
const DESIGN_BAR = { best: true };

/** The most a Scrollback figure may be under `goal`, from the alternatives' figures `by`. */
function limit(goal, by, key) {
  if (goal.flat) {
    return null; // checked per backend against its own figure
  }
  if (goal.best) {
    const alts = ALTERNATIVES.map((k) => by[k]?.[key]).filter((v) => v !== undefined);
    return alts.length ? Math.min(...alts) : undefined;
  }
  let most = goal.abs ?? -Infinity;
  if (goal.vs) {
    const base = by[goal.vs]?.[key];
    if (base === undefined) return undefined;
    most = Math.max(most, base * goal.max);
  }
  if (goal.cap !== undefined) most = Math.min(most, goal.cap);
  return most;
}

function goalText(goal) {
  if (goal.flat) return 'flat: ≤ 1.1× the figure with some rows loaded';
  if (goal.best) return 'DESIGN: ≤ the better alternative';
  const parts = [];
  if (goal.vs) parts.push(`≤ ${goal.max}× ${goal.vs === 'nocache' ? 'no cache' : 'hand-written'}`);
  if (goal.abs !== undefined) parts.push(goal.vs ? `(or ${goal.abs})` : `≤ ${goal.abs}`);
  if (goal.cap !== undefined) parts.push(`and ≤ ${goal.cap}`);
  return parts.join(' ');
}

/** Each Scrollback backend against the goal: `met` / `**MISS**`, joined. */
function check(by, key, unit, goal = DESIGN_BAR, labels, unfinished) {
  const out = [];
  for (const k of SCROLLBACK) {
    const v = by[k]?.[key];
    if (v === undefined) continue;
    const name = labels[k].replace('Scrollback, ', '');
    let ok;
    if (goal.flat) {
      const base = by[k][goal.flat];
      ok = base !== undefined && v <= base * 1.1 + 16;
    } else {
      const most = limit(goal, by, key);
      if (most === undefined) continue;
      ok = v <= most && !unfinished(k, key);
    }
    out.push(`${name} ${ok ? 'met' : '**MISS**'}`);
  }
  return out.length ? `${goalText(goal)}: ${out.join(', ')}` : '';
}

export function table(meta, results) {
  const keys = meta.contenders.map((c) => c.key);
  const labels = Object.fromEntries(meta.contenders.map((c) => [c.key, c.label]));
  const out = [];
  out.push(`Figures from \`npm run bench\` on ${meta.date.slice(0, 10)}: ${meta.machine}, Chromium ${meta.chromium}, headless, server on loopback; load average ${meta.load.toFixed(1)} (the machine is shared: times are noisy).`);
  out.push('Requests and bytes are counted at the server (`GET /stats`, API routes only: response bodies as sent: compressed where the server compresses, with brotli, which Chromium accepts).');
  out.push('Loopback times are from navigation start in the page unless the row says otherwise; slow-link times are from the app\'s first call (the contender\'s `open`).');
  if (meta.slow) {
    const w = meta.slow.worker;
    out.push(`The slow link: Chromium's \`Network.emulateNetworkConditions\`, ${meta.slow.latency} ms latency, ${(meta.slow.downloadThroughput * 8 / 1e6).toFixed(1)} Mbit/s down, ${(meta.slow.uploadThroughput * 8 / 1e3).toFixed(0)} kbit/s up, on the page (a dedicated worker's request: ${w ? `${Math.round(w.loopbackMs)} ms on loopback, ${Math.round(w.slowMs)} ms on the slow link, so workers are throttled too` : 'not checked'}).`);
  }
  if (meta.repeats > 1) out.push(`Times of first visits, reopens (and their scroll back) and catch-ups are the median of ${meta.repeats} runs, each run listed after it (\`BENCH_REPEATS\`); every other figure is from one run.`);
  out.push('Each cell: the figure, then its ratio to the better alternative (no cache or hand-written, whichever is lower). The goal column checks each Scrollback backend against issue #14\'s Must show, and a figure #14 names no goal for against DESIGN\'s bar (no worse than the better alternative). Lower is better.');
  out.push('');
  for (const [id, r] of Object.entries(results)) {
    out.push(`### Session \`${id}\`: ${r.events} events, ${fmt(r.bytes, 'bytes')}`);
    out.push('');
    out.push(`| figure | ${keys.map((k) => labels[k]).join(' | ')} | goal |`);
    out.push(`| --- | ${keys.map(() => '---:').join(' | ')} | --- |`);
    const unfinished = (k, key) => {
      if (key.startsWith('scrollWarm') && r.by[k]?.scrollWarmDone === false) return 'did not reach the start within the cap';
      if (key.startsWith('scrollCold') && r.by[k]?.scrollColdDone === false) return 'did not reach the start within the cap';
      return null;
    };
    for (const [key, label, unit, goal] of FIGURES) {
      if (!keys.some((k) => r.by[k]?.[key] !== undefined)) continue;
      const alts = ALTERNATIVES.map((k) => r.by[k]?.[key]).filter((v) => v !== undefined);
      const base = alts.length ? Math.min(...alts) : undefined;
      const cells = keys.map((k) => {
        const v = r.by[k]?.[key];
        let cell = fmt(v, unit);
        const notes = [];
        if (base !== undefined && v !== undefined && !ALTERNATIVES.includes(k)) notes.push(ratio(v, base));
        const runs = r.by[k]?.[`${key}Runs`];
        if (runs?.length > 1) notes.push(`runs ${runs.map((x) => Math.round(x)).sort((a, b) => a - b).join(', ')}`);
        if (notes.length) cell += ` (${notes.join('; ')})`;
        if (unfinished(k, key)) cell += ' (unfinished)';
        return cell;
      });
      out.push(`| ${label} | ${cells.join(' | ')} | ${check(r.by, key, unit, goal, labels, unfinished)} |`);
    }
    // The page's small module (screen/): up, and warmed up (its fold compiled), unless the
    // answer was in by then (the fold then compiles as it runs).
    const warm = (t) => {
      if (t.screenWarm === undefined) return '';
      return t.screenWarm - t.screenModule < 0.5 ? ' (no warm-up: the answer was in)' : ` (warmed up ${fmt(t.screenWarm, 'ms')})`;
    };
    const small = (t) => (t.screenModule === undefined ? '' : `small module ready ${fmt(t.screenModule, 'ms')}${warm(t)}, `);
    const timeline = (k, t) => (t ? `${t.screen === undefined ? 'no last screen' : `last screen drawn ${fmt(t.screen, 'ms')}`}, ${t.response === undefined ? '' : `check answered ${fmt(t.response, 'ms')}, `}${small(t)}${t.opening === undefined ? '' : `its catch-up folded on and drawn ${fmt(t.opening, 'ms')}, `}worker ${fmt(t.worker, 'ms')}, module ready ${fmt(t.module, 'ms')}, store open ${fmt(t.store, 'ms')}, first cached rows from the worker ${fmt(t.cached ?? t.firstRows, 'ms')}, verified ${fmt(t.verified, 'ms')}, live ${fmt(t.live, 'ms')}` : 'n/a');
    // A first visit: nothing cached, so the first rows wait for the first request's answer.
    const cold = (k, t) => (t ? `open call ${fmt(t.openCall, 'ms')} after navigation; then worker ${fmt(t.worker, 'ms')}, module ready ${fmt(t.module, 'ms')}, store open ${fmt(t.store, 'ms')}, request sent ${fmt(t.request, 'ms')}, answered ${fmt(t.response, 'ms')}, ${small(t)}${t.opening === undefined ? '' : `opening screen drawn ${fmt(t.opening, 'ms')}, `}first rows ${fmt(t.firstRows, 'ms')}, the view's own ${fmt(t.cached, 'ms')}` : 'n/a');
    for (const [field, what, where, show] of [['timeline', 'reopen', 'loopback', timeline], ['slowTimeline', 'reopen', 'slow link', timeline], ['catchUpTimeline', 'catch-up (300 new events)', 'loopback', timeline], ['coldTimeline', 'first-visit', 'loopback', cold]]) {
      const rows = SCROLLBACK.filter((k) => r.by[k]?.[field]);
      if (rows.length) out.push(`| Scrollback ${what} timeline, ${where} (ms after the open call) | ${keys.map((k) => (SCROLLBACK.includes(k) && r.by[k]?.[field] ? show(k, r.by[k][field]) : '')).join(' | ')} | |`);
    }
    const rowsNote = SCROLLBACK.filter((k) => r.by[k]?.patchRows20 !== undefined)
      .map((k) => `${labels[k]}: ${r.by[k].patch20Count ?? 0} patches with ${r.by[k].patchRows20} rows loaded (largest ${fmt(r.by[k].patch20Max, 'bytes')}), ${r.by[k].patchAllCount ?? 0} with all ${r.by[k].patchRowsAll} rows (largest ${fmt(r.by[k].patchAllMax, 'bytes')})`);
    if (rowsNote.length) { out.push(''); out.push(`Patches: ${rowsNote.join('; ')}.`); }
    out.push('');
  }
  out.push('Package sizes:');
  out.push('');
  out.push('| file | raw | gzip -9 |');
  out.push('| --- | ---: | ---: |');
  for (const s of meta.sizes) out.push(`| \`${s.file}\` | ${fmt(s.raw, 'bytes')} | ${fmt(s.gzip, 'bytes')} |`);
  out.push('');
  out.push(`The whole run took ${Math.round(meta.seconds)} s.`);
  return `${out.join('\n')}\n`;
}

const CHART = [
  ['reopenBytes', 'Reopen: bytes', 'bytes'],
  ['reopenFirstRowsMs', 'Reopen: first rows', 'ms'],
  ['scrollWarmMs', 'Scroll back all (reopened): time', 'ms'],
  ['scrollWarmRequests', 'Scroll back all (reopened): requests', 'n'],
  ['catchUpBytes', 'Catch up 300 events: bytes', 'bytes'],
  ['catchUpMs', 'Catch up 300 events: time', 'ms'],
  ['streamLongestTaskMs', 'Longest task while streaming', 'ms'],
];
const COLORS = { nocache: '#9aa0a6', handwritten: '#e8a33d', 'scrollback-opfs': '#1a73e8', 'scrollback-idb': '#34a853' };

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));

/** Grouped bars for the longest session: each figure's bars scaled to its largest value. */
export function chart(meta, results) {
  const [id, r] = Object.entries(results).sort((a, b) => b[1].events - a[1].events)[0];
  const keys = meta.contenders.map((c) => c.key);
  const W = 900; const left = 250; const barH = 14; const gap = 3; const groupGap = 16; const top = 58;
  const groupH = keys.length * (barH + gap) + groupGap;
  const H = top + CHART.length * groupH + 10;
  const parts = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`);
  parts.push(`<rect width="${W}" height="${H}" fill="#fff"/>`);
  parts.push(`<text x="10" y="20" font-size="15" font-weight="bold">Scrollback vs. alternatives: session "${esc(id)}" (${r.events} events, ${esc(fmt(r.bytes, 'bytes'))}); shorter is better</text>`);
  keys.forEach((k, i) => {
    const x = 10 + i * 215;
    parts.push(`<rect x="${x}" y="32" width="12" height="12" fill="${COLORS[k]}"/><text x="${x + 16}" y="42">${esc(meta.contenders[i].label.replace(' (one IndexedDB record)', ''))}</text>`);
  });
  CHART.forEach(([key, label, unit], g) => {
    const y0 = top + g * groupH;
    const max = Math.max(1e-9, ...keys.map((k) => r.by[k]?.[key] ?? 0));
    parts.push(`<text x="10" y="${y0 + (keys.length * (barH + gap)) / 2 + 4}">${esc(label)}</text>`);
    keys.forEach((k, i) => {
      const v = r.by[k]?.[key] ?? 0;
      const w = Math.max(1, ((W - left - 110) * v) / max);
      const y = y0 + i * (barH + gap);
      parts.push(`<rect x="${left}" y="${y}" width="${w.toFixed(1)}" height="${barH}" fill="${COLORS[k]}"/>`);
      parts.push(`<text x="${left + w + 5}" y="${y + barH - 3}">${esc(fmt(v, unit))}</text>`);
    });
  });
  parts.push('</svg>');
  return parts.join('\n');
}

const START = '<!-- bench table: generated by `npm run bench:readme` from tests/out/bench.json -->';
const END = '<!-- end of bench table -->';

/** README.md with the table between its markers replaced by `md`. */
export function withTable(readme, md) {
  const a = readme.indexOf(START);
  const b = readme.indexOf(END);
  if (a < 0 || b < a) throw new Error(`README.md has no bench table markers (${START} ... ${END})`);
  return `${readme.slice(0, a + START.length)}\n\n${md}\n${readme.slice(b)}`;
}

// `node tests/bench/report.mjs --readme`: the README's table regenerated from the last run.
if (process.argv[1] && import.meta.url === (await import('node:url')).pathToFileURL(process.argv[1]).href) {
  const fs = await import('node:fs/promises');
  const { fileURLToPath } = await import('node:url');
  const root = fileURLToPath(new URL('../..', import.meta.url));
  const { meta, results } = JSON.parse(await fs.readFile(`${root}tests/out/bench.json`, 'utf8'));
  const md = table(meta, results);
  if (process.argv.includes('--readme')) {
    const readme = `${root}README.md`;
    await fs.writeFile(readme, withTable(await fs.readFile(readme, 'utf8'), md));
    console.error('README.md: Performance table regenerated from tests/out/bench.json');
  } else {
    console.log(md);
  }
}
