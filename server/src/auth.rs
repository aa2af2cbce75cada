//! `--token`: every route answers 401 without it; `--allow-origin`: CORS for those origins only.
//!
//! The token is accepted as `Authorization: Bearer T`, as a `token` query parameter (what an
//! `EventSource` can send) or as the cookie `scrollback_token` (set when a page was opened with
//! `?token=T`, so the page's scripts and module imports carry it too).

use crate::routes::error;
use axum::extract::{Request, State};
use axum::http::header::{self, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// The cookie that carries the token.
pub const COOKIE: &str = "scrollback_token";

/// Compares without an early exit, so timing does not tell how much of a guess was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

enum Found {
    Header,
    Query,
    Cookie,
}

fn presented(req: &Request, token: &str) -> Option<Found> {
    let t = token.as_bytes();
    let headers = req.headers();
    if let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        if v.strip_prefix("Bearer ")
            .is_some_and(|v| same(v.trim().as_bytes(), t))
        {
            return Some(Found::Header);
        }
    }
    if let Some(query) = req.uri().query() {
        let hit = query
            .split('&')
            .filter_map(|p| p.strip_prefix("token="))
            .any(|v| same(percent_decode(v).as_bytes(), t));
        if hit {
            return Some(Found::Query);
        }
    }
    for v in headers.get_all(header::COOKIE) {
        let Ok(v) = v.to_str() else { continue };
        let hit = v
            .split(';')
            .filter_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='))
            .any(|v| same(v.as_bytes(), t));
        if hit {
            return Some(Found::Cookie);
        }
    }
    None
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Middleware: 401 unless the request carries the token.
pub async fn require_token(State(token): State<Arc<str>>, req: Request, next: Next) -> Response {
    // CORS preflights carry no credentials; the CORS layer outside answers them.
    if req.method() == Method::OPTIONS {
        return next.run(req).await;
    }
    match presented(&req, &token) {
        None => error(StatusCode::UNAUTHORIZED, "missing or wrong token"),
        Some(found) => {
            let mut response = next.run(req).await;
            if matches!(found, Found::Query) {
                let cookie = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
                if let Ok(v) = HeaderValue::from_str(&cookie) {
                    response.headers_mut().append(header::SET_COOKIE, v);
                }
            }
            response
        }
    }
}

/// CORS for exactly these origins (credentials allowed, so the token cookie may travel).
pub fn cors(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let origins: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o.trim_end_matches('/')).ok())
        .collect();
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::HeaderName::from_static("last-event-id"),
            ])
            .allow_credentials(true),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_tokens_are_percent_decoded() {
        assert_eq!(percent_decode("a%2Bb%3D"), "a+b=");
        assert_eq!(percent_decode("a%2"), "a%2");
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"ab", b"abc"));
    }
}
