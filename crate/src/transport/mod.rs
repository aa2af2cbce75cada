//! The transport: everything the engine asks of the network, as one trait.
//!
//! The engine never names a runtime or an HTTP library; it calls a [`Transport`]. A native
//! implementation (`HttpTransport`, feature `native`: reqwest and an SSE parser on tokio)
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
    check_raw, last_seq, parse_catch_up, shortened, CatchUpAnswer, CatchUpQuery, CatchUpState,
    Line, LineError, SessionSummary, TranscriptQuery, MAX_SEQ, UNKNOWN_SESSION,
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
        /// Whether the body was a JSON `{"error": ...}` (not a proxy's or a gateway's page): only
        /// then does another 4xx mean that the request itself is refused.
        from_server: bool,
        /// Whether the body was the server's own answer for a session it does not have (its
        /// `code` is [`UNKNOWN_SESSION`]): only that 404 means that the session is gone.
        session_unknown: bool,
        /// The answer's `Retry-After`, in milliseconds (delay-seconds form only).
        retry_after_ms: Option<u32>,
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
    /// Whether retrying the same request will not help (the session is gone, the token is
    /// refused, or the server refused the request itself): [`Retry::classify`] is no retry.
    pub fn is_client_error(&self) -> bool {
        !matches!(Retry::classify(self), Retry::After(_))
    }
}

impl TransportError {
    /// The error for a non-2xx answer: `status`, the body (the server's `{"error": ...}` or
    /// anything else, shortened) and the `Retry-After` header's value, if any.
    pub fn from_answer(status: u16, body: &str, retry_after: Option<&str>) -> TransportError {
        TransportError::Http {
            status,
            message: error_message(body),
            from_server: server_error(body).is_some(),
            session_unknown: server_error(body)
                .is_some_and(|e| e.code.as_deref() == Some(UNKNOWN_SESSION)),
            retry_after_ms: retry_after.and_then(parse_retry_after),
        }
    }

    /// The HTTP status, when the server (or something in front of it) answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            TransportError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A server address a transport cannot use (not an absolute http(s) URL): the caller's
/// mistake, which no retry mends.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad server URL {url:?}: {why}")]
pub struct BadServer {
    /// The address as given.
    pub url: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// Whether session id `id` can be a segment of a URL's path: not empty, `.` or `..` (a URL
/// parser resolves those away, even percent-encoded, and would ask another resource).
pub fn usable_id(id: &str) -> TransportResult<()> {
    match id {
        "" | "." | ".." => Err(TransportError::BadId(id.to_string())),
        _ => Ok(()),
    }
}

/// A `Retry-After` value in milliseconds: the delay-seconds form (`120`); the HTTP-date form is
/// not trusted (the two clocks need not agree) and answers `None`.
pub fn parse_retry_after(value: &str) -> Option<u32> {
    let secs: u32 = value.trim().parse().ok()?;
    Some(secs.saturating_mul(1000))
}

/// What to do after a failed request. [`Backoff::decide`] is the one rule, used for the probe,
/// the opening window and the stream alike, whatever the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Try again after this many milliseconds (a network error, a 5xx, a 408 or 429, a 2xx
    /// body that does not parse, or a 4xx that is not the server's own answer).
    After(u32),
    /// The server itself said the session does not exist (its 404 with the code
    /// [`UNKNOWN_SESSION`]): the session is gone. Purge it and stop.
    Gone,
    /// 401 or 403 from the server itself (its JSON error): the token is missing or wrong. Stop
    /// until the app does something.
    Unauthorized,
    /// Any other 4xx from the server (or an id that cannot be sent): the same request will be
    /// refused again. Stop, showing the server's message.
    Refused,
}

impl Retry {
    /// The name an app sees for this class of error (`kind` of a JS error and of a session's
    /// `error`): `"unavailable"`, `"gone"`, `"unauthorized"` or `"refused"`.
    pub fn kind(self) -> &'static str {
        match self {
            Retry::After(_) => "unavailable",
            Retry::Gone => "gone",
            Retry::Unauthorized => "unauthorized",
            Retry::Refused => "refused",
        }
    }

    /// The class of `error`, without a delay (`After(0)` for a retryable one).
    pub fn classify(error: &TransportError) -> Retry {
        match error {
            TransportError::Http {
                status,
                from_server,
                session_unknown,
                ..
            } => match status {
                // The token, as the server judged it. A 401 or 403 page that is not the
                // server's JSON (a firewall's challenge, a proxy's or a portal's login) judged
                // the path to the server, not the token: retried, as a proxy's other pages are.
                401 | 403 if *from_server => Retry::Unauthorized,
                404 if *session_unknown => Retry::Gone,
                // Any other 404, even a JSON one (a gateway's, a framework's while the server is
                // being deployed), says nothing about the session: a cache is never purged for it.
                404 => Retry::After(0),
                408 | 429 => Retry::After(0),
                // A 4xx that is not the server's own JSON (a proxy's or a gateway's page) says
                // nothing about the session: the path to the server is broken, for now.
                400..=499 if *from_server => Retry::Refused,
                _ => Retry::After(0),
            },
            TransportError::BadId(_) => Retry::Refused,
            TransportError::Network(_)
            | TransportError::BadLine(_)
            | TransportError::BadResponse(_) => Retry::After(0),
        }
    }
}

/// The longest `Retry-After` honoured, in milliseconds (a server asking for more is waited on
/// this long, then asked again).
pub const MAX_RETRY_AFTER_MS: u32 = 300_000;

/// Exponential backoff with jitter, capped: the delay before the `n`th retry in a row is drawn
/// from `[d/2, d]` with `d = min(max, base * 2^n)`; a success resets it.
#[derive(Debug, Clone)]
pub struct Backoff {
    base_ms: u32,
    max_ms: u32,
    failures: u32,
    rng: u64,
}

impl Backoff {
    /// A backoff from `base_ms` doubling up to `max_ms`, its jitter seeded with `seed` (any
    /// value; two clients with different seeds do not retry in step).
    pub fn new(base_ms: u32, max_ms: u32, seed: u64) -> Backoff {
        Backoff {
            base_ms,
            max_ms: max_ms.max(base_ms),
            failures: 0,
            rng: seed | 1,
        }
    }

    /// A request succeeded: the next failure waits the base delay again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// Failures in a row so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// What to do after `error`: its class ([`Retry::classify`]), with the delay filled in for
    /// a retry: the answer's `Retry-After` when it gave one (408, 429, 503), else the next
    /// backoff step.
    pub fn decide(&mut self, error: &TransportError) -> Retry {
        match Retry::classify(error) {
            Retry::After(_) => {
                let step = self.step();
                match error {
                    TransportError::Http {
                        retry_after_ms: Some(ms),
                        ..
                    } => Retry::After((*ms).min(MAX_RETRY_AFTER_MS)),
                    _ => Retry::After(step),
                }
            }
            stop => stop,
        }
    }

    /// The next delay of the schedule (counted as a failure): what [`Backoff::decide`] waits
    /// when the answer names no delay, and what a wait that no error decides takes (a reopen
    /// in a row).
    pub fn step(&mut self) -> u32 {
        let shift = self.failures.min(20);
        self.failures = self.failures.saturating_add(1);
        let d = (u64::from(self.base_ms) << shift).min(u64::from(self.max_ms));
        // xorshift64: enough to keep clients out of step.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let half = d / 2;
        (half + self.rng % (d - half + 1)) as u32
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
    /// The id of the file the server read it from ([`crate::protocol::FILE_HEADER`]), when
    /// it named one.
    pub file: Option<String>,
}

/// One catch-up answer (`GET /sessions/{id}/catchup`) and the size of its body.
#[derive(Debug, Clone)]
pub struct CatchUp {
    /// The state, the session's summary and the lines.
    pub answer: CatchUpAnswer,
    /// Bytes of response body received, decompressed.
    pub bytes: u64,
    /// The id of the file the server read it from ([`crate::protocol::FILE_HEADER`]), when
    /// it named one.
    pub file: Option<String>,
}

/// Parses a `/transcript` body asked with `query`, and checks that it answers it: seqs rising,
/// every one below `before` and above `after`. A page that does not (a proxy's answer to
/// another request, a server that lies) is [`TransportError::BadResponse`], retried as such:
/// never drawn, never stored, and no reason to stop paging.
pub fn parse_page_for(query: &TranscriptQuery, body: &str) -> TransportResult<Page> {
    let lines = crate::protocol::parse_page(body)?;
    // A raw page holds at most its limit of events (a coalesced one, of rows).
    if !query.coalesced() && lines.len() > query.most() {
        return Err(TransportError::BadResponse(format!(
            "a page asked as `{}` holds {} lines",
            query.to_query_string(),
            lines.len()
        )));
    }
    // Each line past the last one's reach (a coalesced line's reaches through its fold), and
    // the last one's reach below `before`.
    let mut last = query.after.unwrap_or(0);
    for line in &lines {
        let (seq, reach) = (line.seq(), last_seq(line));
        if seq <= last || query.before.is_some_and(|before| reach >= before) {
            return Err(TransportError::BadResponse(format!(
                "a page asked as `{}` holds seq {seq}{}",
                query.to_query_string(),
                match seq <= last {
                    true => format!(" after seq {last}"),
                    false if reach != seq => format!(" folded through seq {reach}"),
                    false => String::new(),
                }
            )));
        }
        if !query.coalesced() {
            check_raw(line)?;
        }
        last = reach;
    }
    Ok(Page {
        lines,
        bytes: body.len() as u64,
        file: None,
    })
}

/// Parses a catch-up body for session `id` asked with `query`, and checks that it answers it:
/// the summary is `id`'s, seqs rise, and unless the server found no line at the cursor
/// (`ahead`) the first line is the cursor's. An answer that does not (a proxy's answer for
/// another session or another cursor, lines out of order) is [`TransportError::BadResponse`],
/// retried as such: a tail that differs from the cache's in such an answer says nothing about
/// the file, and must not purge the cache as a replaced file does.
pub fn parse_catch_up_for(id: &str, query: &CatchUpQuery, body: &str) -> TransportResult<CatchUp> {
    let answer = parse_catch_up(body)?;
    let refuse = |what: String| {
        Err(TransportError::BadResponse(format!(
            "a catch-up asked for session {:?} at `{}` {what}",
            shortened(id),
            query.to_query_string()
        )))
    };
    if answer.summary.id != id {
        return refuse(format!("is session {:?}'s", shortened(&answer.summary.id)));
    }
    answer.lines.iter().try_for_each(check_raw)?;
    if let Some(pair) = answer.lines.windows(2).find(|w| w[1].seq() <= w[0].seq()) {
        return refuse(format!(
            "holds seq {} after seq {}",
            pair[1].seq(),
            pair[0].seq()
        ));
    }
    let first = answer.lines.first().map(Line::seq);
    if answer.state != CatchUpState::Ahead && first != Some(query.cursor) {
        return refuse(match first {
            Some(seq) => format!("starts at seq {seq}, not at the cursor's line"),
            None => "holds no line, not even the cursor's".into(),
        });
    }
    Ok(CatchUp {
        answer,
        bytes: body.len() as u64,
        file: None,
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
    /// A keep-alive frame: the server stays silent at most an interval, and a stream that has
    /// sent nothing for this many milliseconds ([`crate::protocol::silence_limit_ms`]) is dead.
    KeepAlive {
        /// The silence after which the stream is taken for dead.
        silence_limit_ms: u32,
    },
}

impl StreamItem {
    /// The item for a line frame's `data`: a raw line ([`crate::protocol::check_raw`]), else
    /// [`TransportError::BadLine`] (the stream is dropped and opened again on the schedule).
    pub fn line(data: &str) -> TransportResult<StreamItem> {
        let line = Line::parse(data)?;
        check_raw(&line)?;
        Ok(StreamItem::Line(line))
    }

    /// The item for a keep-alive frame's `data`; `None` when it names no interval (a frame
    /// this client does not understand is not a line either: it is skipped).
    pub fn keep_alive(data: &str) -> Option<StreamItem> {
        crate::protocol::silence_limit_ms(data)
            .map(|silence_limit_ms| StreamItem::KeepAlive { silence_limit_ms })
    }
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

    /// The server's host, port (the scheme's default when the URL names none) and path prefix
    /// (the URL's path without its trailing slashes: `""` for a server at the root of its
    /// origin): what the cache keys this server's folder by ([`crate::chunks::names::server_key`],
    /// through [`crate::engine::Engine::assemble`]), so two servers behind one origin keep two
    /// caches.
    fn server(&self) -> (&str, u16, &str);

    /// `GET /sessions`.
    async fn sessions(&self) -> TransportResult<Vec<SessionSummary>>;
    /// `GET /sessions/{id}/transcript?...`: the lines for `query`, parsed with
    /// [`crate::protocol::parse_page`].
    async fn transcript(&self, id: &str, query: &TranscriptQuery) -> TransportResult<Page>;
    /// `GET /sessions/{id}/catchup?cursor=N&limit=W`: the reopen's check and catch-up in one
    /// answer, with the session's summary (parsed with [`parse_catch_up_for`]).
    async fn catch_up(&self, id: &str, query: &CatchUpQuery) -> TransportResult<CatchUp>;
    /// `DELETE /sessions/{id}`.
    async fn delete(&self, id: &str) -> TransportResult<()>;
    /// `POST /sessions/{id}/messages` with `{"text": text}`.
    async fn post_message(&self, id: &str, text: &str) -> TransportResult<()>;
    /// `GET /sessions/{id}/events?after=N&at=F` ([`crate::protocol::events_query`]; `at`, the
    /// fingerprint of the client's line at `N`, lets the server reset with `replaced` when its
    /// line there is another): resolves once the server has answered (so a refused connection
    /// is an error here, not a stream that ends at once).
    async fn events(&self, id: &str, after: u64, at: Option<&str>)
        -> TransportResult<Self::Stream>;
    /// Waits `ms` milliseconds (the reconnect schedule, `RECONNECT_DELAY_MS`), on whatever
    /// clock the transport's runtime has.
    async fn sleep(&self, ms: u32);
    /// Waits `ms` milliseconds for a stream to say something (its silence limit, from the
    /// server's keep-alive): [`Transport::sleep`], kept apart so that a test's clock can
    /// shorten the retry schedule without making every stream look dead at once.
    async fn silence(&self, ms: u32) {
        self.sleep(ms).await;
    }
}

/// A 2xx answer's body, or the error for an HTML page (`content_type` `text/html`): no route
/// of the protocol answers with one, so it is a captive portal's or a proxy's page (a login, a
/// challenge) standing in for the server's answer, said by its title and retried. Without this
/// a portal's 200 reads as a bad line, and a message posted through one as sent.
pub fn answer_body(content_type: Option<&str>, body: String) -> TransportResult<String> {
    let html = content_type.is_some_and(|t| {
        let t = t.trim_start();
        t.len() >= 9 && t[..9].eq_ignore_ascii_case("text/html")
    });
    match html {
        true => Err(TransportError::BadResponse(format!(
            "an HTML page answered, not the server (a network login or a proxy?): {}",
            error_message(&body)
        ))),
        false => Ok(body),
    }
}

/// The `{"error": "..."}` text of a body the server itself wrote, if it is one.
fn server_error(body: &str) -> Option<ErrorBody> {
    serde_json::from_str(body).ok()
}

/// An error body's JSON: `{"error": "...", "code"?: "..."}`.
#[derive(serde::Deserialize)]
struct ErrorBody {
    error: String,
    #[serde(default)]
    code: Option<String>,
}

/// The `{"error": "..."}` text of an error body, or the body itself shortened: an HTML page's
/// (a proxy's, a gateway's) as its title, or its text without the tags, not its markup.
pub fn error_message(body: &str) -> String {
    let text = match server_error(body) {
        Some(e) => e.error,
        None if body.trim_start().starts_with('<') => html_text(body),
        None => body.trim().to_string(),
    };
    match text.is_empty() {
        true => "(no explanation)".into(),
        false => shortened(&text),
    }
}

/// What a person reads of an HTML page: its `<title>` if it has one, else its text without the
/// tags (nor the scripts' and styles'), whitespace collapsed.
fn html_text(page: &str) -> String {
    // Its head is enough (and the walk below stays cheap on a page of megabytes).
    let mut end = page.len().min(16 << 10);
    while !page.is_char_boundary(end) {
        end -= 1;
    }
    let page = &page[..end];
    let lower = page.to_ascii_lowercase();
    let title = (lower.find("<title"))
        .and_then(|i| Some(i + lower[i..].find('>')? + 1))
        .and_then(|start| Some((start, start + lower[start..].find("</title")?)));
    let text = match title {
        Some((start, end)) => page[start..end].to_string(),
        None => {
            let mut out = String::new();
            let mut at = 0; // where the text not yet taken starts
            while let Some(open) = page[at..].find('<').map(|i| at + i) {
                out.push_str(&page[at..open]);
                out.push(' ');
                let tag = &lower[open..];
                // A script's or a style's body is not text.
                let skip_to = ["script", "style"]
                    .iter()
                    .find(|t| tag[1..].starts_with(*t))
                    .and_then(|t| tag.find(&format!("</{t}")));
                let from = open + skip_to.unwrap_or(0);
                at = page[from..]
                    .find('>')
                    .map_or(page.len(), |close| from + close + 1);
            }
            out.push_str(&page[at..]);
            out
        }
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The session list's body, parsed. A `seq` past [`MAX_SEQ`] (no line can carry it, and JS
/// could not hold it exactly) makes the list a bad response, as any other malformed entry does.
pub fn parse_sessions(body: &str) -> TransportResult<Vec<SessionSummary>> {
    let list: Vec<SessionSummary> = serde_json::from_str(body)
        .map_err(|e| TransportError::BadResponse(shortened(&e.to_string())))?;
    if let Some(s) = list.iter().find(|s| s.seq > MAX_SEQ) {
        return Err(TransportError::BadResponse(format!(
            "session {:?} has seq {}, past the highest a line can carry",
            s.id, s.seq
        )));
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server's own answer for a session it does not have.
    const GONE: &str = r#"{"error":"unknown session","code":"unknownSession"}"#;

    #[test]
    fn an_error_body_gives_its_message_and_anything_else_is_shortened() {
        assert_eq!(
            error_message(r#"{"error":"no session \"x\""}"#),
            "no session \"x\""
        );
        assert_eq!(error_message(""), "(no explanation)");
        assert_eq!(
            error_message("<html><head><TITLE>502 Bad\n Gateway</TITLE><style>a{}</style></head><body>x</body></html>"),
            "502 Bad Gateway"
        );
        assert_eq!(
            error_message("<html><script>var a = '<b>';</script><body><h1>404</h1>\n<p>Not  here</p></body></html>"),
            "404 Not here"
        );
        assert_eq!(error_message("<html><body>cut"), "cut");
        let long = "x".repeat(500);
        let short = error_message(&long);
        assert!(short.chars().count() == 201 && short.ends_with('…'));
        // The server's own words are bounded too: a proxy may wrap megabytes as `error`.
        let wrapped = error_message(&format!(r#"{{"error":"{long}"}}"#));
        assert!(wrapped.chars().count() == 201 && wrapped.ends_with('…'));
        let e = TransportError::from_answer(404, GONE, None);
        assert_eq!(e.to_string(), "server answered 404: unknown session");
        assert!(e.is_client_error());
        assert!(!TransportError::Network("refused".into()).is_client_error());
    }

    #[test]
    fn a_list_entry_past_the_highest_seq_is_a_bad_list() {
        let entry = |seq: u64| {
            format!(
                r#"[{{"id":"a","title":"","status":"idle","model":"","permissionMode":"","seq":{seq}}}]"#
            )
        };
        assert_eq!(parse_sessions(&entry(MAX_SEQ)).unwrap()[0].seq, MAX_SEQ);
        let e = parse_sessions(&entry(1 << 60)).unwrap_err();
        assert!(matches!(e, TransportError::BadResponse(_)), "{e}");
    }

    #[test]
    fn a_page_must_answer_what_was_asked() {
        let line = |seq: u64| {
            format!(r#"{{"seq":{seq},"ts":1.0,"event":{{"type":"status","status":"idle"}}}}"#)
        };
        let page = |seqs: &[u64]| {
            let lines: Vec<String> = seqs.iter().map(|s| line(*s)).collect();
            format!("[{}]", lines.join(","))
        };
        let query = TranscriptQuery {
            before: Some(10),
            after: Some(3),
            ..TranscriptQuery::default()
        };
        let seqs = |body: &str| {
            parse_page_for(&query, body).map(|p| p.lines.iter().map(Line::seq).collect::<Vec<_>>())
        };
        assert_eq!(seqs(&page(&[4, 5, 9])).unwrap(), vec![4, 5, 9]);
        assert_eq!(seqs("[]").unwrap(), Vec::<u64>::new());
        let newest = TranscriptQuery {
            limit: Some(2),
            ..TranscriptQuery::default()
        };
        assert!(parse_page_for(&newest, &page(&[4, 5])).is_ok());
        let e = parse_page_for(&newest, &page(&[4, 5, 6])).unwrap_err();
        assert!(e.to_string().contains("holds 3 lines"), "{e}");
        for bad in [&[4, 10][..], &[3, 4], &[5, 4], &[5, 5], &[12]] {
            let e = seqs(&page(bad)).unwrap_err();
            assert!(matches!(e, TransportError::BadResponse(_)), "{bad:?}: {e}");
            assert_eq!(Retry::classify(&e), Retry::After(0), "retried");
        }
        // A line folding the ones after it: a coalesced page's, reaching no further than the
        // next line and `before`; never a raw page's.
        let folded = |seq: u64, through: u64| {
            format!(
                r#"{{"seq":{seq},"ts":1.0,"event":{{"type":"assistantText","text":"ab","messageId":"m","folded":{{"through":{through},"first":"a","last":"b"}}}}}}"#
            )
        };
        let rows = TranscriptQuery {
            coalesce: true,
            ..query
        };
        let ok = format!("[{},{}]", folded(4, 6), line(7));
        assert!(parse_page_for(&rows, &ok).is_ok());
        let e = parse_page_for(&query, &ok).unwrap_err();
        assert!(
            matches!(e, TransportError::BadLine(LineError::Folded)),
            "{e}"
        );
        assert_eq!(Retry::classify(&e), Retry::After(0), "retried");
        for (bad, why) in [
            (
                format!("[{},{}]", folded(4, 7), line(7)),
                "seq 7 after seq 7",
            ),
            (
                format!("[{},{}]", line(4), folded(8, 10)),
                "seq 8 folded through seq 10",
            ),
        ] {
            let e = parse_page_for(&rows, &bad).unwrap_err();
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn a_catch_up_must_answer_what_was_asked() {
        let line = |seq: u64| {
            format!(r#"{{"seq":{seq},"ts":1.0,"event":{{"type":"status","status":"idle"}}}}"#)
        };
        let body = |id: &str, state: &str, seqs: &[u64]| {
            let lines: Vec<String> = seqs.iter().map(|s| line(*s)).collect();
            format!(
                r#"{{"state":"{state}","summary":{{"id":"{id}","title":"","status":"idle","model":"","permissionMode":"","seq":9}},"lines":[{}]}}"#,
                lines.join(",")
            )
        };
        let query = CatchUpQuery::new(5, 80);
        let check = |b: String| parse_catch_up_for("a", &query, &b);
        assert_eq!(
            check(body("a", "caughtUp", &[5, 6, 9]))
                .unwrap()
                .answer
                .lines
                .len(),
            3
        );
        assert!(check(body("a", "behind", &[5, 8, 9])).is_ok());
        assert!(
            check(body("a", "ahead", &[2, 3])).is_ok(),
            "no line at the cursor"
        );
        for (bad, why) in [
            (body("b", "caughtUp", &[5, 6]), "session \"b\"'s"),
            (body("a", "caughtUp", &[5, 7, 6]), "seq 6 after seq 7"),
            (body("a", "caughtUp", &[5, 5]), "seq 5 after seq 5"),
            (body("a", "caughtUp", &[6, 7]), "starts at seq 6"),
            (body("a", "behind", &[]), "holds no line"),
        ] {
            match check(bad) {
                Err(e @ TransportError::BadResponse(_)) => {
                    assert!(e.to_string().contains(why), "{e}");
                    assert_eq!(Retry::classify(&e), Retry::After(0), "retried");
                }
                other => panic!("{why}: {other:?}"),
            }
        }
        // Its lines are raw: one folding the lines after it is refused.
        let folded = r#"{"seq":6,"ts":1.0,"event":{"type":"assistantText","text":"ab","messageId":"m","folded":{"through":8,"first":"a","last":"b"}}}"#;
        let bad = body("a", "caughtUp", &[5]).replace("}]}", &format!("}},{folded}]}}"));
        assert!(matches!(
            check(bad),
            Err(TransportError::BadLine(LineError::Folded))
        ));
        // A body of the wrong shape quoting a huge string: a short message.
        let huge = format!(
            r#"{{"state":"caughtUp","lines":"{}"}}"#,
            "y".repeat(1 << 20)
        );
        let e = check(huge).unwrap_err().to_string();
        assert!(e.chars().count() < 300, "{} characters", e.chars().count());
    }

    #[test]
    fn the_retry_rule_stops_on_what_a_retry_cannot_fix_and_backs_off_on_the_rest() {
        let json = |status| TransportError::from_answer(status, r#"{"error":"x"}"#, None);
        let page = |status| TransportError::from_answer(status, "<html>not found</html>", None);
        let gone = TransportError::from_answer(404, GONE, None);
        assert_eq!(Retry::classify(&gone), Retry::Gone);
        assert_eq!(
            Retry::classify(&page(404)),
            Retry::After(0),
            "a proxy's 404"
        );
        assert_eq!(
            Retry::classify(&json(404)),
            Retry::After(0),
            "a gateway's JSON 404 does not name the session unknown"
        );
        assert_eq!(Retry::classify(&json(401)), Retry::Unauthorized);
        assert_eq!(Retry::classify(&json(403)), Retry::Unauthorized);
        for status in [401, 403] {
            assert_eq!(
                Retry::classify(&page(status)),
                Retry::After(0),
                "a firewall's or a proxy's {status} page"
            );
        }
        assert_eq!(Retry::classify(&json(400)), Retry::Refused);
        assert_eq!(Retry::classify(&json(408)), Retry::After(0));
        assert_eq!(Retry::classify(&json(429)), Retry::After(0));
        assert_eq!(Retry::classify(&page(502)), Retry::After(0));
        assert_eq!(
            Retry::classify(&TransportError::BadId("..".into())),
            Retry::Refused
        );

        let mut b = Backoff::new(1000, 8000, 42);
        let delays: Vec<u32> = (0..6)
            .map(
                |_| match b.decide(&TransportError::Network("down".into())) {
                    Retry::After(ms) => ms,
                    other => panic!("{other:?}"),
                },
            )
            .collect();
        for (i, d) in delays.iter().enumerate() {
            let full = (1000u32 << i).min(8000);
            assert!(
                (full / 2..=full).contains(d),
                "retry {i}: {d} not in [{}, {full}]",
                full / 2
            );
        }
        b.reset();
        assert!(matches!(b.decide(&page(503)), Retry::After(ms) if ms <= 1000));
        let throttled = TransportError::from_answer(429, "{}", Some("7"));
        assert_eq!(
            b.decide(&throttled),
            Retry::After(7000),
            "Retry-After is honoured"
        );
        let huge = TransportError::from_answer(503, "", Some("999999"));
        assert_eq!(b.decide(&huge), Retry::After(MAX_RETRY_AFTER_MS));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
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
