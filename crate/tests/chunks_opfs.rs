//! The store suite (every `Store` operation, the quota hook, and every chunk-store rule) on
//! OPFS, in a dedicated worker (sync access handles exist only there), each test in its own
//! directory of the origin's file system.
#![cfg(target_arch = "wasm32")]

use scrollback::store::OpfsStore;
use scrollback::testing::unique;

wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_dedicated_worker);

async fn fresh() -> OpfsStore {
    OpfsStore::open_in(&format!("conformance/{}", unique("store")))
        .await
        .expect("an OPFS directory")
}

scrollback::store_suite!(async || fresh().await; limit_writes, clock);
