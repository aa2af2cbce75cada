//! The HTTP routes (README "The server's routes") and static files.

use crate::session::{self, TRANSCRIPT};
use crate::{auth, follow, sandbox, stats, transcript, App};
use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{middleware, Json, Router};
use scrollback_protocol::{catch_up_json, page_json, CatchUpQuery, Line, TranscriptQuery};
use serde_json::json;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use tower::ServiceExt;
use tower_http::compression::CompressionLayer;
use tower_http::services::ServeDir;

/// The largest transcript a `PUT` accepts.
pub const MAX_PUT_BYTES: usize = 512 << 20;

/// A JSON error response: `{"error": "..."}`.
pub fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

/// An error a handler answers with.
#[derive(Debug)]
pub struct ApiError(StatusCode, String);

impl ApiError {
    fn bad(message: impl Into<String>) -> ApiError {
        ApiError(StatusCode::BAD_REQUEST, message.into())
    }

    fn unknown() -> ApiError {
        ApiError(StatusCode::NOT_FOUND, "unknown session".into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        error(self.0, self.1)
    }
}

impl From<io::Error> for ApiError {
    fn from(e: io::Error) -> ApiError {
        if e.kind() == io::ErrorKind::NotFound {
            return ApiError::unknown();
        }
        eprintln!("scrollback-server: {e}");
        ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the server could not read or write the session".into(),
        )
    }
}

type Reply = Result<Response, ApiError>;

/// Runs file work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .map_err(ApiError::from)
}

/// The session id from the path, checked before any path is built from it.
fn session_id(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    let Path(id) = path.map_err(|e| ApiError::bad(format!("bad session id: {e}")))?;
    session::check_id(&id).map_err(ApiError::bad)?;
    Ok(id)
}

/// A session's transcript path, or 404 when it has none.
fn existing(app: &App, id: &str) -> Result<PathBuf, ApiError> {
    let path = session::transcript_path(&app.config.data, id);
    if path.is_file() {
        Ok(path)
    } else {
        Err(ApiError::unknown())
    }
}

fn json_body(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn list(State(app): State<Arc<App>>) -> Reply {
    let a = app.clone();
    let sessions = blocking(move || a.summaries.list(&a.config.data)).await?;
    Ok(Json(sessions).into_response())
}

async fn window(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Reply {
    let id = session_id(id)?;
    let query = TranscriptQuery::parse(query.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::bad(e.to_string()))?;
    let path = existing(&app, &id)?;
    let lines = blocking(move || transcript::window(&path, &query)).await?;
    Ok(json_body(page_json(&lines)))
}

/// `GET /sessions/{id}/catchup?cursor=N&limit=W`: the reopen's check and catch-up in one
/// (compressed) answer, with the session's summary.
async fn catch_up(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Reply {
    let id = session_id(id)?;
    let query = CatchUpQuery::parse(query.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::bad(e.to_string()))?;
    let path = existing(&app, &id)?;
    let a = app.clone();
    let body = blocking(move || {
        let (state, lines) = transcript::catch_up::catch_up(&path, &query)?;
        let summary = a
            .summaries
            .summary(&a.config.data, &id)?
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?
            .0;
        Ok(catch_up_json(state, &summary, &lines))
    })
    .await?;
    Ok(json_body(body))
}

async fn events(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Reply {
    let id = session_id(id)?;
    let query = TranscriptQuery::parse(query.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::bad(e.to_string()))?;
    // EventSource reconnects to the same URL and says where it got to in `Last-Event-ID`.
    let after = match headers.get("last-event-id") {
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| ApiError::bad("bad `Last-Event-ID`: must be a whole number"))?,
        None => query.after.unwrap_or(0),
    };
    let path = existing(&app, &id)?;
    let p = path.clone();
    let tail = blocking(move || transcript::events_after(&p, after)).await?;
    let stream = follow::events(path, after, tail, app.shutdown.clone());
    Ok(follow::response(stream).into_response())
}

async fn message(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Reply {
    let id = session_id(id)?;
    #[derive(serde::Deserialize)]
    struct Post {
        text: String,
    }
    let post: Post = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad(format!("bad body: expected {{\"text\": \"...\"}}: {e}")))?;
    if post.text.trim().is_empty() {
        return Err(ApiError::bad("bad `text`: must not be empty"));
    }
    existing(&app, &id)?;
    let line: Line = if app.config.sandbox {
        sandbox::agent::post(&app, &id, post.text)?
    } else {
        app.append(&id, json!({"type": "userMessage", "text": post.text}))?
    };
    Ok(json_body(line.raw().to_owned()))
}

/// Checks a replacement transcript: every line a protocol line, seqs from 1 with no holes.
/// Returns the newest seq.
fn check_transcript(body: &[u8]) -> Result<u64, ApiError> {
    let text = std::str::from_utf8(body).map_err(|_| ApiError::bad("bad body: not UTF-8"))?;
    let mut seq = 0;
    if text.is_empty() {
        return Ok(0);
    }
    for (i, raw) in text
        .strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .enumerate()
    {
        let line = Line::parse(raw)
            .map_err(|e| ApiError::bad(format!("bad body: line {}: {e}", i + 1)))?;
        if line.seq() != seq + 1 {
            return Err(ApiError::bad(format!(
                "bad body: line {} has seq {}, expected {}",
                i + 1,
                line.seq(),
                seq + 1
            )));
        }
        seq = line.seq();
    }
    Ok(seq)
}

async fn replace(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Reply {
    let id = session_id(id)?;
    let seq = check_transcript(&body)?;
    let a = app.clone();
    let created = blocking(move || {
        let dir = session::dir(&a.config.data, &id);
        std::fs::create_dir_all(&dir)?;
        let tmp = dir.join(format!(".{TRANSCRIPT}.put-{}", std::process::id()));
        let mut contents = body.to_vec();
        if !contents.is_empty() && !contents.ends_with(b"\n") {
            contents.push(b'\n');
        }
        let writer = a.writer(&id);
        let _guard = writer.lock().unwrap_or_else(|e| e.into_inner());
        std::fs::write(&tmp, &contents)?;
        let target = dir.join(TRANSCRIPT);
        let created = !target.exists();
        // A rename is atomic: a reader sees the old file or the new one, never a mix.
        std::fs::rename(&tmp, &target)?;
        Ok(created)
    })
    .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(json!({ "seq": seq }))).into_response())
}

async fn remove(State(app): State<Arc<App>>, id: Result<Path<String>, PathRejection>) -> Reply {
    let id = session_id(id)?;
    existing(&app, &id)?;
    let a = app.clone();
    blocking(move || {
        let writer = a.writer(&id);
        let _guard = writer.lock().unwrap_or_else(|e| e.into_inner());
        // Does not follow a symlink: a link is removed, never what it points at.
        std::fs::remove_dir_all(session::dir(&a.config.data, &id))
    })
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn stats_route(State(app): State<Arc<App>>) -> Response {
    Json(app.stats.json()).into_response()
}

/// Anything no route took: a session path with a `/` in its id (400), an unknown API path
/// (404), or a static file from `--www`.
async fn fallback(State(app): State<Arc<App>>, req: Request) -> Response {
    let path = req.uri().path();
    if let Some(rest) = path.strip_prefix("/sessions/") {
        let parts: Vec<&str> = rest.split('/').collect();
        let route = matches!(
            parts.last(),
            Some(&("transcript" | "events" | "messages" | "catchup"))
        );
        if parts.len() > 2 && route {
            return error(
                StatusCode::BAD_REQUEST,
                "bad session id: must not contain `/`",
            );
        }
        return error(StatusCode::NOT_FOUND, "no such route");
    }
    match &app.config.www {
        Some(www) => match ServeDir::new(www).oneshot(req).await {
            Ok(response) => response.into_response(),
            Err(e) => match e {},
        },
        None => error(StatusCode::NOT_FOUND, "no such route"),
    }
}

/// The whole application: routes, static files, and the layers (token, compression, CORS,
/// counters and log, from the inside out).
pub fn router(app: Arc<App>) -> Router {
    let mut router = Router::new()
        .route("/sessions", get(list))
        .route(
            "/sessions/{id}/transcript",
            get(window)
                .put(replace)
                .layer(DefaultBodyLimit::max(MAX_PUT_BYTES)),
        )
        .route("/sessions/{id}/events", get(events))
        .route("/sessions/{id}/catchup", get(catch_up))
        .route("/sessions/{id}/messages", post(message))
        .route("/sessions/{id}", delete(remove))
        .route("/stats", get(stats_route))
        .fallback(fallback);
    if let Some(pkg) = &app.config.pkg {
        router = router.nest_service("/pkg", ServeDir::new(pkg));
    }
    let mut router = router.with_state(app.clone());
    if let Some(token) = &app.config.token {
        let token: Arc<str> = token.as_str().into();
        router = router.layer(middleware::from_fn_with_state(token, auth::require_token));
    }
    // The default predicate leaves `text/event-stream` alone: a stream is never compressed
    // (and so never buffered by the compressor).
    router = router.layer(CompressionLayer::new());
    if let Some(cors) = auth::cors(&app.config.allow_origin) {
        router = router.layer(cors);
    }
    router.layer(middleware::from_fn_with_state(
        app.stats.clone(),
        stats::count_and_log,
    ))
}
