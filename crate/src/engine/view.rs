//! What a UI renders of one session, and how it learns that it changed.

use crate::fold::{SessionState, Transcript};
use crate::protocol::Line;
use serde::Serialize;

/// What the engine has done on the wire and on disk for one session, since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counters {
    /// Requests sent: transcript pages, checks (each with its catch-up) and stream connections.
    pub requests: u64,
    /// Bytes received: page bodies, and the line text of stream events.
    pub bytes: u64,
    /// Older pages served from the cache with no request.
    pub local_pages: u64,
    /// Checks (the reopen's, a reconnect's) whose answer matched the cached tail.
    pub probes_passed: u64,
    /// Checks whose answer did not, or found no line there (the cache was purged, the open went
    /// cold).
    pub probes_failed: u64,
    /// Stream events received and shown.
    pub events: u64,
    /// Lines received with the check (the reopen's or a reconnect's catch-up) and shown.
    pub caught_up: u64,
    /// Resets: reset frames received, and checks that found a gap too large to catch up.
    pub resets: u64,
}

/// One session as a UI renders it: the fold's rows and session state, plus the sync's own.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct View {
    /// The session's id.
    pub id: String,
    /// The rows of the lines shown (serialized as `rows`, oldest first).
    #[serde(rename = "rows", serialize_with = "rows")]
    pub transcript: Transcript,
    /// Status, model, permission mode, context tokens, queued messages and waiting commands,
    /// folded from the newest lines; status, model and permission mode are reassigned from the
    /// session summary after a cached replay (seed 000, decision 7).
    #[serde(flatten)]
    pub state: SessionState,
    /// A connection problem to show (the probe or the stream could not reach the server);
    /// `None` when connected or connecting for the first time.
    pub banner: Option<String>,
    /// Whether older history may exist above the oldest row (false once seq 1 is shown).
    pub more_history: bool,
    /// Whether the first rows are shown (from the cache or the opening window).
    pub ready: bool,
    /// Whether what is shown is known to be the server's now: the check of the cached tail
    /// passed (or the lines came from the server in this open) and the stream has followed the
    /// file since. Until then (and again while the stream is down, when the file could be
    /// replaced unseen), cached rows are shown as they were cached, and older pages come from
    /// the cache only.
    pub verified: bool,
    /// The seq of the oldest line shown, if any: the `before` of the next older page.
    pub oldest: Option<u64>,
    /// The seq of the newest line shown: the stream's cursor (0 before anything is shown).
    pub cursor: u64,
    /// Whether the stream is connected.
    pub live: bool,
    /// Requests, bytes and cache hits so far.
    pub counters: Counters,
}

impl View {
    pub(crate) fn new(id: &str) -> View {
        View {
            id: id.to_string(),
            transcript: Transcript::new(),
            state: SessionState::new(),
            banner: None,
            more_history: true,
            ready: false,
            verified: false,
            oldest: None,
            cursor: 0,
            live: false,
            counters: Counters::default(),
        }
    }
}

fn rows<S: serde::Serializer>(t: &Transcript, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(t.rows())
}

/// What changed, reported with the new [`View`] to the session's listener.
///
/// The lines are what was added to the display, oldest first, exactly as the server sent them
/// (coalesced rows included): a UI that draws from its own model can apply these instead of
/// re-reading the view.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a> {
    /// Lines added at the newest end: the opening window (cached or fetched) or stream events.
    Newer(&'a [Line]),
    /// Lines added at the oldest end: an older page or an anchor restore.
    Older(&'a [Line]),
    /// Everything shown was dropped: a reset frame (the newest window follows), a failed probe
    /// or a reload (the cold open follows).
    Cleared,
    /// Only state changed: the banner, `ready`, `moreHistory`, the summary's fields, counters.
    State,
}
