//! Errors that end and errors that are retried: the native engine over real HTTP against the
//! real server, with a small front (a proxy on another loopback port) that can answer a request
//! with a scripted status instead of forwarding it, as a gateway, a rate limiter or a proxy's
//! error page would.
//!
//! The one rule ([`scrollback::transport::Backoff`]): the server's own 404 means the session is
//! gone (purged, stopped); its 401/403 stop as an authentication error; other 4xx from the
//! server stop with its message; 408/429 retry honouring `Retry-After`; network errors, 5xx, a
//! proxy's page (a 401/403 one too), a portal's HTML page and an answer to another question
//! retry with exponential backoff and jitter, capped. The transport's clock is
//! recorded (and shortened), so the delays the engine asked for are checked exactly, with no
//! timing.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use futures::StreamExt;
use scrollback::engine::{Config, Engine};
use scrollback::protocol::SessionSummary;
use scrollback::store::FsStore;
use scrollback::transport::{HttpTransport, Retry};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use crate::support::{
    assert_chunks_are_servers, assert_shows_server, local, Recorded, Running, TestServer,
};

/// A scripted answer: for requests whose path ends with `route`, answer `status` with `body`
/// (and `Retry-After` when given) instead of forwarding.
#[derive(Clone)]
struct Canned {
    route: &'static str,
    status: u16,
    body: &'static str,
    retry_after: Option<&'static str>,
}

impl Canned {
    /// An answer of `status` with `body`, without `Retry-After`.
    fn new(route: &'static str, status: u16, body: &'static str) -> Canned {
        Canned {
            route,
            status,
            body,
            retry_after: None,
        }
    }
}

#[derive(Clone)]
struct Front {
    upstream: String,
    script: Arc<Mutex<VecDeque<Canned>>>,
    http: reqwest::Client,
    /// Lets a request scripted as [`HELD`] through.
    release: Arc<tokio::sync::Notify>,
    /// When on, older pages (`/transcript?before=`) are answered as first answered, by URL,
    /// as a cache in between that ignores `no-store` answers them.
    kept: Arc<Mutex<Option<Kept>>>,
}

/// An answer kept: status, headers, body.
type KeptAnswer = (u16, Vec<(String, Vec<u8>)>, Vec<u8>);
/// Answers kept by URL.
type Kept = std::collections::HashMap<String, KeptAnswer>;

async fn front(State(front): State<Front>, request: Request) -> Response {
    let path = request.uri().path().to_string();
    let canned = {
        let mut script = front.script.lock().unwrap();
        match script.front() {
            Some(c) if path.ends_with(c.route) => script.pop_front(),
            _ => None,
        }
    };
    let canned = match canned {
        // A stalled connection: forwarded once the test releases it.
        Some(c) if c.body == HELD => {
            front.release.notified().await;
            None
        }
        other => other,
    };
    if let Some(c) = canned {
        let mut answer = Response::builder().status(c.status);
        if let Some(after) = c.retry_after {
            answer = answer.header("retry-after", after);
        }
        if c.body.starts_with('<') {
            answer = answer.header("content-type", "text/html; charset=utf-8");
        }
        // A 200 on the stream's route is an event stream: its body as scripted, or, for a
        // body ending in `SILENT`, what comes before it and then nothing, never ending (a
        // proxy that buffers the stream, a server that stops talking).
        if c.status == 200 && c.route == "/events" {
            answer = answer.header("content-type", "text/event-stream");
            if let Some(said) = c.body.strip_suffix(SILENT) {
                let said = futures::stream::iter([Ok(said.as_bytes().to_vec())]);
                let never =
                    said.chain(futures::stream::pending::<Result<Vec<u8>, std::io::Error>>());
                return answer.body(Body::from_stream(never)).unwrap();
            }
        }
        return answer.body(Body::from(c.body)).unwrap();
    }
    let url = format!(
        "{}{}",
        front.upstream,
        request.uri().path_and_query().unwrap().as_str()
    );
    let keep = front.kept.lock().unwrap().is_some()
        && path.ends_with("/transcript")
        && request.uri().query().is_some_and(|q| q.contains("before="));
    let answer = |(status, headers, body): KeptAnswer| {
        let mut answer = Response::builder().status(status);
        for (name, value) in headers {
            answer = answer.header(name, value);
        }
        answer.body(Body::from(body)).unwrap()
    };
    if keep {
        let kept = front
            .kept
            .lock()
            .unwrap()
            .as_ref()
            .unwrap()
            .get(&url)
            .cloned();
        if let Some(kept) = kept {
            return answer(kept);
        }
        let upstream = front.http.get(&url).send().await.unwrap();
        let status = upstream.status().as_u16();
        // The body is kept whole: its framing headers are the front's own.
        let framing = [
            "content-length",
            "transfer-encoding",
            "content-encoding",
            "connection",
        ];
        let headers = (upstream.headers().iter())
            .filter(|(n, _)| !framing.contains(&n.as_str()))
            .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
            .collect();
        let body = upstream.bytes().await.unwrap().to_vec();
        let got = (status, headers, body);
        let mut kept = front.kept.lock().unwrap();
        kept.as_mut().unwrap().insert(url, got.clone());
        return answer(got);
    }
    let mut forwarded = front.http.request(request.method().clone(), url);
    for (name, value) in request.headers() {
        if name != "host" {
            forwarded = forwarded.header(name, value);
        }
    }
    let body = axum::body::to_bytes(request.into_body(), 1 << 20)
        .await
        .unwrap();
    let upstream = forwarded.body(body).send().await.unwrap();
    let mut answer = Response::builder().status(upstream.status().as_u16());
    for (name, value) in upstream.headers() {
        answer = answer.header(name, value);
    }
    answer
        .body(Body::from_stream(upstream.bytes_stream()))
        .unwrap()
}

struct Env {
    base: TestServer,
    front: String,
    script: Arc<Mutex<VecDeque<Canned>>>,
    release: Arc<tokio::sync::Notify>,
    kept: Arc<Mutex<Option<Kept>>>,
    sleeps: Rc<RefCell<Vec<u32>>>,
}

impl Env {
    async fn start(token: Option<&str>) -> Env {
        let base = TestServer::start(|config| {
            config.sandbox = true;
            config.token = token.map(str::to_string);
        })
        .await;
        let script = Arc::new(Mutex::new(VecDeque::new()));
        let release = Arc::new(tokio::sync::Notify::new());
        let kept = Arc::new(Mutex::new(None));
        let state = Front {
            upstream: base.server.url(),
            script: script.clone(),
            http: reqwest::Client::new(),
            release: release.clone(),
            kept: kept.clone(),
        };
        let app = axum::Router::new().fallback(front).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let front = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Env {
            base,
            front,
            script,
            release,
            kept,
            sleeps: Rc::default(),
        }
    }

    /// Scripts the next answers of the front, in order.
    fn script(&self, canned: &[Canned]) {
        self.script.lock().unwrap().extend(canned.iter().cloned());
    }

    fn scripted_left(&self) -> usize {
        self.script.lock().unwrap().len()
    }

    /// An engine through the front, over the same cache folder each time.
    async fn client(&self, token: Option<&str>) -> Engine<FsStore, Recorded> {
        self.client_with(token, Config::default()).await
    }

    /// The same, with `config`'s other numbers.
    async fn client_with(&self, token: Option<&str>, config: Config) -> Engine<FsStore, Recorded> {
        let transport = HttpTransport::new(&self.front, token.map(str::to_string)).unwrap();
        self.client_over(transport, config).await
    }

    /// The same, through `transport` (a clone of which can renew its token).
    async fn client_over(
        &self,
        transport: HttpTransport,
        config: Config,
    ) -> Engine<FsStore, Recorded> {
        let store = Arc::new(FsStore::new(&self.base.cache));
        let clocked = Recorded::fast_clock(transport, self.sleeps.clone());
        let config = Config {
            reconnect_delay_ms: 100,
            reconnect_max_ms: 800,
            ..config
        };
        Engine::assemble(store, clocked, config).await
    }

    fn sleeps(&self) -> Vec<u32> {
        self.sleeps.borrow().clone()
    }
}

fn summary(id: &str) -> SessionSummary {
    SessionSummary {
        id: id.into(),
        title: String::new(),
        status: "idle".into(),
        model: String::new(),
        permission_mode: String::new(),
        seq: 0,
    }
}

fn open(client: &Engine<FsStore, Recorded>, id: &str) -> Running<FsStore, Recorded> {
    Running::spawn(client.open(summary(id), None).unwrap())
}

/// Every banner the session shows from now on, in order (each one once while it stays).
fn banners(opened: &Running<FsStore, Recorded>) -> Rc<RefCell<Vec<String>>> {
    let banners = Rc::new(RefCell::new(Vec::new()));
    let seen = banners.clone();
    opened.session.on_change(move |v, _| {
        if let Some(b) = &v.banner {
            if seen.borrow().last() != Some(b) {
                seen.borrow_mut().push(b.clone());
            }
        }
    });
    banners
}

/// A scripted event stream's body that is never sent (or the end of one): nothing more, for
/// ever.
const SILENT: &str = "(silent)";

/// A stream frame carrying `line`.
fn frame(line: &str) -> String {
    format!("data: {line}\n\n")
}

/// A user message line at `seq` saying `text`.
fn said(seq: u64, text: &str) -> String {
    format!(r#"{{"seq":{seq},"ts":1.5,"event":{{"type":"userMessage","text":"{text}"}}}}"#)
}

/// A line at `seq` whose `folded` field claims the lines after it, through `through`: what
/// only a coalesced page's lines carry.
fn folded(seq: u64, through: u64) -> String {
    format!(
        r#"{{"seq":{seq},"ts":1.5,"event":{{"type":"assistantText","text":"hi","messageId":"m","folded":{{"through":{through},"first":"h","last":"i"}}}}}}"#
    )
}

/// A scripted request held (no answer at all) until the test releases it, then forwarded.
const HELD: &str = "(held)";

/// The server's own 404 for a session it does not have (its `code` says so).
const NOT_FOUND_JSON: &str = r#"{"error":"unknown session","code":"unknownSession"}"#;

#[test]
fn a_session_deleted_on_the_server_is_purged_said_and_not_asked_again() {
    local(async {
        let env = Env::start(None).await;
        let client = env.client(None).await;
        let warm = open(&client, "welcome");
        warm.wait("live", |v| v.live).await;
        warm.close().await;
        assert!(client.cache().session_size("welcome").await > 0, "cached");

        // Deleted behind the client's back (another device): the probe finds nothing.
        std::fs::remove_dir_all(env.base.data.join("welcome")).unwrap();
        let again = open(&client, "welcome");
        again
            .wait("the session said to be gone", |v| v.error.is_some())
            .await;
        let view = again.session.view();
        let error = view.error.clone().unwrap();
        assert_eq!((error.kind, error.status), ("gone", Some(404)), "{error:?}");
        assert_eq!(error.message, "unknown session", "the server's own words");
        assert_eq!(view.counters.requests, 1, "the probe, and no retry");
        assert!(env.sleeps().is_empty(), "nothing waited to retry");
        assert!(
            view.transcript.rows().is_empty(),
            "nothing of it stays shown"
        );
        assert_eq!(view.banner, None);
        assert_eq!(
            client.cache().session_size("welcome").await,
            0,
            "its cache is purged"
        );
        assert!(!view.writer, "a stopped session holds no writer role");

        // The session comes back; a reload asks for the role again and writes the cache.
        std::fs::create_dir_all(env.base.data.join("welcome")).unwrap();
        std::fs::write(
            env.base.path("welcome"),
            "{\"seq\":1,\"ts\":1.5,\"event\":{\"type\":\"userMessage\",\"text\":\"back\"}}\n",
        )
        .unwrap();
        again.session.reload(None);
        again
            .wait("live again, writing", |v| {
                v.live && v.writer && v.cursor == 1
            })
            .await;
        again.close().await;
        assert!(
            client.cache().session_size("welcome").await > 0,
            "cached again"
        );
    });
}

#[test]
fn a_wrong_token_is_an_authentication_error_that_stops() {
    local(async {
        let env = Env::start(Some("right")).await;
        let client = env.client(Some("wrong")).await;
        let opened = open(&client, "welcome");
        opened.wait("the error", |v| v.error.is_some()).await;
        let view = opened.session.view();
        let error = view.error.unwrap();
        assert_eq!((error.kind, error.status), ("unauthorized", Some(401)));
        assert_eq!(view.counters.requests, 1, "asked once");
        assert!(env.sleeps().is_empty(), "no retry");
        // A reload tries again (and is refused again).
        opened.session.reload(None);
        opened
            .wait("refused again", |v| {
                v.error.is_some() && v.counters.requests == 2
            })
            .await;
        opened.close().await;
    });
}

#[test]
fn a_session_stopped_for_its_token_resumes_from_the_cache_when_told_nothing_purged() {
    local(async {
        let env = Env::start(Some("good")).await;
        let warm_client = env.client(Some("good")).await;
        let warm = open(&warm_client, "welcome");
        warm.wait("live", |v| v.live).await;
        let shown = warm.session.view().transcript.rows().clone();
        warm.close().await;
        let size = warm_client.cache().session_size("welcome").await;
        assert!(size > 0, "cached");

        // The app's token has expired: the server refuses the reopen's check.
        let transport = HttpTransport::new(&env.front, Some("expired".into())).unwrap();
        let client = env.client_over(transport.clone(), Config::default()).await;
        let again = open(&client, "welcome");
        again.wait("stopped", |v| v.error.is_some()).await;
        let view = again.session.view();
        assert_eq!(view.error.unwrap().kind, "unauthorized");
        assert_eq!(view.transcript.rows(), &shown, "the cached rows stay shown");
        assert!(!view.writer, "a stopped session holds no writer role");

        // The app has a fresh token: the session opens again from its cache.
        transport.set_token(Some("good".into()));
        again.session.resume();
        assert_eq!(again.session.view().error, None, "trying again at once");
        again
            .wait("live again, writing", |v| v.live && v.verified && v.writer)
            .await;
        let view = again.session.view();
        assert_eq!(view.error, None);
        assert_eq!(view.transcript.rows(), &shown, "the same rows");
        assert_eq!(
            view.counters.requests, 3,
            "the refused check, the check, the stream"
        );
        assert_eq!(
            (view.counters.probes_passed, view.counters.probes_failed),
            (1, 0)
        );
        assert!(env.sleeps().is_empty(), "nothing waited to retry");
        again.close().await;
        assert_eq!(
            client.cache().session_size("welcome").await,
            size,
            "nothing purged, nothing fetched again"
        );
    });
}

#[test]
fn a_stream_refused_for_its_token_resumes_with_the_older_pages_it_showed() {
    local(async {
        let env = Env::start(None).await;
        let client = env.client(None).await;
        let warm = open(&client, "long");
        warm.wait("live", |v| v.live).await;
        assert!(warm.session.older().await.unwrap());
        assert!(warm.session.older().await.unwrap());
        warm.close().await;

        // Reopened, checked, and its stream refused (the token expired between the two).
        env.script(&[Canned::new(
            "/events",
            401,
            r#"{"error":"missing or wrong token"}"#,
        )]);
        let again = open(&client, "long");
        again.wait("stopped", |v| v.error.is_some()).await;
        let error = again.session.view().error.unwrap();
        assert_eq!((error.kind, error.status), ("unauthorized", Some(401)));
        // Scrolled back meanwhile, through the cache.
        assert!(again.session.older().await.unwrap());
        assert!(again.session.older().await.unwrap());
        let shown = again.session.view();
        assert_eq!(shown.counters.local_pages, 2);

        again.session.resume();
        again
            .wait("live again, down to the same oldest row", |v| {
                v.live && v.verified && v.oldest == shown.oldest
            })
            .await;
        let view = again.session.view();
        assert_eq!(
            view.transcript.rows(),
            shown.transcript.rows(),
            "the same rows"
        );
        assert!(
            view.counters.local_pages > shown.counters.local_pages,
            "the older rows drawn again from the cache"
        );
        assert_eq!(
            view.counters.requests - shown.counters.requests,
            2,
            "the check and the stream, no page"
        );
        again.close().await;
    });
}

#[test]
fn another_4xx_from_the_server_stops_with_its_message_and_a_new_token_does_not_resume_it() {
    local(async {
        let env = Env::start(None).await;
        let client = env.client(None).await;
        env.script(&[Canned::new(
            "/transcript",
            400,
            r#"{"error":"limit must be at most 10000"}"#,
        )]);
        let opened = open(&client, "welcome");
        opened.wait("the error", |v| v.error.is_some()).await;
        let error = opened.session.view().error.unwrap();
        assert_eq!((error.kind, error.status), ("refused", Some(400)));
        assert_eq!(error.message, "limit must be at most 10000");
        assert!(env.sleeps().is_empty());
        opened.session.resume();
        let error = opened.session.view().error.map(|e| e.kind);
        assert_eq!(
            error,
            Some("refused"),
            "still stopped: a new token cannot help"
        );
        let session = opened.close().await;
        assert_eq!(session.view().counters.requests, 1, "nothing asked again");
    });
}

#[test]
fn throttling_is_retried_after_the_servers_retry_after_and_then_the_session_opens() {
    local(async {
        let env = Env::start(None).await;
        let client = env.client(None).await;
        env.script(&[
            Canned {
                route: "/transcript",
                status: 429,
                body: r#"{"error":"slow down"}"#,
                retry_after: Some("3"),
            },
            Canned::new("/transcript", 408, ""),
        ]);
        let opened = open(&client, "welcome");
        opened.wait("live", |v| v.live).await;
        let sleeps = env.sleeps();
        assert_eq!(sleeps.len(), 2, "{sleeps:?}");
        assert_eq!(sleeps[0], 3000, "Retry-After: 3 is honoured");
        assert!((50..=200).contains(&sleeps[1]), "then backoff: {sleeps:?}");
        assert_eq!(opened.session.view().error, None);
        opened.close().await;
    });
}

#[test]
fn server_errors_and_a_proxys_404s_back_off_exponentially_with_jitter_up_to_the_cap() {
    local(async {
        let env = Env::start(None).await;
        let client = env.client(None).await;
        let failure = |status, body| Canned::new("/transcript", status, body);
        env.script(&[
            failure(503, "Service Unavailable"),
            failure(502, "<html>Bad Gateway</html>"),
            failure(404, "<html><h1>404 Not Found</h1>nginx</html>"),
            failure(500, r#"{"error":"boom"}"#),
            // A gateway's JSON 404 (mid-deploy, say): JSON, but not the server's word that the
            // session is unknown.
            failure(404, r#"{"error":"Not Found"}"#),
            failure(503, ""),
        ]);
        let opened = open(&client, "welcome");
        let banners = banners(&opened);
        opened.wait("live", |v| v.live).await;
        assert_eq!(env.scripted_left(), 0);
        let sleeps = env.sleeps();
        assert_eq!(sleeps.len(), 6, "{sleeps:?}");
        growing(&sleeps);
        assert!(
            banners
                .borrow()
                .iter()
                .any(|b| b.contains("502") && b.contains("retrying in")),
            "the banner says so: {:?}",
            banners.borrow()
        );
        let view = opened.session.view();
        assert_eq!(view.error, None, "a proxy's 404 is not the session gone");
        assert!(
            client.cache().session_size("welcome").await > 0,
            "nor is the cache purged for it"
        );
        assert!(!view.transcript.rows().is_empty());
        opened.close().await;
    });
}

#[test]
fn the_stream_refused_by_the_server_is_classified_by_the_same_rule() {
    local(async {
        let env = Env::start(None).await;
        let client = env.client(None).await;
        // The opening window passes; the stream's connection is answered 404 by the server.
        env.script(&[Canned::new("/events", 404, NOT_FOUND_JSON)]);
        let opened = open(&client, "welcome");
        opened.wait("the error", |v| v.error.is_some()).await;
        let view = opened.session.view();
        assert_eq!(view.error.as_ref().map(|e| e.kind), Some("gone"));
        assert!(view.transcript.rows().is_empty());
        assert_eq!(client.cache().session_size("welcome").await, 0);
        assert!(env.sleeps().is_empty());
        opened.close().await;

        // A 503 on the stream is retried with backoff, then it connects.
        env.script(&[
            Canned::new("/events", 503, ""),
            Canned {
                route: "/events",
                status: 429,
                body: "",
                retry_after: Some("2"),
            },
        ]);
        let opened = open(&client, "welcome");
        opened.wait("live", |v| v.live).await;
        let sleeps = env.sleeps();
        assert_eq!(sleeps.len(), 2, "{sleeps:?}");
        assert!((50..=100).contains(&sleeps[0]));
        assert_eq!(sleeps[1], 2000);
        opened.close().await;
    });
}

/// Each of `sleeps` within the jitter of its step, `100 << i` capped at 800 ms.
fn growing(sleeps: &[u32]) {
    for (i, ms) in sleeps.iter().enumerate() {
        let full = (100u32 << i).min(800);
        assert!(
            (full / 2..=full).contains(ms),
            "retry {i} waited {ms} ms, not in [{}, {full}]: {sleeps:?}",
            full / 2
        );
    }
}

#[test]
fn a_stream_that_keeps_failing_after_good_catch_ups_is_retried_less_and_less_often() {
    local(async {
        let env = Env::start(None).await;
        let client = env.client(None).await;
        let refused = Canned::new("/events", 503, "");
        env.script(&[refused.clone(), refused.clone(), refused.clone(), refused]);
        let opened = open(&client, "welcome");
        opened.wait("live", |v| v.live).await;
        assert_eq!(env.scripted_left(), 0);
        let sleeps = env.sleeps();
        // Each failure is followed by a catch-up that passes: it does not start the schedule
        // again, as a stream that follows the file does.
        assert_eq!(sleeps.len(), 4, "{sleeps:?}");
        growing(&sleeps);
        opened.close().await;
    });
}

#[test]
fn answers_that_disagree_about_the_file_reopen_it_less_and_less_often_saying_so() {
    local(async {
        let env = Env::start(None).await;
        let client = env.client(None).await;
        // The window passes, and the stream says at once that the file was replaced: as when a
        // proxy answers the window from an old copy. Three times over, then the truth.
        let replaced = Canned::new(
            "/events",
            200,
            // As the server sends it: the opening keep-alive, then the reset.
            "event: keepalive\ndata: {\"every\":15000}\n\nevent: reset\ndata: {\"reason\":\"replaced\",\"first\":1}\n\n",
        );
        env.script(&[replaced.clone(), replaced.clone(), replaced]);
        let opened = open(&client, "welcome");
        // Every banner, and whether the view said it was live while it waited to reopen.
        let (banners, waits_live) = (
            Rc::new(RefCell::new(Vec::new())),
            Rc::new(RefCell::new(false)),
        );
        let (seen, live) = (banners.clone(), waits_live.clone());
        opened.session.on_change(move |v, _| {
            if let Some(b) = &v.banner {
                seen.borrow_mut().push(b.clone());
                *live.borrow_mut() |= v.live && b.contains("disagree");
            }
        });
        opened
            .wait("live", |v| v.live && env.scripted_left() == 0)
            .await;
        opened
            .wait("rows", |v| !v.transcript.rows().is_empty())
            .await;
        let sleeps = env.sleeps();
        // The first reopen is at once (a file replaced once is nothing odd); each one after it,
        // with nothing heard from a stream in between, waits the next step.
        assert_eq!(sleeps.len(), 2, "{sleeps:?}");
        growing(&sleeps);
        assert!(
            banners.borrow().iter().any(|b| b.contains("disagree")),
            "the banner says why: {:?}",
            banners.borrow()
        );
        assert_eq!(opened.session.view().counters.resets, 3);
        assert!(!*waits_live.borrow(), "never live while waiting to reopen");
        opened.close().await;
    });
}

#[test]
fn a_stream_that_sends_nothing_from_its_start_is_taken_for_dead() {
    local(async {
        let env = Env::start(None).await;
        let config = Config {
            first_frame_ms: Some(300),
            ..Config::default()
        };
        let client = env.client_with(None, config).await;
        env.script(&[Canned::new("/events", 200, SILENT)]);
        let opened = open(&client, "welcome");
        let banners = banners(&opened);
        let said = || banners.borrow().iter().any(|b| b.contains("sent nothing"));
        opened.wait("the silence said", |_| said()).await;
        // Reconnected (its catch-up, then a stream that speaks): a line written since arrives.
        let newest = env.base.lines("welcome").last().unwrap().seq();
        let line = format!(
            "{{\"seq\":{},\"ts\":9.5,\"event\":{{\"type\":\"userMessage\",\"text\":\"after\"}}}}\n",
            newest + 1
        );
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(env.base.path("welcome"))
            .unwrap();
        std::io::Write::write_all(&mut file, line.as_bytes()).unwrap();
        opened
            .wait("the new line", |v| v.live && v.cursor == newest + 1)
            .await;
        opened.close().await;
    });
}

#[test]
fn an_older_page_that_does_not_answer_what_was_asked_is_an_error_to_retry_not_the_end() {
    local(async {
        let env = Env::start(None).await;
        // An opening window of 20 of the session's 65 lines: the older ones are paged from the
        // server.
        let config = Config {
            opening_window: 20,
            ..Config::default()
        };
        let client = env.client_with(None, config).await;
        let opened = open(&client, "welcome");
        opened.wait("live", |v| v.live).await;
        let oldest = opened.session.view().oldest.unwrap();
        assert!(oldest > 1, "history left to page");
        // A page from another request (a proxy's mix-up): its seqs are not below `before`.
        env.script(&[Canned::new("/transcript", 200, r#"[{"seq":64,"ts":1.0,"event":{"type":"status","status":"idle"}},{"seq":65,"ts":1.0,"event":{"type":"status","status":"idle"}}]"#)]);
        let e = opened.session.older().await.unwrap_err();
        assert!(
            e.to_string().contains("holds seq 64"),
            "says what is wrong: {e}"
        );
        assert!(!e.is_client_error(), "retried");
        let view = opened.session.view();
        assert!(view.more_history, "not the end of the history");
        assert_eq!(view.oldest, Some(oldest), "nothing of it shown");
        // Asked again, the server's own page comes.
        assert!(opened.session.older().await.unwrap());
        assert!(opened.session.view().oldest.unwrap() < oldest);
        opened.close().await;
    });
}

#[test]
fn a_firewalls_or_a_proxys_401_or_403_page_is_retried_not_taken_for_a_wrong_token() {
    local(async {
        let env = Env::start(None).await;
        let client = env.client(None).await;
        env.script(&[
            Canned::new(
                "/transcript",
                403,
                "<html><head><title>Just a moment...</title></head><body>checking</body></html>",
            ),
            Canned::new(
                "/transcript",
                401,
                "<html><title>Proxy login</title></html>",
            ),
        ]);
        let opened = open(&client, "welcome");
        let banners = banners(&opened);
        opened.wait("live", |v| v.live).await;
        assert_eq!(opened.session.view().error, None, "not stopped");
        assert_eq!(env.sleeps().len(), 2, "each page retried once");
        let said = banners.borrow().join(" | ");
        assert!(
            said.contains("Just a moment...") && said.contains("Proxy login"),
            "the banner says what answered: {said}"
        );
        opened.close().await;
    });
}

#[test]
fn a_catch_up_answered_for_another_session_is_retried_and_purges_nothing() {
    local(async {
        let env = Env::start(None).await;
        let client = env.client(None).await;
        let warm = open(&client, "welcome");
        warm.wait("live", |v| v.live).await;
        let (cursor, rows) = {
            let v = warm.session.view();
            (v.cursor, v.transcript.rows().clone())
        };
        warm.close().await;
        // What a proxy keying its cache without the path would answer: another session's
        // catch-up from the same cursor.
        let other = reqwest::get(format!(
            "{}/sessions/fix-build/catchup?cursor={cursor}",
            env.base.server.url()
        ))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
        env.script(&[Canned::new(
            "/catchup",
            200,
            Box::leak(other.into_boxed_str()),
        )]);
        let again = open(&client, "welcome");
        let banners = banners(&again);
        again.wait("live", |v| v.live).await;
        let view = again.session.view();
        assert_eq!(
            (view.counters.probes_failed, view.counters.probes_passed),
            (0, 1),
            "the wrong answer was no check: the cache was kept, not purged"
        );
        assert_eq!(env.sleeps().len(), 1, "retried once");
        assert_eq!(view.transcript.rows(), &rows, "the same rows");
        let said = banners.borrow().join(" | ");
        assert!(said.contains("\"fix-build\""), "{said}");
        again.close().await;
    });
}

#[test]
fn a_captive_portals_page_is_said_by_its_title_and_retried() {
    local(async {
        let env = Env::start(None).await;
        let client = env.client(None).await;
        let portal = "<html><head><title>Hotel WiFi - Please log in</title></head><body><form></form></body></html>";
        env.script(&[Canned::new("/transcript", 200, portal)]);
        let opened = open(&client, "welcome");
        let banners = banners(&opened);
        opened.wait("live", |v| v.live).await;
        assert_eq!(env.sleeps().len(), 1, "retried once");
        let said = banners.borrow().join(" | ");
        assert!(
            said.contains("an HTML page answered") && said.contains("Hotel WiFi - Please log in"),
            "{said}"
        );
        // A message posted through the portal was not sent, and says so.
        env.script(&[Canned::new("/messages", 200, portal)]);
        use scrollback::transport::Transport;
        let posted = client.transport().post_message("welcome", "hello").await;
        let e = posted.unwrap_err();
        assert!(e.to_string().contains("Hotel WiFi"), "{e}");
        opened.close().await;
    });
}

#[test]
fn a_check_or_a_first_window_left_unanswered_says_so_until_it_is_answered() {
    local(async {
        let env = Env::start(None).await;
        let config = Config {
            slow_answer_ms: 300,
            ..Config::default()
        };
        let client = env.client_with(None, config).await;
        // A first visit: nothing to show, and the server silent.
        env.script(&[Canned::new("/transcript", 0, HELD)]);
        let cold = open(&client, "welcome");
        cold.wait("the banner", |v| v.banner.is_some()).await;
        let said = cold.session.view().banner.unwrap();
        assert!(
            said.contains("has not answered") && said.contains("still waiting"),
            "{said}"
        );
        env.release.notify_one();
        cold.wait("live, the banner gone", |v| v.live && v.banner.is_none())
            .await;
        cold.close().await;
        // A reopen: the cached rows shown, the check silent.
        env.script(&[Canned::new("/catchup", 0, HELD)]);
        let warm = open(&client, "welcome");
        warm.wait("the banner", |v| v.banner.is_some()).await;
        let view = warm.session.view();
        let said = view.banner.unwrap();
        assert!(said.contains("showing what is cached"), "{said}");
        assert!(
            !view.transcript.rows().is_empty(),
            "the cache's rows meanwhile"
        );
        env.release.notify_one();
        warm.wait("live, the banner gone", |v| v.live && v.banner.is_none())
            .await;
        assert!(env.sleeps().is_empty(), "no error, no retry");
        warm.close().await;
    });
}

#[test]
fn an_older_page_a_cache_kept_from_a_replaced_file_is_refused_never_shown() {
    local(async {
        let env = Env::start(None).await;
        *env.kept.lock().unwrap() = Some(Kept::new());
        let conversation = |name: &str| -> String {
            (1..=300)
                .map(|seq| {
                    let text = format!("{name} #{seq}");
                    let event = serde_json::json!({"type": "userMessage", "text": text});
                    format!(
                        "{}\n",
                        serde_json::json!({"seq": seq, "ts": seq, "event": event})
                    )
                })
                .collect()
        };
        std::fs::create_dir_all(env.base.data.join("book")).unwrap();
        std::fs::write(env.base.path("book"), conversation("first")).unwrap();
        let client = env.client(None).await;
        let first = open(&client, "book");
        first.wait("live", |v| v.live).await;
        assert!(
            first.session.older().await.unwrap(),
            "an older page, now kept"
        );
        first.close().await;

        // Replaced by another conversation as long: the check sees it, the cache is purged,
        // the newest window is the new file's. Its older page has the same URL as the kept one.
        std::fs::write(env.base.path("book"), conversation("second")).unwrap();
        let again = open(&client, "book");
        again
            .wait("live on the new file", |v| {
                v.live && v.cursor == 300 && v.counters.probes_failed == 1
            })
            .await;
        let refused = again.session.older().await.unwrap_err();
        assert!(
            refused.to_string().contains("another file")
                || refused.to_string().contains("not of the file"),
            "{refused}"
        );
        assert_eq!(
            Retry::classify(&refused),
            Retry::After(0),
            "asked again later"
        );
        let view = again.session.view();
        let shown: Vec<String> = view
            .transcript
            .rows()
            .iter()
            .map(|r| format!("{r:?}"))
            .collect();
        assert!(
            shown.iter().all(|r| !r.contains("first #")),
            "nothing of the replaced file shown"
        );
        again.close().await;
    });
}

#[test]
fn a_behind_reset_whose_window_starts_at_what_was_held_is_another_files_never_spliced_on() {
    local(async {
        let env = Env::start(None).await;
        // No silence limit: only what the stream says can end it.
        let config = Config {
            first_frame_ms: None,
            ..Config::default()
        };
        let client = env.client_with(None, config).await;
        let warm = open(&client, "welcome");
        warm.wait("live", |v| v.live).await;
        warm.close().await;
        let all = env.base.lines("welcome");
        // The next stream says `behind` (a gap too large to send), then sends lines from seq 1:
        // another file's, whatever the reason said. Then it stays open, saying nothing.
        let other: String = (1..=3)
            .map(|seq| frame(&said(seq, "another file")))
            .collect();
        let body = format!("event: reset\ndata: {{\"reason\":\"behind\"}}\n\n{other}{SILENT}");
        env.script(&[Canned::new("/events", 200, body.leak())]);
        let again = open(&client, "welcome");
        again
            .wait("opened again from the server's own file", |v| {
                v.live && v.cursor == all.len() as u64 && v.counters.resets == 1
            })
            .await;
        assert_shows_server(&again.session, &all);
        again.close().await;
        assert!(assert_chunks_are_servers(&env.base, &client, "welcome").await > 0);
    });
}

#[test]
fn a_raw_line_that_claims_the_lines_after_it_is_refused_and_the_stream_opened_again() {
    local(async {
        let env = Env::start(None).await;
        let client = env.client(None).await;
        let newest = env.base.lines("welcome").len() as u64;
        // A stream whose first line says it folds the two after it (only a coalesced page's
        // lines do): drawn, it would hide them.
        let body = [
            frame(&folded(newest + 1, newest + 3)),
            frame(&said(newest + 2, "hidden")),
            frame(&said(newest + 3, "hidden")),
        ]
        .concat();
        env.script(&[Canned::new(
            "/events",
            200,
            format!("{body}{SILENT}").leak(),
        )]);
        let opened = open(&client, "welcome");
        let banners = banners(&opened);
        opened
            .wait("live", |v| v.live && env.scripted_left() == 0)
            .await;
        // Refused, said, and the server's own stream followed: a line written now arrives.
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(env.base.path("welcome"))
            .unwrap();
        std::io::Write::write_all(
            &mut file,
            format!("{}\n", said(newest + 1, "after")).as_bytes(),
        )
        .unwrap();
        opened
            .wait("the server's line", |v| v.live && v.cursor == newest + 1)
            .await;
        assert!(
            banners
                .borrow()
                .iter()
                .any(|b| b.contains("claims the lines after it")),
            "{:?}",
            banners.borrow()
        );
        assert_shows_server(&opened.session, &env.base.lines("welcome"));
        opened.close().await;
        assert!(assert_chunks_are_servers(&env.base, &client, "welcome").await > 0);
    });
}

#[test]
fn a_restore_page_that_reaches_into_the_rows_shown_is_asked_once_and_the_session_goes_live() {
    local(async {
        let env = Env::start(None).await;
        let config = Config {
            opening_window: 20,
            ..Config::default()
        };
        let client = env.client_with(None, config).await;
        let warm = open(&client, "welcome");
        warm.wait("live", |v| v.live).await;
        warm.close().await;
        let newest = env.base.lines("welcome").len() as u64;
        let first_shown = newest - 19;
        // The page below the opening window, as a server that lies answers it every time: its
        // last line folded through the first rows shown, so it can never be drawn below them.
        let page = format!(
            "[{},{}]",
            said(first_shown - 2, "below"),
            folded(first_shown - 1, first_shown + 1)
        );
        let page: &'static str = page.leak();
        env.script(&vec![Canned::new("/transcript", 200, page); 20]);
        // Opened again at seq 5: the rows down to it are asked for before the stream opens.
        let opened = Running::spawn(client.open(summary("welcome"), Some(5)).unwrap());
        opened.wait("live", |v| v.live).await;
        let asked = 20 - env.scripted_left();
        assert_eq!(asked, 1, "the page that cannot be drawn is asked once");
        assert_eq!(
            opened.session.view().oldest,
            Some(first_shown),
            "nothing of it shown"
        );
        env.script.lock().unwrap().clear();
        opened.close().await;
    });
}
