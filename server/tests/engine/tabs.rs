//! Two tabs on one session, natively: two sessions of one engine share one store (one origin),
//! whose in-process writer lock stands for Web Locks. The first open writes; the second shows
//! the same rows read-only; when the writer goes away half-way through a streaming reply, the
//! reader takes over and brings the cache up to what it shows. Afterwards every chunk is what
//! the server answers for its coverage and no seq is cached twice. (tests/tabs.test.mjs does
//! the same with two real tabs in Chromium, on OPFS and on IndexedDB.)

use scrollback::chunks::names::{encode, parse_chunk_name};
use scrollback::chunks::Cache;
use scrollback::engine::{Config, Engine, Session};
use scrollback::protocol::{last_seq, Line, TranscriptQuery, MAX_LIMIT};
use scrollback::store::{MemoryStore, Store};
use scrollback::testing::Hooked;
use scrollback::transport::{HttpTransport, Transport};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use crate::support::{local, wait, Recorded, Running, TestServer, Yielding};

type Tab = Session<MemoryStore, HttpTransport>;

fn rows(session: &Tab) -> String {
    session.with_view(|v| serde_json::to_string(&v.transcript.rows()).unwrap())
}

fn file_lines(path: &Path) -> Vec<Line> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| Line::parse(l).unwrap())
        .collect()
}

/// Every chunk is what the server answers for its own coverage, and no seq is in two chunks.
async fn check_chunks(store: &MemoryStore, dir: &str, transport: &HttpTransport, id: &str) {
    let mut covered: Vec<(u64, u64)> = Vec::new();
    for entry in store.list(dir).await.unwrap() {
        let Some((first, end, kind)) = parse_chunk_name(&entry.name) else {
            continue;
        };
        let path = format!("{dir}/{}", entry.name);
        let bytes = store.read(&path, 0, usize::MAX).await.unwrap();
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.ends_with('\n'), "{path} ends in a whole line");
        let lines: Vec<Line> = text.lines().map(|l| Line::parse(l).unwrap()).collect();
        let end = end.unwrap_or_else(|| last_seq(lines.last().unwrap()) + 1);
        let query = TranscriptQuery {
            before: Some(end),
            after: Some(first - 1),
            limit: Some(MAX_LIMIT),
            coalesce: kind == scrollback::chunks::coverage::Kind::Rows,
            bytes: None,
        };
        let server = transport.transcript(id, &query).await.unwrap().lines;
        let raw = |ls: &[Line]| ls.iter().map(|l| l.raw().to_string()).collect::<Vec<_>>();
        assert_eq!(
            raw(&lines),
            raw(&server),
            "{path} is the server's [{first}, {end})"
        );
        covered.push((first, end));
    }
    covered.sort();
    for pair in covered.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "no seq cached twice: {covered:?}");
    }
    assert!(!covered.is_empty(), "something is cached");
}

#[test]
fn a_second_tab_reads_and_takes_over_when_the_writer_goes_away_mid_reply() {
    local(async {
        let base = TestServer::start(|config| {
            config.sandbox = true;
            config.pace_ms = 20;
        })
        .await;
        let server = &base.server;
        let transport = HttpTransport::new(&server.url(), None).unwrap();
        let store = Arc::new(MemoryStore::new());
        let cache = Cache::for_server(store.clone(), transport.server()).await;
        let dir = format!("{}/{}", cache.dir(), encode("welcome").unwrap());
        let config = Config {
            reconnect_delay_ms: 50,
            ..Config::default()
        };
        let engine = Engine::new(
            cache,
            HttpTransport::new(&server.url(), None).unwrap(),
            config,
        );

        let a = Running::open(&engine, "welcome").await;
        wait(&a.session, "the first tab live", |v| v.live).await;
        let b = Running::open(&engine, "welcome").await;
        wait(&b.session, "the second tab live", |v| v.live).await;
        assert!(a.session.view().writer, "the first tab writes");
        assert!(!b.session.view().writer, "the second reads");

        transport
            .post_message("welcome", "tell me about two tabs")
            .await
            .unwrap();
        let file = base.path("welcome");
        let posted = file_lines(&file).last().unwrap().seq();
        // Half-way through the reply: both tabs show the same rows, then the writer goes.
        wait(&a.session, "the reply streaming", |v| {
            v.cursor >= posted + 10
        })
        .await;
        let at = a.session.view().cursor;
        wait(&b.session, "the reader at the same line", |v| {
            v.cursor >= at
        })
        .await;
        a.session.close();
        a.run.await.unwrap();
        let shown_a = rows(&a.session);
        let cursor_a = a.session.view().cursor;
        drop(a.session);
        wait(&b.session, "the reader took over", |v| v.writer && v.live).await;

        // The reply ends; the new writer has every line once.
        for _ in 0..6000 {
            let lines = file_lines(&file);
            let done = lines
                .iter()
                .any(|l| l.seq() > posted && l.raw().contains(r#""status":"idle""#));
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let newest = file_lines(&file).last().unwrap().seq();
        wait(&b.session, "the reader at the reply's end", |v| {
            v.cursor == newest
        })
        .await;
        let shown_b = rows(&b.session);
        // What the first tab showed is what the second showed up to the same line: the second's
        // rows up to the writer's cursor draw the same (the reply's row grew since).
        let cut = shown_a.trim_end_matches(']').to_string();
        let common = cut
            .rsplit_once(r#"{"kind""#)
            .map_or(cut.as_str(), |(head, _)| head);
        assert!(
            shown_b.starts_with(common),
            "both tabs showed the same rows (first tab at {cursor_a})"
        );
        check_chunks(&store, &dir, &transport, "welcome").await;
        // The cache reaches the newest line.
        let mut reopened = engine.cache().session("welcome").unwrap();
        reopened.open().await;
        assert_eq!(reopened.cursor().await.map(|l| l.seq()), Some(newest));

        b.close().await;
    });
}

/// A session opened while its worker builds the session's search segment (idle-time work that
/// holds the session's writer role for a moment) waits for the build: it writes from the
/// start, with one check, rather than open as a reader and take the role over with a second
/// check and a second stream.
#[test]
fn a_session_opened_while_its_search_segment_is_built_writes_from_the_start() {
    local(async {
        let base = TestServer::start(|config| config.sandbox = true).await;
        let transport = Recorded::new(HttpTransport::new(&base.server.url(), None).unwrap());
        let store = Arc::new(Hooked::new(MemoryStore::new(), Yielding));
        let cache = Cache::for_server(store.clone(), transport.server()).await;
        let dir = format!("{}/{}", cache.dir(), encode("long").unwrap());
        let engine = Rc::new(Engine::new(cache, transport, Config::default()));
        let first = Running::open(&engine, "long").await;
        first.live().await;
        first.scroll_to_start().await;
        first.close().await;
        let sessions = engine.sessions().await.unwrap();
        let summary = sessions.into_iter().find(|s| s.id == "long").unwrap();

        // The worker's idle build of what the session indexed, under way: it holds the role.
        let building = engine.clone();
        let build = tokio::task::spawn_local(async move { building.build_search().await });
        while store.inner.writer(&dir, false).await.is_some() {
            assert!(
                !build.is_finished(),
                "the build never held the session's role"
            );
            tokio::task::yield_now().await;
        }
        engine.transport().queries.borrow_mut().clear();
        let again = Running::spawn(engine.open(summary, None).unwrap());
        assert_eq!(build.await.unwrap(), 1, "the segment was built");
        again
            .wait("the reopen live, checked and writing", |v| {
                v.live && v.verified && v.writer
            })
            .await;
        let queries = engine.transport().queries.borrow().clone();
        assert_eq!(queries.len(), 1, "one check, no takeover: {queries:?}");
        assert!(queries[0].starts_with("catchup:"), "{queries:?}");
        again.close().await;
    });
}

/// Listing the cache without the network (a start offline) reads each session as a reader:
/// another tab may be writing it, so nothing is repaired, touched or indexed.
#[test]
fn an_offline_list_writes_nothing_of_a_session_another_tab_writes() {
    local(async {
        let store = Arc::new(MemoryStore::new());
        let cache = Cache::new(store.clone(), "127.0.0.1", 9).await;
        let mut writer = cache.session("s").unwrap();
        for line in scrollback::testing::transcript(20) {
            writer.append(&line).await;
        }
        let dir = format!("{}/{}", cache.dir(), encode("s").unwrap());
        let open = format!("{dir}/1-open.raw.jsonl");
        // The writer's next line, half written.
        store.append(&open, br#"{"seq":21,"#).await.unwrap();
        let files = |store: Arc<MemoryStore>| {
            let dir = dir.clone();
            async move {
                let mut all: Vec<(String, u64)> = store
                    .list(&dir)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|e| (e.name, e.size))
                    .collect();
                all.sort();
                all
            }
        };
        let before = files(store.clone()).await;
        let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
        let bytes = text(store.read(&open, 0, usize::MAX).await.unwrap());

        let engine = Engine::new(
            cache,
            HttpTransport::new("http://127.0.0.1:9", None).unwrap(),
            Config::default(),
        );
        let listed = engine.cached_sessions().await;
        assert_eq!(
            listed
                .iter()
                .map(|s| (s.id.as_str(), s.seq))
                .collect::<Vec<_>>(),
            [("s", 20)]
        );
        assert_eq!(
            text(store.read(&open, 0, usize::MAX).await.unwrap()),
            bytes,
            "the torn line is the writer's to repair"
        );
        assert_eq!(files(store).await, before, "nothing touched or indexed");
    });
}

/// A view closed while a page of history is on its way (or asked for after the close) stores
/// nothing: it gave the writer role up, and another tab may write the session now.
#[test]
fn a_closed_view_stores_no_page() {
    local(async {
        let base = TestServer::start(|config| config.sandbox = true).await;
        let transport = HttpTransport::new(&base.server.url(), None).unwrap();
        let store = Arc::new(MemoryStore::new());
        let cache = Cache::for_server(store.clone(), transport.server()).await;
        let dir = format!("{}/{}", cache.dir(), encode("long").unwrap());
        let engine = Engine::new(cache, transport, Config::default());
        let a = Running::open(&engine, "long").await;
        a.live().await;
        let names = || async {
            let entries = store.list(&dir).await.unwrap().into_iter();
            let mut names: Vec<String> = entries.map(|e| e.name).collect();
            names.sort();
            names
        };
        let before = names().await;
        let session = a.close().await;
        assert!(session.with_view(|v| v.more_history), "history not cached");
        let _ = session.older().await;
        assert_eq!(names().await, before, "no chunk stored after the close");
    });
}
