//! The cache's budget and a full storage, natively on a `MemoryStore`: the budget runs beside the
//! stream (an open's first rows, restore and stream never wait for its scan of every cached
//! session), still evicts the least recently opened sessions on every open that writes, never the
//! open one nor one another tab writes; and a write the storage refuses for its quota evicts the
//! least recently opened sessions even under the budget, so that the next open writes again.

use scrollback::chunks::Cache;
use scrollback::engine::{Config, Engine, View};
use scrollback::store::{MemoryStore, Store, StoreResult};
use scrollback::testing::{transcript, Hook, Hooked, Op};
use scrollback::transport::HttpTransport;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::support::{local, Running, TestServer};

/// What the budget's scan does to a store: one listing of the server's folder, then one of each
/// session's. This hook holds the first (while `held`) or slows every listing below it
/// (`delay_ms`, as OPFS costs about 2 ms a folder), and counts those of the folders named
/// `s<n>` (`lists`).
#[derive(Debug, Default)]
struct Scan {
    /// The server's folder (`Cache::dir`), set once the engine is made.
    dir: OnceLock<String>,
    held: AtomicBool,
    delay_ms: AtomicU64,
    lists: AtomicUsize,
}

impl Hook for Scan {
    async fn before(&self, op: Op<'_>) -> StoreResult<()> {
        let Op::List(path) = op else { return Ok(()) };
        let Some(dir) = self.dir.get() else {
            return Ok(());
        };
        if path == dir {
            while self.held.load(SeqCst) {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        if path.starts_with(dir.as_str()) {
            let ms = self.delay_ms.load(SeqCst);
            if ms > 0 {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            if path.starts_with(&format!("{dir}/s")) {
                self.lists.fetch_add(1, SeqCst);
            }
        }
        Ok(())
    }
}

type Scanned = Hooked<MemoryStore, Scan>;

async fn engine<S: Store>(
    base: &TestServer,
    store: &Arc<S>,
    budget: u64,
) -> Engine<S, HttpTransport> {
    let transport = HttpTransport::new(&base.server.url(), None).unwrap();
    let cache = Cache::new(store.clone(), transport.host(), transport.port()).await;
    let config = Config {
        budget_bytes: budget,
        ..Config::default()
    };
    Engine::new(cache, transport, config)
}

/// The ids the cache holds, sorted.
async fn cached<S: Store>(engine: &Engine<S, HttpTransport>) -> Vec<String> {
    let mut ids: Vec<String> = (engine.cache().sessions().await)
        .into_iter()
        .filter_map(|s| s.id)
        .collect();
    ids.sort();
    ids
}

/// Waits (30 s at most) until the cache holds exactly `ids`.
async fn wait_cached<S: Store>(engine: &Engine<S, HttpTransport>, ids: &[&str]) {
    for _ in 0..6000 {
        if cached(engine).await == ids {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the cache holds {:?}, not {ids:?}", cached(engine).await);
}

/// Opens `id` (by id, no list fetched), runs it until live, closes it.
async fn visit<S: Store + 'static>(engine: &Engine<S, HttpTransport>, id: &str) {
    let running = Running::spawn(engine.open_id(id, None).await.unwrap());
    running.live().await;
    running.close().await;
}

fn live_and_storing(v: &View) -> bool {
    v.live && v.storage_error.is_none()
}

/// With the budget's scan held, a warm open still draws its rows, restores its anchor and goes
/// live; once the scan goes on, the budget evicts the least recently opened session, never
/// the one open nor one another tab writes.
#[test]
fn the_stream_and_the_restore_do_not_wait_for_the_budget() {
    local(async {
        let base = TestServer::start(|config| config.sandbox = true).await;
        let store = Arc::new(Scanned::new(MemoryStore::new(), Scan::default()));
        let roomy = engine(&base, &store, u64::MAX).await;
        store.hook.dir.set(roomy.cache().dir().to_string()).unwrap();
        visit(&roomy, "welcome").await;
        visit(&roomy, "long").await;
        // Another tab writes `queued` meanwhile.
        let other = Running::spawn(roomy.open_id("queued", None).await.unwrap());
        other.wait("the other tab", |v| v.live && v.writer).await;

        // Every other session is over this budget.
        let tight = engine(&base, &store, 1).await;
        store.hook.held.store(true, SeqCst);
        let cursor = (roomy.cache().session("long").unwrap().cursor().await)
            .unwrap()
            .seq();
        let anchor = cursor.saturating_sub(400).max(1);
        let long = Running::spawn(tight.open_id("long", Some(anchor)).await.unwrap());
        long.wait("live and restored with the budget held", |v| {
            live_and_storing(v) && v.oldest.is_some_and(|o| o <= anchor)
        })
        .await;
        // Read past the hook, which holds the listing.
        let dir = tight.cache().dir();
        let mut names = store.inner.names(dir).await.unwrap();
        names.sort();
        assert_eq!(
            names,
            ["long", "queued", "welcome"],
            "nothing evicted yet: the budget waits for its scan"
        );

        store.hook.held.store(false, SeqCst);
        // `welcome` goes; `long` is open, `queued` written by the other tab.
        wait_cached(&tight, &["long", "queued"]).await;
        assert!(long.session.with_view(|v| v.live));
        long.close().await;
        other.close().await;
    });
}

/// What a reviewer measured in Chromium (each open waited 194-785 ms for the budget with 300
/// cached sessions), natively: 300 cached sessions, each folder's listing slowed to 2 ms; the
/// time from a warm open to its live stream is printed (`--nocapture`), and the budget still
/// runs. No timed assertion.
#[test]
fn open_to_live_with_300_cached_sessions() {
    local(async {
        let base = TestServer::start(|config| config.sandbox = true).await;
        let store = Arc::new(Scanned::new(MemoryStore::new(), Scan::default()));
        let client = engine(&base, &store, u64::MAX).await;
        let dir = client.cache().dir().to_string();
        store.hook.dir.set(dir.clone()).unwrap();
        visit(&client, "welcome").await;
        let mut bytes = Vec::new();
        for line in transcript(5) {
            bytes.extend_from_slice(line.raw().as_bytes());
            bytes.push(b'\n');
        }
        for i in 0..300 {
            let base = format!("{dir}/s{i}");
            store
                .inner
                .write(&format!("{base}/touch"), b"")
                .await
                .unwrap();
            let chunk = format!("{base}/1-open.raw.jsonl");
            store.inner.write(&chunk, &bytes).await.unwrap();
        }
        store.hook.delay_ms.store(2, SeqCst);
        let mut times = Vec::new();
        for _ in 0..3 {
            store.hook.lists.store(0, SeqCst);
            let start = Instant::now();
            let open = Running::spawn(client.open_id("welcome", None).await.unwrap());
            open.wait("live", |v| v.live).await;
            let live = start.elapsed().as_millis();
            // The budget's scan, done with the last of the 300.
            while store.hook.lists.load(SeqCst) < 300 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let scanned = start.elapsed().as_millis();
            open.close().await;
            times.push(format!("live {live} ms, budget scanned {scanned} ms"));
        }
        println!("warm open, 301 cached sessions, 2 ms a folder listing: {times:?}");
    });
}

/// A write the storage refuses for its quota, at an open (the check's catch-up) or later (an
/// older page), evicts the least recently opened sessions though the cache is far under its
/// budget; never the open one. The next open writes again.
#[test]
fn a_write_refused_for_the_quota_evicts_and_the_next_open_writes() {
    local(async {
        let base = TestServer::start(|config| config.sandbox = true).await;
        let store = Arc::new(MemoryStore::new());
        let client = engine(&base, &store, Config::default().budget_bytes).await;
        visit(&client, "welcome").await;
        visit(&client, "queued").await;
        visit(&client, "fix-build").await;

        // The origin is full, far under the budget: the open's first write is refused.
        store.limit_writes(Some(0));
        let long = Running::spawn(client.open_id("long", None).await.unwrap());
        long.wait("shown, not stored", |v| {
            v.live && v.storage_error.as_deref() == Some("storage quota exceeded")
        })
        .await;
        // The least recently opened go first (at least one). (`long` stored nothing.)
        for _ in 0..6000 {
            if !cached(&client).await.contains(&"welcome".to_string()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let left = cached(&client).await;
        let order = ["welcome", "queued", "fix-build"];
        let first_kept = order.iter().position(|id| left.contains(&id.to_string()));
        let gone = first_kept.unwrap_or(order.len());
        assert!(gone >= 1, "{left:?}");
        for id in &order[gone..] {
            assert!(left.contains(&id.to_string()), "oldest first: {left:?}");
        }
        long.close().await;

        // The room evicting freed (the testing store does not give back what a remove frees,
        // as a real origin does): the next open writes.
        store.limit_writes(None);
        visit(&client, "welcome").await;
        visit(&client, "queued").await;
        let long = Running::spawn(client.open_id("long", None).await.unwrap());
        long.wait("stored again", live_and_storing).await;
        let kept = long.session.cached_size().await;
        assert!(kept > 0);

        // Full again while it is open: an older page is shown, not stored, and what the other
        // sessions hold is halved again.
        let before = cached(&client).await;
        store.limit_writes(Some(0));
        while long.session.with_view(|v| v.storage_error.is_none()) {
            assert!(long.session.older().await.unwrap(), "more history to page");
        }
        for _ in 0..6000 {
            if cached(&client).await.len() < before.len() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let after = cached(&client).await;
        assert!(after.len() < before.len(), "{before:?} -> {after:?}");
        assert!(
            after.contains(&"long".into()),
            "the open one stays: {after:?}"
        );
        long.close().await;
    });
}
