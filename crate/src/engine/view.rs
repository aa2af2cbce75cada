//! What a UI renders of one session, and how it learns that it changed.

use crate::fold::{Queued, Row, SessionState, Transcript, Waiting};
use crate::protocol::{CatchUpAnswer, Line, SessionSummary};
use serde::{Deserialize, Serialize};

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
    /// The fingerprint of the newest line shown ([`Line::fingerprint`]): what a screen the page
    /// saved is checked by before newer lines are folded onto it ([`View::resumed`]).
    pub cursor_fingerprint: Option<String>,
    /// Whether the stream is connected.
    pub live: bool,
    /// Why the session stopped, when a retry cannot help (the session is gone, the token is
    /// refused, the server refused the request): nothing more is asked until a reload.
    pub error: Option<SessionError>,
    /// Whether this open writes the cache: one writer per session across tabs; the others
    /// show the same rows read-only and take over when the writer goes away.
    pub writer: bool,
    /// Why this open stopped keeping what it shows in the cache, when a write (or a read) of
    /// the store failed: a full quota, a store that went away. The rows are still shown and
    /// followed, but not kept for the next open. `None` while the cache keeps them (and for a
    /// reader, which keeps nothing); a reload, which throws the session's cache away, tries
    /// again.
    pub storage_error: Option<String>,
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
            cursor_fingerprint: None,
            live: false,
            error: None,
            writer: false,
            storage_error: None,
            counters: Counters::default(),
        }
    }
}

/// A screen as the page saves it (`js/screen.js`): the newest rows a view showed, the fields
/// that describe the session (other fields are ignored), and its cursor's fingerprint. Its JSON
/// is flat, as [`View`]'s: the session state's fields beside the screen's own.
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "ScreenFields")]
pub struct SavedScreen {
    /// The session's id.
    pub id: String,
    /// The newest rows shown, oldest first.
    pub rows: Vec<Row>,
    /// Status, model, permission mode, context tokens, queued messages, waiting commands.
    pub state: SessionState,
    /// Whether older history may exist above the oldest row.
    pub more_history: bool,
    /// The seq of the newest line shown.
    pub cursor: u64,
    /// That line's fingerprint ([`View::cursor_fingerprint`]).
    pub cursor_fingerprint: String,
}

/// A [`SavedScreen`]'s JSON, read in one pass. (`#[serde(flatten)]` buffers every field the
/// outer struct does not name before it reads the inner one, with a deserializer of its own:
/// the page's small module, which reads saved screens, is 3.4 kB smaller without it.) A field
/// the session state gains fails to compile in `from` below until it is read here too.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScreenFields {
    id: String,
    rows: Vec<Row>,
    more_history: bool,
    cursor: u64,
    cursor_fingerprint: String,
    status: Option<String>,
    model: Option<String>,
    permission_mode: Option<String>,
    context_tokens: Option<u64>,
    queued: Option<Vec<Queued>>,
    waiting_commands: Option<Vec<Waiting>>,
    compacting_since: Option<f64>,
}

impl From<ScreenFields> for SavedScreen {
    fn from(f: ScreenFields) -> SavedScreen {
        // A field left out takes the state's default, as `SessionState`'s own `serde(default)`.
        let d = SessionState::default();
        SavedScreen {
            id: f.id,
            rows: f.rows,
            state: SessionState {
                status: f.status.unwrap_or(d.status),
                model: f.model.unwrap_or(d.model),
                permission_mode: f.permission_mode.unwrap_or(d.permission_mode),
                context_tokens: f.context_tokens.or(d.context_tokens),
                queued: f.queued.unwrap_or(d.queued),
                waiting_commands: f.waiting_commands.unwrap_or(d.waiting_commands),
                compacting_since: f.compacting_since.or(d.compacting_since),
            },
            more_history: f.more_history,
            cursor: f.cursor,
            cursor_fingerprint: f.cursor_fingerprint,
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

/// A [`View`] without its rows: every other field, serialized as the view serializes them. The
/// worker sends these apart from the rows, and only the ones that changed (`js/worker.js`). A
/// field added to [`View`] is added here too (the test below checks the two agree).
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fields<'a> {
    /// [`View::id`].
    pub id: &'a str,
    /// [`View::state`], flattened.
    #[serde(flatten)]
    pub state: &'a SessionState,
    /// [`View::banner`].
    pub banner: &'a Option<String>,
    /// [`View::more_history`].
    pub more_history: bool,
    /// [`View::ready`].
    pub ready: bool,
    /// [`View::verified`].
    pub verified: bool,
    /// [`View::oldest`].
    pub oldest: Option<u64>,
    /// [`View::cursor`].
    pub cursor: u64,
    /// [`View::cursor_fingerprint`].
    pub cursor_fingerprint: &'a Option<String>,
    /// [`View::live`].
    pub live: bool,
    /// [`View::error`].
    pub error: &'a Option<SessionError>,
    /// [`View::writer`].
    pub writer: bool,
    /// [`View::storage_error`].
    pub storage_error: &'a Option<String>,
    /// [`View::counters`].
    pub counters: Counters,
}

impl View {
    /// Shows lines at the newest end: their rows folded onto the rows shown, the session state
    /// they carry, and the cursor. The caller passes only lines above the cursor (the fold
    /// refuses any other).
    pub(crate) fn push_newer(&mut self, lines: &[Line]) {
        let (Some(first), Some(last)) = (lines.first(), lines.last()) else {
            return;
        };
        for line in lines {
            if self.transcript.push_newer(line).is_ok() {
                self.state.apply(line);
            }
        }
        self.oldest.get_or_insert(first.seq());
        if self.oldest == Some(first.seq()) {
            self.more_history = first.seq() > 1;
        }
        self.cursor = last.seq();
        self.cursor_fingerprint = Some(last.fingerprint());
    }

    /// A first visit's first screen, before the session opens: the newest `lines` as the
    /// server answered the opening window, shown as the session's view would show them (the
    /// same fold), `ready` but neither verified nor live (the page draws it as it draws a last
    /// screen, and the view's own state replaces it). `None` when there is nothing to show.
    pub fn opening(id: &str, lines: &[Line]) -> Option<View> {
        if lines.is_empty() {
            return None;
        }
        let mut view = View::new(id);
        view.push_newer(lines);
        view.ready = true;
        Some(view)
    }

    /// A reopen's screen before the session opens: the screen the page saved (`screen`) with
    /// the lines its catch-up brought (`answer`, the check the page asked at the open call)
    /// folded on, as the session's view will show them once it has checked its cache the same
    /// way: `ready`, neither verified nor live, the summary's status, model and permission mode
    /// applied. `None` when the answer brings nothing new, or when the saved screen is not the
    /// server's (the answer's first line is not, byte for byte, the line at its cursor: a
    /// replaced file) or not this fold's.
    pub fn resumed(screen: SavedScreen, answer: CatchUpAnswer) -> Option<View> {
        let tail = answer
            .lines
            .first()
            .filter(|l| l.seq() == screen.cursor && l.fingerprint() == screen.cursor_fingerprint)?
            .clone();
        let summary = answer.summary.clone();
        let (after, gap) = answer.take_after(&tail)?;
        if after.is_empty() {
            return None;
        }
        let mut view = View::new(&screen.id);
        view.state = screen.state;
        if gap {
            // Behind: the newest window alone, as the engine shows it after such a check.
            view.state.clear_pending();
        } else {
            view.transcript = Transcript::resumed(screen.rows, &tail)?;
            view.oldest = view.transcript.first_seq();
            view.more_history = screen.more_history;
        }
        view.push_newer(&after);
        view.apply_summary(&summary);
        view.ready = true;
        Some(view)
    }

    /// Takes status, model and permission mode from the session's summary, the newer
    /// measurement than a replayed cache (seed 000, decision 7), when it is this session's and
    /// measured at least the lines shown (its seq at or past the cursor). An older one (the list
    /// remembered before the cache's newest lines, a list answered before the newest lines
    /// streamed) changes nothing: the lines shown are newer. Whether it was taken.
    pub(crate) fn apply_summary(&mut self, summary: &SessionSummary) -> bool {
        let newer = summary.id == self.id && summary.seq >= self.cursor;
        if newer {
            self.state.apply_summary(summary);
        }
        newer
    }

    /// Every field but the rows.
    pub fn fields(&self) -> Fields<'_> {
        Fields {
            id: &self.id,
            state: &self.state,
            banner: &self.banner,
            more_history: self.more_history,
            ready: self.ready,
            verified: self.verified,
            oldest: self.oldest,
            cursor: self.cursor,
            cursor_fingerprint: &self.cursor_fingerprint,
            live: self.live,
            error: &self.error,
            writer: self.writer,
            storage_error: &self.storage_error,
            counters: self.counters,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_the_view_without_its_rows() {
        let view = View::new("s");
        let mut whole = serde_json::to_value(&view).unwrap();
        whole.as_object_mut().unwrap().remove("rows");
        assert_eq!(serde_json::to_value(view.fields()).unwrap(), whole);
    }

    #[test]
    fn a_saved_screen_reads_back_every_field_of_the_view_it_was_saved_from() {
        let mut view = View::new("s");
        view.state = SessionState {
            status: "running".into(),
            model: "m".into(),
            permission_mode: "plan".into(),
            context_tokens: Some(7),
            queued: vec![Queued {
                id: "q".into(),
                text: "t".into(),
                seq: 3,
            }],
            waiting_commands: vec![Waiting {
                id: "c".into(),
                command: "ls".into(),
                seq: 4,
            }],
            compacting_since: Some(1.5),
        };
        view.more_history = true;
        view.cursor = 9;
        view.cursor_fingerprint = Some("f".into());
        let screen: SavedScreen =
            serde_json::from_str(&serde_json::to_string(&view).unwrap()).unwrap();
        assert_eq!(screen.id, "s");
        assert_eq!(screen.state, view.state);
        assert!(screen.more_history);
        assert_eq!(
            (screen.cursor, screen.cursor_fingerprint.as_str()),
            (9, "f")
        );

        // The state's fields left out read as its defaults; the screen's own are required.
        let bare = r#"{"id":"s","rows":[],"moreHistory":false,"cursor":0,"cursorFingerprint":""}"#;
        let screen: SavedScreen = serde_json::from_str(bare).unwrap();
        assert_eq!(screen.state, SessionState::default());
        let err = serde_json::from_str::<SavedScreen>(r#"{"id":"s","rows":[]}"#).unwrap_err();
        assert!(err.to_string().contains("moreHistory"), "{err}");
    }
}
