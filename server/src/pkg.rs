//! The built npm package at `/pkg/` (`--pkg`), served as a bundler serves its output: under a
//! versioned path, `/pkg/<version>/index.js` (and the worker and module it loads, by relative
//! URLs), with `Cache-Control: immutable`, so a reopen starts the worker and compiles the
//! module from the HTTP cache with no request at all. `GET /pkg/version` names the version (a
//! hash of the files' names, sizes and modification times, so a rebuild changes it). The plain
//! paths (`/pkg/index.js`) stay, revalidated on every use (`no-cache`). A file with
//! precompressed copies beside it (`.br`, `.gz`, written by `scripts/wasm.sh build`) at least as
//! new as itself is sent as one of them, so a first visit does not wait for the module to be
//! compressed; without them (or when one is older) the response is compressed as it leaves.

use crate::error::{error, file_or_error};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tower::ServiceExt;
use tower_http::services::ServeDir;

/// Cache-Control of a versioned file: it never changes.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// The routes under `/pkg` for the package folder `dir`.
pub fn router(dir: PathBuf) -> Router {
    Router::new()
        .route("/version", get(version_route))
        .fallback(serve)
        .with_state(Arc::new(dir))
}

/// The package's version: 16 hex digits that change whenever a file of `dir` does.
pub fn version(dir: &Path) -> String {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    files.sort_by_key(|e| e.file_name());
    let mut h = DefaultHasher::new();
    for e in files {
        e.file_name().hash(&mut h);
        if let Ok(meta) = e.metadata() {
            meta.len().hash(&mut h);
            meta.modified().ok().hash(&mut h);
        }
    }
    format!("{:016x}", h.finish())
}

async fn version_route(State(dir): State<Arc<PathBuf>>) -> Response {
    let mut res = version(&dir).into_response();
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    res
}

/// Whether the package file at URI path `path` (one name, no folders) has both precompressed
/// copies, each modified no earlier than the file itself: a stale copy (the file rebuilt or
/// replaced since) is never sent.
fn precompressed(dir: &Path, path: &str) -> bool {
    let name = path.trim_start_matches('/');
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return false;
    }
    let modified = |p: PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let Some(file) = modified(dir.join(name)) else {
        return false;
    };
    ["br", "gz"]
        .iter()
        .all(|ext| modified(dir.join(format!("{name}.{ext}"))).is_some_and(|m| m >= file))
}

async fn serve(State(dir): State<Arc<PathBuf>>, mut req: Request) -> Response {
    let path = req.uri().path().to_owned();
    let versioned = path
        .strip_prefix('/')
        .and_then(|p| p.split_once('/'))
        .filter(|(v, _)| v.len() == 16 && v.bytes().all(|b| b.is_ascii_hexdigit()));
    let cache = match versioned {
        // An old version is not served as if it were the current one.
        Some((v, _)) if *v != version(&dir) => {
            return error(StatusCode::NOT_FOUND, "this package version is gone")
        }
        Some((_, rest)) => {
            let Ok(uri) = format!("/{rest}").parse() else {
                return error(StatusCode::BAD_REQUEST, "bad path");
            };
            *req.uri_mut() = uri;
            IMMUTABLE
        }
        None => "no-cache",
    };
    let serve = ServeDir::new(dir.as_path());
    let serve = match precompressed(&dir, req.uri().path()) {
        true => serve.precompressed_br().precompressed_gzip(),
        false => serve,
    };
    let Ok(mut res) = serve.oneshot(req).await;
    if res.status().is_success() {
        res.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    }
    file_or_error(res.into_response())
}
