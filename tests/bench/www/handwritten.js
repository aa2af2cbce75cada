// Contender "hand-written cache": what a team plausibly writes instead of Scrollback. The whole
// transcript is one IndexedDB record (the parsed lines). On open the record is read and drawn,
// then the tail after its newest seq is fetched (GET /transcript?after=N), appended, and the
// record rewritten; a cold open downloads everything (10,000 lines per request). Live lines from
// /events are appended and the record is rewritten at most once a second. Older history is
// then all in memory: scrolling back costs no request.
const DB = 'handwritten-cache';
const STORE = 'transcripts';
const LIMIT = 10_000;

const done = (r) => new Promise((resolve, reject) => {
  r.onsuccess = () => resolve(r.result);
  r.onerror = () => reject(r.error);
});

function openDb() {
  const r = indexedDB.open(DB, 1);
  r.onupgradeneeded = () => r.result.createObjectStore(STORE);
  return done(r);
}

async function save(db, id, lines) {
  const tx = db.transaction(STORE, 'readwrite');
  tx.objectStore(STORE).put({ lines, savedAt: Date.now() }, id);
  await new Promise((resolve, reject) => {
    tx.oncomplete = resolve;
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error);
  });
}

export async function open({ id, server, show }) {
  const base = `${server}/sessions/${encodeURIComponent(id)}`;
  const get = async (query) => {
    const res = await fetch(`${base}/transcript${query}`);
    if (!res.ok) throw new Error(`GET transcript${query}: ${res.status}`);
    return res.json();
  };
  const describe = (l) => `${l.event.type} ${l.event.text ?? ''}`;
  const db = await openDb();
  const cached = await done(db.transaction(STORE).objectStore(STORE).get(id));

  /** Everything, newest page first, drawn as soon as the newest page is in. */
  async function downloadAll() {
    let all = await get(`?limit=${LIMIT}`);
    show(all, describe);
    while (all.length && all[0].seq > 1) all = (await get(`?before=${all[0].seq}&limit=${LIMIT}`)).concat(all);
    return all;
  }

  let lines;
  if (cached) {
    lines = cached.lines;
    show(lines, describe);
    const newestCached = lines.length ? lines[lines.length - 1].seq : 0;
    const tail = await get(`?after=${newestCached}&limit=${LIMIT}`);
    if (tail.length === LIMIT) lines = await downloadAll(); // too far behind: start over
    else if (tail.length) { lines.push(...tail); show(lines, describe); }
  } else {
    lines = await downloadAll();
  }
  let newest = lines.length ? lines[lines.length - 1].seq : 0;
  let saving = save(db, id, lines);

  let timer = null;
  const scheduleSave = () => {
    if (timer) return;
    timer = setTimeout(() => {
      timer = null;
      saving = saving.then(() => save(db, id, lines));
    }, 1000);
  };

  const events = new EventSource(`${base}/events?after=${newest}`);
  events.addEventListener('reset', () => { lines = []; newest = 0; });
  events.onmessage = (e) => {
    const line = JSON.parse(e.data);
    if (line.seq <= newest) return;
    lines.push(line);
    newest = line.seq;
    show(lines, describe);
    scheduleSave();
  };

  return {
    cursor: () => newest,
    async scrollBack() {
      // Everything is in memory: page through it 40 lines at a time, as a list would.
      let pages = 0;
      for (let end = lines.length - 80; end > 0; end -= 40) { lines.slice(Math.max(0, end - 40), end); pages += 1; }
      return { pages, requests: 0, done: true };
    },
    async settled() {
      while (timer) await new Promise((r) => setTimeout(r, 50));
      await saving;
    },
    async storageBytes() {
      const record = await done(db.transaction(STORE).objectStore(STORE).get(id));
      return record ? new Blob([JSON.stringify(record)]).size : 0;
    },
  };
}
