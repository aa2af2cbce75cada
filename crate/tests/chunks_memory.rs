//! The store suite against the in-memory store (with its quota hook), plus what only it can
//! simulate: a wipe.

use scrollback::chunks::Cache;
use scrollback::store::{MemoryStore, Store};
use scrollback::testing::transcript;
use std::sync::Arc;

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

scrollback::store_suite!(async || MemoryStore::new(); limit_writes);

scrollback::async_test!(
    fn a_wipe_gives_misses() {
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
    }
);

scrollback::async_test!(
    fn a_list_that_leaves_out_a_session_being_written_keeps_it() {
        let store = Arc::new(MemoryStore::new());
        let cache = Cache::new(store.clone(), "retain", 1).await;
        let t = transcript(10);
        for id in ["written", "idle"] {
            let mut s = cache.session(id).unwrap();
            for line in &t {
                s.append(line).await;
            }
        }
        // Another tab's view writes "written" (it holds the session's writer role).
        let dir = format!("{}/written", cache.dir());
        let role = store.writer(&dir, false).await.expect("free");
        cache.retain_only(&["other"]).await;
        async fn ids(cache: &Cache<MemoryStore>) -> Vec<String> {
            let sessions = cache.sessions().await.into_iter();
            sessions.filter_map(|s| s.id).collect()
        }
        assert_eq!(ids(&cache).await, ["written"]);
        drop(role);
        cache.retain_only(&["other"]).await;
        assert_eq!(ids(&cache).await, Vec::<String>::new());
    }
);
