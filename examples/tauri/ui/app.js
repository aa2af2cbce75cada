// The example's page: the npm package follows a session of the server (cached in IndexedDB),
// and the app's own chat "notes" is read and written through the Rust side's commands, with the
// package's ChatWindow turning edits into the smallest write. `window.app` is what the test
// (tests/tauri.e2e.mjs) drives.
import { Scrollback, ChatWindow } from './pkg/index.js';

const { invoke } = window.__TAURI__.core;
const $ = (id) => document.getElementById(id);

// ChatWindow writes through anything with `patch` and `replace`: here, the Tauri commands,
// which take its arguments by name (its patch is the Rust `PatchOp` as it is).
const commands = {
  patch: (name, cursor, header, op, options) => invoke('chat_patch', { name, cursor, header, op, options }),
  replace: (name, header, lines, options) => invoke('chat_replace', { name, header, lines, options }),
};

const NOTES = 'notes';
const app = {
  config: null,
  sb: null,
  view: null,
  /** Settles when the session's rows are drawn and the server confirmed them. */
  session: null,
  /** Settles when the local chat's window is read. */
  notes: null,
  error: null,
  header: JSON.stringify({ chat_metadata: { integrity: 'notes' } }),
  lines: [],
  window: null,
};
window.app = app;

function drawRows(state) {
  $('status').textContent = state.banner ?? state.status;
  const rows = state.rows.filter((r) => typeof r.text === 'string');
  $('rows').replaceChildren(...rows.map((r) => {
    const div = document.createElement('div');
    div.className = `row ${r.kind}`;
    div.textContent = `${r.kind}: ${r.text}`;
    return div;
  }));
}

async function followSession() {
  app.sb = await Scrollback.open({ server: app.config.server, storage: 'indexeddb' });
  const [first] = await app.sb.sessions();
  $('session-id').textContent = first.id;
  await new Promise((resolve, reject) => {
    const onChange = (state) => {
      drawRows(state);
      if (state.ready && state.verified) resolve();
    };
    app.sb.openSession(first.id, { onChange }).then((view) => {
      app.view = view;
      onChange(view.state);
    }, reject);
  });
}

function drawNotes() {
  $('more').hidden = !app.window.hasMoreBefore;
  $('notes').replaceChildren(...app.lines.map((line, i) => {
    const div = document.createElement('div');
    div.className = 'row';
    // A line is the file's, as another program may have written it: blank, or not ours.
    let text;
    try { text = JSON.parse(line)?.mes ?? line; } catch { text = line; }
    div.textContent = `${i}: ${text}`;
    return div;
  }));
}

async function openNotes() {
  const tail = await invoke('chat_tail', { name: NOTES, allowNotFound: true });
  if (tail.header) app.header = tail.header;
  app.lines = tail.lines;
  app.window = ChatWindow.fromTail(tail);
  drawNotes();
}

/**
 * Older notes in front of the window (the app's "show more"). A note added meanwhile may be
 * saving while the page is read: the window keeps the page once that save lands.
 */
app.showOlder = async () => {
  const chunk = await invoke('chat_before', { name: NOTES, cursor: app.window.cursor });
  app.lines = [...chunk.lines, ...app.lines];
  app.window.prepended(chunk);
  drawNotes();
  return chunk.lines.length;
};

/** Adds a note and saves; resolves to the write performed. */
app.addNote = async (text) => {
  app.lines.push(JSON.stringify({ mes: text }));
  const plan = await app.window.save(commands, NOTES, app.header, app.lines);
  drawNotes();
  return plan;
};

/** Edits note `i` and saves; resolves to the write performed. */
app.editNote = async (i, text) => {
  app.lines[i] = JSON.stringify({ mes: text });
  app.window.markDirty(i);
  const plan = await app.window.save(commands, NOTES, app.header, app.lines);
  drawNotes();
  return plan;
};

/** The prompt history behind the window, up to a token budget (the backfill command). */
app.promptHistory = (budgetTokens) => invoke('chat_backfill', {
  name: NOTES, window: app.lines, cursor: app.window.cursor,
  hasMoreBefore: app.window.hasMoreBefore, budgetTokens,
});

$('more').onclick = () => app.showOlder();
$('add').onsubmit = (e) => {
  e.preventDefault();
  const text = $('text').value.trim();
  if (text) app.addNote(text).then(() => { $('text').value = ''; });
};

app.config = await invoke('app_config');
app.notes = openNotes();
app.session = followSession();
for (const p of [app.notes, app.session]) {
  p.catch((e) => { app.error = `${e?.name ?? 'Error'}: ${e?.message ?? JSON.stringify(e)}`; $('status').textContent = app.error; });
}
