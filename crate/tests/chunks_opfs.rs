//! The chunk-store conformance suite on OPFS, in a dedicated worker (sync access handles exist
//! only there), each test in its own directory of the origin's file system.
#![cfg(target_arch = "wasm32")]

use scrollback::store::OpfsStore;

wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_dedicated_worker);

async fn fresh() -> OpfsStore {
    let dir = format!(
        "conformance/{}-{}",
        js_sys::Date::now() as u64,
        (js_sys::Math::random() * 1e9) as u64
    );
    OpfsStore::open_in(&dir).await.expect("an OPFS directory")
}

scrollback::chunk_store_suite!(async || fresh().await);
