// The windowed chat file and prompt backfill through the JS API (`sb.chats()`), over real OPFS
// and real IndexedDB in the package's worker, in each engine a user meets (SCROLLBACK_ENGINE:
// chromium, webkitgtk, firefox; one description, driven through tests/lib/engines.mjs): a chat
// is written, read as a tail and pages before it, patched (append, rewriteFromIndex), refused
// with a stale cursor or another chat's header (the file unchanged), read back after a reopen,
// and backfilled to a token budget (a second backfill served from the page cache).
// Where the engine's OPFS has no sync access handles (WebKitGTK), the chat store cannot run on
// OPFS: those variants are skipped with the reason, and a test checks that OPFS is refused there
// with a clear error.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { ENGINE, FACTS, launch, unavailable } from './lib/engines.mjs';
import { ROOT } from './lib/server.mjs';
import { serveStatic } from './lib/static.mjs';

const missing = unavailable();
let site, browser;

before(async () => {
  if (missing) return;
  assert.ok(existsSync(path.join(ROOT, 'pkg/index.js')), 'pkg/ is missing: run scripts/wasm.sh build (npm test does)');
  site = await serveStatic(ROOT);
  browser = await launch();
});
after(async () => { await browser?.close(); await site?.close(); });

const STORAGES = ['opfs', 'indexeddb'];
/** A test per storage; skipped (with the reason) where the engine cannot run it. */
const each = (name, fn) => {
  for (const storage of STORAGES) {
    const skip = missing ?? (storage === 'opfs' ? FACTS.noOpfsSyncHandles : null);
    test(`${ENGINE}: chats in ${storage}: ${name}`, skip ? { skip } : {}, () => fn(storage));
  }
};

/**
 * Loads a fresh blank page (the previous page's workers go, storage stays) that records its
 * uncaught errors; `pageErrors()` reads them back.
 */
async function freshPage() {
  await browser.goto(`${site.url}/tests/lib/blank.html?${Math.random()}`);
  await browser.run(async () => {
    window.pageErrors = [];
    addEventListener('error', (e) => window.pageErrors.push(`error: ${e.message}`));
    addEventListener('unhandledrejection', (e) => window.pageErrors.push(`unhandled rejection: ${e.reason}`));
  });
}
const pageErrors = () => browser.run(async () => window.pageErrors);

// Where OPFS has no sync access handles, asking for it by name is refused with a clear error
// (never a silent fallback to another storage), whichever way the chat store is opened.
if (FACTS?.noOpfsSyncHandles) {
  test(`${ENGINE}: chats on opfs are refused with a clear error where sync access handles do not work`,
    missing ? { skip: missing } : {}, async () => {
      await freshPage();
      const out = await browser.run(async () => {
        const { Scrollback } = await import('/pkg/index.js');
        const caught = async (promise) => {
          try { const v = await promise; v?.close?.(); return null; } catch (e) { return { name: e.name, message: e.message }; }
        };
        return {
          local: await caught(Scrollback.chats({ storage: 'opfs' })),
          cache: await caught(Scrollback.open({ server: 'http://127.0.0.1:9', storage: 'opfs' })),
        };
      });
      for (const e of [out.local, out.cache]) {
        assert.ok(e, 'opening on opfs was refused');
        assert.match(e.message, /^cannot open the storage: .*OPFS sync access handles do not work here.*NotSupportedError/, e.message);
      }
      assert.deepEqual(await pageErrors(), []);
    });
}

const msg = (i) => JSON.stringify({ name: 'user', mes: `message ${String(i).padStart(3, '0')}` });
const header = (integrity) => JSON.stringify({ user_name: 'u', chat_metadata: { integrity } });

/** Runs the scenario in a fresh page with `storage`; returns what it saw. */
async function scenario(storage) {
  await freshPage();
  const lines = Array.from({ length: 30 }, (_, i) => msg(i));
  const out = await browser.run(async ({ storage, lines, head, other }) => {
    const { Scrollback } = await import('/pkg/index.js');
    // No transcript server is contacted for chats; the address is only the cache's key.
    const opts = { server: 'http://127.0.0.1:9', storage };
    const caught = async (promise) => {
      try { await promise; return null; } catch (e) {
        return { isError: e instanceof Error, name: e.name, kind: e.kind, message: e.message };
      }
    };
    let sb = await Scrollback.open(opts);
    let chats = await sb.chats();
    const name = 'demo chat';
    const r = {};
    r.missing = await chats.tail(name, { allowNotFound: true });
    r.notFound = await caught(chats.tail(name));
    const c0 = await chats.save(name, r.missing.cursor, head, lines);
    r.tail = await chats.tail(name, { maxLines: 10 });
    r.before = await chats.before(name, r.tail.cursor, 5);
    r.pages = await chats.beforePages(name, r.tail.cursor, 10, 5);
    r.appended = await chats.patch(name, r.tail.cursor, head, { append: ['{"mes":"a"}', '{"mes":"b"}'] },
      { expectedWindowLineCount: 10 });
    r.afterAppend = await chats.tail(name, { maxLines: 12 });
    r.rewritten = await chats.patch(name, r.appended, head, { rewriteFromIndex: 10, lines: ['{"mes":"c"}'] });
    r.afterRewrite = await chats.tail(name, { maxLines: 12 });
    // The cursor of the first tail is stale by now: refused, file unchanged.
    r.stale = await caught(chats.patch(name, r.tail.cursor, head, { append: ['{"mes":"lost"}'] }));
    r.integrity = await caught(chats.patch(name, r.rewritten, other, { append: ['{"mes":"x"}'] }));
    // A full save meant for another chat is refused too (it would overwrite this one whole).
    r.replaceIntegrity = await caught(chats.replace(name, other, ['{"mes":"x"}']));
    r.baseline = await caught(chats.patch(name, r.rewritten, head, { append: ['{"mes":"x"}'] },
      { expectedWindowLineCount: 3 }));
    r.badOp = await caught(chats.patch(name, r.rewritten, head, { append: [], lines: [] }));
    r.unsafe = await caught(chats.tail('../transcripts/x', {}));
    r.negative = await caught(chats.before(name, r.rewritten, -1));
    r.zeroPages = await caught(chats.beforePages(name, r.rewritten, 5, 0));
    r.afterRefusals = await chats.tail(name, { maxLines: 12 });
    // Everything is in the storage: a new worker reads it back.
    sb.close();
    sb = await Scrollback.open(opts);
    chats = sb.chats();
    r.reopened = await chats.tail(name, { maxLines: 5 });
    const request = {
      window: r.reopened.lines, cursor: r.reopened.cursor, hasMoreBefore: r.reopened.hasMoreBefore,
      budgetTokens: r.reopened.lines.reduce((n, l) => n + Math.ceil(l.length / 4), 0) + 7 * Math.ceil(lines[0].length / 4),
      pageLines: 4,
    };
    r.backfill = await chats.backfill(name, request);
    r.backfillAgain = await chats.backfill(name, request);
    r.backfillStale = await chats.backfill(name, { ...request, cursor: c0 });
    r.backfillAll = await chats.backfill(name, { ...request, budgetTokens: 1e6 });
    // The cache now holds every page of this window. Another writer (a second handle, with its
    // own cache) appends to the chat: the cached pages are of the old version, never served.
    r.warmBeforeEdit = await chats.backfill(name, { ...request, budgetTokens: 1e6 });
    const writer = sb.chats();
    await writer.patch(name, (await writer.tail(name)).cursor, head, { append: ['{"mes":"outside"}'] });
    r.backfillAfterEdit = await chats.backfill(name, { ...request, budgetTokens: 1e6 });
    sb.close();
    return r;
  }, { storage, lines, head: header('chat-1'), other: header('chat-2') });
  assert.deepEqual(await pageErrors(), []);
  return { out, lines };
}

each(`windowed reads, patches, typed refusals and backfill`, async (storage) => {
  const { out: r, lines } = await scenario(storage);
  assert.deepEqual(r.missing, { header: null, lines: [], cursor: { offset: 0, size: 0, modifiedMillis: 0 }, hasMoreBefore: false });
  assert.equal(r.notFound.kind, 'notFound');

  assert.equal(r.tail.header, header('chat-1'));
  assert.deepEqual(r.tail.lines, lines.slice(20));
  assert.equal(r.tail.hasMoreBefore, true);
  assert.deepEqual(r.before.lines, lines.slice(15, 20));
  assert.deepEqual(r.pages.map((p) => p.lines), [lines.slice(10, 20), lines.slice(0, 10)]);
  assert.deepEqual(r.pages.map((p) => p.hasMoreBefore), [true, false]);

  assert.deepEqual(r.afterAppend.lines, [...lines.slice(20), '{"mes":"a"}', '{"mes":"b"}']);
  assert.deepEqual(r.afterAppend.cursor, r.appended, 'the window keeps its start; the cursor is the new version');
  assert.deepEqual(r.afterRewrite.lines, [...lines.slice(19), '{"mes":"c"}'], 'a and b replaced by c');

  for (const [e, kind] of [[r.stale, 'signatureMismatch'], [r.integrity, 'integrityMismatch'],
    [r.replaceIntegrity, 'integrityMismatch'],
    [r.baseline, 'windowBaselineMismatch'], [r.badOp, 'invalidArgument'], [r.unsafe, 'invalidArgument'],
    [r.negative, 'invalidArgument'], [r.zeroPages, 'invalidArgument']]) {
    assert.ok(e?.isError, `${kind}: rejected with an Error`);
    assert.equal(e.name, 'ChatError');
    assert.equal(e.kind, kind, e.message);
  }
  assert.match(r.stale.message, /stale/);
  assert.deepEqual(r.afterRefusals, r.afterRewrite, 'a refused write changes nothing');

  assert.deepEqual(r.reopened.lines, [...lines.slice(26), '{"mes":"c"}']);
  const b = r.backfill;
  assert.deepEqual(b.older, lines.slice(19, 26), 'the 7 lines just before the window');
  assert.equal(b.stop, 'budget');
  assert.ok(b.pagesRead >= 2, `pages read: ${b.pagesRead}`);
  assert.equal(r.backfillAgain.pagesRead, 0, 'the second backfill reads nothing');
  assert.ok(r.backfillAgain.pagesCached >= 2, `pages cached: ${r.backfillAgain.pagesCached}`);
  assert.deepEqual(r.backfillAgain.older, b.older);
  assert.equal(r.backfillStale.stop, 'staleCursor');
  assert.equal(r.backfillStale.stale.kind, 'signatureMismatch');
  assert.deepEqual(r.backfillStale.older, []);
  assert.deepEqual(r.backfillAll.older, lines.slice(0, 26));
  assert.equal(r.backfillAll.stop, 'startOfChat');
  assert.equal(r.warmBeforeEdit.pagesRead, 0, 'the cache is warm');
  assert.deepEqual(r.warmBeforeEdit.older, lines.slice(0, 26));
  assert.equal(r.backfillAfterEdit.stop, 'staleCursor', 'warm cache + outside edit: stale');
  assert.equal(r.backfillAfterEdit.stale.kind, 'signatureMismatch');
  assert.deepEqual(r.backfillAfterEdit.older, []);
  assert.equal(r.backfillAfterEdit.pagesCached, 0);
});

/**
 * The rest of the surface on a local-only chat store (`Scrollback.chats`, no server): options,
 * normalized names and an older spelling (OPFS: the test writes the old file itself), full save
 * and restore, and everything still there in a new worker.
 */
async function localScenario(storage) {
  await freshPage();
  const lines = Array.from({ length: 40 }, (_, i) => msg(i));
  const out = await browser.run(async ({ storage, lines, head, extra }) => {
    const { Scrollback } = await import('/pkg/index.js');
    const caught = async (promise) => {
      try { await promise; return null; } catch (e) {
        return { isError: e instanceof Error, name: e.name, kind: e.kind, message: e.message };
      }
    };
    const r = {};
    r.badPreset = await caught(Scrollback.chats({ storage, backfillPages: 'tablet' }));
    r.badLines = await caught(Scrollback.chats({ storage, windowLines: 0 }));
    r.badKey = await caught(Scrollback.chats({ storage, server: 'http://127.0.0.1:9' }));
    if (storage === 'opfs') {
      // A chat written by a version that kept names as given: "old.jsonl" at old.jsonl.jsonl.
      const root = await navigator.storage.getDirectory();
      const dir = await root.getDirectoryHandle('chats', { create: true });
      const file = await dir.getFileHandle('old.jsonl.jsonl', { create: true });
      const w = await file.createWritable();
      await w.write([head, ...lines.slice(0, 3)].join('\n') + '\n');
      await w.close();
    }
    let chats = await Scrollback.chats({ storage, windowLines: 4, backfillPages: 'mobile' });
    r.options = await chats.options();
    r.fractional = await caught(Scrollback.chats({ storage: 'memory', windowLines: 2.5 }));
    // Names: one chat under every spelling; a name that is nothing once normalized is refused.
    r.normalized = await chats.normalizeName('  notes.jsonl ');
    const c0 = await chats.replace(' notes.jsonl', head, lines.slice(0, 30));
    r.spellings = [];
    for (const spelling of ['notes', 'notes.jsonl', '  notes  ']) {
      const t = await chats.tail(spelling);
      r.spellings.push({ lines: t.lines, cursor: t.cursor });
    }
    r.emptyName = await caught(chats.tail(' .jsonl'));
    if (storage === 'opfs') r.legacy = (await chats.tail('old')).lines;
    // windowLines is the default of tail and before.
    r.tail = await chats.tail('notes');
    r.before = await chats.before('notes', r.tail.cursor);
    // A full save over a longer chat: the whole file is replaced, older cursors are stale.
    const c1 = await chats.replace('notes', head, lines.slice(30, 35));
    r.afterReplace = await chats.tail('notes', { maxLines: 100 });
    r.staleAfterReplace = await caught(chats.patch('notes', c0, head, { append: [extra] }));
    // restoreBackup undoes the last write (the replace), once.
    await chats.restoreBackup('notes');
    r.restored = await chats.tail('notes', { maxLines: 100 });
    r.staleAfterRestore = await caught(chats.patch('notes', c1, head, { append: [extra] }));
    r.restoreTwice = await caught(chats.restoreBackup('notes'));
    r.restoreMissing = await caught(chats.restoreBackup('never written'));

    // Backfill: warm the cache for a window, then another writer (a second handle, with its own
    // cache) edits the chat. The warm pages belong to the old version: not served.
    const t = await chats.tail('notes');
    const request = { window: t.lines, cursor: t.cursor, hasMoreBefore: t.hasMoreBefore, budgetTokens: 1e6 };
    r.warm = await chats.backfill('notes', request);
    r.warmAgain = await chats.backfill('notes', request);
    chats.close();
    // Reopen: everything persisted in the storage.
    chats = await Scrollback.chats({ storage });
    r.reopenedOptions = await chats.options();
    r.reopened = await chats.tail('notes', { maxLines: 100 });
    chats.close();
    r.closed = await caught(chats.tail('notes'));
    return r;
  }, { storage, lines, head: header('chat-1'), extra: msg(99) });
  assert.deepEqual(await pageErrors(), []);
  return { out, lines };
}

each(`a local-only store, options, names, full save, restore, stale backfill`, async (storage) => {
  const { out: r, lines } = await localScenario(storage);
  // (a backfill's pageLines defaults to windowLines too, see warmAgain below)
  for (const e of [r.badPreset, r.badLines, r.badKey]) {
    assert.equal(e?.name, 'TypeError', JSON.stringify(e));
  }
  assert.match(r.badPreset.message, /desktop.*mobile/);
  assert.deepEqual(r.options, { windowLines: 4, backfillPages: 8 });
  assert.equal(r.fractional?.name, 'TypeError', 'windowLines must be a whole number');

  assert.equal(r.normalized, 'notes');
  for (const s of r.spellings) assert.deepEqual(s, r.spellings[0]);
  assert.deepEqual(r.spellings[0].lines, lines.slice(26, 30));
  assert.equal(r.emptyName?.kind, 'invalidArgument');
  if (storage === 'opfs') assert.deepEqual(r.legacy, lines.slice(0, 3), 'found under its older spelling');

  assert.deepEqual(r.tail.lines, lines.slice(26, 30), 'windowLines is the tail default');
  assert.deepEqual(r.before.lines, lines.slice(22, 26), 'and the before default');
  assert.deepEqual(r.afterReplace.lines, lines.slice(30, 35));
  assert.equal(r.afterReplace.hasMoreBefore, false);
  assert.equal(r.staleAfterReplace?.kind, 'signatureMismatch');
  assert.deepEqual(r.restored.lines, lines.slice(0, 30), 'restoreBackup undid the full save');
  assert.equal(r.staleAfterRestore?.kind, 'signatureMismatch');
  assert.equal(r.restoreTwice?.kind, 'notFound');
  assert.equal(r.restoreMissing?.kind, 'notFound');

  assert.deepEqual(r.warm.older, lines.slice(0, 26));
  assert.equal(r.warmAgain.pagesRead, 0);
  assert.equal(r.warmAgain.pagesCached, 7, 'pages of windowLines (4): 26 lines');
  assert.deepEqual(r.reopenedOptions, { windowLines: 50, backfillPages: 12 });
  assert.deepEqual(r.reopened.lines, lines.slice(0, 30), 'persisted across workers');
  assert.equal(r.closed?.message, 'these chats are closed');
});

/**
 * The window-state helper against a model: random sequences of what a chat UI does (send,
 * edit, delete, insert, regenerate the last replies, show older messages, change the header,
 * reopen the chat) with saves in between through `ChatWindow.save`. After every save the whole
 * file must equal the app's model: the lines before the window, then the window.
 */
async function windowProperty(storage, seed, sequences, steps) {
  await freshPage();
  const out = await browser.run(async ({ storage, seed, sequences, steps }) => {
    const { Scrollback, ChatWindow } = await import('/pkg/index.js');
    // mulberry32: a seeded PRNG, so a failure names its seed and replays.
    let a = seed >>> 0;
    const rand = () => {
      a = (a + 0x6D2B79F5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const int = (n) => Math.floor(rand() * n);
    let serial = 0;
    const message = () => JSON.stringify({ mes: `m${serial++} ${'é'.repeat(int(4))}`, swipe: int(3) });
    const chats = await Scrollback.chats({ storage, windowLines: 6 });
    const kinds = {};
    const failures = [];
    let saves = 0;
    for (let s = 0; s < sequences && failures.length === 0; s++) {
      const name = `prop-${seed}-${s}`;
      let header = JSON.stringify({ chat_metadata: { integrity: name, v: 0 } });
      // The app's model: `older` (in the file, before the window) and `lines` (the window).
      let older = [];
      let lines;
      let w;
      let written = false;
      if (s % 2 === 0) {
        // A chat that is new on disk: the first save appends to the missing chat's cursor.
        const t = await chats.tail(name, { allowNotFound: true });
        w = ChatWindow.fromTail(t);
        lines = [];
      } else {
        // A chat the app built in memory: no window yet, the first save is a full save.
        w = new ChatWindow();
        lines = Array.from({ length: 3 + int(10) }, message);
      }
      for (let step = 0; step < steps && failures.length === 0; step++) {
        const op = int(10);
        const at = lines.length ? int(lines.length) : 0;
        if (op <= 1) {
          lines.push(...Array.from({ length: 1 + int(3) }, message)); // send / reply
        } else if (op === 2 && lines.length) {
          lines[at] = message(); w.markDirty(at); // edit
        } else if (op === 3 && lines.length) {
          lines.splice(at, 1); w.markDirty(at); // delete
        } else if (op === 4) {
          lines.splice(at, 0, message()); w.markDirty(at); // insert
        } else if (op === 5 && lines.length) {
          const from = Math.max(0, lines.length - 1 - int(2)); // regenerate the last replies
          lines.splice(from, lines.length - from, message()); w.markDirty(from);
        } else if (op === 6 && w.cursor && w.hasMoreBefore && w.dirtyFromIndex === null
          && w.savedMessageCount === lines.length) {
          // Show more: older lines in front (the window saved, as the seed's UI requires).
          const chunk = await chats.before(name, w.cursor, 1 + int(4));
          const expected = older.slice(older.length - chunk.lines.length);
          if (JSON.stringify(chunk.lines) !== JSON.stringify(expected)) {
            failures.push({ seed, s, step, what: 'before', got: chunk.lines, expected });
          }
          older = older.slice(0, older.length - chunk.lines.length);
          lines = [...chunk.lines, ...lines];
          w.prepended(chunk);
        } else if (op === 7) {
          header = JSON.stringify({ chat_metadata: { integrity: name, v: step } }); w.markHeaderDirty();
        } else if (op === 8 && w.cursor && w.cursor.size > 0 && w.dirtyFromIndex === null
          && w.savedMessageCount === lines.length && !w.headerDirty) {
          // Reopen the chat: a fresh tail of the saved file.
          const t = await chats.tail(name, { maxLines: 1 + int(8) });
          const all = [...older, ...lines];
          older = all.slice(0, all.length - t.lines.length);
          lines = t.lines;
          w = ChatWindow.fromTail(t);
          if (JSON.stringify(t.lines) !== JSON.stringify(all.slice(older.length))) {
            failures.push({ seed, s, step, what: 'reopen', got: t.lines });
          }
        }
        if (int(3) === 0 || step === steps - 1) {
          let plan;
          try {
            plan = await w.save(chats, name, header, lines);
          } catch (e) {
            failures.push({ seed, s, step, what: 'save', error: `${e.name} ${e.kind} ${e.message}` });
            break;
          }
          const kind = plan.kind === 'patch' ? Object.keys(plan.op)[0] : plan.kind;
          kinds[kind] = (kinds[kind] ?? 0) + 1;
          saves++;
          written ||= plan.kind !== 'none';
          if (!written) continue; // a new chat with nothing to save yet: still no file
          const file = await chats.tail(name, { maxLines: 100000, allowNotFound: true });
          const model = [...older, ...lines];
          if (file.header !== header || JSON.stringify(file.lines) !== JSON.stringify(model)) {
            failures.push({ seed, s, step, what: 'file', plan, file: file.lines, header: file.header, model, wantHeader: header });
          }
          if (w.savedMessageCount !== lines.length || w.dirtyFromIndex !== null) {
            failures.push({ seed, s, step, what: 'state', w: { ...w } });
          }
        }
      }
    }
    chats.close();
    return { kinds, failures, saves };
  }, { storage, seed, sequences, steps });
  assert.deepEqual(await pageErrors(), []);
  return out;
}

each(`ChatWindow's writes over random edit sequences keep the file equal to the app's model`, async (storage) => {
  const seed = Number(process.env.CHATS_SEED ?? 20261201);
  const { kinds, failures, saves } = await windowProperty(storage, seed, 24, 40);
  assert.deepEqual(failures, [], `seed ${seed}`);
  // Every kind of write was exercised, many times.
  for (const kind of ['append', 'rewriteFromIndex', 'replace', 'none']) {
    assert.ok((kinds[kind] ?? 0) > 0, `${kind} was never planned: ${JSON.stringify(kinds)}`);
  }
  assert.ok(saves > 200, `saves: ${saves}`);
  console.log(`# ${storage}: ${saves} saves, ${JSON.stringify(kinds)}`);
});

// Two tabs of the app share its chats: each has its own worker (`Scrollback.chats`), and each
// reads and writes what the other wrote. Before each call held the chat's Web Lock and let go of
// its files after writing, a chat one worker had written stayed locked against every other one
// on OPFS (its sync access handles), and a cursor read in one worker was stale in the next.
each(`two workers (two tabs) share a chat: each reads and writes what the other wrote; a write that crossed another is refused`, async (storage) => {
  await freshPage();
  const out = await browser.run(async ({ storage, head }) => {
    const { Scrollback } = await import('/pkg/index.js');
    const caught = (p) => p.then(() => 'ok', (e) => e.kind ?? e.message);
    const line = (i) => JSON.stringify({ mes: `m${i}` });
    const [a, b] = [await Scrollback.chats({ storage }), await Scrollback.chats({ storage })];
    const name = 'shared';
    const r = {};
    let ca = await a.replace(name, head, [line(1), line(2)]);
    ca = await a.patch(name, ca, head, { append: [line(3)] });
    // b reads what a wrote, with a's cursor (nothing wrote since), and appends.
    const tb = await b.tail(name);
    r.bSees = tb.lines;
    r.sameCursor = JSON.stringify(tb.cursor) === JSON.stringify(ca);
    const cb = await b.patch(name, ca, head, { append: [line(4)] });
    // a's cursor is stale now: refused, nothing written.
    r.aStale = await caught(a.patch(name, ca, head, { append: [line(99)] }));
    const ta = await a.tail(name);
    r.aSees = ta.lines;
    r.aCursorIsB = JSON.stringify(ta.cursor) === JSON.stringify(cb);
    // Both write at once from the same state: one write lands, the other is refused.
    r.both = await Promise.all([a, b].map((w, i) => caught(w.patch(name, ta.cursor, head, { append: [line(10 + i)] }))));
    r.end = (await b.tail(name)).lines;
    // A third worker, after the two are gone, reads and restores the last write's backup.
    await Promise.all([a.close(), b.close()]);
    const c = await Scrollback.chats({ storage });
    r.restored = await caught(c.restoreBackup(name));
    r.afterRestore = (await c.tail(name)).lines;
    await c.close();
    return r;
  }, { storage, head: header('shared') });
  assert.deepEqual(await pageErrors(), []);
  const m = (...is) => is.map((i) => JSON.stringify({ mes: `m${i}` }));
  assert.deepEqual(out.bSees, m(1, 2, 3), 'the second worker reads what the first wrote');
  assert.ok(out.sameCursor, 'and the same cursor: nothing changed in between');
  assert.equal(out.aStale, 'signatureMismatch');
  assert.deepEqual(out.aSees, m(1, 2, 3, 4));
  assert.ok(out.aCursorIsB, 'the first worker reads the cursor the second wrote');
  assert.deepEqual([...out.both].sort(), ['ok', 'signatureMismatch'], JSON.stringify(out.both));
  assert.equal(out.end.length, 5);
  assert.deepEqual(out.end.slice(0, 4), m(1, 2, 3, 4));
  assert.ok([m(10)[0], m(11)[0]].includes(out.end[4]), out.end[4]);
  assert.equal(out.restored, 'ok');
  assert.deepEqual(out.afterRestore, m(1, 2, 3, 4), 'the crossing write undone');
});

// An app that saves on every edit does not wait for the last save: the saves run one after the
// other, each planned from what the one before left. Before, the second was planned from the
// same cursor as the first and refused as stale, by the window's own write.
each(`ChatWindow: saves called while one is on its way all land, in order`, async (storage) => {
  await freshPage();
  const out = await browser.run(async ({ storage, head }) => {
    const { Scrollback, ChatWindow } = await import('/pkg/index.js');
    const chats = await Scrollback.chats({ storage });
    const line = (i) => JSON.stringify({ mes: `m${i}` });
    const name = 'autosaved';
    await chats.replace(name, head, [line(0), line(1)]);
    const tail = await chats.tail(name);
    const messages = [...tail.lines];
    const w = ChatWindow.fromTail(tail);
    const saves = [];
    messages.push(line(2));
    saves.push(w.save(chats, name, head, messages));
    messages.push(line(3));
    saves.push(w.save(chats, name, head, messages));
    messages[0] = line(10);
    w.markDirty(0);
    saves.push(w.save(chats, name, head, messages));
    const plans = await Promise.all(saves.map((p) => p.then((plan) => plan.kind, (e) => e.kind ?? e.message)));
    const file = (await chats.tail(name)).lines;
    await chats.close();
    return { plans, file, messages, dirty: w.dirtyFromIndex, count: w.savedMessageCount };
  }, { storage, head: header('autosaved') });
  assert.deepEqual(await pageErrors(), []);
  assert.deepEqual(out.plans, ['patch', 'patch', 'patch'], 'every save landed');
  assert.deepEqual(out.file, out.messages, 'the file is the app\'s lines');
  assert.equal(out.dirty, null);
  assert.equal(out.count, out.messages.length);
});

// An app lists its chats (a sidebar) and deletes one: gone with its backup, its cursors stale,
// and a first save starts it again.
each(`chats are listed by name and deleted with their backups`, async (storage) => {
  await freshPage();
  const out = await browser.run(async ({ storage, head }) => {
    const { Scrollback } = await import('/pkg/index.js');
    const chats = await Scrollback.chats({ storage });
    const caught = (p) => p.then((v) => v, (e) => e.kind ?? e.message);
    const r = {};
    // The storage holds this file's other tests' chats too: this test's are named `listed …`.
    const mine = async () => (await chats.list()).filter((e) => e.name.startsWith('listed '));
    r.empty = await mine();
    const c = await chats.replace('listed trip', head, ['{"m":1}', '{"m":2}']);
    await chats.patch('listed trip', c, head, { append: ['{"m":3}'] });
    await chats.replace(' listed notes.jsonl', head, ['{"m":1}']);
    r.listed = await mine();
    r.deleted = await chats.delete('listed trip');
    r.again = await chats.delete('listed trip');
    r.after = (await mine()).map((e) => e.name);
    r.tail = await caught(chats.tail('listed trip'));
    r.restore = await caught(chats.restoreBackup('listed trip'));
    r.stale = await caught(chats.patch('listed trip', c, head, { append: ['{"m":9}'] }));
    const fresh = await chats.tail('listed trip', { allowNotFound: true });
    await chats.save('listed trip', fresh.cursor, head, ['{"m":5}']);
    r.restarted = (await chats.tail('listed trip')).lines;
    r.badName = await caught(chats.delete('..'));
    await chats.close();
    return r;
  }, { storage, head: header('listed') });
  assert.deepEqual(await pageErrors(), []);
  assert.deepEqual(out.empty, []);
  assert.deepEqual(out.listed.map((e) => e.name), ['listed notes', 'listed trip'], 'by name, normalized, nothing beside them');
  const size = (lines) => [header('listed'), ...lines].join('\n').length + 1;
  assert.deepEqual(out.listed.map((e) => e.size), [size(['{"m":1}']), size(['{"m":1}', '{"m":2}', '{"m":3}'])]);
  for (const e of out.listed) assert.ok(e.modifiedMillis > 1.7e12, `a time: ${e.modifiedMillis}`);
  assert.equal(out.deleted, true);
  assert.equal(out.again, false);
  assert.deepEqual(out.after, ['listed notes']);
  assert.equal(out.tail, 'notFound');
  assert.equal(out.restore, 'notFound', 'the backup went with it');
  assert.equal(out.stale, 'signatureMismatch');
  assert.deepEqual(out.restarted, ['{"m":5}']);
  assert.equal(out.badName, 'invalidArgument');
});

// "Show more" and a send racing: the user asks for older messages, then sends one, and the page
// comes back while the save is on its way (or after it landed, read against the cursor the save
// made stale). Before, the save, once landed, set the window's cursor and saved count from what
// it had planned: the page was forgotten, and the next save appended lines already on disk
// again (the baseline check passed: the file did hold that many lines after the old offset),
// so the file ended `… L9 N1 L9 N1 N2` while the app showed `… L9 N1 N2`. A page read before a
// save and put in front after it kept its cursor, stale by then: the next "show more" was
// refused. Writes held by a writer that answers only when the test lets it make the race
// deterministic; after each case the whole file must be what the app holds, once.
each(`ChatWindow: older pages put in front while a save is on its way are kept, once`, async (storage) => {
  await freshPage();
  const out = await browser.run(async ({ storage }) => {
    const { Scrollback, ChatWindow } = await import('/pkg/index.js');
    const chats = await Scrollback.chats({ storage });
    const L = (i) => JSON.stringify({ mes: typeof i === 'number' ? `L${i}` : i });
    const head = (name, pad = '') => JSON.stringify({ chat_metadata: { integrity: name }, pad });
    /** A writer whose patch is held until `release()`: `started` settles once it is under way. */
    const held = ({ fail = false } = {}) => {
      let release, issued;
      const gate = new Promise((r) => { release = r; });
      const started = new Promise((r) => { issued = r; });
      const writer = {
        async patch(name, cursor, header, op, options) {
          if (fail) {
            // A real refusal (nothing written), answered once the test lets it.
            const refused = chats.patch(name, cursor, header, op, { ...options, expectedWindowLineCount: 999 })
              .then(() => null, (e) => e);
            issued();
            await gate;
            throw await refused;
          }
          const c = await chats.patch(name, cursor, header, op, options); // on disk already
          issued();
          await gate;
          return c;
        },
        replace: (...args) => chats.replace(...args),
      };
      return { writer, started, release };
    };
    /** The file read back whole, by a tail and by pages before the window's cursor. */
    const readBack = async (name, w, messages) => {
      const whole = await chats.tail(name, { maxLines: 100000 });
      const win = await chats.tail(name, { maxLines: messages.length });
      let older = [];
      let cursor = w.cursor;
      let more = w.hasMoreBefore;
      try {
        while (more) {
          const page = await chats.before(name, cursor, 3);
          older = [...page.lines, ...older];
          ({ cursor, hasMoreBefore: more } = page);
        }
      } catch (e) {
        older = `${e.name} ${e.kind}`;
      }
      return {
        file: whole.lines, header: whole.header, older, windowOnDisk: win.lines, messages,
        cursorIsTheFiles: JSON.stringify(win.cursor) === JSON.stringify(w.cursor),
        saved: w.savedMessageCount, dirty: w.dirtyFromIndex,
      };
    };
    const start = async (name) => {
      await chats.replace(name, head(name), Array.from({ length: 10 }, (_, i) => L(i)));
      const tail = await chats.tail(name, { maxLines: 2 });
      return { w: ChatWindow.fromTail(tail), messages: [...tail.lines] };
    };
    const caught = (p) => p.then((plan) => plan.kind, (e) => `${e.name} ${e.kind}`);
    const r = {};

    // The audit's case: the page was asked for before the send, and comes back while the
    // save (a new header too: a longer one, so the write moves every byte) is on its way.
    {
      const name = 'race page during save';
      let { w, messages } = await start(name);
      const page = await chats.before(name, w.cursor, 2);
      const hold = held();
      messages.push(L('N1'));
      w.markHeaderDirty();
      const saving = w.save(hold.writer, name, head(name, 'a longer header'), messages);
      await hold.started;
      messages = [...page.lines, ...messages];
      w.prepended(page);
      hold.release();
      const first = await caught(saving);
      messages.push(L('N2'));
      const second = await caught(w.save(chats, name, head(name, 'a longer header'), messages));
      const afterSecond = (await chats.tail(name, { maxLines: 100000 })).lines;
      // The next "show more" reads with the window's cursor: current, the pages in front.
      const next = await chats.before(name, w.cursor, 2).catch((e) => ({ error: `${e.name} ${e.kind}` }));
      if (next.lines) {
        messages = [...next.lines, ...messages];
        w.prepended(next);
        messages[1] = L('E5');
        w.markDirty(1);
      }
      const third = await caught(w.save(chats, name, head(name, 'a longer header'), messages));
      r.duringSave = { plans: [first, second, third], afterSecond, next: next.error ?? next.lines, ...await readBack(name, w, messages) };
    }

    // A save that fails while two pages are put in front, with a save called before them
    // waiting behind it (its lines have none of the pages) and an edit marked meanwhile.
    {
      const name = 'race failed save';
      let { w, messages } = await start(name);
      const hold = held({ fail: true });
      messages.push(L('N1'));
      const failing = w.save(hold.writer, name, head(name), messages);
      messages.push(L('N2'));
      const waiting = w.save(chats, name, head(name), messages);
      await hold.started;
      for (let i = 0; i < 2; i++) {
        const page = await chats.before(name, w.cursor, 2);
        messages = [...page.lines, ...messages];
        w.prepended(page);
      }
      messages[1] = L('E5');
      w.markDirty(1);
      hold.release();
      const plans = [await caught(failing), await caught(waiting)];
      // The waiting save wrote its lines, after the pages (on disk already); not the edit yet.
      const afterWaiting = (await chats.tail(name, { maxLines: 100000 })).lines;
      plans.push(await caught(w.save(chats, name, head(name), messages)));
      r.failedSave = { plans, afterWaiting, ...await readBack(name, w, messages) };
    }

    // The page read before the save comes back after it landed: its cursor is of the file
    // before the save (stale), the lines in front of the window the same.
    {
      const name = 'race page after save';
      let { w, messages } = await start(name);
      const page = await chats.before(name, w.cursor, 2);
      messages.push(L('N1'));
      w.markHeaderDirty();
      const first = await caught(w.save(chats, name, head(name, 'longer'), messages));
      messages = [...page.lines, ...messages];
      w.prepended(page);
      const next = await chats.before(name, w.cursor, 2).catch((e) => ({ error: `${e.name} ${e.kind}` }));
      if (next.lines) {
        messages = [...next.lines, ...messages];
        w.prepended(next);
      }
      messages.push(L('N2'));
      const second = await caught(w.save(chats, name, head(name, 'longer'), messages));
      r.afterSave = { plans: [first, second], next: next.error ?? next.lines, ...await readBack(name, w, messages) };
    }
    await chats.close();
    return r;
  }, { storage });
  assert.deepEqual(await pageErrors(), []);
  const L = (...is) => is.map((i) => JSON.stringify({ mes: typeof i === 'number' ? `L${i}` : i }));
  const expect = (c, what, { plans, older, next }) => {
    assert.deepEqual(c.file, [...older, ...c.messages], `${what}: the file is the lines before the window, then the app's, once`);
    assert.equal(new Set(c.file).size, c.file.length, `${what}: no line twice`);
    assert.deepEqual(c.plans, plans, `${what}: the saves`);
    if (next) assert.deepEqual(c.next, next, `${what}: the next "show more" reads the lines in front`);
    assert.deepEqual(c.older, older, `${what}: the pages before the window's cursor`);
    assert.deepEqual(c.windowOnDisk, c.messages, `${what}: the window on disk`);
    assert.ok(c.cursorIsTheFiles, `${what}: the window's cursor is the file's`);
    assert.equal(c.saved, c.messages.length, `${what}: saved count`);
    assert.equal(c.dirty, null, `${what}: nothing left to save`);
  };
  assert.deepEqual(out.duringSave.afterSecond, L(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 'N1', 'N2'),
    'the second save wrote only what was not on disk');
  expect(out.duringSave, 'a page put in front during a save', {
    plans: ['patch', 'patch', 'patch'], next: L(4, 5), older: L(0, 1, 2, 3),
  });
  assert.deepEqual(out.duringSave.messages, L(4, 'E5', 6, 7, 8, 9, 'N1', 'N2'));
  assert.deepEqual(out.failedSave.afterWaiting, L(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 'N1', 'N2'),
    'the save waiting behind the failed one wrote its lines after the pages, nothing lost');
  expect(out.failedSave, 'two pages put in front during a failed save', {
    plans: ['ChatError windowBaselineMismatch', 'patch', 'patch'], older: L(0, 1, 2, 3),
  });
  assert.deepEqual(out.failedSave.messages, L(4, 'E5', 6, 7, 8, 9, 'N1', 'N2'));
  expect(out.afterSave, 'a page read before a save, put in front after it', {
    plans: ['patch', 'patch'], next: L(4, 5), older: L(0, 1, 2, 3),
  });
  assert.deepEqual(out.afterSave.messages, L(4, 5, 6, 7, 8, 9, 'N1', 'N2'));
});
