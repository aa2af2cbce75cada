//! What a UI renders of one session, and how it learns that it changed.

use crate::fold::{SessionState, Transcript};
use crate::protocol::Line;
use serde::Serialize;

/// What the engine has done on the wire and on disk for one session, since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counters {
    /// Requests sent: transcript pages (probes included) and stream connections.
    pub requests: u64,
    /// Bytes received: page bodies, and the line text of stream events.
    pub bytes: u64,
    /// Older pages served from the cache with no request.
    pub local_pages: u64,
    /// Probes whose answer matched the cached tail.
    pub probes_passed: u64,
    /// Probes whose answer did not (the cache was purged and the open went cold).
    pub probes_failed: u64,
    /// Stream events received and shown.
    pub events: u64,
    /// Reset frames received.
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
    /// Whether what is shown is known to be the server's: the probe passed, or the lines came
    /// from the server in this open. Until then, cached rows are shown as they were cached, and
    /// older pages come from the cache only.
    pub verified: bool,
    /// The seq of the oldest line shown, if any: the `before` of the next older page.
    pub oldest: Option<u64>,
    /// The seq of the newest line shown: the stream's cursor (0 before anything is shown).
    pub cursor: u64,
    /// Whether the stream is connected.
    pub live: bool,
    /// Why the session stopped, when a retry cannot help (the session is gone, the token is
    /// refused, the server refused the request): nothing more is asked until a reload.
    pub error: Option<SessionError>,
    /// Whether this open writes the cache: one writer per session across tabs; the others
    /// show the same rows read-only and take over when the writer goes away.
    pub writer: bool,
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
            error: None,
            writer: false,
            counters: Counters::default(),
        }
    }
}

/// Why a session stopped (see [`View::error`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionError {
    /// `"gone"` (the server has no such session: its cache was purged), `"unauthorized"` (401
    /// or 403: the token is missing or wrong) or `"refused"` (another 4xx).
    pub kind: &'static str,
    /// The HTTP status, when the server answered.
    pub status: Option<u16>,
    /// The server's own explanation.
    pub message: String,
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
