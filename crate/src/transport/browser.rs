//! The browser transport: `fetch` through gloo-net for requests, `web_sys::EventSource` for the
//! stream, `setTimeout` for the clock. Works on a page and in a dedicated worker.
//!
//! The stream listens to `EventSource` directly: gloo-net's wrapper hides the errors fired while
//! the browser reconnects and cannot say where to resume. Here an `error` event ends the
//! connection (the `EventSource` is closed before it can reconnect by itself), and the engine
//! reconnects on the protocol's schedule with its newest cursor in `?after=N`.

use super::{
    answer_body, parse_catch_up_for, parse_page_for, parse_sessions, usable_id, BadServer, CatchUp,
    EventStream, Page, ResetReason, Retry, StreamItem, Transport, TransportError, TransportResult,
};
use crate::protocol::{
    CatchUpQuery, SessionSummary, TranscriptQuery, FILE_HEADER, KEEP_ALIVE_EVENT, RESET_EVENT,
};
use futures::channel::mpsc;
use futures::StreamExt;
use gloo_net::http::{Request, RequestBuilder};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{AbortSignal, EventSource, MessageEvent, RequestCache};

/// Why a stream the browser closed before it opened failed, until a `fetch` says more.
const REFUSED_STREAM: &str = "the server refused the event stream (an error status or no stream)";

/// How long a request (not the stream) may take before it counts as a network error.
const REQUEST_TIMEOUT_MS: u32 = 60_000;
/// How long the question of why a stream was refused may take (ms): the stream has failed
/// already, and its retry waits for the answer.
const REFUSAL_TIMEOUT_MS: u32 = 10_000;

/// What one transport has cost on the wire since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireCounters {
    /// Requests sent: every fetch and every stream connection attempted.
    pub requests: u64,
    /// Bytes received: response bodies (error bodies included) and the `data` of stream events.
    pub bytes: u64,
}

/// The server's routes from a browser page or worker.
#[derive(Debug)]
pub struct BrowserTransport {
    base: String,
    host: String,
    port: u16,
    /// The URL's path without its trailing slashes (`""` at the root of the origin).
    prefix: String,
    /// Sent with every request from now on: [`BrowserTransport::set_token`] replaces it.
    token: RefCell<Option<String>>,
    /// Bumped by each [`BrowserTransport::set_token`]: a request knows whether the token it was
    /// sent with is still the app's ([`BrowserTransport::stale_token`]).
    token_turn: Cell<u64>,
    counters: Rc<Cell<WireCounters>>,
    early: RefCell<Option<Early>>,
}

/// A session's first request, asked by the page before the module was ready
/// (`Scrollback.open`'s `opening`): a reopen's check, or a first visit's newest window.
#[derive(Debug)]
struct Early {
    /// The URL it asked, as [`BrowserTransport::catch_up`] or [`Transport::transcript`]
    /// spells it.
    url: String,
    /// The page's answer: `{status, body}` (an `ArrayBuffer`), or null when it got none.
    answer: js_sys::Promise,
    /// When it was handed over (ms since the epoch).
    since: f64,
}

/// How long an early request stays usable: the open it was asked for makes its own request
/// within a moment; an answer older than this is not taken for the server's present.
const EARLY_FOR_MS: f64 = 10_000.0;

impl BrowserTransport {
    /// A transport for the server at `server` (`http://127.0.0.1:8080`, optionally with a path
    /// prefix), sending `token` (when given and not empty) as `Authorization: Bearer` on every
    /// request and as the `token` query parameter on the stream, which cannot send headers.
    pub fn new(server: &str, token: Option<String>) -> Result<BrowserTransport, BadServer> {
        let bad = |why: &'static str| BadServer {
            url: server.to_string(),
            why,
        };
        let url = web_sys::Url::new(server).map_err(|_| bad("not an absolute URL"))?;
        let default_port = match url.protocol().as_str() {
            "http:" => 80,
            "https:" => 443,
            _ => return Err(bad("not an http(s) address")),
        };
        url.set_search("");
        url.set_hash("");
        let port = match url.port().as_str() {
            "" => default_port,
            p => p.parse().map_err(|_| bad("bad port"))?,
        };
        let base = url.href().trim_end_matches('/').to_string();
        Ok(BrowserTransport {
            base,
            host: url.hostname(),
            port,
            prefix: url.pathname().trim_end_matches('/').to_string(),
            token: RefCell::new(token.filter(|t| !t.is_empty())),
            token_turn: Cell::new(0),
            counters: Rc::default(),
            early: RefCell::default(),
        })
    }

    /// Replaces the token (`None` or empty: none) for every request and stream made from now on
    /// (an app's access token refreshed); one under way keeps the token it was sent with.
    pub fn set_token(&self, token: Option<String>) {
        *self.token.borrow_mut() = token.filter(|t| !t.is_empty());
        self.token_turn.set(self.token_turn.get() + 1);
    }

    /// `error`, but for the server refusing the token a request was sent with (at `turn`) when
    /// the app has set another since ([`Self::set_token`] while it was on its way, as an app
    /// that starts with an expired token does while its refresh comes back): then a network
    /// error, retried with the new token, rather than the session stopped for a token that is
    /// not the app's any more.
    fn stale_token(&self, error: TransportError, turn: u64) -> TransportError {
        if self.token_turn.get() == turn || Retry::classify(&error) != Retry::Unauthorized {
            return error;
        }
        TransportError::Network(format!(
            "{error} (sent with the token before the one set since: asked again)"
        ))
    }

    /// Takes over a request the page made before the module was ready: the first request of
    /// one session's open, asked at `url` (as [`Transport::catch_up`] asks a reopen's check, or
    /// [`Transport::transcript`] a first visit's newest window), whose `answer` resolves to
    /// `{status, body}` (an `ArrayBuffer`) or null. The next request of the same route asking
    /// the same URL, within a few seconds, awaits that answer instead of asking again; any
    /// other request of that route and session drops it. Counted as a request now, its bytes
    /// when taken.
    pub fn expect(&self, url: String, answer: js_sys::Promise) {
        self.count(1, 0);
        let since = js_sys::Date::now();
        *self.early.borrow_mut() = Some(Early { url, answer, since });
    }

    /// The early request's body, if `url` is the one it asked and it was answered with a 2xx;
    /// `None` sends the request (so every error is classified by [`Self::send`]). An early
    /// request left unanswered for a request's timeout is that timeout: the request is not
    /// made again at once, to wait as long again (the retry schedule asks again).
    async fn early(&self, url: &str) -> Option<TransportResult<(String, Option<String>)>> {
        let session = |u: &str| u.split('?').next().map(str::to_owned);
        let early = {
            let mut slot = self.early.borrow_mut();
            match &*slot {
                Some(e) if session(&e.url) == session(url) => slot.take()?,
                _ => return None,
            }
        };
        if early.url != url || js_sys::Date::now() - early.since > EARLY_FOR_MS {
            return None;
        }
        // One deadline from when the request was made, as a request of its own has.
        let waited = (js_sys::Date::now() - early.since).max(0.0) as u32;
        let wait =
            gloo_timers::future::TimeoutFuture::new(REQUEST_TIMEOUT_MS.saturating_sub(waited));
        let answer = wasm_bindgen_futures::JsFuture::from(early.answer);
        let answer = match futures::future::select(answer, wait).await {
            futures::future::Either::Left((Ok(answer), _)) => answer,
            futures::future::Either::Left((Err(_), _)) => return None,
            futures::future::Either::Right(_) => {
                return Some(Err(TransportError::Network(format!(
                    "{url}: no answer in {} s",
                    REQUEST_TIMEOUT_MS / 1000
                ))))
            }
        };
        let field = |name: &str| js_sys::Reflect::get(&answer, &name.into()).ok();
        let status = field("status")?.as_f64()?;
        let body = field("body")?.dyn_into::<js_sys::ArrayBuffer>().ok()?;
        if !(200.0..300.0).contains(&status) {
            return None;
        }
        let body = String::from_utf8(js_sys::Uint8Array::new(&body).to_vec()).ok()?;
        self.count(0, body.len() as u64);
        let file = field("file").and_then(|f| f.as_string());
        Some(Ok((body, file)))
    }

    /// The server's address, without a trailing slash.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The server's host name (with its port and path prefix, what the cache keys the server
    /// by: [`Transport::server`]).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The server's port, the scheme's default when the URL names none.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's path prefix, without a trailing slash: `/sandbox` for
    /// `https://gw.example.com/sandbox/`, `""` for a server at the root of its origin.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Requests and bytes so far.
    pub fn counters(&self) -> WireCounters {
        self.counters.get()
    }

    fn count(&self, requests: u64, bytes: u64) {
        count(&self.counters, requests, bytes);
    }

    /// The URL of `segments` below the base, each percent-encoded, so a session id holding `/`,
    /// `?` or `#` stays one segment; one that cannot be a segment is refused ([`usable_id`]).
    fn url(&self, segments: &[&str]) -> TransportResult<String> {
        let mut url = self.base.clone();
        for segment in segments {
            usable_id(segment)?;
            url.push('/');
            url.push_str(&String::from(js_sys::encode_uri_component(segment)));
        }
        Ok(url)
    }

    /// Sends a request with the token and a timeout; a non-2xx answer becomes
    /// [`TransportError::Http`] with the server's explanation. Returns the body.
    async fn send(&self, request: RequestBuilder, body: Option<String>) -> TransportResult<String> {
        Ok(self.exchange(request, body).await?.0)
    }

    /// [`Self::send`], and the file the answer names ([`FILE_HEADER`]).
    async fn exchange(
        &self,
        request: RequestBuilder,
        body: Option<String>,
    ) -> TransportResult<(String, Option<String>)> {
        let turn = self.token_turn.get();
        let signal = AbortSignal::timeout_with_u32(REQUEST_TIMEOUT_MS);
        // Never the browser's HTTP cache: an answer kept there (a proxy's `max-age`, say) is the
        // file as it was, and a replaced file would be answered with the old one again.
        let mut request = (request.abort_signal(Some(&signal))).cache(RequestCache::NoStore);
        if let Some(token) = &*self.token.borrow() {
            request = request.header("Authorization", &format!("Bearer {token}"));
        }
        let request: Request = match body {
            Some(body) => request
                .header("Content-Type", "application/json")
                .body(body),
            None => request.build(),
        }
        .map_err(|e| TransportError::Network(e.to_string()))?;
        // (gloo-net 0.6 puts a `&` after a URL that has a query of its own: not in messages.)
        let url = request.url();
        let url = url.strip_suffix('&').unwrap_or(&url).to_string();
        self.count(1, 0);
        let response = request
            .send()
            .await
            .map_err(|e| TransportError::Network(format!("{url}: {e}")))?;
        // As bytes: one copy into the module, where text would be decoded into a JS string
        // and encoded back (and invalid UTF-8 replaced, not refused).
        let bytes = response
            .binary()
            .await
            .map_err(|e| TransportError::Network(format!("{url}: {e}")))?;
        let text = String::from_utf8(bytes)
            .map_err(|e| TransportError::Network(format!("{url}: not UTF-8: {e}")))?;
        self.count(0, text.len() as u64);
        if !response.ok() {
            let retry_after = response.headers().get("Retry-After");
            let error =
                TransportError::from_answer(response.status(), &text, retry_after.as_deref());
            return Err(self.stale_token(error, turn));
        }
        let file = response.headers().get(FILE_HEADER);
        Ok((
            answer_body(response.headers().get("Content-Type").as_deref(), text)?,
            file,
        ))
    }

    /// Why the browser refused an event stream: `EventSource` hides the status, so the same URL
    /// is asked once more with `fetch`, which shows it (and the server's JSON error), and the
    /// answer is classified as every other request's is. A stream that opens this time is cut
    /// at once, and the refusal stays a network error, to be retried.
    async fn refusal(&self, url: &str, fallback: TransportError) -> TransportError {
        let Ok(controller) = web_sys::AbortController::new() else {
            return fallback;
        };
        let Ok(request) = Request::get(url)
            .abort_signal(Some(&controller.signal()))
            .header("Accept", "text/event-stream")
            .build()
        else {
            return fallback;
        };
        self.count(1, 0);
        let asked = async {
            let Ok(response) = request.send().await else {
                // No answer at all (Firefox closes an EventSource it could not connect): the
                // server cannot be reached, which is what the stream's error says in every engine.
                return match fallback.clone() {
                    TransportError::Network(message) => TransportError::Network(message.replace(
                        REFUSED_STREAM,
                        "cannot reach the server for the event stream",
                    )),
                    other => other,
                };
            };
            if response.ok() {
                return fallback.clone();
            }
            let text = response.text().await.unwrap_or_default();
            self.count(0, text.len() as u64);
            let retry_after = response.headers().get("Retry-After");
            TransportError::from_answer(response.status(), &text, retry_after.as_deref())
        };
        // A server that takes this request and never answers (or never ends its body) must not
        // keep the stream from being retried: past the bound, the stream's own error stands.
        let bound = gloo_timers::future::TimeoutFuture::new(REFUSAL_TIMEOUT_MS);
        let error = match futures::future::select(std::pin::pin!(asked), bound).await {
            futures::future::Either::Left((error, _)) => error,
            futures::future::Either::Right(_) => fallback.clone(),
        };
        // (An answer that opened a stream, or one cut off by the bound: not read any further.)
        controller.abort();
        error
    }
}

impl Transport for BrowserTransport {
    type Stream = BrowserStream;

    fn server(&self) -> (&str, u16, &str) {
        (self.host(), self.port(), self.prefix())
    }

    async fn sessions(&self) -> TransportResult<Vec<SessionSummary>> {
        let body = self
            .send(Request::get(&self.url(&["sessions"])?), None)
            .await?;
        parse_sessions(&body)
    }

    async fn transcript(&self, id: &str, query: &TranscriptQuery) -> TransportResult<Page> {
        let mut url = self.url(&["sessions", id, "transcript"])?;
        let q = query.to_query_string();
        if !q.is_empty() {
            url.push('?');
            url.push_str(&q);
        }
        if let Some(early) = self.early(&url).await {
            let (body, file) = early?;
            if let Ok(page) = parse_page_for(query, &body) {
                return Ok(Page { file, ..page });
            }
        }
        let (body, file) = self.exchange(Request::get(&url), None).await?;
        Ok(Page {
            file,
            ..parse_page_for(query, &body)?
        })
    }

    async fn catch_up(&self, id: &str, query: &CatchUpQuery) -> TransportResult<CatchUp> {
        let url = format!(
            "{}?{}",
            self.url(&["sessions", id, "catchup"])?,
            query.to_query_string()
        );
        if let Some(early) = self.early(&url).await {
            let (body, file) = early?;
            if let Ok(answer) = parse_catch_up_for(id, query, &body) {
                return Ok(CatchUp { file, ..answer });
            }
        }
        let (body, file) = self.exchange(Request::get(&url), None).await?;
        Ok(CatchUp {
            file,
            ..parse_catch_up_for(id, query, &body)?
        })
    }

    async fn delete(&self, id: &str) -> TransportResult<()> {
        let url = self.url(&["sessions", id])?;
        self.send(Request::delete(&url), None).await.map(drop)
    }

    async fn post_message(&self, id: &str, text: &str) -> TransportResult<()> {
        let url = self.url(&["sessions", id, "messages"])?;
        let body = serde_json::json!({ "text": text }).to_string();
        self.send(Request::post(&url), Some(body)).await.map(drop)
    }

    async fn events(
        &self,
        id: &str,
        after: u64,
        at: Option<&str>,
    ) -> TransportResult<BrowserStream> {
        let path = self.url(&["sessions", id, "events"])?;
        let mut url = format!("{path}?{}", crate::protocol::events_query(after, at));
        let turn = self.token_turn.get();
        if let Some(token) = &*self.token.borrow() {
            url.push_str("&token=");
            url.push_str(&String::from(js_sys::encode_uri_component(token)));
        }
        self.count(1, 0);
        // `path` names the stream in errors: the URL itself may carry the token.
        let mut stream = BrowserStream::connect(&url, path, self.counters.clone())?;
        // Its answer is awaited as any request's (a connection that never answers would hold
        // the session for ever); the stream itself is timed by the engine, by its keep-alive.
        let wait = gloo_timers::future::TimeoutFuture::new(REQUEST_TIMEOUT_MS);
        let opened = match futures::future::select(stream.signals.next(), wait).await {
            futures::future::Either::Left((signal, _)) => signal,
            futures::future::Either::Right(_) => None,
        };
        match opened {
            Some(Signal::Open) => Ok(stream),
            _ => {
                let refused = stream.source.ready_state() == EventSource::CLOSED;
                let error = stream.failure(false);
                drop(stream);
                match refused {
                    true => Err(self.stale_token(self.refusal(&url, error).await, turn)),
                    false => Err(error),
                }
            }
        }
    }

    async fn sleep(&self, ms: u32) {
        gloo_timers::future::TimeoutFuture::new(ms).await;
    }
}

fn count(counters: &Cell<WireCounters>, requests: u64, bytes: u64) {
    let mut c = counters.get();
    c.requests += requests;
    c.bytes += bytes;
    counters.set(c);
}

/// What the `EventSource`'s listeners report, in order.
enum Signal {
    Open,
    Data(String),
    Reset(String),
    KeepAlive(String),
    Error,
}

type Listener = Closure<dyn FnMut(web_sys::Event)>;

/// One `/events` connection: an `EventSource`, closed at its first error or when dropped.
pub struct BrowserStream {
    source: EventSource,
    path: String,
    counters: Rc<Cell<WireCounters>>,
    signals: mpsc::UnboundedReceiver<Signal>,
    listeners: Vec<(&'static str, Listener)>,
    ended: bool,
}

impl std::fmt::Debug for BrowserStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserStream")
            .field("path", &self.path)
            .field("ended", &self.ended)
            .finish()
    }
}

impl BrowserStream {
    fn connect(
        url: &str,
        path: String,
        counters: Rc<Cell<WireCounters>>,
    ) -> TransportResult<BrowserStream> {
        let source = EventSource::new(url).map_err(|e| {
            TransportError::Network(format!("{path}: cannot open the event stream: {e:?}"))
        })?;
        let (tx, signals) = mpsc::unbounded();
        let mut stream = BrowserStream {
            source,
            path,
            counters,
            signals,
            listeners: Vec::with_capacity(5),
            ended: false,
        };
        let signal = |make: fn(&web_sys::Event) -> Signal| {
            let tx = tx.clone();
            Closure::new(move |event: web_sys::Event| {
                let _ = tx.unbounded_send(make(&event));
            })
        };
        stream.listen("open", signal(|_| Signal::Open));
        stream.listen("message", signal(|e| Signal::Data(data(e))));
        stream.listen(RESET_EVENT, signal(|e| Signal::Reset(data(e))));
        stream.listen(KEEP_ALIVE_EVENT, signal(|e| Signal::KeepAlive(data(e))));
        stream.listen("error", signal(|_| Signal::Error));
        Ok(stream)
    }

    fn listen(&mut self, name: &'static str, listener: Listener) {
        // Adding a listener to a live EventSource cannot fail.
        let _ = self
            .source
            .add_event_listener_with_callback(name, listener.as_ref().unchecked_ref());
        self.listeners.push((name, listener));
    }

    /// Ends the connection and says why: refused (closed by the browser: an HTTP error or not
    /// an event stream) or lost (the browser would reconnect; the engine does instead).
    fn failure(&mut self, was_open: bool) -> TransportError {
        let refused = self.source.ready_state() == EventSource::CLOSED;
        self.ended = true;
        self.source.close();
        let why = match (was_open, refused) {
            (false, true) => REFUSED_STREAM,
            (false, false) => "cannot reach the server for the event stream",
            (true, _) => "the event stream was interrupted",
        };
        TransportError::Network(format!("{}: {why}", self.path))
    }
}

/// A message event's `data`, which is always a string for `EventSource`.
fn data(event: &web_sys::Event) -> String {
    event
        .dyn_ref::<MessageEvent>()
        .and_then(|e| e.data().as_string())
        .unwrap_or_default()
}

impl EventStream for BrowserStream {
    async fn next(&mut self) -> Option<TransportResult<StreamItem>> {
        if self.ended {
            return None;
        }
        loop {
            match self.signals.next().await {
                Some(Signal::Data(text)) if text.is_empty() => continue,
                Some(Signal::Data(text)) => {
                    count(&self.counters, 0, text.len() as u64);
                    return Some(StreamItem::line(&text));
                }
                Some(Signal::Reset(text)) => {
                    return Some(Ok(StreamItem::Reset(ResetReason::from_data(&text))))
                }
                Some(Signal::KeepAlive(text)) => match StreamItem::keep_alive(&text) {
                    Some(item) => return Some(Ok(item)),
                    None => continue,
                },
                Some(Signal::Open) => continue,
                Some(Signal::Error) | None => return Some(Err(self.failure(true))),
            }
        }
    }
}

impl Drop for BrowserStream {
    fn drop(&mut self) {
        self.source.close();
        for (name, listener) in &self.listeners {
            let _ = self
                .source
                .remove_event_listener_with_callback(name, listener.as_ref().unchecked_ref());
        }
    }
}
