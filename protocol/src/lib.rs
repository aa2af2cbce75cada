//! The wire, shared by client and server: a transcript line, the row rule, the `/transcript`
//! query, the protocol's constants, and the reading of lines out of blocks. No I/O.

#![warn(missing_docs)]

mod blocks;
mod catch_up;
mod events;
mod line;
mod names;
mod query;
mod rows;
mod session;

pub use blocks::{BackWalk, ForwardWalk, Found, Probed, Seek, SeqSeek, Step, BLOCK, FIRST_BLOCK};
pub use catch_up::{catch_up_json, parse_catch_up, CatchUpAnswer, CatchUpQuery, CatchUpState};
pub use events::{
    events_at, events_query, keep_alive_data, silence_limit_ms, KEEP_ALIVE_BOUNDS_MS,
    KEEP_ALIVE_EVENT, KEEP_ALIVE_MS, SILENT_INTERVALS,
};
pub use line::{
    fingerprint, page_json, parse_json, parse_page, shortened, EventKind, Fingerprint, Line,
    LineError, MESSAGE_CHARS,
};
pub use names::{
    check_session_id, decode, encode, is_reserved_name, KeyError, MAX_ID_LEN, MAX_KEY_LEN,
};
pub use query::{query_pairs, QueryError, TranscriptQuery};
pub use rows::{check_raw, clean_append, coalesce, continues, joins, last_seq, RowWalk, FOLDED};
pub use session::{SessionSummary, UNKNOWN_SESSION};

/// The highest seq a line may carry: JavaScript's largest exact integer (2^53-1), so a seq
/// means the same in the page as in the worker, and `seq + 1` never overflows. A line above
/// it does not parse (a file's malformed line; a server that sends one is refused).
pub const MAX_SEQ: u64 = (1 << 53) - 1;

/// How far behind `/events?after=N` still catches up event by event; further behind, the
/// server sends a `reset` frame and then the newest this many raw events.
pub const CATCH_UP_LIMIT: usize = 200;
/// How many bytes of lines (their raw JSON text) a reopen's catch-up and `/events?after=N` still
/// send after the cursor; a client further behind than this gets a reset and pages the gap with
/// `after`. A byte bound (not a count of events) so that what one catch-up costs is bounded
/// whatever the events' sizes. Replaces `CATCH_UP_LIMIT` as the catch-up rule.
pub const CATCH_UP_BYTES: usize = 1 << 20;
/// Rows in one page of older history (coalesced).
pub const HISTORY_PAGE: usize = 40;
/// Raw events in the opening window (a cold open's first page, a warm open's first draw).
pub const OPENING_WINDOW: usize = 80;
/// The largest `limit` the server accepts, in events or rows.
pub const MAX_LIMIT: usize = 10_000;
/// How long a client waits before reconnecting a stream or retrying a probe.
pub const RECONNECT_DELAY_MS: u32 = 2_000;
/// The cache's default byte budget per server.
pub const CACHE_BUDGET_BYTES: u64 = 256 << 20;
/// The SSE event name of the reset frame.
pub const RESET_EVENT: &str = "reset";
/// The on-disk format version: the `v1` in `transcripts/v1/...`.
pub const FORMAT_VERSION: &str = "v1";

/// The response header of `/transcript` and `/catchup` that names the file the answer was read
/// from ([`file_id`]). A client holding lines of one file refuses an older page of another: a
/// cache between it and the server (a CDN or a service worker that keeps answers despite
/// `no-store`) may answer with a page of a file since replaced, which no seq tells apart.
pub const FILE_HEADER: &str = "scrollback-file";
/// How much of a file's first line [`file_id`] reads.
pub const FILE_ID_BYTES: usize = 4096;

/// A transcript file's id, from its `head` (its first bytes, up to its first complete line's
/// end or [`FILE_ID_BYTES`]): the [`fingerprint`] of its first line's first [`FILE_ID_BYTES`].
/// The same while the file is appended to; another for a file replaced by another conversation
/// (whose first line carries its own `ts`). `None` before the first line is complete.
pub fn file_id(head: &[u8]) -> Option<String> {
    let head = &head[..head.len().min(FILE_ID_BYTES)];
    match memchr::memchr(b'\n', head) {
        Some(end) => Some(fingerprint(&head[..end])),
        None if head.len() == FILE_ID_BYTES => Some(fingerprint(head)),
        None => None,
    }
}
