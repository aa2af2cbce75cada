//! The engine over real HTTP against the real server (spawned in-process on a loopback port),
//! with a real filesystem cache. Requests and bytes are counted by the server (`/stats`).
//!
//! The cache's measured claims (docs/design.md, Part A), with issue #14's reopen: a warm reopen
//! is one check (which carries the catch-up and the summary) and the stream, and no
//! `GET /sessions`; a catch-up after N events is that same one request for any N up to
//! `CATCH_UP_BYTES`; scrolling the whole cached conversation back is zero requests; a gap past
//! the catch-up bound costs the gap and no more (`after=201`); a file replaced on the server is
//! caught by the check and the reopen is cold; a reply streaming when the session is reopened
//! continues at its next delta with nothing skipped or doubled; a page read ahead (the first one
//! by the reopen itself) is shown from memory, and never after the file was replaced. Also: the list prunes the
//! cache, delete purges it, and the token travels on every request and the stream.

use scrollback::engine::{Config, Engine, View};
use scrollback::fold::Transcript;
use scrollback::protocol::{
    last_seq, parse_page, Line, TranscriptQuery, CATCH_UP_BYTES, OPENING_WINDOW,
};
use scrollback::store::{FsStore, StoreResult};
use scrollback::testing::{Hook, Hooked, Op};
use scrollback::transport::{HttpTransport, Transport};
use scrollback_server::spawn;
use scrollback_server::transcript;
use serde_json::{json, Value};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio::task::LocalSet;

use crate::support::{
    assert_chunks_are_servers, assert_shows_server, Recorded, Running, TestServer,
};

type Client = Engine<FsStore, Recorded>;

/// The server (over a temporary folder, the client's cache beside it), and what asks it for
/// its figures.
struct Env {
    base: TestServer,
    http: reqwest::Client,
    token: Option<String>,
}

impl Env {
    async fn start(sandbox: bool, token: Option<&str>) -> Env {
        let base = TestServer::start(|config| {
            config.sandbox = sandbox;
            config.pace_ms = 15;
            config.token = token.map(str::to_string);
        })
        .await;
        Env {
            base,
            http: reqwest::Client::new(),
            token: token.map(str::to_string),
        }
    }

    /// A client as an app starting up would make one: over the same cache folder each time.
    async fn client(&self, token: Option<&str>) -> Client {
        let transport =
            HttpTransport::new(&self.base.server.url(), token.map(str::to_string)).unwrap();
        let store = Arc::new(FsStore::new(&self.base.cache));
        Engine::assemble(
            store,
            Recorded::new(transport),
            Config {
                reconnect_delay_ms: 50,
                ..Config::default()
            },
        )
        .await
    }

    fn append(&self, id: &str, event: Value) -> Line {
        let Value::Object(event) = event else {
            panic!("an event is an object")
        };
        transcript::append(&self.base.path(id), event).unwrap()
    }

    fn create(&self, id: &str) {
        std::fs::create_dir_all(self.base.data.join(id)).unwrap();
        std::fs::write(self.base.path(id), b"").unwrap();
    }

    /// `(requests, bytes)` the server counted for a route.
    async fn stats(&self, route: &str) -> (u64, u64) {
        let mut request = self.http.get(format!("{}/stats", self.base.server.url()));
        if let Some(t) = &self.token {
            request = request.bearer_auth(t);
        }
        let stats: Value = request.send().await.unwrap().json().await.unwrap();
        let r = &stats[route];
        (
            r["requests"].as_u64().unwrap_or(0),
            r["bytes"].as_u64().unwrap_or(0),
        )
    }
}

type Opened = Running<FsStore, Recorded>;

#[tokio::test]
async fn a_warm_reopen_is_one_request_and_scrolling_back_is_free() {
    LocalSet::new()
        .run_until(async {
            let env = Env::start(false, None).await;
            env.base.long_session("long", 3000);
            let all = env.base.lines("long");

            let t0 = env.stats("transcript").await;
            let cold = Running::open(&env.client(None).await, "long").await;
            cold.live().await;
            let t1 = env.stats("transcript").await;
            cold.scroll_to_start().await;
            let t2 = env.stats("transcript").await;
            assert_shows_server(&cold.session, &all);
            cold.close().await;

            // Reopen, as after an app restart: one check, for one line.
            let (e0, w0) = (env.stats("events").await, env.stats("transcript").await);
            let client = env.client(None).await;
            let warm = Running::open(&client, "long").await;
            warm.wait("the cached rows", |v| v.ready).await;
            warm.live().await;
            let (e1, w1) = (env.stats("events").await, env.stats("transcript").await);
            assert_eq!(w1.0 - w0.0, 1, "a warm reopen is one transcript request");
            assert!(w1.1 - w0.1 < 1024, "the check is under 1 KB: {} bytes", w1.1 - w0.1);
            assert_eq!(e1.0 - e0.0, 1, "and one stream, which has nothing to send");
            let check = format!("catchup:cursor={}", all.len());
            assert_eq!(client.transport().queries.borrow().as_slice(), [check]);
            let c = warm.session.counters();
            assert_eq!(
                (c.probes_passed, c.probes_failed, c.events, c.caught_up),
                (1, 0, 0, 0)
            );

            // The whole conversation back, from the cache.
            warm.scroll_to_start().await;
            let w2 = env.stats("transcript").await;
            assert_eq!(w2.0 - w1.0, 0, "scrolling back through cached history costs nothing");
            assert_shows_server(&warm.session, &all);
            assert!(warm.session.counters().local_pages > 0);
            println!(
                "cold open: {} requests, {} bytes; first scroll back: {} requests, {} bytes; \
                 warm reopen: {} request, {} bytes; warm scroll back: 0 requests ({} pages from the cache)",
                t1.0 - t0.0,
                t1.1 - t0.1,
                t2.0 - t1.0,
                t2.1 - t1.1,
                w1.0 - w0.0,
                w1.1 - w0.1,
                warm.session.counters().local_pages
            );
            warm.close().await;
            env.base.server.shutdown().await.unwrap();
        })
        .await;
}

/// A first visit's opening screen (what the worker draws from the page's early window before
/// the store is open, `View::opening`) is the screen the session's own cold open then shows:
/// the same rows, state, cursor and oldest row, ready but not verified.
#[tokio::test]
async fn a_first_visits_opening_screen_is_what_the_cold_open_shows() {
    LocalSet::new()
        .run_until(async {
            let env = Env::start(false, None).await;
            env.base.long_session("long", 3000);
            let transport = HttpTransport::new(&env.base.server.url(), None).unwrap();
            let window = TranscriptQuery {
                limit: Some(OPENING_WINDOW),
                ..TranscriptQuery::default()
            };
            let lines = transport.transcript("long", &window).await.unwrap().lines;
            let screen = View::opening("long", &lines).expect("a window with lines");
            assert!(screen.ready && !screen.verified && !screen.live);

            // Opened by id, as a page with `opening` does (no list asked first).
            let cold = open_unlisted(&env.client(None).await, "long").await;
            cold.wait("the first rows", |v| v.ready).await;
            cold.session.with_view(|v| {
                assert_eq!(v.transcript.rows(), screen.transcript.rows());
                assert_eq!((v.cursor, v.oldest), (screen.cursor, screen.oldest));
                assert_eq!(v.more_history, screen.more_history);
                assert_eq!(
                    serde_json::to_value(&v.state).unwrap(),
                    serde_json::to_value(&screen.state).unwrap()
                );
            });
            let newest = env.base.lines("long").last().map(last_seq);
            assert_eq!(Some(screen.cursor), newest, "the newest line is on it");
            assert!(
                View::opening("long", &[]).is_none(),
                "nothing to show, no screen"
            );
            cold.close().await;
            env.base.server.shutdown().await.unwrap();
        })
        .await;
}

#[tokio::test]
async fn a_gap_past_the_catch_up_bound_costs_the_gap_and_no_more() {
    LocalSet::new()
        .run_until(async {
            let env = Env::start(false, None).await;
            env.create("gap");
            env.append(
                "gap",
                json!({"type": "settings", "model": "m", "permissionMode": "p"}),
            );
            for i in 2..=201 {
                match i % 3 {
                    0 => env.append(
                        "gap",
                        json!({"type": "userMessage", "text": format!("q{i}")}),
                    ),
                    1 => env.append(
                        "gap",
                        json!({"type": "assistantText", "text": format!("answer {i}")}),
                    ),
                    _ => env.append("gap", json!({"type": "status", "status": "idle"})),
                };
            }
            // The phone holds everything up to 201.
            let first = Running::open(&env.client(None).await, "gap").await;
            first.live().await;
            first.scroll_to_start().await;
            first.close().await;

            // Away for 304 events: four rows (202..305), then 200 long messages (306..505) that
            // together pass the catch-up bound (`CATCH_UP_BYTES`).
            env.append(
                "gap",
                json!({"type": "userMessage", "text": "write it out"}),
            );
            for i in 0..101 {
                env.append(
                    "gap",
                    json!({"type": "assistantText", "text": format!(" w{i}")}),
                );
            }
            env.append("gap", json!({"type": "status", "status": "idle"}));
            env.append("gap", json!({"type": "usageDelta", "context": 1234}));
            let long = "x".repeat(CATCH_UP_BYTES / 200 + 100);
            for i in 306..=505 {
                env.append(
                    "gap",
                    json!({"type": "userMessage", "text": format!("later {i} {long}")}),
                );
            }
            let all = env.base.lines("gap");

            let client = env.client(None).await;
            let t0 = env.stats("transcript").await;
            let back = Running::open(&client, "gap").await;
            back.wait("the reset window", |v| {
                v.cursor == 505 && v.oldest == Some(426)
            })
            .await;
            back.live().await;
            let t1 = env.stats("transcript").await;
            assert_eq!(back.session.counters().resets, 1);
            assert_eq!(
                t1.0 - t0.0,
                1,
                "one check answers: the gap is too large, here is the newest window"
            );
            client.transport().queries.borrow_mut().clear();

            // Paging back through the gap asks for the gap only, down to where the cache ends.
            let g0 = env.stats("transcript").await;
            while back.session.with_view(|v| v.oldest) > Some(202) {
                assert!(back.session.older().await.unwrap());
            }
            let g1 = env.stats("transcript").await;
            let gap_bytes = g1.1 - g0.1;
            let queries = client.transport().queries.borrow().clone();
            assert_eq!(
                queries[0], "before=426&after=201&limit=40&coalesce=true&bytes=65536",
                "the page asks for the gap only"
            );
            assert!(
                queries.iter().all(|q| q.contains("&after=201&")),
                "every gap page stops where the cache ends: {queries:?}"
            );
            assert_eq!(
                back.session.with_view(|v| v.oldest),
                Some(202),
                "the gap pages end where the cache ends"
            );

            // The server's side of the gap's last page: four coalesced rows for 202..305.
            let page = {
                let q = TranscriptQuery {
                    before: Some(306),
                    after: Some(201),
                    limit: Some(40),
                    coalesce: true,
                    bytes: Some(65536),
                };
                client
                    .transport()
                    .inner
                    .transcript("gap", &q)
                    .await
                    .unwrap()
            };
            assert_eq!(page.lines.len(), 4, "four coalesced rows");
            assert_eq!(page.lines[0].seq(), 202);
            assert_eq!(last_seq(page.lines.last().unwrap()), 305);
            let unbounded = env
                .http
                .get(format!(
                    "{}/sessions/gap/transcript?before=306&limit=40&coalesce=true",
                    env.base.server.url()
                ))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            assert!(parse_page(&unbounded).unwrap()[0].seq() < 202);

            // The gap closed: the rest of the history is local.
            let s0 = env.stats("transcript").await;
            back.scroll_to_start().await;
            let s1 = env.stats("transcript").await;
            assert_eq!(
                s1.0 - s0.0,
                0,
                "after the gap, history comes from the cache"
            );
            assert_shows_server(&back.session, &all);
            println!(
                "gap past the catch-up bound: the check {} bytes on the wire (newest window); \
                 the gap 202..425: {} requests, {gap_bytes} bytes on the wire",
                t1.1 - t0.1,
                g1.0 - g0.0,
            );
            back.close().await;
            env.base.server.shutdown().await.unwrap();
        })
        .await;
}

#[tokio::test]
async fn a_file_replaced_on_the_server_is_caught_by_the_probe() {
    LocalSet::new()
        .run_until(async {
            let env = Env::start(false, None).await;
            env.base.long_session("r", 300);
            let cached_len = env.base.lines("r").len();
            let first = Running::open(&env.client(None).await, "r").await;
            first.live().await;
            first.close().await;

            // The same id, another transcript (as a re-seeded sandbox would be).
            let mut body = String::new();
            for seq in 1..=150u64 {
                let ts = 1_800_000_000.0 + seq as f64 * 0.123_456_789;
                let line = Line::new(
                    seq,
                    ts,
                    json!({"type": "userMessage", "text": format!("other {seq}")})
                        .as_object()
                        .unwrap()
                        .clone(),
                )
                .unwrap();
                body.push_str(line.raw());
                body.push('\n');
            }
            let put = env
                .http
                .put(format!("{}/sessions/r/transcript", env.base.server.url()))
                .body(body)
                .send()
                .await
                .unwrap();
            assert!(put.status().is_success());
            let all = env.base.lines("r");

            let t0 = env.stats("transcript").await;
            let client = env.client(None).await;
            let again = Running::open(&client, "r").await;
            again.live().await;
            let t1 = env.stats("transcript").await;
            let c = again.session.counters();
            assert_eq!((c.probes_passed, c.probes_failed), (0, 1));
            assert_eq!(t1.0 - t0.0, 2, "the check, then the cold opening window");
            assert_eq!(
                client.transport().queries.borrow().as_slice(),
                [
                    format!("catchup:cursor={cached_len}"),
                    "limit=80".to_string()
                ]
            );
            assert_shows_server(&again.session, &all);
            again
                .session
                .with_view(|v| assert_eq!((v.oldest, v.cursor), (Some(71), 150)));
            // The cache now holds the new file's lines, and only those.
            again.scroll_to_start().await;
            assert_shows_server(&again.session, &all);
            again.close().await;
            let reopened = Running::open(&env.client(None).await, "r").await;
            reopened.live().await;
            assert_eq!(reopened.session.counters().probes_passed, 1);
            assert_shows_server(&reopened.session, &all);
            reopened.close().await;
            env.base.server.shutdown().await.unwrap();
        })
        .await;
}

#[tokio::test]
async fn a_reply_streaming_when_reopened_continues_at_its_next_delta() {
    LocalSet::new()
        .run_until(async {
            let env = Env::start(true, None).await;
            env.create("chat");
            env.append("chat", json!({"type": "status", "status": "idle"}));
            let client = env.client(None).await;
            let first = Running::open(&client, "chat").await;
            first.live().await;
            client
                .transport()
                .post_message("chat", "tell me a story")
                .await
                .unwrap();
            first
                .wait("part of the reply", |v| v.counters.events >= 30)
                .await;
            let cursor = first.close().await.with_view(|v| v.cursor);
            tokio::time::sleep(Duration::from_millis(150)).await;

            let second = Running::open(&env.client(None).await, "chat").await;
            second.live().await;
            second
                .wait("the end of the reply", |v| {
                    v.state.status == "idle" && v.cursor > cursor + 30
                })
                .await;
            // The reply is over when the server's last line is the idle status.
            let mut all = env.base.lines("chat");
            for _ in 0..400 {
                if all.last().and_then(|l| l.event().get("status")) == Some(&json!("idle"))
                    && all.len() as u64 == second.session.with_view(|v| v.cursor)
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                all = env.base.lines("chat");
            }
            let newest = all.len() as u64;
            let c = second.session.counters();
            assert_eq!(c.probes_passed, 1);
            assert_eq!(
                c.caught_up + c.events,
                newest - cursor,
                "every event after the cached cursor arrived once: nothing skipped or doubled"
            );
            assert_shows_server(&second.session, &all);
            // One assistant row holds the whole reply, cached half and streamed half.
            let reply: String = all
                .iter()
                .filter(|l| l.event_type() == "assistantText")
                .filter_map(Line::text)
                .collect();
            let shown = second.session.with_view(|v| {
                v.transcript
                    .rows()
                    .iter()
                    .filter_map(|r| match r {
                        scrollback::fold::Row::Assistant { text, .. } => Some(text.clone()),
                        _ => None,
                    })
                    .collect::<String>()
            });
            assert_eq!(shown, reply);
            second.close().await;
            env.base.server.shutdown().await.unwrap();
        })
        .await;
}

#[tokio::test]
async fn an_older_page_dropped_half_way_leaves_the_next_one_free_to_load() {
    LocalSet::new()
        .run_until(async {
            let env = Env::start(false, None).await;
            env.base.long_session("drop", 600);
            let client = env.client(None).await;
            let s = Running::open(&client, "drop").await;
            s.live().await;
            // A first visit: the older page comes from the server, so it cannot be done at its
            // first poll. The caller gives up on it there (a timeout, a select).
            {
                let mut older = std::pin::pin!(s.session.older());
                let first = futures_util::poll!(older.as_mut());
                assert!(first.is_pending(), "the page is asked from the server");
            }
            let oldest = s.session.with_view(|v| v.oldest);
            assert!(
                s.session.older().await.unwrap(),
                "the next older page loads"
            );
            assert!(s.session.with_view(|v| v.oldest) < oldest);
            s.close().await;
        })
        .await;
}

/// Holds back the writes of chunks fetched as older pages while `held` says so (a slow disk,
/// made to order); how many wait is counted.
struct HeldPages {
    held: watch::Receiver<bool>,
    waiting: AtomicUsize,
}

impl Hook for HeldPages {
    async fn before(&self, op: Op<'_>) -> StoreResult<()> {
        if let Op::Write(path) = op {
            if path.ends_with(".rows.jsonl") {
                self.waiting.fetch_add(1, Ordering::SeqCst);
                let _ = self.held.clone().wait_for(|held| !held).await;
                self.waiting.fetch_sub(1, Ordering::SeqCst);
            }
        }
        Ok(())
    }
}

/// Polls `cond` every 5 ms until it holds (30 s at most, then fails with `what`).
async fn until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..6000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("waited 30 s for {what}");
}

/// A first visit's scroll back: each older page comes from the server, and is answered as soon
/// as it is shown, before it is stored; the next page is asked and shown while the one before
/// it is still being written. Both are stored all the same, with nothing asked twice.
#[tokio::test]
async fn an_older_page_is_answered_once_shown_and_the_next_is_asked_while_it_is_stored() {
    LocalSet::new()
        .run_until(async {
            let env = Env::start(false, None).await;
            env.base.long_session("slow", 3000);
            let (hold, held) = watch::channel(false);
            let store = Arc::new(Hooked::new(
                FsStore::new(&env.base.cache),
                HeldPages {
                    held,
                    waiting: AtomicUsize::new(0),
                },
            ));
            let transport = HttpTransport::new(&env.base.server.url(), None).unwrap();
            let client =
                Engine::assemble(store.clone(), Recorded::new(transport), Config::default()).await;
            let s = Running::open(&client, "slow").await;
            s.live().await;
            client.transport().queries.borrow_mut().clear();
            hold.send(true).unwrap();

            let older = |shown: Rc<Cell<bool>>| {
                let session = s.session.clone();
                tokio::task::spawn_local(
                    async move { session.older_then(|| shown.set(true)).await },
                )
            };
            let oldest = || s.session.with_view(|v| v.oldest.unwrap());
            let window = oldest();
            let shown = Rc::new(Cell::new(false));
            let first = older(shown.clone());
            until("the first page shown", || shown.get()).await;
            let page = oldest();
            assert!(page < window, "the first older page is shown");
            until("its write", || {
                store.hook.waiting.load(Ordering::SeqCst) == 1
            })
            .await;
            assert!(!first.is_finished(), "its write is held");

            let shown = Rc::new(Cell::new(false));
            let second = older(shown.clone());
            until("the second page shown", || shown.get()).await;
            assert!(oldest() < page, "the second older page is shown");
            assert!(
                !first.is_finished() && !second.is_finished(),
                "while the first page's write is still held"
            );
            assert_eq!(
                *client.transport().queries.borrow(),
                [
                    format!("before={window}&limit=40&coalesce=true&bytes=65536"),
                    format!("before={page}&limit=40&coalesce=true&bytes=65536"),
                ],
                "each page asked once, neither bounded: nothing is cached below the window"
            );

            // What reads the store without the session (a search) waits for the writes.
            let stored = {
                let session = s.session.clone();
                tokio::task::spawn_local(async move { session.stored().await })
            };
            tokio::task::yield_now().await;
            assert!(!stored.is_finished(), "`stored` waits for the held writes");

            hold.send(false).unwrap();
            stored.await.unwrap();
            assert!(first.await.unwrap().unwrap());
            assert!(second.await.unwrap().unwrap());
            let reached = oldest();
            s.close().await;

            // Both pages were stored: a reopen pages back over them with no request.
            let again = Running::open(&env.client(None).await, "slow").await;
            again.live().await;
            let t0 = env.stats("transcript").await;
            while again.session.with_view(|v| v.oldest) > Some(reached) {
                assert!(again.session.older().await.unwrap());
            }
            assert_eq!(
                env.stats("transcript").await.0,
                t0.0,
                "both pages are the cache's"
            );
            assert_shows_server(&again.session, &env.base.lines("slow"));
            again.close().await;
            env.base.server.shutdown().await.unwrap();
        })
        .await;
}

/// Opening at an anchor far back (a search hit) while the app pages back beside it (its scroll
/// handler, as the view first draws): whichever shows the page both asked for first, the
/// restore goes on from there and reaches the anchor.
#[tokio::test]
async fn an_anchor_restore_reaches_its_seq_while_the_app_pages_back_beside_it() {
    LocalSet::new()
        .run_until(async {
            let env = Env::start(false, None).await;
            env.base.long_session("far", 3000);
            let anchor = 100;
            let client = env.client(None).await;
            // The restore's span back to the anchor (one request for all of it) is slow.
            let gate = Rc::new(Notify::new());
            let newest = env.base.lines("far").len() as u64;
            let span = (newest - OPENING_WINDOW as u64 + 1 - anchor) as usize;
            *client.transport().held.borrow_mut() = Some((
                Box::new(move |q: &TranscriptQuery| q.limit == Some(span)),
                gate.clone(),
            ));
            let s = Running::spawn(client.open_id("far", Some(anchor)).await.unwrap());
            let asked = || {
                let queries = client.transport().queries.borrow();
                queries.iter().any(|q| q.contains(&format!("limit={span}")))
            };
            for _ in 0..2000 {
                if asked() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            assert!(
                asked(),
                "the restore asks for the span: {:?}",
                client.transport().queries.borrow()
            );
            // The app's older page answers first and is shown; then the restore's answer comes.
            assert!(s.session.older().await.unwrap());
            gate.notify_one();
            s.wait("the anchor's row", |v| {
                v.oldest.is_some_and(|o| o <= anchor)
            })
            .await;
            assert_shows_server(&s.session, &env.base.lines("far"));
            s.close().await;
        })
        .await;
}

#[tokio::test]
async fn the_list_prunes_the_cache_and_delete_purges_it() {
    LocalSet::new()
        .run_until(async {
            let env = Env::start(false, None).await;
            for id in ["a", "b", "c"] {
                env.base.long_session(id, 120);
            }
            let client = env.client(None).await;
            for id in ["a", "b", "c"] {
                let s = Running::open(&client, id).await;
                s.live().await;
                s.close().await;
                assert!(client.cache().session_size(id).await > 0);
            }
            client.delete("b").await.unwrap();
            assert_eq!(client.cache().session_size("b").await, 0, "delete purges");
            // Gone from the server behind the client's back.
            std::fs::remove_dir_all(env.base.data.join("c")).unwrap();
            let ids: Vec<String> = client
                .sessions()
                .await
                .unwrap()
                .into_iter()
                .map(|s| s.id)
                .collect();
            assert_eq!(ids, ["a"]);
            assert_eq!(client.cache().session_size("c").await, 0, "the list prunes");
            assert!(client.cache().session_size("a").await > 0);
            env.base.server.shutdown().await.unwrap();
        })
        .await;
}

#[tokio::test]
async fn the_token_travels_on_every_request_and_the_stream() {
    LocalSet::new()
        .run_until(async {
            let env = Env::start(false, Some("s3cret")).await;
            env.base.long_session("t", 100);
            let denied = env.client(None).await;
            let err = denied.sessions().await.unwrap_err();
            assert_eq!(
                err.to_string(),
                "server answered 401: missing or wrong token"
            );

            let client = env.client(Some("s3cret")).await;
            let s = Running::open(&client, "t").await;
            s.live().await;
            let newest = env
                .append("t", json!({"type": "status", "status": "working"}))
                .seq();
            s.wait("the streamed event", |v| v.cursor == newest).await;
            s.close().await;

            // A session opened without the token stops with an authentication error (retrying
            // cannot fix a token), instead of retrying forever.
            let summary = client.sessions().await.unwrap().remove(0);
            let opened = Running::spawn(denied.open(summary, None).unwrap());
            opened.wait("the error", |v| v.error.is_some()).await;
            opened.session.with_view(|v| {
                let error = v.error.as_ref().unwrap();
                assert_eq!((error.kind, error.status), ("unauthorized", Some(401)));
                assert_eq!(error.message, "missing or wrong token");
                assert_eq!(v.banner, None);
                // The cached rows stay shown (nothing is purged for a wrong token).
                assert!(v.ready && !v.verified && v.cursor == newest);
            });
            opened.close().await;
            env.base.server.shutdown().await.unwrap();
        })
        .await;
}

/// Opens `id` as an app that never listed sessions would: by id alone, no `GET /sessions`.
async fn open_unlisted(client: &Client, id: &str) -> Opened {
    Running::spawn(client.open_id(id, None).await.unwrap())
}

#[tokio::test]
async fn a_catch_up_after_n_events_is_one_request_for_any_n_up_to_the_bound() {
    LocalSet::new()
        .run_until(async {
            let env = Env::start(false, None).await;
            env.base.long_session("c", 500);
            let first = Running::open(&env.client(None).await, "c").await;
            first.live().await;
            first.close().await;
            let mut figures = Vec::new();
            // 2,000 events of about 250 bytes pass nothing: all well inside CATCH_UP_BYTES.
            for n in [1usize, 300, 2000] {
                for i in 0..n {
                    let event = match i % 4 {
                        0 => {
                            let text = format!("question {i} {}", "q".repeat(200));
                            json!({"type": "userMessage", "text": text})
                        }
                        1 => json!({"type": "status", "status": "working"}),
                        2 => json!({"type": "assistantText", "text": format!(" answer {i}")}),
                        _ => json!({"type": "usageDelta", "context": i}),
                    };
                    env.append("c", event);
                }
                env.append(
                    "c",
                    json!({"type": "settings", "model": format!("model-{n}"), "permissionMode": "ask"}),
                );
                env.append("c", json!({"type": "status", "status": "idle"}));
                let all = env.base.lines("c");
                let newest = all.len() as u64;
                let (l0, t0, e0) = (
                    env.stats("sessions").await,
                    env.stats("transcript").await,
                    env.stats("events").await,
                );
                let client = env.client(None).await;
                let again = open_unlisted(&client, "c").await;
                again.wait("the newest line", |v| v.cursor == newest).await;
                again.live().await;
                let (l1, t1, e1) = (
                    env.stats("sessions").await,
                    env.stats("transcript").await,
                    env.stats("events").await,
                );
                assert_eq!(l1.0 - l0.0, 0, "no GET /sessions: the check brings the summary");
                assert_eq!(t1.0 - t0.0, 1, "{n} events behind: one transcript request");
                assert_eq!(e1.0 - e0.0, 1, "and the stream, from the newest");
                let c = again.session.counters();
                assert_eq!((c.caught_up, c.events, c.resets), (n as u64 + 2, 0, 0));
                assert_eq!(
                    client.transport().queries.borrow().as_slice(),
                    [format!("catchup:cursor={}", newest - n as u64 - 2)]
                );
                again.session.with_view(|v| {
                    assert_eq!(v.state.status, "idle");
                    assert_eq!(v.state.model, format!("model-{n}"), "the summary's model");
                });
                assert_shows_server(&again.session, &all);
                again.close().await;
                assert!(assert_chunks_are_servers(&env.base, &client, "c").await > 0);
                figures.push(format!(
                    "{n} events: {} request, {} bytes on the wire ({} raw)",
                    t1.0 - t0.0,
                    t1.1 - t0.1,
                    all[all.len() - n - 2..].iter().map(|l| l.raw().len() + 1).sum::<usize>()
                ));
            }
            println!("catch-up: {}", figures.join("; "));
            env.base.server.shutdown().await.unwrap();
        })
        .await;
}

/// Replaces `id`'s file through the server's `PUT`, with `n` lines of other content.
async fn put_other(env: &Env, id: &str, n: u64, salt: f64) {
    let mut body = String::new();
    for seq in 1..=n {
        let ts = 1_800_000_000.0 + salt + seq as f64 * 0.123_456_789;
        let event = match seq % 3 {
            0 => json!({"type": "assistantText", "text": format!(" new {seq}")}),
            _ => json!({"type": "userMessage", "text": format!("new file {salt} line {seq}")}),
        };
        let line = Line::new(seq, ts, event.as_object().unwrap().clone()).unwrap();
        body.push_str(line.raw());
        body.push('\n');
    }
    let put = env
        .http
        .put(format!(
            "{}/sessions/{id}/transcript",
            env.base.server.url()
        ))
        .body(body)
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success());
}

#[tokio::test]
async fn a_file_replaced_between_the_check_and_the_stream_is_caught_by_the_stream() {
    LocalSet::new()
        .run_until(async {
            let env = Env::start(false, None).await;
            env.base.long_session("b", 300);
            let first = Running::open(&env.client(None).await, "b").await;
            first.live().await;
            first.close().await;

            // The reopen's check passes (the file is the cached one); then, before its stream
            // connects, the file is replaced by a longer one with other content.
            let client = env.client(None).await;
            let path = env.base.path("b");
            *client.transport().before_events.borrow_mut() = Some(Box::new(move || {
                let mut body = String::new();
                for seq in 1..=500u64 {
                    let ts = 1_900_000_000.0 + seq as f64 * 0.25;
                    let event = json!({"type": "userMessage", "text": format!("other file {seq}")});
                    let line = Line::new(seq, ts, event.as_object().unwrap().clone()).unwrap();
                    body.push_str(line.raw());
                    body.push('\n');
                }
                let new = path.with_extension("new");
                std::fs::write(&new, body).unwrap();
                std::fs::rename(&new, &path).unwrap();
            }));
            let again = Running::open(&client, "b").await;
            let all = || env.base.lines("b");
            again
                .wait("the new file, and only it", |v| {
                    let all = all();
                    v.live
                        && v.cursor == 500
                        && v.transcript.rows()
                            == Transcript::from_lines(&all[v.oldest.unwrap_or(1) as usize - 1..])
                                .unwrap()
                                .rows()
                })
                .await;
            assert_eq!(
                again.session.counters().probes_passed,
                1,
                "the check passed"
            );
            let all = all();
            assert_shows_server(&again.session, &all);
            again.scroll_to_start().await;
            assert_shows_server(&again.session, &all);
            assert_chunks_are_servers(&env.base, &client, "b").await;
            again.close().await;
        })
        .await;
}

#[tokio::test]
async fn a_file_replaced_while_open_leaves_nothing_of_the_old_one() {
    LocalSet::new()
        .run_until(async {
            let env = Env::start(true, None).await;
            env.base.long_session("o", 400);
            let client = env.client(None).await;
            let s = Running::open(&client, "o").await;
            s.live().await;
            s.scroll_to_start().await;
            let mut salt = 0.0;
            // Shorter (numbered from 1 again), as long with other content, longer.
            for (what, n) in [("shorter", 120u64), ("as long", 120), ("longer", 700)] {
                salt += 1000.0;
                put_other(&env, "o", n, salt).await;
                let all = env.base.lines("o");
                s.wait(what, |v| {
                    v.live
                        && v.cursor == n
                        && v.transcript.rows()
                            == Transcript::from_lines(&all[v.oldest.unwrap_or(1) as usize - 1..])
                                .unwrap()
                                .rows()
                })
                .await;
                assert_shows_server(&s.session, &all);
                s.scroll_to_start().await;
                assert_shows_server(&s.session, &all);
                assert!(
                    assert_chunks_are_servers(&env.base, &client, "o").await > 0,
                    "{what}"
                );
            }
            // While a reply streams into the open session.
            client
                .transport()
                .post_message("o", "tell me a story")
                .await
                .unwrap();
            s.wait("part of the reply", |v| v.state.status == "working")
                .await;
            salt += 1000.0;
            put_other(&env, "o", 50, salt).await;
            // The sandbox's reply goes on into the new file; wait for its end.
            s.wait("the new file and the reply's end", |v| {
                v.live && v.state.status == "idle" && v.cursor as usize == env.base.lines("o").len()
            })
            .await;
            let all = env.base.lines("o");
            assert!(
                all[49].raw().contains(&format!("{salt}")),
                "the new file is shown"
            );
            assert_shows_server(&s.session, &all);
            s.scroll_to_start().await;
            assert_shows_server(&s.session, &all);
            assert_chunks_are_servers(&env.base, &client, "o").await;
            let resets = s.session.counters().resets;
            assert!(resets >= 4, "each replacement was a reset: {resets}");
            s.close().await;
            env.base.server.shutdown().await.unwrap();
        })
        .await;
}

#[tokio::test]
async fn offline_a_cached_session_opens_reads_back_and_goes_live_when_the_server_returns() {
    LocalSet::new()
        .run_until(async {
            let env = Env::start(false, None).await;
            env.base.long_session("off", 600);
            env.base.long_session("never", 50);
            let all = env.base.lines("off");
            let client = env.client(None).await;
            let s = Running::open(&client, "off").await;
            s.live().await;
            s.scroll_to_start().await;
            s.close().await;
            let addr = env
                .base
                .server
                .url()
                .trim_start_matches("http://")
                .to_string();
            let (path, data) = (env.base.path("off"), env.base.data.clone());
            let client = env.client(None).await;
            env.base.server.shutdown().await.unwrap();

            // No server: the list is the cache's, the session draws and pages from the cache.
            assert!(client.sessions().await.is_err());
            let listed = client.cached_sessions().await;
            assert_eq!(
                listed
                    .iter()
                    .map(|s| (s.id.as_str(), s.seq))
                    .collect::<Vec<_>>(),
                [("off", all.len() as u64)]
            );
            let s = open_unlisted(&client, "off").await;
            s.wait("the banner", |v| {
                v.ready
                    && v.banner.as_deref().is_some_and(|b| {
                        b.starts_with("Cannot reach the server: showing what is cached")
                    })
            })
            .await;
            s.scroll_to_start().await;
            assert_shows_server(&s.session, &all);
            assert!(s.session.counters().local_pages > 0);
            let never = open_unlisted(&client, "never").await;
            never
                .wait("the banner", |v| {
                    !v.ready
                        && v.banner
                            .as_deref()
                            .is_some_and(|b| b.contains("needs the network"))
                })
                .await;

            // The server comes back (same address): the check runs, the session goes live.
            let mut config = scrollback_server::Config::new(&data);
            config.addr = addr;
            let server = spawn(config).await.unwrap();
            let newest = transcript::append(
                &path,
                json!({"type": "status", "status": "working"})
                    .as_object()
                    .unwrap()
                    .clone(),
            )
            .unwrap()
            .seq();
            s.wait("live again", |v| {
                v.live && v.banner.is_none() && v.cursor == newest
            })
            .await;
            let now: Vec<Line> = std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .map(|l| Line::parse(l).unwrap())
                .collect();
            assert_shows_server(&s.session, &now);
            never.wait("the cold open", |v| v.live && v.ready).await;
            s.close().await;
            never.close().await;
            server.shutdown().await.unwrap();
        })
        .await;
}

#[tokio::test]
async fn a_page_read_ahead_is_shown_from_memory_and_never_after_the_file_is_replaced() {
    LocalSet::new()
        .run_until(async {
            let env = Env::start(true, None).await;
            env.create("r");
            put_other(&env, "r", 600, 1000.0).await;
            let client = env.client(None).await;
            let cold = Running::open(&client, "r").await;
            cold.live().await;
            cold.scroll_to_start().await;
            cold.close().await;

            // Warm: each page read ahead, then shown, costs no request and is the server's.
            let all = env.base.lines("r");
            let warm = Running::open(&client, "r").await;
            warm.live().await;
            let before = env.stats("transcript").await;
            let mut pages = 0;
            while warm.session.with_view(|v| v.more_history) {
                warm.session.read_ahead().await;
                assert!(warm.session.older().await.unwrap());
                assert_shows_server(&warm.session, &all);
                pages += 1;
            }
            assert!(pages > 2, "several pages: {pages}");
            assert_eq!(env.stats("transcript").await.0, before.0, "no request");
            warm.close().await;

            // A page read ahead, then the file replaced by one of the same shape: the reopen
            // shows the new file, and the next older page is the new file's, not the page read.
            let warm = Running::open(&client, "r").await;
            warm.live().await;
            warm.session.read_ahead().await;
            let oldest = warm.session.with_view(|v| v.oldest);
            put_other(&env, "r", 600, 2000.0).await;
            let all = env.base.lines("r");
            warm.wait("the new file", |v| {
                v.live
                    && v.cursor == 600
                    && v.transcript.rows()
                        == Transcript::from_lines(&all[v.oldest.unwrap_or(1) as usize - 1..])
                            .unwrap()
                            .rows()
            })
            .await;
            assert_eq!(
                warm.session.with_view(|v| v.oldest),
                oldest,
                "the same shape"
            );
            assert!(warm.session.older().await.unwrap());
            assert_shows_server(&warm.session, &all);
            warm.scroll_to_start().await;
            assert_shows_server(&warm.session, &all);
            warm.close().await;

            // A reopen reads its older pages ahead by itself once open, all of them when they
            // fit the read-ahead's bytes (this history does): with the cache's files gone
            // behind its back, the whole history still comes, from memory, with no request.
            // (A call waits for the read ahead the session started, then tops it up.)
            let warm = Running::open(&client, "r").await;
            warm.live().await;
            warm.session.read_ahead().await;
            std::fs::remove_dir_all(&env.base.cache).unwrap();
            let before = env.stats("transcript").await;
            let pages = warm.session.with_view(|v| v.counters.local_pages);
            let mut from_memory = 0;
            while warm.session.with_view(|v| v.more_history) {
                assert!(warm.session.older().await.unwrap());
                assert_shows_server(&warm.session, &all);
                from_memory += 1;
            }
            assert!(
                from_memory > 8,
                "more pages than the old cap of 8: {from_memory}"
            );
            assert_eq!(env.stats("transcript").await.0, before.0, "no request");
            assert_eq!(
                warm.session.with_view(|v| v.counters.local_pages),
                pages + from_memory
            );
            assert_eq!(warm.session.with_view(|v| v.oldest), Some(1));
            warm.close().await;
            env.base.server.shutdown().await.unwrap();
        })
        .await;
}

/// Lines the server cannot read (real transcripts hold some: a line with no event) are skipped,
/// leaving holes in the seqs: a cached session with holes reopens with its check alone and
/// scrolls back from the cache, holes below a page's edge, inside it and in the live stream
/// alike, and shows every line the server serves.
#[tokio::test]
async fn lines_the_server_skips_cost_nothing_once_cached() {
    LocalSet::new()
        .run_until(async {
            let env = Env::start(false, None).await;
            env.base.long_session("holes", 3000);
            let path = env.base.path("holes");
            let text = std::fs::read_to_string(&path).unwrap();
            // Every 7th line has no event.
            let holed: String = text
                .lines()
                .enumerate()
                .map(|(i, l)| match (i + 1) % 7 {
                    0 => format!("{{\"seq\":{},\"ts\":1}}\n", i + 1),
                    _ => format!("{l}\n"),
                })
                .collect();
            std::fs::write(&path, holed).unwrap();
            let served = || {
                let text = std::fs::read_to_string(&path).unwrap();
                text.lines().filter_map(|l| Line::parse(l).ok()).collect::<Vec<_>>()
            };
            let shows_served = |s: &Opened| {
                let lines = served();
                s.session.with_view(|v| {
                    let expected = Transcript::from_lines(&lines).unwrap();
                    assert_eq!(v.transcript.rows(), expected.rows(), "rows differ from the server's");
                });
            };

            let cold = Running::open(&env.client(None).await, "holes").await;
            cold.live().await;
            cold.scroll_to_start().await;
            shows_served(&cold);
            // A hole in the live stream too.
            let held = std::fs::read_to_string(&path).unwrap();
            let hole = held.lines().count() + 1;
            let after = json!({"seq": hole + 1, "ts": 2.5, "event": {"type": "userMessage", "text": "after the hole"}});
            std::fs::write(&path, format!("{held}{{\"seq\":{hole},\"ts\":1}}\n{after}\n")).unwrap();
            cold.wait("the line after the hole", |v| v.cursor == hole as u64 + 1).await;
            cold.close().await;

            let w0 = env.stats("transcript").await;
            let client = env.client(None).await;
            let warm = Running::open(&client, "holes").await;
            warm.live().await;
            warm.scroll_to_start().await;
            let w1 = env.stats("transcript").await;
            shows_served(&warm);
            let c = warm.session.counters();
            println!("warm: {:?} queries {:?}", c, client.transport().queries.borrow());
            assert_eq!((c.probes_passed, c.probes_failed), (1, 0));
            assert_eq!(w1.0 - w0.0, 1, "the check alone: {:?}", client.transport().queries.borrow());
            warm.close().await;
            env.base.server.shutdown().await.unwrap();
        })
        .await;
}
