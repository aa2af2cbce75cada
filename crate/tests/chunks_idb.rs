//! The chunk-store conformance suite on IndexedDB, on a page's main thread (where a tab without
//! a worker keeps its cache), each test in its own database.
#![cfg(target_arch = "wasm32")]

use scrollback::store::IdbStore;

wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

async fn fresh() -> IdbStore {
    let name = format!(
        "conformance-{}-{}",
        js_sys::Date::now() as u64,
        (js_sys::Math::random() * 1e9) as u64
    );
    IdbStore::open_named(&name)
        .await
        .expect("an IndexedDB database")
}

scrollback::chunk_store_suite!(async || fresh().await);
