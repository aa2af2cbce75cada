//! The store suite against the in-memory store (with its quota hook), plus what only it can
//! simulate: a wipe.

use scrollback::chunks::Cache;
use scrollback::store::MemoryStore;
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
