// A tiny static file server on loopback, for tests that need only files (no transcript server).
import http from 'node:http';
import fs from 'node:fs/promises';
import path from 'node:path';

const TYPES = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm',
  '.html': 'text/html', '.json': 'application/json', '.css': 'text/css' };

/** Answers with the file at `rel` under `root` (404 when there is none). */
async function sendFile(res, root, rel) {
  const file = path.join(root, path.normalize(`/${rel}`));
  if (!file.startsWith(root)) { res.writeHead(403).end(); return; }
  try {
    const body = await fs.readFile(file);
    res.writeHead(200, { 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-cache' });
    res.end(body);
  } catch { res.writeHead(404).end(); }
}

/** Listens on 127.0.0.1 (`port`, or a free one); resolves to { url, port, close }. */
async function listen(server, port = 0) {
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const bound = server.address().port;
  return {
    url: `http://127.0.0.1:${bound}`,
    port: bound,
    /** Stops listening and drops every open connection (the port is free again). */
    close: () => new Promise((r) => { server.close(r); server.closeAllConnections(); }),
  };
}

/** Serves `root` on 127.0.0.1 at a free port; resolves to { url, close }. */
export async function serveStatic(root) {
  const server = http.createServer((req, res) => sendFile(res, root, decodeURIComponent(new URL(req.url, 'http://x').pathname)));
  return listen(server);
}

/**
 * The demo page without its API, on `port` (where the transcript server was): `www` at `/`,
 * `pkg` at `/pkg/`, and every other request's connection dropped unanswered. A page that loads
 * (as from a cache) while the server cannot be reached.
 */
export async function servePageOnly(port, { www, pkg }) {
  const server = http.createServer((req, res) => {
    const rel = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    if (rel.startsWith('/pkg/')) sendFile(res, pkg, rel.slice('/pkg/'.length));
    else if (rel === '/' || /^\/[\w.-]+\.(html|js|css)$/.test(rel)) sendFile(res, www, rel === '/' ? 'index.html' : rel);
    else req.socket.destroy();
  });
  return listen(server, port);
}
