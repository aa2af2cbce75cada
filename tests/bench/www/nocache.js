// Contender "no cache": what an app does today. Each open fetches the newest 80 lines
// (GET /transcript with no `before`), follows /events from there, and pages older history from
// the server on demand: 40 coalesced rows per request (before= the oldest seq held).
export async function open({ id, server, show }) {
  const base = `${server}/sessions/${encodeURIComponent(id)}`;
  const get = async (query) => {
    const res = await fetch(`${base}/transcript${query}`);
    if (!res.ok) throw new Error(`GET transcript${query}: ${res.status}`);
    return res.json();
  };
  const describe = (l) => `${l.event.type} ${l.event.text ?? ''}`;
  let lines = await get('');
  let newest = lines.length ? lines[lines.length - 1].seq : 0;
  show(lines, describe);

  const events = new EventSource(`${base}/events?after=${newest}`);
  events.addEventListener('reset', () => { lines = []; newest = 0; });
  events.onmessage = (e) => {
    const line = JSON.parse(e.data);
    if (line.seq <= newest) return;
    lines.push(line);
    newest = line.seq;
    show(lines, describe);
  };

  return {
    cursor: () => newest,
    async scrollBack(deadline) {
      let requests = 0;
      let pages = 0;
      while (performance.now() < deadline) {
        if (!lines.length || lines[0].seq <= 1) return { pages, requests, done: true };
        const page = await get(`?before=${lines[0].seq}&coalesce=true`);
        requests += 1;
        if (!page.length) return { pages, requests, done: true };
        pages += 1;
        lines = page.concat(lines);
      }
      return { pages, requests, done: false };
    },
    settled: async () => {},
    storageBytes: async () => 0,
  };
}
