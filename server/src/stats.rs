//! Per-route counters (`GET /stats`) and the one log line per request.
//!
//! Bytes are counted as the response body leaves, after compression, so they are the bytes on
//! the wire (without headers); a stream's bytes are counted as they are sent. The log line is
//! written when the body ends or the client goes away, so it carries the final byte count.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};
use scrollback_protocol::query_pairs;
use serde::Serialize;
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

/// The routes counted, by name.
pub const ROUTES: [&str; 8] = [
    "sessions",
    "transcript",
    "events",
    "messages",
    "replace",
    "delete",
    "stats",
    "static",
];

/// One route's counters.
#[derive(Debug, Default, Serialize)]
pub struct Counter {
    /// Requests answered (any status).
    pub requests: AtomicU64,
    /// Response body bytes sent.
    pub bytes: AtomicU64,
}

/// The counters of every route.
#[derive(Debug)]
pub struct Stats {
    routes: BTreeMap<&'static str, Counter>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            routes: ROUTES.iter().map(|r| (*r, Counter::default())).collect(),
        }
    }
}

impl Stats {
    /// `{"<route>": {"requests": n, "bytes": n}}`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(&self.routes).unwrap_or_default()
    }

    fn counter(&self, route: &str) -> &Counter {
        &self.routes[route]
    }
}

/// The route a request is counted under.
pub fn route_name(method: &Method, path: &str) -> &'static str {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        (_, ["sessions"]) => "sessions",
        (_, ["stats"]) => "stats",
        (&Method::PUT, ["sessions", _, "transcript"]) => "replace",
        (_, ["sessions", _, "transcript"]) => "transcript",
        // The reopen's check and catch-up reads the transcript too.
        (_, ["sessions", _, "catchup"]) => "transcript",
        (_, ["sessions", _, "events"]) => "events",
        (_, ["sessions", _, "messages"]) => "messages",
        (&Method::DELETE, ["sessions", _]) => "delete",
        _ => "static",
    }
}

/// The path and query with the value of any `token` parameter hidden.
pub fn redact(path_and_query: &str) -> String {
    let Some((path, query)) = path_and_query.split_once('?') else {
        return path_and_query.to_owned();
    };
    // A key as the token check reads it (`%74oken` is `token`).
    let is_token = |pair: &str| query_pairs(pair).next().is_some_and(|(k, _)| k == "token");
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match is_token(pair) {
            true => "token=REDACTED".to_owned(),
            false => pair.to_owned(),
        })
        .collect();
    format!("{path}?{}", query.join("&"))
}

/// Middleware: counts the request, counts its response bytes, logs one line when it is done.
pub async fn count_and_log(State(stats): State<Arc<Stats>>, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let target = redact(
        req.uri()
            .path_and_query()
            .map_or(req.uri().path(), |p| p.as_str()),
    );
    let route = route_name(&method, req.uri().path());
    stats
        .counter(route)
        .requests
        .fetch_add(1, Ordering::Relaxed);
    let response = next.run(req).await;
    let status = response.status();
    let (parts, body) = response.into_parts();
    let body = Body::new(Counted {
        inner: body,
        sent: 0,
        done: Some(Done {
            stats,
            route,
            method,
            target,
            status,
        }),
    });
    Response::from_parts(parts, body)
}

struct Done {
    stats: Arc<Stats>,
    route: &'static str,
    method: Method,
    target: String,
    status: StatusCode,
}

/// A response body that counts what passes through and logs when it is dropped.
struct Counted {
    inner: Body,
    sent: u64,
    done: Option<Done>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let Some(d) = self.done.take() {
            eprintln!(
                "{} {} {} {}",
                d.method,
                d.target,
                d.status.as_u16(),
                self.sent
            );
        }
    }
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let poll = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &poll {
            if let Some(data) = frame.data_ref() {
                let n = data.len() as u64;
                self.sent += n;
                if let Some(d) = &self.done {
                    d.stats
                        .counter(d.route)
                        .bytes
                        .fetch_add(n, Ordering::Relaxed);
                }
            }
        }
        poll
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_never_reach_the_log() {
        assert_eq!(
            redact("/sessions/a/events?after=3&token=s3cret"),
            "/sessions/a/events?after=3&token=REDACTED"
        );
        assert_eq!(redact("/sessions"), "/sessions");
        assert_eq!(
            redact("/sessions?%74oken=s3cret&x=%74oken"),
            "/sessions?token=REDACTED&x=%74oken"
        );
    }

    #[test]
    fn routes_are_named_by_method_and_shape() {
        assert_eq!(
            route_name(&Method::GET, "/sessions/x/transcript"),
            "transcript"
        );
        assert_eq!(
            route_name(&Method::PUT, "/sessions/x/transcript"),
            "replace"
        );
        assert_eq!(route_name(&Method::DELETE, "/sessions/x"), "delete");
        assert_eq!(route_name(&Method::GET, "/pkg/scrollback.js"), "static");
    }
}
