// The bench's Markdown table and SVG chart, from run.mjs's results. Lower is better everywhere.

/** The figures, in table order: [key, label, unit]. */
export const FIGURES = [
  ['reopenRequests', 'Reopen: requests', 'n'],
  ['reopenBytes', 'Reopen: bytes downloaded', 'bytes'],
  ['reopenFirstRowsMs', 'Reopen: time to first rows on screen', 'ms'],
  ['coldFirstRowsMs', 'First visit: time to first rows on screen', 'ms'],
  ['coldBytes', 'First visit: bytes until settled', 'bytes'],
  ['scrollWarmMs', 'Scroll back through everything (after a reopen): time', 'ms'],
  ['scrollWarmRequests', 'Scroll back through everything (after a reopen): requests', 'n'],
  ['scrollWarmBytes', 'Scroll back through everything (after a reopen): bytes', 'bytes'],
  ['scrollColdMs', 'Scroll back through everything (first visit): time', 'ms'],
  ['scrollColdRequests', 'Scroll back through everything (first visit): requests', 'n'],
  ['catchUpBytes', 'Catch up after 300 new events: bytes', 'bytes'],
  ['catchUpMs', 'Catch up after 300 new events: time to the newest on screen', 'ms'],
  ['catchUpRequests', 'Catch up after 300 new events: requests', 'n'],
  ['streamLongestTaskMs', 'Longest main-thread task while a reply streams in', 'ms'],
  ['storageEstimate', 'Storage used (navigator.storage.estimate)', 'bytes'],
  ['storageOwn', "Storage used (the contender's own count)", 'bytes'],
];

const SCROLLBACK = ['scrollback-opfs', 'scrollback-idb'];

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

/** Whether Scrollback's better backend beats every alternative on this figure. */
function verdict(by, key, unit, labels, sessionDone) {
  const sb = SCROLLBACK.filter((k) => by[k] && by[k][key] !== undefined);
  const others = Object.keys(by).filter((k) => !SCROLLBACK.includes(k) && by[k][key] !== undefined);
  if (!sb.length || !others.length) return '';
  const best = (keys) => keys.reduce((a, k) => (by[k][key] < by[a][key] ? k : a));
  const s = best(sb);
  const o = best(others);
  const sv = by[s][key];
  const ov = by[o][key];
  const notDone = sessionDone(s, key);
  if (notDone) return `**no**: ${notDone}`;
  // Within 5 % (or 2 ms / 100 B) counts as a tie: measurement noise on a shared machine.
  const slack = Math.max(Math.abs(ov) * 0.05, unit === 'ms' ? 2 : unit === 'bytes' ? 100 : 0);
  if (sv < ov - slack) return 'yes';
  if (Math.abs(sv - ov) <= slack) return `tie with ${labels[o]}`;
  return `**no**: ${labels[o]} ${fmt(ov, unit)} vs ${fmt(sv, unit)}`;
}

export function table(meta, results) {
  const keys = meta.contenders.map((c) => c.key);
  const labels = Object.fromEntries(meta.contenders.map((c) => [c.key, c.label]));
  const out = [];
  out.push(`Figures from \`npm run bench\` on ${meta.date.slice(0, 10)}: ${meta.machine}, Chromium ${meta.chromium}, headless, server on loopback; load average ${meta.load.toFixed(1)} (the machine is shared: times are noisy).`);
  out.push('Requests and bytes are counted at the server (`GET /stats`, API routes only: response bodies as sent, gzip where the server compresses).');
  out.push('Times are from navigation start in the page. Each cell: the figure, then its ratio to no cache. Lower is better.');
  out.push('');
  for (const [id, r] of Object.entries(results)) {
    out.push(`### Session \`${id}\`: ${r.events} events, ${fmt(r.bytes, 'bytes')}`);
    out.push('');
    out.push(`| figure | ${keys.map((k) => labels[k]).join(' | ')} | Scrollback ahead? |`);
    out.push(`| --- | ${keys.map(() => '---:').join(' | ')} | --- |`);
    const sessionDone = (k, key) => {
      if (key.startsWith('scrollWarm') && r.by[k].scrollWarmDone === false) return 'did not reach the start within the cap';
      if (key.startsWith('scrollCold') && r.by[k].scrollColdDone === false) return 'did not reach the start within the cap';
      return null;
    };
    for (const [key, label, unit] of FIGURES) {
      const base = r.by.nocache?.[key];
      const cells = keys.map((k) => {
        const v = r.by[k]?.[key];
        let cell = fmt(v, unit);
        if (k !== 'nocache' && base !== undefined && v !== undefined) cell += ` (${ratio(v, base)})`;
        if (sessionDone(k, key)) cell += ' (unfinished)';
        return cell;
      });
      out.push(`| ${label} | ${cells.join(' | ')} | ${verdict(r.by, key, unit, labels, sessionDone)} |`);
    }
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
