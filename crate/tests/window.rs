//! The windowed chat file's suite (`window_suite`) on the in-memory store, natively and in
//! headless Chromium (`scripts/wasm.sh test --release --test window`).

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

#[macro_use]
mod window_suite;

mod memory {
    use scrollback::store::MemoryStore;
    window_cases!(async { ((), MemoryStore::new()) });
}
