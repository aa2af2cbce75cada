//! The HTTP routes (README "The server's routes") and static files.

use crate::answers::{self, Closer, Share};
use crate::error::{error, file_or_error, ApiError};
use crate::session::{self, TRANSCRIPT};
use crate::{auth, follow, sandbox, stats, transcript, App};
use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{middleware, Extension, Json, Router};
use scrollback_protocol::{
    catch_up_json, page_json, parse_json, CatchUpQuery, Line, TranscriptQuery, FILE_HEADER,
};
use serde_json::json;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tower::ServiceExt;
use tower_http::compression::predicate::{DefaultPredicate, Predicate};
use tower_http::compression::{CompressionLayer, CompressionLevel};
use tower_http::services::ServeDir;
use tower_http::set_header::SetResponseHeaderLayer;

/// The largest transcript a `PUT` accepts.
pub const MAX_PUT_BYTES: usize = 512 << 20;

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

/// The connection's close handle (see [`crate::answers`]): `None` outside `listen::serve`.
type Close = Option<Extension<Closer>>;

async fn window(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    close: Close,
) -> Reply {
    let id = session_id(id)?;
    let query = TranscriptQuery::parse(query.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::bad(e.to_string()))?;
    let path = existing(&app, &id)?;
    let turn = app.answers.build().await;
    let (lines, file) = blocking(move || transcript::window_and_file(&path, &query)).await?;
    let body = page_json(&lines);
    drop(lines);
    // The turn is kept while the answer waits for room: the bodies waiting are a few too.
    let sent = app.answers.send(body, close.map(|c| c.0)).await;
    drop(turn);
    naming_file(sent, file)
}

/// An answer with the header naming the file it was read from (`FILE_HEADER`), when it has one.
fn naming_file(reply: Reply, file: Option<String>) -> Reply {
    let mut response = reply?;
    if let Some(value) = file.and_then(|f| HeaderValue::from_str(&f).ok()) {
        (response.headers_mut()).insert(HeaderName::from_static(FILE_HEADER), value);
    }
    Ok(response)
}

/// `GET /sessions/{id}/catchup?cursor=N&limit=W`: the reopen's check and catch-up in one
/// (compressed) answer, with the session's summary.
async fn catch_up(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    close: Close,
) -> Reply {
    let id = session_id(id)?;
    let query = CatchUpQuery::parse(query.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::bad(e.to_string()))?;
    let path = existing(&app, &id)?;
    let a = app.clone();
    let turn = app.answers.build().await;
    let (body, file) = blocking(move || {
        let (state, lines, file) = transcript::catch_up::catch_up_and_file(&path, &query)?;
        let summary = a
            .summaries
            .summary(&a.config.data, &id)?
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?
            .0;
        Ok((catch_up_json(state, &summary, &lines), file))
    })
    .await?;
    let sent = app.answers.send(body, close.map(|c| c.0)).await;
    drop(turn);
    naming_file(sent, file)
}

async fn events(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    close: Close,
) -> Reply {
    let id = session_id(id)?;
    let raw = query.as_deref().unwrap_or("");
    let query = TranscriptQuery::parse(raw).map_err(|e| ApiError::bad(e.to_string()))?;
    let at = scrollback_protocol::events_at(raw).map_err(|e| ApiError::bad(e.to_string()))?;
    // The line the client named when it connected (`at` is the one at `after`).
    let named = query.after.unwrap_or(0);
    // EventSource reconnects to the same URL and says where it got to in `Last-Event-ID`. The
    // line its URL names is still checked: a file replaced while it was away is a reset, not
    // another conversation's lines resumed after its own.
    let after = match headers.get("last-event-id") {
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| ApiError::bad("bad `Last-Event-ID`: must be a whole number"))?,
        None => named,
    };
    let path = existing(&app, &id)?;
    // Watched before the catch-up is read, so no change falls between them.
    let watched = app.watchers.watch(&path);
    let p = path.clone();
    // Built in its turn, as a page is, and held against the budget until it is sent: a 503 to
    // retry when it cannot be.
    let turn = app.answers.build().await;
    let tail =
        blocking(move || follow::catch_up_from_end(&p, after, at.as_deref().map(|at| (named, at))))
            .await?;
    let share = app.answers.share(close.map(|c| c.0));
    let stream = follow::events(path, after, tail, watched, app.shutdown.clone(), share).await;
    drop(turn);
    let stream = stream.ok_or_else(crate::answers::busy)?;
    Ok(follow::response(stream, app.config.keep_alive_ms).into_response())
}

/// The body's length as its `Content-Length` declares it, if it does.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

/// A message's body, at most [`MAX_POST_BYTES`]. A longer one is read to its end (up to
/// [`DRAIN_POST_BYTES`]) before it is refused with 413: a connection closed on a body still
/// being sent is reset, and a browser (WebKitGTK, for 2.5 MB) then reports a network error
/// instead of the answer. What is kept counts against the answer budget in `share` (twice:
/// the parse is a second copy), so that posts trickling in cannot hold more than the budget
/// between them: one that cannot have its share is a 503 to retry.
async fn message_body(
    headers: &HeaderMap,
    body: Body,
    share: &mut Share,
) -> Result<Bytes, ApiError> {
    let too_large = || {
        ApiError(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("bad body: a message is at most {MAX_POST_BYTES} bytes"),
        )
    };
    if declared_length(headers).is_some_and(|n| n > DRAIN_POST_BYTES as u64) {
        return Err(too_large());
    }
    let mut kept = Vec::new();
    let mut body = Capped::new(body, DRAIN_POST_BYTES);
    while let Some(chunk) = body.next(too_large).await? {
        if body.received <= MAX_POST_BYTES {
            kept.extend_from_slice(&chunk);
            if !share.grow_to(2 * kept.len() as u64).await {
                return Err(answers::full());
            }
        }
    }
    if body.received > MAX_POST_BYTES {
        return Err(too_large());
    }
    Ok(Bytes::from(kept))
}

/// A request body's pieces, refused once they pass `max` bytes.
struct Capped {
    stream: axum::body::BodyDataStream,
    received: usize,
    max: usize,
}

impl Capped {
    fn new(body: Body, max: usize) -> Capped {
        Capped {
            stream: body.into_data_stream(),
            received: 0,
            max,
        }
    }

    /// The next piece (`None` at the end); `too_large()` once the body passes the cap, and a
    /// 400 when it breaks off.
    async fn next(&mut self, too_large: impl Fn() -> ApiError) -> Result<Option<Bytes>, ApiError> {
        use futures_util::StreamExt;
        let Some(chunk) = self.stream.next().await else {
            return Ok(None);
        };
        let chunk = chunk.map_err(|e| ApiError::bad(format!("bad body: {e}")))?;
        self.received += chunk.len();
        if self.received > self.max {
            return Err(too_large());
        }
        Ok(Some(chunk))
    }
}

async fn message(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    close: Close,
    body: Body,
) -> Reply {
    let id = session_id(id)?;
    // Held until the message is written: closed to make room past the grace, as an answer's.
    let mut share = app.answers.share(close.map(|c| c.0));
    let body = message_body(&headers, body, &mut share).await?;
    // A cross-site form can post `text/plain` without asking; JSON needs a CORS preflight.
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Err(ApiError(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "bad body: `Content-Type` must be `application/json`".into(),
        ));
    }
    #[derive(serde::Deserialize)]
    struct Post {
        text: String,
    }
    // As JavaScript wrote it: a lone surrogate half (a reply cut mid-emoji) is U+FFFD.
    let post: Post = std::str::from_utf8(&body)
        .map_err(|e| e.to_string())
        .and_then(|text| parse_json(text).map_err(|e| e.to_string()))
        .map_err(|e| ApiError::bad(format!("bad body: expected {{\"text\": \"...\"}}: {e}")))?;
    if post.text.trim().is_empty() {
        return Err(ApiError::bad("bad `text`: must not be empty"));
    }
    existing(&app, &id)?;
    let (writer, at) = (app.clone(), id.clone());
    let line: Line = if app.config.sandbox {
        app.append_waiting(move || sandbox::agent::post(&writer, &at, post.text.clone()))
            .await?
    } else {
        let event = json!({"type": "userMessage", "text": post.text});
        app.append_waiting(move || writer.append(&at, event.clone()))
            .await?
    };
    Ok(json_body(line.raw().to_owned()))
}

/// Checks a replacement transcript as it arrives: every line a protocol line, seqs from 1 with
/// no holes. Holds only the line being received.
#[derive(Default)]
struct TranscriptCheck {
    partial: Vec<u8>,
    lines: u64,
    seq: u64,
}

impl TranscriptCheck {
    fn line(&mut self, raw: &[u8]) -> Result<(), ApiError> {
        self.lines += 1;
        let i = self.lines;
        let raw = std::str::from_utf8(raw).map_err(|_| ApiError::bad("bad body: not UTF-8"))?;
        let line = transcript::reader::file_line(raw)
            .map_err(|e| ApiError::bad(format!("bad body: line {i}: {e}")))?;
        // As the server writes its lines: the seq first, read from the head alone when the
        // line is long (a post after it, the session list). With another key first, a line of
        // 200 MB was read whole, and parsed, by every post after it.
        if Line::seq_of_head(raw.as_bytes()) != Some(line.seq()) {
            return Err(ApiError::bad(format!(
                "bad body: line {i} does not open with its seq ({{\"seq\":N,...}}, as the server writes lines)"
            )));
        }
        if line.seq() != self.seq + 1 {
            return Err(ApiError::bad(format!(
                "bad body: line {i} has seq {}, expected {}",
                line.seq(),
                self.seq + 1
            )));
        }
        self.seq = line.seq();
        Ok(())
    }

    fn feed(&mut self, mut chunk: &[u8]) -> Result<(), ApiError> {
        while let Some(i) = chunk.iter().position(|&b| b == b'\n') {
            if self.partial.is_empty() {
                self.line(&chunk[..i])?;
            } else {
                let mut raw = std::mem::take(&mut self.partial);
                raw.extend_from_slice(&chunk[..i]);
                self.line(&raw)?;
            }
            chunk = &chunk[i + 1..];
        }
        self.partial.extend_from_slice(chunk);
        Ok(())
    }

    /// The newest seq, once the body has ended; `true` when the body lacked a final newline.
    fn finish(mut self) -> Result<(u64, bool), ApiError> {
        if self.partial.is_empty() {
            return Ok((self.seq, false));
        }
        let raw = std::mem::take(&mut self.partial);
        self.line(&raw)?;
        Ok((self.seq, true))
    }
}

/// A temporary file removed unless it was renamed into place.
struct TempFile(Option<PathBuf>);

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Bytes gathered before a write to the temporary file.
const PUT_WRITE_BYTES: usize = 1 << 20;

async fn write_temp(file: std::fs::File, bytes: Vec<u8>) -> Result<std::fs::File, ApiError> {
    blocking(move || {
        use std::io::Write;
        let mut file = file;
        file.write_all(&bytes)?;
        Ok(file)
    })
    .await
}

async fn replace(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    close: Close,
    body: Body,
) -> Reply {
    let id = session_id(id)?;
    let too_large = || {
        ApiError(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("bad body: a transcript is at most {MAX_PUT_BYTES} bytes"),
        )
    };
    // Decided from the declared length, before a byte of the body is read.
    if declared_length(&headers).is_some_and(|n| n > MAX_PUT_BYTES as u64) {
        return Err(too_large());
    }
    let Ok(_slot) = app.puts.clone().try_acquire_owned() else {
        return Err(ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many transcripts being received at once; try again".into(),
        ));
    };
    // Received into a file beside the sessions (its name is no session id), checked as it
    // comes, then renamed into place under the session's lock.
    static PUTS: AtomicU64 = AtomicU64::new(0);
    let n = PUTS.fetch_add(1, Ordering::Relaxed);
    let tmp = app
        .config
        .data
        .join(format!("#put-{}-{n}.tmp", std::process::id()));
    let t = tmp.clone();
    let mut file = blocking(move || std::fs::File::create(t)).await?;
    let mut temp = TempFile(Some(tmp.clone()));
    let mut check = TranscriptCheck::default();
    // Closed to make room past the grace, as an answer's is: a line trickling in for hours
    // must not hold the budget that pages need.
    let mut share = app.answers.share(close.map(|c| c.0));
    let mut buffer = Vec::new();
    let mut body = Capped::new(body, MAX_PUT_BYTES);
    while let Some(chunk) = body.next(too_large).await? {
        check.feed(&chunk)?;
        // The line being received is held whole to be checked (and parsed, a second copy):
        // it counts against the answer budget, so that a few PUTs of huge lines cannot hold
        // more than the budget between them.
        let holding = 2 * check.partial.len() as u64;
        if holding == 0 {
            share.release();
        } else if !share.grow_to(holding).await {
            return Err(answers::full());
        }
        buffer.extend_from_slice(&chunk);
        if buffer.len() >= PUT_WRITE_BYTES {
            file = write_temp(file, std::mem::take(&mut buffer)).await?;
        }
    }
    let (seq, unterminated) = check.finish()?;
    if unterminated {
        buffer.push(b'\n');
    }
    let file = write_temp(file, buffer).await?;
    drop(file);
    let a = app.clone();
    let created = blocking(move || {
        let writer = a.writer(&id);
        let _guard = writer.lock().unwrap_or_else(|e| e.into_inner());
        // Under the session's lock: a DELETE cannot remove the folder between these steps.
        let dir = session::dir(&a.config.data, &id);
        std::fs::create_dir_all(&dir)?;
        let target = dir.join(TRANSCRIPT);
        let created = !target.exists();
        // A rename is atomic: a reader sees the old file or the new one, never a mix.
        std::fs::rename(&tmp, &target)?;
        Ok(created)
    })
    .await?;
    temp.0 = None;
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
    let mut stats = app.stats.json();
    if let Some(map) = stats.as_object_mut() {
        map.insert("streams".into(), app.watchers.json());
        map.insert("connections".into(), app.connections.json());
        map.insert("answers".into(), app.answers.json());
        map.insert("memory".into(), crate::memory::release().json());
    }
    Json(stats).into_response()
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
            // The page is revalidated on every load (a 304 when unchanged).
            Ok(mut response) => {
                response.headers_mut().insert(
                    header::CACHE_CONTROL,
                    header::HeaderValue::from_static("no-cache"),
                );
                file_or_error(response.into_response())
            }
            Err(e) => match e {},
        },
        None => error(StatusCode::NOT_FOUND, "no such route"),
    }
}

/// The most bytes a posted message's body may hold.
pub const MAX_POST_BYTES: usize = 2 << 20;

/// The most bytes of a too-long message read (and dropped) before it is refused, so that its
/// client is there to read the 413; past it the connection is closed.
pub const DRAIN_POST_BYTES: usize = 16 << 20;

/// A route asked with a method it does not take: the JSON error every other refusal is.
async fn method_not_allowed(req: Request) -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{} is not a method of {}", req.method(), req.uri().path()),
    )
}

/// The smallest body compressed at the fastest level rather than the default one. Brotli's
/// default (level 4 here) takes about a second of CPU for a 64 MB answer (a page of one long
/// tool output), during which the answer holds its share of the budget; the fastest level
/// takes a fraction of that and still shrinks text. Pages and catch-ups of usual lines are
/// far smaller and keep the default.
pub const FAST_COMPRESSION_BYTES: u64 = 1 << 20;

/// A response whose body is known to be at least [`FAST_COMPRESSION_BYTES`].
#[derive(Clone, Copy)]
struct Large;

impl Predicate for Large {
    fn should_compress<B: http_body::Body>(&self, response: &Response<B>) -> bool {
        response
            .body()
            .size_hint()
            .exact()
            .is_some_and(|n| n >= FAST_COMPRESSION_BYTES)
    }
}

/// The whole application: routes, static files, and the layers (token, compression, CORS,
/// counters and log, from the inside out).
pub fn router(app: Arc<App>) -> Router {
    let mut router = Router::new()
        .route("/sessions", get(list))
        .route("/sessions/{id}/transcript", get(window).put(replace))
        .route("/sessions/{id}/events", get(events))
        .route("/sessions/{id}/catchup", get(catch_up))
        .route("/sessions/{id}/messages", post(message))
        .route("/sessions/{id}", delete(remove))
        .route("/stats", get(stats_route))
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(fallback)
        // An answer is the file as it is now: a proxy, a CDN or the browser that kept one would
        // answer a later request with a file that may have been replaced since.
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-store"),
        ));
    if let Some(pkg) = &app.config.pkg {
        router = router.nest_service("/pkg", crate::pkg::router(pkg.clone()));
    }
    let mut router = router.with_state(app.clone());
    if let Some(token) = &app.config.token {
        let guard = Arc::new(auth::TokenGuard {
            token: token.as_str().into(),
            site: app.site.clone(),
        });
        router = router.layer(middleware::from_fn_with_state(guard, auth::require_token));
    }
    // The default predicate leaves `text/event-stream` alone: a stream is never compressed
    // (and so never buffered by the compressor). A large body is compressed at the fastest
    // level by the inner layer (the outer one leaves what is already encoded), the rest at the
    // default one.
    let large = DefaultPredicate::new().and(Large);
    router = router.layer(
        CompressionLayer::new()
            .quality(CompressionLevel::Fastest)
            .compress_when(large),
    );
    router = router.layer(CompressionLayer::new());
    if let Some(cors) = auth::cors(&app.config.allow_origin) {
        router = router.layer(cors);
    }
    router
        .layer(middleware::from_fn_with_state(
            app.site.clone(),
            auth::check_site,
        ))
        .layer(middleware::from_fn_with_state(
            app.stats.clone(),
            stats::count_and_log,
        ))
}
