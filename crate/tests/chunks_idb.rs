//! The store suite (every `Store` operation, the quota hook, and every chunk-store rule) on
//! IndexedDB, on a page's main thread (where a tab without a worker keeps its cache), each test
//! in its own database.
#![cfg(target_arch = "wasm32")]

use scrollback::store::IdbStore;
use scrollback::testing::unique;

wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

async fn fresh() -> IdbStore {
    IdbStore::open_named(&unique("conformance"))
        .await
        .expect("an IndexedDB database")
}

scrollback::store_suite!(async || fresh().await; limit_writes, clock);
