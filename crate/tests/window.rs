//! The windowed chat file's suite (`window_suite`) on the in-memory store and, natively, on the
//! filesystem; in headless Chromium with `scripts/wasm.sh test --release --test window`.

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

#[macro_use]
mod window_suite;

mod memory {
    use scrollback::store::MemoryStore;
    window_cases!(async { ((), MemoryStore::new()) });
}

/// Each case in its own temporary folder, removed when the case ends.
#[cfg(not(target_arch = "wasm32"))]
mod fs {
    use scrollback::store::FsStore;
    window_cases!(async {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let store = FsStore::new(dir.path());
        (dir, store)
    });
}
