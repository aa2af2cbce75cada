// A session's cache as a page's storage holds it, and the check that it is the server's.
import assert from 'node:assert/strict';

/**
 * The session's chunks as the tab's storage holds them: `[{ name, text }]`, read in the page
 * from OPFS (files, no lock needed) or IndexedDB (the store's `meta` and `seg` records).
 */
export function readChunks(page, storage, port, id) {
  return page.evaluate(async ({ storage, port, id }) => {
    const dir = (server) => `transcripts/v1/${server}/${id}`;
    if (storage === 'opfs') {
      let d = await navigator.storage.getDirectory();
      for (const name of ['transcripts', 'v1']) d = await d.getDirectoryHandle(name);
      let server = null;
      for await (const [name] of d.entries()) if (name.endsWith(`_${port}`)) server = name;
      d = await (await d.getDirectoryHandle(server)).getDirectoryHandle(id);
      const out = [];
      for await (const [name, handle] of d.entries()) {
        if (handle.kind === 'file') out.push({ name, text: await (await handle.getFile()).text() });
      }
      return out;
    }
    const db = await new Promise((resolve, reject) => {
      const req = indexedDB.open('scrollback');
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    const all = (store, query) => new Promise((resolve, reject) => {
      const tx = db.transaction(store, 'readonly');
      const keys = tx.objectStore(store).getAllKeys(query);
      const values = tx.objectStore(store).getAll(query);
      tx.oncomplete = () => resolve(keys.result.map((k, i) => [k, values.result[i]]));
      tx.onerror = () => reject(tx.error);
    });
    const meta = (await all('meta')).filter(([k]) => typeof k === 'string' && k.startsWith('transcripts/v1/') && k.includes(`_${port}/${id}/`));
    const out = [];
    for (const [key, [blob, size]] of meta) {
      const segs = await all('seg', IDBKeyRange.bound([blob, 0], [blob, Infinity]));
      const bytes = new Uint8Array(size);
      let at = 0;
      for (const [, part] of segs) {
        const chunk = new Uint8Array(part.buffer ?? part);
        bytes.set(chunk.subarray(0, Math.min(chunk.length, size - at)), at);
        at += chunk.length;
        if (at >= size) break;
      }
      out.push({ name: key.slice(key.lastIndexOf('/') + 1), text: new TextDecoder().decode(bytes) });
    }
    db.close();
    void dir;
    return out;
  }, { storage, port, id });
}

/** Every chunk is the server's answer for its coverage; no seq is in two chunks. */
export async function checkChunks(server, chunks, id) {
  const spans = [];
  for (const { name, text } of chunks) {
    const m = name.match(/^(\d+)-(\d+|open)\.(rows|raw)\.jsonl$/);
    if (!m) continue;
    assert.ok(text.endsWith('\n'), `${name} ends in a whole line`);
    const lines = text.split('\n').filter(Boolean);
    const first = Number(m[1]);
    const last = JSON.parse(lines.at(-1));
    const end = m[2] === 'open' ? (last.folded?.through ?? last.seq) + 1 : Number(m[2]);
    // The server's lines in [first, end) as the lines they are made of (each line's own text,
    // byte for byte): a raw chunk may hold more lines than a page (10,000), so it is asked in
    // pages, newest first; a rows chunk is one page of rows.
    const rows = m[3] === 'rows';
    let expected = [];
    for (let before = end; ;) {
      const q = new URLSearchParams({ before, after: first - 1, limit: 10000, coalesce: rows });
      const page = JSON.parse(await (await fetch(`${server.url}/sessions/${id}/transcript?${q}`)).text());
      expected = page.map((l) => JSON.stringify(l)).concat(expected);
      if (rows || page.length === 0 || page[0].seq <= first) break;
      before = page[0].seq;
    }
    assert.deepEqual(lines.map((l) => JSON.stringify(JSON.parse(l))), expected, `${name} is the server's [${first}, ${end})`);
    assert.equal(JSON.parse(lines[0]).seq, first, `${name} starts at its first seq`);
    spans.push([first, end, name]);
  }
  assert.ok(spans.length > 0, 'the session is cached');
  spans.sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < spans.length; i += 1) {
    assert.ok(spans[i - 1][1] <= spans[i][0], `no seq cached twice: ${JSON.stringify(spans)}`);
  }
  return spans;
}

/**
 * Every path the page's storage holds under `transcripts/v1/` (the caches of every server), sorted:
 * OPFS files walked from its root, or the IndexedDB store's `meta` keys.
 */
export function cachedPaths(page, storage) {
  return page.evaluate(async (storage) => {
    const out = [];
    if (storage === 'opfs') {
      const walk = async (dir, at) => {
        for await (const [name, handle] of dir.entries()) {
          if (handle.kind === 'file') out.push(`${at}${name}`);
          else await walk(handle, `${at}${name}/`);
        }
      };
      let d = await navigator.storage.getDirectory();
      try {
        for (const name of ['transcripts', 'v1']) d = await d.getDirectoryHandle(name);
      } catch {
        return out; // nothing cached yet
      }
      await walk(d, 'transcripts/v1/');
      return out.sort();
    }
    const db = await new Promise((resolve, reject) => {
      const req = indexedDB.open('scrollback');
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    const keys = await new Promise((resolve, reject) => {
      const tx = db.transaction('meta', 'readonly');
      const req = tx.objectStore('meta').getAllKeys();
      tx.oncomplete = () => resolve(req.result);
      tx.onerror = () => reject(tx.error);
    });
    db.close();
    return keys.filter((k) => typeof k === 'string' && k.startsWith('transcripts/v1/')).sort();
  }, storage);
}
