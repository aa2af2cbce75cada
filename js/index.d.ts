// Types of Scrollback's JS API (js/index.js).

/**
 * Where the cache keeps its data. `auto`: OPFS when a sync access handle opens here (Chromium,
 * Firefox, Safari), else IndexedDB (WebKitGTK, so a Tauri app on Linux), else memory.
 */
export type Storage = 'auto' | 'opfs' | 'indexeddb' | 'memory';

/** Options of {@link Scrollback.open}. */
export interface ScrollbackOptions {
  /** The transcript server, e.g. `http://127.0.0.1:8080`. */
  server: string;
  /** The server's access token, sent on every request and on the stream. */
  token?: string;
  /** Where to cache (default `auto`). */
  storage?: Storage;
  /** The cache's byte budget for this server; least recently opened sessions go first. */
  budgetBytes?: number;
  /**
   * Whether cached sessions are indexed for {@link Scrollback.search} (default `true`). An
   * app that never searches turns it off and pays nothing for the index: no index bytes in
   * the budget (about a third of the cached bytes with it on), no indexing work on each
   * append. Off, each session's first write removes the index it had, and the worker's
   * warm-up shortly after `open` removes the rest; `search` rejects. Turned on again, each
   * session's index is rebuilt from its cached lines when it is next opened or written. The
   * tabs of one app should agree: one with search off removes what one with it on builds.
   */
  search?: boolean;
  /**
   * The id of the session the app opens first, when it knows it (a reopen at a chat's URL):
   * its first request is asked at once, from the page, while the worker, the module and the
   * store start (the check and catch-up from the cursor of the session's last screen, or, with
   * none, the newest window a first visit shows), and `openSession(opening)` takes that answer
   * instead of asking again. Saves a round trip; the cached tail is still compared with the
   * server's line before anything is shown as verified.
   */
  opening?: string;
  /**
   * With `opening`: called once with the session's first screen, folded in the page by the
   * package's small module (`scrollback_screen_bg.wasm`, loaded beside the request) as soon as
   * the answer is in, before the worker's module, the store and the session's view are up. On a
   * first visit (no last screen kept: see {@link Scrollback.lastScreen}), the newest window the
   * page asked; on a reopen, the last screen with the lines its check brought folded on, once
   * the server's line at its cursor was found to be the one the screen was saved with (a
   * replaced file gives none). Like a last screen, `ready` but neither `verified` nor `live`;
   * draw it, and let the view's first state replace it. Not called when a view of the session
   * already shows rows, when there is nothing new to show (a session with no line, a reopen
   * with nothing new), or when the request failed. The worker's own module is fetched once the
   * small one is up (or failed, or after a second at most): it is needed first. An error it
   * throws is reported (`reportError`) and the session opens as usual.
   */
  onOpeningScreen?: (state: SessionState) => void;
}

/** One entry of the session list. */
export interface SessionSummary {
  id: string;
  title: string;
  /** `idle`, `working`, `waiting`, ... */
  status: string;
  model: string;
  permissionMode: string;
  /** The newest line's seq; 0 for an empty transcript. */
  seq: number;
  /**
   * Set when the server could not be reached and this entry is what the cache knows of the
   * session (from the last list fetched, or its id and newest cached seq): not live.
   */
  offline?: true;
}

/**
 * What changed since the last `onChange` (or since `openSession` resolved), so a UI can patch
 * what it drew: rows are named by their `seq`, fields by their name in {@link SessionState}.
 */
export interface SessionChange {
  /** Every row may have changed (a reset, a failed check, a reload): redraw all of `rows`. */
  reset: boolean;
  /** Rows that are new (streamed in, or an older page), by seq, ascending. */
  added: number[];
  /** Rows already drawn whose content changed (an assistant message grew, a tool call got its result, a command its new state), by seq. */
  updated: number[];
  /** Rows no longer in `rows` (a loose result or command update taken in by an older row), by seq. */
  removed: number[];
  /** The other fields of the state that changed (`status`, `live`, `counters`, ...). */
  state: (keyof SessionState)[];
}

/** Options of {@link Scrollback.openSession}. */
export interface OpenSessionOptions {
  /**
   * Called with the new state and what changed: at once when nothing was delivered since the
   * last animation frame, else at the next frame, so at most once a frame while changes keep
   * coming. The state is a new object whenever anything changed; its `rows` array is a new one
   * when rows changed. An error it throws is reported (`reportError`) and stops nothing else.
   */
  onChange?: (state: SessionState, change: SessionChange) => void;
  /**
   * A seq saved at the reader's position: history is loaded back to it, after `openSession`
   * has resolved (the rows that reach it arrive through `onChange`).
   */
  anchor?: number;
}

/** What a cache has saved and cost so far. */
export interface Counters {
  /** Requests sent to the server (pages, probes, stream connections, lists, writes). */
  requests: number;
  /** Bytes received from the server. */
  bytesDownloaded: number;
  /** Older pages served from the cache with no request. */
  pagesLocal: number;
  /** Opens whose cached tail the server confirmed. */
  probesPassed: number;
  /** Opens whose cache the server contradicted (the cache was purged, the open went cold). */
  probesFailed: number;
}

/** A tool's result. */
export interface ToolOutput {
  /** The result line's seq. */
  seq: number;
  /** The result line's timestamp (seconds). */
  ts: number;
  output: unknown;
  isError: boolean;
}

interface RowBase {
  /** The seq of the line that starts the row. */
  seq: number;
  /** That line's timestamp (seconds since the epoch). */
  ts: number;
}

/** The user's message. */
export interface UserRow extends RowBase {
  kind: 'user';
  text: string;
  /** The queued message it delivers, if it was queued. */
  queuedId?: string;
}

/** An assistant message: a run of streamed deltas joined. */
export interface AssistantRow extends RowBase {
  kind: 'assistant';
  /** The last seq the row covers. */
  lastSeq: number;
  text: string;
  messageId?: string;
}

/** A tool call, with its result once it arrived. */
export interface ToolRow extends RowBase {
  kind: 'tool';
  id: string;
  name: string;
  input: unknown;
  result: ToolOutput | null;
}

/** A tool result whose call is not loaded (yet). */
export interface ToolResultRow extends RowBase {
  kind: 'toolResult';
  id: string;
  output: unknown;
  isError: boolean;
}

/** A slash command and its output. */
export interface CommandRow extends RowBase {
  kind: 'command';
  id: string;
  command: string;
  done: boolean;
  output: string | null;
}

/** A status change. */
export interface StatusRow extends RowBase {
  kind: 'status';
  status: string;
}

/** Context usage. */
export interface UsageRow extends RowBase {
  kind: 'usage';
  /** Tokens in the context (absolute). */
  context: number;
  output: number | null;
}

/** A settings change. */
export interface SettingsRow extends RowBase {
  kind: 'settings';
  model: string | null;
  permissionMode: string | null;
}

/** A message queued until the agent reads it. */
export interface QueuedRow extends RowBase {
  kind: 'queued';
  id: string;
  text: string;
}

/** Context compaction started or ended. */
export interface CompactingRow extends RowBase {
  kind: 'compacting';
  active: boolean;
}

/** An error the agent reported. */
export interface ErrorRow extends RowBase {
  kind: 'error';
  message: string;
}

/** An event of a type this version does not know, kept as it came. */
export interface UnknownRow extends RowBase {
  kind: 'unknown';
  /** The event's `type`, as sent. */
  eventType: string;
  /** The whole event. */
  event: Record<string, unknown>;
}

/** An event of a known type whose fields do not have the protocol's shape. */
export interface MalformedRow extends RowBase {
  kind: 'malformed';
  /** The event's `type`. */
  eventType: string;
  /** What is wrong with it. */
  reason: string;
  /** The whole event. */
  event: Record<string, unknown>;
}

/** One display row; `kind` says which. */
export type Row =
  | UserRow | AssistantRow | ToolRow | ToolResultRow | CommandRow | StatusRow | UsageRow
  | SettingsRow | QueuedRow | CompactingRow | ErrorRow | UnknownRow | MalformedRow;

/** A message waiting for the agent. */
export interface QueuedMessage {
  id: string;
  text: string;
  seq: number;
}

/** A command that has not finished. */
export interface WaitingCommand {
  id: string;
  command: string;
  seq: number;
}

/** A session as a screen shows it. */
export interface SessionState {
  /** The session's id. */
  id: string;
  /** The rows shown, oldest first. */
  rows: Row[];
  status: string;
  model: string;
  permissionMode: string;
  /** Tokens in the context, when known. */
  contextTokens: number | null;
  /** Messages queued and not yet read by the agent. */
  queued: QueuedMessage[];
  /** Commands started and not finished. */
  waitingCommands: WaitingCommand[];
  /** When a running compaction started (seconds), if one is running. */
  compactingSince: number | null;
  /**
   * A connection problem to show (e.g. reconnecting), or null. Also set, with `live` false, when
   * the package's worker failed: the view then hears nothing more.
   */
  banner: string | null;
  /** Whether older history exists above the first row. */
  moreHistory: boolean;
  /**
   * Whether the view's rows are to be drawn. False until its first rows are read, and while
   * they are cached rows older than a screen the app was already handed for the session (its
   * last screen, its opening screen: a cache that stopped writing, or a last screen lost) and
   * the server has not answered their check yet: drawing them would take the user back to
   * older lines for a moment.
   */
  ready: boolean;
  /** Whether the server has confirmed the rows shown (cached rows are shown before it has). */
  verified: boolean;
  /** The seq of the oldest line shown. */
  oldest: number | null;
  /** The seq of the newest line shown (the stream's cursor). */
  cursor: number;
  /**
   * A fingerprint of that line's exact text (16 hex digits; null before anything is shown): a
   * saved screen keeps it, so that the next reopen's check can tell the screen is still the
   * server's before newer lines are folded onto it.
   */
  cursorFingerprint: string | null;
  /** Whether the stream is connected. */
  live: boolean;
  /**
   * Why the session stopped, when retrying cannot help: `gone` (the server has no such session;
   * its cache was purged), `unauthorized` (the server's own 401/403: the token is missing or
   * wrong: `Scrollback.setToken` opens it again from the cache), `refused` (another 4xx from
   * the server). Nothing more is asked until `reload()` (or, for `unauthorized`, `setToken`).
   * Network errors, 5xx and a proxy's or a portal's pages are retried with backoff instead, and
   * show in `banner`.
   */
  error: SessionError | null;
  /**
   * Whether this tab writes the session's cache: one writer per session per origin; the other
   * tabs show the same rows read-only and take over when the writer's tab closes. (Where the
   * page has no Web Locks, every tab starts as a writer, and one that finds another tab's
   * writes in the store becomes a reader for the rest of the open.)
   */
  writer: boolean;
  /**
   * Why this tab stopped keeping the session's rows in the cache, or null while it keeps them:
   * a write (or a read) of the storage failed, e.g. `"storage quota exceeded"`. The rows are
   * still shown and followed live, but the next open fetches what was not kept. `reload()`
   * throws the session's cache away and tries again. A quota error also evicts the least
   * recently opened sessions (never this one), so the next open or `reload()` writes again.
   * Null for a reader (`writer` false).
   */
  storageError: string | null;
  /** This session's own counts since it was opened. */
  counters: SessionCounters;
}

/** The class of a server or network error, by what retrying does about it. */
export type ServerErrorKind = 'unavailable' | 'gone' | 'unauthorized' | 'refused';

/** Why a session stopped (see {@link SessionState.error}). */
export interface SessionError {
  kind: Exclude<ServerErrorKind, 'unavailable'>;
  /** The HTTP status, when the server answered. */
  status: number | null;
  /** The server's own explanation. */
  message: string;
}

/**
 * What a call rejects with when the cache, the storage or the server fails: an `Error` named
 * `ScrollbackError`. When the call reached for the server, `kind` is the error's class and,
 * when the server answered, `status` its HTTP status (401 for a wrong token, 404 for a session
 * the server does not have); a storage error has neither. Every rejection is one of four:
 * a `TypeError` (a bad argument or option: `name` and `message` only), a `ScrollbackError`,
 * a {@link ChatError} (a chat operation), or a plain `Error` when the object is closed or its
 * worker failed ("Scrollback is closed", "this session view is closed", "these chats are
 * closed", "the Scrollback worker failed: ..."). Calls that return a promise never throw.
 */
export interface ScrollbackError extends Error {
  name: 'ScrollbackError';
  kind?: ServerErrorKind;
  status?: number;
}

/** What one open session has cost and saved. */
export interface SessionCounters {
  /** Requests: pages, checks (each with its catch-up) and stream connections. */
  requests: number;
  /** Bytes received: page bodies and stream events. */
  bytes: number;
  /** Older pages served from the cache. */
  localPages: number;
  probesPassed: number;
  probesFailed: number;
  /** Stream events received. */
  events: number;
  /** Lines received with a check of the cached tail (the reopen's catch-up, a reconnect's). */
  caughtUp: number;
  /** Resets: reset frames, and checks that found a gap too large to catch up. */
  resets: number;
}

/** One open session. */
export declare class SessionView {
  private constructor();
  /** The session's id. */
  readonly id: string;
  /** The newest state. */
  readonly state: SessionState;
  /**
   * Loads one page of older history (from the cache when it holds it) into `state.rows`;
   * resolves to whether more history remains (`state.moreHistory`): `false` once the page just
   * loaded reached the session's first line, or when there was nothing older to load. It
   * resolves once the page is shown: a page from the server is written to the cache after that
   * (`cachedSize` and `search` wait for the write). Rejects when the view is closed before the
   * page came (it is not waited for), and with a `ScrollbackError` of kind `unavailable` when
   * the page is not cached here and the server cannot be reached (or has not answered the
   * view's check yet, the banner says why): try again when the banner is gone. While the check
   * is on its way without a banner (a moment after an open or a reconnect), the call waits for
   * it: a page from the server is never shown over rows it has not checked.
   */
  loadOlder(): Promise<boolean>;
  /** Bytes cached for this session. */
  cachedSize(): Promise<number>;
  /**
   * Purges this session's cache and reopens it cold at `anchor` (the newest rows without one).
   * Resolves once the cache is purged and the reopen has begun, not when its rows are in:
   * they arrive through `onChange` (until then `state.ready` is false), and history is then
   * loaded back to `anchor`.
   */
  reload(anchor?: number): Promise<void>;
  /** Stops following the session. */
  close(): void;
}

/** Options of `Scrollback.search`. */
export interface SearchOptions {
  /** The most hits returned (default 20). */
  limit?: number;
  /** Only these sessions (ids); every cached session of the server when absent. */
  sessions?: string[];
}

/**
 * A piece of a search hit's snippet. `text` is the transcript's own text, plain: show it as
 * text (a text node, `textContent`), never as HTML, since a transcript may hold markup
 * (`<img onerror>`).
 */
export interface SnippetPiece {
  text: string;
  /** Whether it is a matched word (mark it). */
  hit: boolean;
}

/** One search result: open `session` with `anchor: seq` to show the row. */
export interface SearchHit {
  /** The session id. */
  session: string;
  /**
   * The seq of the line the match is in: a row's first line, or for a tool's result (or a
   * command's later output) the line that brought it, which the display shows in the earlier
   * row of its call. `openSession(session, { anchor: seq })` shows it either way; in the view's
   * rows it is the last row whose seq is at most this one. A call and its result that both
   * match are two hits.
   */
  seq: number;
  /** That line's timestamp (seconds since the epoch, as the server sent it). */
  ts: number;
  /** Relevance: BM25 with a recency tie-break; higher first. */
  score: number;
  /** An excerpt around the first match (`…` where cut), matched words marked. */
  snippet: SnippetPiece[];
}

/** A client-side transcript cache for one server. */
export declare class Scrollback {
  private constructor();
  /** Starts the worker and opens the cache for `options.server`. */
  static open(options: ScrollbackOptions): Promise<Scrollback>;
  /**
   * The last screen of session `id` shown in this browser (its newest rows, kept in
   * `localStorage` as views change), read at once with no worker and no network: draw it while
   * `open` and `openSession` start, and let the view's first state replace it. `ready` is true;
   * `verified` and `live` are false (the server has not checked it). Null when none is kept (a
   * reload, a delete, or the session gone from the server forget it). `server` is the same
   * string as given to `open`.
   */
  static lastScreen(server: string, id: string): SessionState | null;
  /** The storage the cache opened on; with `auto`, the one that worked here. */
  readonly storage: Exclude<Storage, 'auto'>;
  /**
   * The server's sessions (sessions the server no longer has are pruned from the cache), the
   * list remembered in the store. When the server cannot be reached, the cached
   * sessions instead, each marked `offline: true`; when nothing is cached, rejects (a
   * `ScrollbackError` of kind `unavailable`) rather than answering an empty list.
   */
  sessions(): Promise<SessionSummary[]>;
  /**
   * Opens a session view. Resolves without asking the network: cached rows are drawn first,
   * then one request checks them and catches up (and brings the fresh summary), then the
   * stream. Offline, a cached session shows its rows with the banner saying the server cannot
   * be reached, and goes live by itself when it can.
   */
  openSession(id: string, options?: OpenSessionOptions): Promise<SessionView>;
  /** Posts a user message to a session. */
  postMessage(id: string, text: string): Promise<void>;
  /** Deletes a session on the server and purges it from the cache. */
  deleteSession(id: string): Promise<void>;
  /**
   * Deletes everything this browser keeps of this server's transcripts (a sign-out): every
   * session's cache and search index, the remembered session list, and the last screens. The
   * chat files (`chats()`) are the app's and stay. Rejects while a view of this Scrollback is
   * open (close them first). A session another tab is showing is kept (that tab still writes
   * it): resolves to the ids kept that way, `[]` when everything went.
   */
  clearCache(): Promise<string[]>;
  /**
   * Full-text search over every cached session (offline, in the worker): words and `"quoted
   * phrases"`, case- and accent-insensitive (Arabic and Hebrew vowel marks too; half-width
   * katakana are full-width ones; decomposed kana and Hangul are composed), the last word matching as a prefix while it is typed (no
   * space after it); Chinese, Japanese, Korean, Thai, Lao, Khmer and Myanmar found inside a
   * sentence (`勉強` in `日本語を勉強中`), and emoji; BM25-ranked, best first. A row is found
   * as soon as it is complete, and a reply still streaming in this worker as it grows. Open a
   * hit with `openSession(hit.session, { anchor: hit.seq })`. Rejects (a `ScrollbackError`)
   * when the Scrollback was opened with `search: false`.
   */
  search(query: string, options?: SearchOptions): Promise<SearchHit[]>;
  /**
   * Readies search now: builds the search segments that are behind what was cached and loads
   * each session's index header, so the next `search` does not wait (the worker also does it by
   * itself shortly after `open`, and builds what it wrote every minute). Resolves when done.
   * A view closed just before is let finish storing what it showed first, so that its session
   * is built too. With `search: false`, removes every session's index instead.
   */
  warmSearch(): Promise<void>;
  /**
   * Replaces the server's token (an access token refreshed; `null` or `''`: none) for every
   * request and stream from now on. A view the server had stopped for its token (`error.kind`
   * `'unauthorized'`) opens again: its rows are drawn from the cache again and checked, nothing
   * purged (unlike `reload()`). Resolves once the worker has the token.
   */
  setToken(token: string | null): Promise<void>;
  /** What the cache has saved and cost so far. */
  counters(): Promise<Counters>;
  /**
   * The worker's start-up marks, as this page's `performance.now()` times: `start` (the worker
   * began), `module` (the wasm module was compiled and ready), `open` (the store was open),
   * and, once it made one, `request` and `response` (its first request to the server was sent,
   * and its answer had arrived), and `search-warm` (its own search warm-up, in idle time after
   * the open, was done).
   */
  marks(): Promise<{ start: number; module?: number; open?: number; request?: number; response?: number; 'search-warm'?: number }>;
  /**
   * The windowed chat files and prompt backfill, in the same worker and storage. Each call is a
   * handle with its own options and backfill cache; bad options reject its calls (TypeError).
   */
  chats(options?: ChatsOptions): Chats;
  /**
   * Only the chat store, in a worker of its own, with no server (an app that keeps its chats
   * locally). `chats.close()` stops the worker.
   */
  static chats(options?: ChatStoreOptions): Promise<Chats>;
  /**
   * Closes every view and stops the worker once it has finished what it was writing (calls
   * under way answered, sessions stopped, buffered appends committed, the other tabs told what
   * it added to the search indexes), or after two seconds if it does not answer. Calls made
   * after it reject. Resolves when the worker is gone.
   */
  close(): Promise<void>;
}

/** The seed's backfill cache capacities: `desktop` 12 pages, `mobile` 8. */
export type BackfillPagesPreset = 'desktop' | 'mobile';

/** Options of a {@link Chats} handle. */
export interface ChatsOptions {
  /** The window: a tail's and a page's lines when a call does not say (default 50). */
  windowLines?: number;
  /** The backfill page cache's capacity: a preset or a number of pages (default `desktop`, 12). */
  backfillPages?: BackfillPagesPreset | number;
}

/** Options of {@link Scrollback.chats}: the handle's, and where the chats are kept. */
export interface ChatStoreOptions extends ChatsOptions {
  /** Where to keep the chats (default `auto`). */
  storage?: Storage;
}

/**
 * Where a window starts in a chat file, and the file version it was read from. Opaque: pass it
 * back as it came. A chat that does not exist has `{offset: 0, size: 0, modifiedMillis: 0}`.
 */
export interface Cursor {
  offset: number;
  size: number;
  modifiedMillis: number;
}

/** `Chats.tail`'s options. */
export interface TailOptions {
  /** How many of the newest lines (default: the handle's `windowLines`, 50). */
  maxLines?: number;
  /** Answer a missing chat as empty (no header, no lines) instead of a `notFound` error. */
  allowNotFound?: boolean;
}

/** One chat of the store ({@link Chats.list}). */
export interface ChatEntry {
  /** Its name (the stored name: trimmed, without `.jsonl`). */
  name: string;
  /** The file's size in bytes. */
  size: number;
  /** When it was last written, in milliseconds since the epoch, as the storage keeps it. */
  modifiedMillis: number;
}

/** The header and the newest lines of a chat. */
export interface ChatTail {
  /** The header line; null for a chat that does not exist, or whose file is empty (no header yet). */
  header: string | null;
  /** The newest message lines, oldest first. */
  lines: string[];
  cursor: Cursor;
  /** Whether older lines exist before `cursor.offset`. */
  hasMoreBefore: boolean;
}

/** One page read backwards. */
export interface ChatChunk {
  /** The lines just before the cursor asked with, oldest first. */
  lines: string[];
  /**
   * Where `lines` start: the window's cursor once they are prepended ({@link ChatWindow.prepended}
   * moves it past the window's own saves that landed since it was read).
   */
  cursor: Cursor;
  hasMoreBefore: boolean;
}

/** A windowed patch, relative to the window at the cursor. */
export type PatchOp =
  | { append: string[] }
  | { rewriteFromIndex: number; lines: string[] };

/** Checks a write may be asked for beyond the ones it always makes. */
export interface WriteOptions {
  /** Refuse (`windowBaselineMismatch`) unless the file holds exactly this many lines after the cursor. */
  expectedWindowLineCount?: number;
  /** Skip the integrity check (and only that one). */
  force?: boolean;
}

/** What a prompt is built from. */
export interface BackfillRequest {
  /** The window's lines, oldest first (counted against the budget first). */
  window: string[];
  cursor: Cursor;
  hasMoreBefore: boolean;
  /** Tokens the whole history (window and older) may take. */
  budgetTokens: number;
  /** Lines per page read (default: the handle's `windowLines`). */
  pageLines?: number;
  /** At most this many pages behind the window (default 12). */
  maxPages?: number;
  /** At most this many older messages (default: no cap). */
  maxMessages?: number;
  /** The token estimate: one token per this many characters (default 4). */
  charsPerToken?: number;
}

/** The older messages for one prompt. */
export interface Backfill {
  /** Older lines, oldest first, just before the window. */
  older: string[];
  windowTokens: number;
  olderTokens: number;
  /** Why it stopped. On `staleCursor` nothing older was taken: reload the window. */
  stop: 'budget' | 'pageCap' | 'messageCap' | 'startOfChat' | 'staleCursor';
  /** The stale cursor's error, when `stop` is `staleCursor`. */
  stale: { kind: ChatErrorKind; message: string } | null;
  /** Pages served from the backfill's page cache. */
  pagesCached: number;
  /** Pages read from the chat file. */
  pagesRead: number;
}

/** Which check refused a chat operation. */
export type ChatErrorKind =
  | 'notFound'
  | 'signatureMismatch'
  | 'offsetOutOfBounds'
  | 'offsetBeforeBody'
  | 'notAtLineBoundary'
  | 'windowBaselineMismatch'
  | 'startIndexOutOfBounds'
  | 'integrityMismatch'
  | 'invalidLine'
  | 'invalidArgument'
  | 'notUtf8'
  | 'store';

/**
 * What a chat operation rejects with: an `Error` named `ChatError`, always with the `kind` of
 * the check that refused it (never a `status`). A refused write changed nothing.
 */
export interface ChatError extends Error {
  name: 'ChatError';
  kind: ChatErrorKind;
}

/**
 * The app's chats (`chats/<name>.jsonl`), each a header line and one message a line, read and
 * written as a window. Names are normalized by one rule (trimmed, without `.jsonl`), and a chat
 * stored under an older spelling is still found. A refused operation rejects with a
 * {@link ChatError}; an argument of the wrong type (a name or header that is not a string), or a
 * handle made with bad options, with a `TypeError`; a call after `close()` with a plain `Error`
 * (see {@link ScrollbackError}).
 */
export declare class Chats {
  private constructor();
  /** This handle's options as applied. */
  options(): Promise<{ windowLines: number; backfillPages: number }>;
  /** A chat's stored name (trimmed, without `.jsonl`): the rule every call applies. */
  normalizeName(name: string): Promise<string>;
  /** The header and the newest lines (default `windowLines`), with the window's cursor. */
  tail(name: string, options?: TailOptions): Promise<ChatTail>;
  /** Up to `maxLines` (default `windowLines`) lines just before `cursor`. */
  before(name: string, cursor: Cursor, maxLines?: number): Promise<ChatChunk>;
  /** Up to `maxPages` pages going backwards from `cursor`, newest first. */
  beforePages(name: string, cursor: Cursor, maxLines: number, maxPages: number): Promise<ChatChunk[]>;
  /** Windowed save: replaces everything from `cursor` on with `lines`; resolves to the new cursor. */
  save(name: string, cursor: Cursor, header: string, lines: string[], options?: WriteOptions): Promise<Cursor>;
  /** Windowed patch; resolves to the new cursor. */
  patch(name: string, cursor: Cursor, header: string, op: PatchOp, options?: WriteOptions): Promise<Cursor>;
  /** Full save: the whole chat becomes `header` and `lines` (refused for another chat's header unless `force`); every earlier cursor is stale. */
  replace(name: string, header: string, lines: string[], options?: WriteOptions): Promise<Cursor>;
  /** The chats of this store, sorted by name. */
  list(): Promise<ChatEntry[]>;
  /** Deletes the chat with its backup (no restore); whether there was one. Its cursors are stale after. */
  delete(name: string): Promise<boolean>;
  /** Undoes the last write (kind `notFound` when there is none); every cursor is stale after. */
  restoreBackup(name: string): Promise<void>;
  /** Older messages behind the window for a prompt, up to a token budget. */
  backfill(name: string, request: BackfillRequest): Promise<Backfill>;
  /** Frees the handle (for {@link Scrollback.chats}, stops its worker once its writes are committed). */
  close(): Promise<void>;
}

/** The write that brings a chat to the app's window. */
export type ChatWritePlan =
  | { kind: 'none' }
  | { kind: 'patch'; op: PatchOp; options: WriteOptions }
  | { kind: 'replace' };

/**
 * What an app saved of a chat's window and what it changed since (`savedMessageCount`,
 * `dirtyFromIndex`), turned into the smallest write: nothing, an append, a rewrite from the
 * first changed line, or (no window read from the file) a full save.
 */
export declare class ChatWindow {
  constructor(state?: { cursor?: Cursor | null; hasMoreBefore?: boolean; savedMessageCount?: number });
  /** The window of a tail just read. */
  static fromTail(tail: ChatTail): ChatWindow;
  /** The window's cursor; null: the next save is a full save. */
  cursor: Cursor | null;
  hasMoreBefore: boolean;
  /** How many window lines are on disk as the app has them. */
  savedMessageCount: number;
  /** The first window index changed since the last save, or null. */
  dirtyFromIndex: number | null;
  headerDirty: boolean;
  /** The line at `index` was edited, inserted or deleted. */
  markDirty(index: number): void;
  /** The header changed. */
  markHeaderDirty(): void;
  /**
   * Older lines (a page from `before`, read with the window's cursor) were put in front of the
   * window. A page put in front while a save is on its way, or read before a save and put in
   * front after it landed, is kept: the save counts its lines as saved, and the window's cursor
   * is the save's, starting at the page.
   */
  prepended(chunk: ChatChunk): void;
  /** The write that brings the file to `lines` (the whole window now). */
  plan(lines: string[]): ChatWritePlan;
  /** A write of `lines` succeeded with `cursor`. */
  saved(cursor: Cursor, lines: string[], replaced?: boolean): void;
  /**
   * Plans, performs and records the write; resolves to the plan performed. Saves called while
   * one is on its way run one after the other, each planned from what the one before left
   * (pages put in front after the call included: they are on disk already).
   */
  save(chats: ChatWriter, name: string, header: string, lines: string[], options?: WriteOptions): Promise<ChatWritePlan>;
}

/**
 * What {@link ChatWindow.save} writes through: {@link Chats}, or anything with the same
 * `patch` and `replace` (a Tauri app's commands, say).
 */
export interface ChatWriter {
  patch(name: string, cursor: Cursor, header: string, op: PatchOp, options?: WriteOptions): Promise<Cursor>;
  replace(name: string, header: string, lines: string[], options?: WriteOptions): Promise<Cursor>;
}
