//! The native transport: reqwest for requests, `eventsource-stream` for the SSE framing, tokio
//! for the clock. Used by the `scrollback` CLI and the integration tests.

use super::{
    answer_body, parse_catch_up_for, parse_page_for, parse_sessions, usable_id, BadServer, CatchUp,
    EventStream, Page, ResetReason, StreamItem, Transport, TransportError, TransportResult,
};
use crate::protocol::{
    CatchUpQuery, SessionSummary, TranscriptQuery, FILE_HEADER, KEEP_ALIVE_EVENT, RESET_EVENT,
};
use eventsource_stream::{EventStreamError, Eventsource};
use futures::stream::{BoxStream, StreamExt};
use reqwest::{header, Client, RequestBuilder, Response, Url};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// How long a request (not the stream) may take before it counts as a network error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The server's routes over HTTP.
#[derive(Debug, Clone)]
pub struct HttpTransport {
    client: Client,
    base: Url,
    /// Shared by the clones: [`HttpTransport::set_token`] renews it for all of them.
    token: Arc<RwLock<Option<String>>>,
}

impl HttpTransport {
    /// A transport for the server at `server` (`http://127.0.0.1:8080`), sending `token` (when
    /// given; else a `token` in the address's query) as `Authorization: Bearer` on every request
    /// and on the stream. Plain `http` only: an `https` address is refused ([`BadServer`]).
    pub fn new(server: &str, token: Option<String>) -> Result<HttpTransport, BadServer> {
        let bad = |why: &'static str| BadServer {
            url: server.to_string(),
            why,
        };
        let mut base = Url::parse(server).map_err(|_| bad("not an absolute URL"))?;
        if base.cannot_be_a_base() || !matches!(base.scheme(), "http" | "https") {
            return Err(bad("not an http(s) address"));
        }
        // Built without a TLS library (none in a Tauri backend's or the CLI's tree): said now,
        // not a network error retried for ever.
        if base.scheme() == "https" {
            return Err(bad(
                "an https address: the native transport speaks plain http (put a TLS proxy in front, or use the browser's)",
            ));
        }
        // A token in the address (`?token=T`, as the server takes it) is the token, unless one
        // is given.
        let token = token.or_else(|| {
            let query = base.query().unwrap_or("");
            let mut pairs = crate::protocol::query_pairs(query);
            pairs
                .find(|(k, _)| k == "token")
                .map(|(_, v)| v.into_owned())
        });
        base.set_query(None);
        base.set_fragment(None);
        // `/p`, `/p/` and `/p//` are one server (one cache, `Transport::server`): one address.
        let path = base.path().trim_end_matches('/').to_string();
        base.set_path(&path);
        let client = Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|_| bad("no HTTP client could be made for it"))?;
        Ok(HttpTransport {
            client,
            base,
            token: Arc::new(RwLock::new(token.filter(|t| !t.is_empty()))),
        })
    }

    /// Replaces the token (`None` or empty: none) for every request and stream made from now on,
    /// by this transport and its clones (an access token refreshed); one under way keeps the
    /// token it was sent with.
    pub fn set_token(&self, token: Option<String>) {
        *self.token.write().unwrap_or_else(|e| e.into_inner()) = token.filter(|t| !t.is_empty());
    }

    /// The server's address as given (scheme, host, port, path).
    pub fn base(&self) -> &Url {
        &self.base
    }

    /// The server's host (with its port and path prefix, the cache's key: [`Transport::server`]).
    pub fn host(&self) -> &str {
        self.base.host_str().unwrap_or("")
    }

    /// The server's port, the scheme's default when the URL names none.
    pub fn port(&self) -> u16 {
        self.base.port_or_known_default().unwrap_or(0)
    }

    /// The server's path prefix, without a trailing slash: `/sandbox` for
    /// `http://gw.example.com/sandbox/`, `""` for a server at the root of its origin.
    pub fn prefix(&self) -> &str {
        self.base.path().trim_end_matches('/')
    }

    /// The URL of `segments` below the base, each segment percent-encoded (a session id with
    /// `/` in it stays one segment); one that cannot be a segment is refused ([`usable_id`]).
    fn url(&self, segments: &[&str]) -> TransportResult<Url> {
        for segment in segments {
            usable_id(segment)?;
        }
        let mut url = self.base.clone();
        url.path_segments_mut()
            .expect("checked in new: the base can be a base")
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    fn with_token(&self, request: RequestBuilder) -> RequestBuilder {
        match &*self.token.read().unwrap_or_else(|e| e.into_inner()) {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Sends a request; a non-2xx answer becomes [`TransportError::Http`] with the server's
    /// explanation.
    async fn send(&self, request: RequestBuilder) -> TransportResult<Response> {
        let response = self.with_token(request).send().await.map_err(network)?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = response.text().await.unwrap_or_default();
        Err(TransportError::from_answer(
            status.as_u16(),
            &body,
            retry_after.as_deref(),
        ))
    }

    async fn body(&self, request: RequestBuilder) -> TransportResult<String> {
        Ok(self.body_and_file(request).await?.0)
    }

    /// [`Self::body`], and the file the answer names ([`FILE_HEADER`]).
    async fn body_and_file(
        &self,
        request: RequestBuilder,
    ) -> TransportResult<(String, Option<String>)> {
        let response = self.send(request.timeout(REQUEST_TIMEOUT)).await?;
        let header = |name| {
            let value = response.headers().get(name)?;
            value.to_str().ok().map(str::to_string)
        };
        let (content_type, file) = (header(header::CONTENT_TYPE.as_str()), header(FILE_HEADER));
        let body = response.text().await.map_err(network)?;
        Ok((answer_body(content_type.as_deref(), body)?, file))
    }
}

fn network(e: reqwest::Error) -> TransportError {
    // reqwest's Display is terse ("error sending request"); the source says why.
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    TransportError::Network(message)
}

impl Transport for HttpTransport {
    type Stream = HttpStream;

    fn server(&self) -> (&str, u16, &str) {
        (self.host(), self.port(), self.prefix())
    }

    async fn sessions(&self) -> TransportResult<Vec<SessionSummary>> {
        let body = self.body(self.client.get(self.url(&["sessions"])?)).await?;
        parse_sessions(&body)
    }

    async fn transcript(&self, id: &str, query: &TranscriptQuery) -> TransportResult<Page> {
        let mut url = self.url(&["sessions", id, "transcript"])?;
        let q = query.to_query_string();
        url.set_query((!q.is_empty()).then_some(q.as_str()));
        let (body, file) = self.body_and_file(self.client.get(url)).await?;
        Ok(Page {
            file,
            ..parse_page_for(query, &body)?
        })
    }

    async fn catch_up(&self, id: &str, query: &CatchUpQuery) -> TransportResult<CatchUp> {
        let mut url = self.url(&["sessions", id, "catchup"])?;
        url.set_query(Some(&query.to_query_string()));
        let (body, file) = self.body_and_file(self.client.get(url)).await?;
        Ok(CatchUp {
            file,
            ..parse_catch_up_for(id, query, &body)?
        })
    }

    async fn delete(&self, id: &str) -> TransportResult<()> {
        self.body(self.client.delete(self.url(&["sessions", id])?))
            .await
            .map(drop)
    }

    async fn post_message(&self, id: &str, text: &str) -> TransportResult<()> {
        let body = serde_json::json!({ "text": text }).to_string();
        let request = self
            .client
            .post(self.url(&["sessions", id, "messages"])?)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body);
        self.body(request).await.map(drop)
    }

    async fn events(&self, id: &str, after: u64, at: Option<&str>) -> TransportResult<HttpStream> {
        let mut url = self.url(&["sessions", id, "events"])?;
        url.set_query(Some(&crate::protocol::events_query(after, at)));
        let request = self
            .client
            .get(url)
            .header(header::ACCEPT, "text/event-stream");
        // The answer's head is awaited as any request's; the stream itself is not timed here
        // (the engine times its silences by the server's keep-alive).
        let response = tokio::time::timeout(REQUEST_TIMEOUT, self.send(request))
            .await
            .map_err(|_| {
                TransportError::Network("the event stream was not answered in time".into())
            })??;
        Ok(HttpStream {
            events: response.bytes_stream().eventsource().boxed(),
        })
    }

    async fn sleep(&self, ms: u32) {
        tokio::time::sleep(Duration::from_millis(ms.into())).await;
    }
}

/// One open `/events` connection.
pub struct HttpStream {
    events: BoxStream<'static, Result<eventsource_stream::Event, EventStreamError<reqwest::Error>>>,
}

impl std::fmt::Debug for HttpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpStream")
    }
}

impl EventStream for HttpStream {
    async fn next(&mut self) -> Option<TransportResult<StreamItem>> {
        loop {
            let event = match self.events.next().await? {
                Ok(event) => event,
                Err(EventStreamError::Transport(e)) => return Some(Err(network(e))),
                Err(e) => return Some(Err(TransportError::Network(e.to_string()))),
            };
            if event.event == RESET_EVENT {
                return Some(Ok(StreamItem::Reset(ResetReason::from_data(&event.data))));
            }
            if event.event == KEEP_ALIVE_EVENT {
                match StreamItem::keep_alive(&event.data) {
                    Some(item) => return Some(Ok(item)),
                    None => continue,
                }
            }
            // A frame without data (a comment, another server's keep-alive) carries no line.
            if event.data.is_empty() {
                continue;
            }
            return Some(StreamItem::line(&event.data));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the cache keys a server by: its host, port and path prefix, one server however
    /// many slashes end its URL.
    #[test]
    fn servers_are_keyed_by_host_port_and_path_prefix() {
        let server = |url: &str| {
            let t = HttpTransport::new(url, None).unwrap();
            let (host, port, prefix) = t.server();
            (host.to_string(), port, prefix.to_string())
        };
        let at = |host: &str, port, prefix: &str| (host.to_string(), port, prefix.to_string());
        assert_eq!(server("http://127.0.0.1:8080"), at("127.0.0.1", 8080, ""));
        assert_eq!(server("http://127.0.0.1:8080/"), at("127.0.0.1", 8080, ""));
        assert_eq!(server("http://Chat.Example/"), at("chat.example", 80, ""));
        for url in [
            "http://gw.example.com/sandbox",
            "http://gw.example.com/sandbox/",
            "http://gw.example.com/sandbox//?x=1#y",
        ] {
            assert_eq!(server(url), at("gw.example.com", 80, "/sandbox"), "{url}");
            let t = HttpTransport::new(url, None).unwrap();
            assert_eq!(
                t.url(&["sessions"]).unwrap().as_str(),
                "http://gw.example.com/sandbox/sessions",
                "{url}: one server, one address"
            );
        }
        assert_eq!(
            server("http://gw.example.com/a/Prod"),
            at("gw.example.com", 80, "/a/Prod")
        );
        assert_ne!(
            server("http://gw.example.com/sandbox"),
            server("http://gw.example.com/prod")
        );
    }

    #[test]
    fn an_https_address_is_refused_and_a_token_in_the_address_is_the_token() {
        let e = HttpTransport::new("https://chat.example", None).unwrap_err();
        assert!(e.to_string().contains("plain http"), "{e}");
        let token = |url: &str, given: Option<&str>| {
            let t = HttpTransport::new(url, given.map(str::to_string)).unwrap();
            let token = t.token.read().unwrap().clone();
            (token, t.base().query().map(str::to_string))
        };
        assert_eq!(
            token("http://h/?token=a%2Bb", None),
            (Some("a+b".into()), None)
        );
        assert_eq!(
            token("http://h/?token=a", Some("b")).0.as_deref(),
            Some("b")
        );
        assert_eq!(token("http://h/?x=1", None).0, None);
    }
}
