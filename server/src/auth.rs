//! `--token`: every route answers 401 without it; `--allow-origin`: CORS for those origins only;
//! the site rules against DNS rebinding and cross-site writes ([`Site`]).
//!
//! The token is accepted as `Authorization: Bearer T`, as a `token` query parameter (what an
//! `EventSource` can send) or as the cookie `scrollback_token` (set when a page was opened with
//! `?token=T`, so the page's scripts and module imports carry it too).

use crate::error::error;
use axum::extract::{Request, State};
use axum::http::header::{self, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use scrollback_protocol::query_pairs;
use std::net::SocketAddr;
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
        let hit = query_pairs(query).any(|(k, v)| k == "token" && same(v.as_bytes(), t));
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

/// Which `Host` and `Origin` values this server answers.
///
/// Hosts: the listening address, `localhost` with its port when that address is a loopback one
/// (any IP literal with the port when it is unspecified, `0.0.0.0` or `::`), and the
/// `--allow-host` values. Origins: `http://` and an answered host, or an `--allow-origin` value.
#[derive(Debug, Clone)]
pub struct Site {
    port: u16,
    hosts: Vec<String>,
    any_ip: bool,
    origins: Vec<String>,
}

impl Site {
    /// The rules for a server listening on `addr`.
    pub fn new(addr: SocketAddr, allow_host: &[String], allow_origin: &[String]) -> Site {
        let port = addr.port();
        let mut hosts = vec![addr.to_string()];
        if addr.ip().is_loopback() {
            hosts.push(format!("localhost:{port}"));
        }
        for h in allow_host {
            let h = h.trim().to_ascii_lowercase();
            if h.contains(':') && !h.starts_with('[') {
                hosts.push(h);
            } else {
                hosts.push(format!("{h}:{port}"));
                hosts.push(h);
            }
        }
        Site {
            port,
            hosts,
            any_ip: addr.ip().is_unspecified(),
            origins: allow_origin
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
        }
    }

    /// Whether a `Host` value names this server.
    pub fn host_ok(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        // The default port may be left out.
        let portless = host.ends_with(']') || !host.contains(':');
        let with_port = if self.port == 80 && portless {
            format!("{host}:80")
        } else {
            host.clone()
        };
        if self.hosts.contains(&host) || self.hosts.contains(&with_port) {
            return true;
        }
        self.any_ip
            && with_port
                .parse::<SocketAddr>()
                .is_ok_and(|a| a.port() == self.port)
    }

    /// Whether an `Origin` value is this server's own or an allowed one.
    pub fn origin_ok(&self, origin: &str) -> bool {
        let origin = origin.trim().to_ascii_lowercase();
        self.origins.contains(&origin)
            || origin
                .strip_prefix("http://")
                .is_some_and(|h| !h.contains('/') && self.host_ok(h))
    }

    /// Whether a request that carries the token only in the cookie comes from a page allowed to
    /// use it: a cookie travels to every port of a host, so the browser's own word on where the
    /// request comes from must agree (`Origin` allowed, or no `Origin` and `Sec-Fetch-Site`
    /// absent, `same-origin` or `none`).
    fn cookie_ok(&self, req: &Request) -> bool {
        let headers = req.headers();
        if let Some(origin) = headers.get(header::ORIGIN) {
            return origin.to_str().is_ok_and(|o| self.origin_ok(o));
        }
        match headers.get("sec-fetch-site").map(|v| v.to_str()) {
            None => true,
            Some(Ok(site)) => matches!(site, "same-origin" | "none"),
            Some(Err(_)) => false,
        }
    }
}

/// Middleware: 421 for a `Host` that does not name this server (DNS rebinding), 403 for a
/// state-changing request from an origin that is not allowed (a cross-site form or script).
pub async fn check_site(State(site): State<Arc<Site>>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .map(|h| h.to_str().map(str::to_owned));
    match host {
        Some(Ok(h)) if site.host_ok(&h) => {}
        None if req.uri().authority().is_none() => {}
        None if req
            .uri()
            .authority()
            .is_some_and(|a| site.host_ok(a.as_str())) => {}
        _ => {
            return error(
                StatusCode::MISDIRECTED_REQUEST,
                "unknown `Host`: this server answers only its own address (see --allow-host)",
            )
        }
    }
    let writes = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if writes {
        if let Some(origin) = req.headers().get(header::ORIGIN) {
            if !origin.to_str().is_ok_and(|o| site.origin_ok(o)) {
                return error(
                    StatusCode::FORBIDDEN,
                    "this origin may not change sessions (see --allow-origin)",
                );
            }
        }
    }
    next.run(req).await
}

/// What [`require_token`] checks against.
pub struct TokenGuard {
    /// The token.
    pub token: Arc<str>,
    /// Where a cookie-carried token may come from.
    pub site: Arc<Site>,
}

/// Middleware: 401 unless the request carries the token (and, when only the cookie carries it,
/// comes from an allowed page: 403 otherwise).
pub async fn require_token(
    State(guard): State<Arc<TokenGuard>>,
    req: Request,
    next: Next,
) -> Response {
    let token = &guard.token;
    // CORS preflights carry no credentials; the CORS layer outside answers them.
    if req.method() == Method::OPTIONS {
        return next.run(req).await;
    }
    match presented(&req, token) {
        None => error(StatusCode::UNAUTHORIZED, "missing or wrong token"),
        Some(Found::Cookie) if !guard.site.cookie_ok(&req) => error(
            StatusCode::FORBIDDEN,
            "the token cookie is not accepted from another site or port",
        ),
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
            .expose_headers([header::HeaderName::from_static(
                scrollback_protocol::FILE_HEADER,
            )])
            .allow_credentials(true),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_tokens_are_percent_decoded() {
        let asked = |query: &str| {
            let req = Request::get(format!("/sessions?{query}"))
                .body(axum::body::Body::empty())
                .unwrap();
            presented(&req, "a+b=").is_some()
        };
        assert!(asked("token=a%2Bb%3D"));
        assert!(asked("x=1&%74oken=a%2Bb%3D"), "the key decoded too");
        assert!(!asked("token=a+b="), "a + is a space");
        assert!(!asked("token=a%2"));
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"ab", b"abc"));
    }

    #[test]
    fn hosts_and_origins_name_the_listening_address() {
        let site = Site::new("127.0.0.1:4000".parse().unwrap(), &["box.lan".into()], &[]);
        for ok in [
            "127.0.0.1:4000",
            "localhost:4000",
            "LOCALHOST:4000",
            "box.lan",
            "box.lan:4000",
        ] {
            assert!(site.host_ok(ok), "{ok}");
        }
        for bad in [
            "rebind.attacker.example",
            "localhost:4001",
            "127.0.0.1",
            "evil:4000",
        ] {
            assert!(!site.host_ok(bad), "{bad}");
        }
        assert!(site.origin_ok("http://localhost:4000"));
        assert!(!site.origin_ok("http://localhost:5000") && !site.origin_ok("null"));
        let any = Site::new("0.0.0.0:4000".parse().unwrap(), &[], &[]);
        assert!(any.host_ok("192.168.1.9:4000") && !any.host_ok("evil.example:4000"));
    }
}
