//! The transport: everything the engine asks of the network, as one trait.
//!
//! The engine never names a runtime or an HTTP library; it calls a [`Transport`]. A native
//! implementation ([`HttpTransport`], feature `native`: reqwest and an SSE parser on tokio)
//! serves the `scrollback` CLI and the integration tests against the real server; a browser one
//! (fetch and `EventSource`) lives beside it for the wasm build. Tests may implement the trait
//! in-process.
//!
//! Every answer carries what it cost on the wire ([`Page::bytes`], [`StreamItem`] lines carry
//! their text), so the engine can count requests and bytes the way the server's `/stats` does.

#[cfg(target_arch = "wasm32")]
mod browser;
#[cfg(feature = "native")]
mod native;

#[cfg(target_arch = "wasm32")]
pub use browser::{BrowserStream, BrowserTransport, WireCounters};

#[cfg(feature = "native")]
pub use native::{HttpStream, HttpTransport};

use crate::protocol::{
    parse_catch_up, CatchUpAnswer, CatchUpQuery, Line, LineError, SessionSummary, TranscriptQuery,
};

/// What a request to the server can fail with. Each variant's message says what happened in
/// words a banner can show.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The server answered with an error status; `message` is its `{"error": ...}` text (or
    /// the body, shortened, when it is not that shape).
    #[error("server answered {status}: {message}")]
    Http {
        /// The HTTP status code.
        status: u16,
        /// The server's own explanation.
        message: String,
    },
    /// No answer: connection refused, reset, timed out, DNS, a stream cut mid-frame.
    #[error("network error: {0}")]
    Network(String),
    /// The server answered 2xx with a line (or page) that is not a transcript line.
    #[error("bad line from server: {0}")]
    BadLine(#[from] LineError),
    /// The server answered 2xx with a body of the wrong shape (not the session list, say).
    #[error("bad response from server: {0}")]
    BadResponse(String),
    /// A session id that cannot be put in a URL path (empty, `.` or `..`: a URL parser resolves
    /// those away, even percent-encoded). Nothing was sent.
    #[error("session id {0:?} cannot be used in a URL")]
    BadId(String),
}

impl TransportError {
    /// Whether the request reached the server and was refused (4xx): retrying the same
    /// request will not help.
    pub fn is_client_error(&self) -> bool {
        match self {
            TransportError::Http { status, .. } => (400..500).contains(status),
            TransportError::BadId(_) => true,
            _ => false,
        }
    }
}

/// A result of a transport operation.
pub type TransportResult<T> = Result<T, TransportError>;

/// One `/transcript` answer: the lines, oldest first, each keeping the exact text the server
/// sent, and the size of the response body.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// The lines, oldest first.
    pub lines: Vec<Line>,
    /// Bytes of response body received, decompressed (the server's `/stats` counts what
    /// crossed the wire, which is less when the response was compressed).
    pub bytes: u64,
}

/// One catch-up answer (`GET /sessions/{id}/catchup`) and the size of its body.
#[derive(Debug, Clone)]
pub struct CatchUp {
    /// The state, the session's summary and the lines.
    pub answer: CatchUpAnswer,
    /// Bytes of response body received, decompressed.
    pub bytes: u64,
}

/// Parses a catch-up body.
pub fn parse_catch_up_body(body: &str) -> TransportResult<CatchUp> {
    Ok(CatchUp {
        answer: parse_catch_up(body)?,
        bytes: body.len() as u64,
    })
}

/// Why the server reset a stream (the `reason` of its reset frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetReason {
    /// The client is too far behind: what it holds is still the server's, with a gap.
    Behind,
    /// The file was replaced: nothing the client holds is the server's any more.
    Replaced,
    /// The client holds lines past the file's newest (a shorter file replaced it).
    Ahead,
}

impl ResetReason {
    /// The reason a reset frame's `data:` (`{"reason":"behind","first":N}`) gives. A frame that
    /// gives none the client knows is taken as `Replaced`: a needless purge costs a cold open,
    /// a missed one would keep another file's lines.
    pub fn from_data(data: &str) -> ResetReason {
        #[derive(serde::Deserialize)]
        struct Frame {
            reason: String,
        }
        match serde_json::from_str::<Frame>(data).map(|f| f.reason) {
            Ok(r) if r == "behind" => ResetReason::Behind,
            Ok(r) if r == "ahead" => ResetReason::Ahead,
            _ => ResetReason::Replaced,
        }
    }
}

/// What an event stream yields.
#[derive(Debug, Clone)]
pub enum StreamItem {
    /// One event, exactly as the `data:` payload carried it.
    Line(Line),
    /// The server's `event: reset` frame and its reason; the newest window follows as ordinary
    /// lines.
    Reset(ResetReason),
}

/// One connection of `/sessions/{id}/events`. A connection error ends it: after
/// `Some(Err(..))` or `None` the engine drops it and, on the reconnect schedule, opens another.
#[allow(async_fn_in_trait)]
pub trait EventStream {
    /// The next item; `None` when the server closed the connection.
    async fn next(&mut self) -> Option<TransportResult<StreamItem>>;
}

/// The server's routes, as the engine uses them.
///
/// Implementations put the access token (when one is configured) on every request and on the
/// stream, and encode the session id so it cannot change the path.
#[allow(async_fn_in_trait)]
pub trait Transport {
    /// The stream type [`Transport::events`] opens.
    type Stream: EventStream;

    /// `GET /sessions`.
    async fn sessions(&self) -> TransportResult<Vec<SessionSummary>>;
    /// `GET /sessions/{id}/transcript?...`: the lines for `query`, parsed with
    /// [`crate::protocol::parse_page`].
    async fn transcript(&self, id: &str, query: &TranscriptQuery) -> TransportResult<Page>;
    /// `GET /sessions/{id}/catchup?cursor=N&limit=W`: the reopen's check and catch-up in one
    /// answer, with the session's summary (parsed with [`parse_catch_up_body`]).
    async fn catch_up(&self, id: &str, query: &CatchUpQuery) -> TransportResult<CatchUp>;
    /// `DELETE /sessions/{id}`.
    async fn delete(&self, id: &str) -> TransportResult<()>;
    /// `POST /sessions/{id}/messages` with `{"text": text}`.
    async fn post_message(&self, id: &str, text: &str) -> TransportResult<()>;
    /// `GET /sessions/{id}/events?after=N`: resolves once the server has answered (so a refused
    /// connection is an error here, not a stream that ends at once).
    async fn events(&self, id: &str, after: u64) -> TransportResult<Self::Stream>;
    /// Waits `ms` milliseconds (the reconnect schedule, `RECONNECT_DELAY_MS`), on whatever
    /// clock the transport's runtime has.
    async fn sleep(&self, ms: u32);
}

/// The `{"error": "..."}` text of an error body, or the body itself shortened.
pub fn error_message(body: &str) -> String {
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        error: String,
    }
    match serde_json::from_str::<ErrorBody>(body) {
        Ok(e) => e.error,
        Err(_) => {
            let body = body.trim();
            match body.char_indices().nth(200) {
                Some((cut, _)) => format!("{}…", &body[..cut]),
                None if body.is_empty() => "(no explanation)".into(),
                None => body.to_string(),
            }
        }
    }
}

/// The session list's body, parsed.
pub fn parse_sessions(body: &str) -> TransportResult<Vec<SessionSummary>> {
    serde_json::from_str(body).map_err(|e| TransportError::BadResponse(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_body_gives_its_message_and_anything_else_is_shortened() {
        assert_eq!(
            error_message(r#"{"error":"no session \"x\""}"#),
            "no session \"x\""
        );
        assert_eq!(error_message(""), "(no explanation)");
        let long = "x".repeat(500);
        let short = error_message(&long);
        assert!(short.chars().count() == 201 && short.ends_with('…'));
        let e = TransportError::Http {
            status: 404,
            message: "no such session".into(),
        };
        assert_eq!(e.to_string(), "server answered 404: no such session");
        assert!(e.is_client_error());
        assert!(!TransportError::Network("refused".into()).is_client_error());
    }

    #[test]
    fn a_reset_frame_gives_its_reason_and_an_unknown_one_purges() {
        let r = ResetReason::from_data;
        assert_eq!(r(r#"{"reason":"behind","first":9}"#), ResetReason::Behind);
        assert_eq!(r(r#"{"reason":"ahead","first":1}"#), ResetReason::Ahead);
        assert_eq!(
            r(r#"{"reason":"replaced","first":1}"#),
            ResetReason::Replaced
        );
        assert_eq!(r(""), ResetReason::Replaced);
        assert_eq!(r(r#"{"reason":"new"}"#), ResetReason::Replaced);
    }

    #[test]
    fn a_session_list_of_the_wrong_shape_is_a_bad_response() {
        assert!(matches!(
            parse_sessions(r#"{"sessions":[]}"#),
            Err(TransportError::BadResponse(_))
        ));
        let list = parse_sessions(
            r#"[{"id":"a","title":"t","status":"idle","model":"m","permissionMode":"p","seq":3}]"#,
        )
        .unwrap();
        assert_eq!(list[0].seq, 3);
    }
}
