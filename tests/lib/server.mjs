// Starts the real reference server (target/PROFILE/scrollback-server: SCROLLBACK_PROFILE,
// release unless set; npm test's is ci) for a test: sandbox data in a fresh temp folder, a free
// loopback port, the demo page and the built package served.
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import { existsSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const PROFILE = process.env.SCROLLBACK_PROFILE || 'release';
export const SERVER_BIN = path.join(ROOT, 'target', PROFILE, 'scrollback-server');

/** Fails, saying how to build them, when the package or the server binary is missing. */
export function assertBuilt(files = ['pkg/index.js', 'pkg/scrollback_bg.wasm', SERVER_BIN]) {
  for (const file of files) {
    if (!existsSync(path.resolve(ROOT, file))) {
      throw new Error(`${file} is missing: run scripts/wasm.sh build and cargo build --profile ${PROFILE} -p scrollback-server (npm test does)`);
    }
  }
}

/** A free TCP port on 127.0.0.1. */
export async function freePort() {
  const probe = net.createServer();
  await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/**
 * Starts the server; resolves once `GET /sessions` answers.
 * @param {{ sandbox?: boolean, data?: string, args?: string[], port?: number, www?: string }} options
 *   `www`: the folder served at `/` (default: the demo page, `www/`)
 */
export async function startServer({ sandbox = true, data, args = [], port, www = path.join(ROOT, 'www') } = {}) {
  const dataDir = data ?? await fs.mkdtemp(path.join(os.tmpdir(), 'scrollback-data-'));
  port ??= await freePort();
  const url = `http://127.0.0.1:${port}`;
  const argv = ['--data', dataDir, '--addr', `127.0.0.1:${port}`,
    '--www', www, '--pkg', path.join(ROOT, 'pkg'), ...args];
  if (sandbox) argv.push('--sandbox');
  const child = spawn(SERVER_BIN, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.on('data', (chunk) => { log = (log + chunk).slice(-20000); });
  const exited = new Promise((resolve) => child.once('exit', resolve));

  const headers = args.includes('--token') ? { authorization: `Bearer ${args[args.indexOf('--token') + 1]}` } : {};
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`scrollback-server exited (${child.exitCode}):\n${log}`);
    try {
      const res = await fetch(`${url}/sessions`, { headers });
      if (res.ok) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) { child.kill(); throw new Error(`scrollback-server did not start:\n${log}`); }
    await new Promise((r) => setTimeout(r, 100));
  }

  return {
    url, port, dataDir, headers,
    /** The server's log so far (stderr). */
    log: () => log,
    /** The per-route counters of GET /stats. */
    stats: async () => (await fetch(`${url}/stats`, { headers })).json(),
    /** The transcript file of a session. */
    transcriptPath: (id) => path.join(dataDir, id, 'transcript.jsonl'),
    /**
     * All complete lines of a session, parsed, as the file holds them. A line the server is
     * still writing (no newline yet) is not one: a test reading while a reply streams would
     * otherwise parse half a line.
     */
    async lines(id) {
      const text = await fs.readFile(path.join(dataDir, id, 'transcript.jsonl'), 'utf8');
      return text.slice(0, text.lastIndexOf('\n') + 1).split('\n').filter(Boolean).map((l) => JSON.parse(l));
    },
    /** Appends raw lines to a session's file, as the agent process would. */
    async append(id, lines) {
      await fs.appendFile(path.join(dataDir, id, 'transcript.jsonl'), lines.map((l) => `${l}\n`).join(''));
    },
    /** Stops the server (SIGTERM) and waits for it to exit. */
    async stop() {
      if (child.exitCode === null) { child.kill('SIGTERM'); await exited; }
    },
    /** Stops the server and removes its data folder. */
    async dispose() {
      await this.stop();
      if (!data) await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}
