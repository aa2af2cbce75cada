//! The conformance suite against the in-memory store, plus what only it can simulate: a quota
//! and a wipe.

use scrollback::chunks::conformance::{seqs, transcript};
use scrollback::chunks::Cache;
use scrollback::protocol::coalesce;
use scrollback::store::MemoryStore;
use std::sync::Arc;

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

scrollback::chunk_store_suite!(async || MemoryStore::new());

#[cfg(not(target_arch = "wasm32"))]
use pollster::block_on;

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn a_full_quota_stops_writing_and_loses_nothing_shown() {
    block_on(async {
        let store = Arc::new(MemoryStore::new());
        let cache = Cache::new(store.clone(), "quota", 1).await;
        let t = transcript(200);
        let mut s = cache.session("s").unwrap();
        for line in &t[100..150] {
            s.append(line).await;
        }
        let shown = s.newest(30).await.unwrap();
        store.set_quota(Some(cache.session_size("s").await + 3 * 1024));
        for line in &t[150..] {
            s.append(line).await;
        }
        assert!(!s.is_writing(), "a write failed and writing stopped");
        let cursor = s.cursor().await.unwrap().seq();
        assert!(
            (151..200).contains(&cursor),
            "some lines fit, then none: {cursor}"
        );
        // What was shown is still served, and what fit is whole.
        assert_eq!(s.page(151, 30, false).await.unwrap().lines, shown);
        let mut fresh = cache.session("s").unwrap();
        let all = fresh.newest(1000).await.unwrap();
        assert_eq!(seqs(&all), (101..=cursor).collect::<Vec<_>>());
        // A page arriving now is shown by the caller but not stored.
        assert!(!s.store_page(&coalesce(&t[..100]), 101, true).await);
        store.set_quota(None);
        assert!(
            !s.store_page(&coalesce(&t[..100]), 101, true).await,
            "this instance stays off"
        );
        assert!(
            fresh.store_page(&coalesce(&t[..100]), 101, true).await,
            "a new one writes"
        );
    });
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn a_quota_hit_by_a_page_stops_writing() {
    block_on(async {
        let store = Arc::new(MemoryStore::new());
        let cache = Cache::new(store.clone(), "quota-page", 1).await;
        let t = transcript(100);
        let mut s = cache.session("s").unwrap();
        for line in &t[50..] {
            s.append(line).await;
        }
        store.set_quota(Some(cache.session_size("s").await + 100));
        assert!(!s.store_page(&t[..50], 51, false).await);
        assert!(!s.is_writing());
        assert_eq!(s.newest(100).await.map(|l| l.len()), Some(50));
        assert_eq!(s.page(51, 10, false).await, None, "the page was not stored");
    });
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn a_wipe_gives_misses() {
    block_on(async {
        let store = Arc::new(MemoryStore::new());
        let cache = Cache::new(store.clone(), "wipe", 1).await;
        let t = transcript(60);
        let mut s = cache.session("s").unwrap();
        for line in &t[..50] {
            s.append(line).await;
        }
        assert_eq!(s.newest(5).await.map(|l| l.len()), Some(5));
        store.wipe();
        assert_eq!(s.newest(5).await, None);
        assert_eq!(s.page(30, 5, true).await, None);
        s.append(&t[50]).await;
        assert_eq!(cache.sessions().await, Vec::new());
        let mut fresh = cache.session("s").unwrap();
        assert_eq!(fresh.cursor().await, None);
    });
}
