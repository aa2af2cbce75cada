// One small driver adapter over the three engines the package is tested in, so a test describes
// a scenario once and runs it in each:
//   chromium   Debian's Chromium through playwright-core (as the other end-to-end tests)
//   webkitgtk  WebKitGTK (the engine of a Tauri app on Linux) through WebKitWebDriver under
//              Xvfb, with tests/lib/wkbrowser.py (an on-disk profile) and the storage features on
//   firefox    Firefox ESR through geckodriver (classic WebDriver: playwright-core 1.65, which
//              drives Chromium here, fails at newPage on Firefox's BiDi; TOOLCHAIN.md section 7)
// A browser is { engine, goto(url), run(fn, arg), close() }: `run` calls `fn(arg)` in the page
// (an async function, its source sent as text) and resolves to its JSON result.
// The engine comes from SCROLLBACK_ENGINE (default chromium).
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { launch as launchChromium } from './browser.mjs';
import { freePort, ROOT } from './server.mjs';

export const ENGINE = process.env.SCROLLBACK_ENGINE || 'chromium';

/** The WebKit features a Scrollback page needs: storage APIs are off by default in WebKitGTK. */
export const WEBKIT_FEATURES = '+StorageAPI,+StorageAPIEstimate,+FileSystem,+FileSystemWritableStream,+AccessHandle';

/**
 * What differs between engines, as a test expects it: the storage `auto` picks (WebKitGTK's
 * OPFS sync access handles throw NotSupportedError, so IndexedDB), and, where the store cannot
 * run on OPFS at all, why (a test's skip reason; null where it can).
 */
export const FACTS = {
  chromium: { autoStorage: 'opfs', noOpfsSyncHandles: null },
  webkitgtk: {
    autoStorage: 'indexeddb',
    noOpfsSyncHandles: 'WebKitGTK has no OPFS sync access handles (createSyncAccessHandle throws '
      + 'NotSupportedError; WebKit implements it on Apple platforms only): the store runs on IndexedDB here',
  },
  firefox: { autoStorage: 'opfs', noOpfsSyncHandles: null },
}[ENGINE];

const which = (name) => {
  try { return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim(); } catch { return ''; }
};

/** Why this engine cannot run here (a missing program), or null. */
export function unavailable() {
  const need = { chromium: ['/usr/bin/chromium'], webkitgtk: ['WebKitWebDriver', 'Xvfb'], firefox: ['geckodriver', 'firefox-esr'] }[ENGINE];
  if (!need) return `unknown engine ${ENGINE}`;
  const missing = need.filter((p) => !(p.startsWith('/') ? existsSync(p) : which(p) || existsSync(path.join(os.homedir(), '.cargo/bin', p))));
  return missing.length ? `${missing.join(', ')} not installed (scripts/setup.sh installs them)` : null;
}

/** Launches the engine with a profile that lasts until close (so storage survives a reload). */
export async function launch() {
  if (ENGINE === 'chromium') return chromium();
  return webdriver(ENGINE);
}

async function chromium() {
  const browser = await launchChromium();
  const page = await browser.newPage();
  return {
    engine: 'chromium',
    goto: async (url) => { await page.goto(url); },
    run: (fn, arg) => page.evaluate(fn, arg),
    close: () => browser.close(),
  };
}

/** A program started for the session; stopped (and awaited) at close. */
function start(cmd, args, env) {
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.on('data', (d) => { log = (log + d).slice(-4000); });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return { child, log: () => log, stop: async () => { if (child.exitCode === null) { child.kill(); await exited; } } };
}

async function webdriver(engine) {
  const tmp = await fs.mkdtemp(path.join(os.tmpdir(), `scrollback-${engine}-`));
  const procs = [];
  const stopAll = async () => {
    for (const p of procs.reverse()) await p.stop();
    // The engine's own helper processes (WebKit's network process writing its disk cache) may
    // outlive the driver for a moment: removing the profile is retried while they finish.
    await fs.rm(tmp, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
  };
  try {
    const port = await freePort();
    let capabilities;
    if (engine === 'webkitgtk') {
      // A display of its own: Xvfb picks a free number and writes it to fd 3.
      const xvfb = spawn('Xvfb', ['-displayfd', '3', '-screen', '0', '1280x1024x24', '-nolisten', 'tcp'],
        { stdio: ['ignore', 'ignore', 'ignore', 'pipe'] });
      const xExited = new Promise((resolve) => xvfb.once('exit', resolve));
      procs.push({ stop: async () => { if (xvfb.exitCode === null) { xvfb.kill(); await xExited; } } });
      const display = await new Promise((resolve, reject) => {
        let out = '';
        xvfb.stdio[3].on('data', (d) => { out += d; if (out.includes('\n')) resolve(out.trim()); });
        xvfb.once('exit', (code) => reject(new Error(`Xvfb exited (${code})`)));
      });
      procs.push(start('WebKitWebDriver', [`--port=${port}`], { DISPLAY: `:${display}`, WK_PROFILE: path.join(tmp, 'profile') }));
      capabilities = { 'webkitgtk:browserOptions': {
        binary: path.join(ROOT, 'tests/lib/wkbrowser.py'), args: ['--automation', `--features=${WEBKIT_FEATURES}`] } };
    } else {
      const gecko = which('geckodriver') || path.join(os.homedir(), '.cargo/bin/geckodriver');
      procs.push(start(gecko, ['--host', '127.0.0.1', '--port', String(port)]));
      await fs.mkdir(path.join(tmp, 'profile'));
      // No storage-prompt prefs: a real user's Firefox, where persist() waits on a prompt.
      capabilities = { browserName: 'firefox', 'moz:firefoxOptions': {
        binary: which('firefox-esr') || '/usr/bin/firefox-esr', args: ['-headless', '-profile', path.join(tmp, 'profile')] } };
    }
    const base = `http://127.0.0.1:${port}`;
    const call = async (method, url, body) => {
      const res = await fetch(`${base}${url}`, { method, headers: { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(180_000) });
      const json = await res.json();
      if (!res.ok) throw new Error(`${engine} WebDriver ${method} ${url}: ${json.value?.error}: ${json.value?.message}`);
      return json.value;
    };
    for (let i = 0; ; i += 1) {
      try { await call('GET', '/status'); break; } catch (e) {
        if (i > 300) throw new Error(`${engine}'s WebDriver did not start: ${e.message}\n${procs.at(-1).log()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const { sessionId } = await call('POST', '/session', { capabilities: { alwaysMatch: capabilities } });
    const s = `/session/${sessionId}`;
    await call('POST', `${s}/timeouts`, { script: 180_000, pageLoad: 60_000 });
    return {
      engine,
      goto: (url) => call('POST', `${s}/url`, { url }),
      async run(fn, arg) {
        const script = `const done = arguments[arguments.length - 1];
          (${fn.toString()})(arguments[0]).then((v) => done({ ok: v === undefined ? null : v }),
            (e) => done({ err: String(e) + (e && e.stack ? '\\n' + e.stack : '') }));`;
        const out = await call('POST', `${s}/execute/async`, { script, args: [arg ?? null] });
        if (out && 'err' in out) throw new Error(`in ${engine}: ${out.err}`);
        return out?.ok;
      },
      async close() {
        await call('DELETE', s).catch(() => {});
        await stopAll();
      },
    };
  } catch (e) {
    await stopAll();
    throw e;
  }
}
