//! `storage: 'auto'` in a dedicated worker, in every engine: it picks OPFS exactly where a sync
//! access handle really opens (Chromium, Firefox), and IndexedDB where the method exists but
//! throws (WebKitGTK: NotSupportedError), and the chosen store works. Asking for OPFS by name
//! where sync handles do not work is an error at open, not at the first write.
#![cfg(target_arch = "wasm32")]

use scrollback::store::{open_store, Backend, Store};
use scrollback::testing::unique;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;
use web_sys::{
    FileSystemDirectoryHandle, FileSystemFileHandle, FileSystemGetFileOptions,
    FileSystemSyncAccessHandle, StorageManager,
};

wasm_bindgen_test_configure!(run_in_dedicated_worker);

/// Whether a sync access handle opens here, tried directly on a file of the test's own.
async fn sync_handles_work() -> bool {
    let navigator = js_sys::Reflect::get(&js_sys::global(), &"navigator".into()).unwrap();
    let storage: StorageManager = js_sys::Reflect::get(&navigator, &"storage".into())
        .unwrap()
        .unchecked_into();
    let root: FileSystemDirectoryHandle = match JsFuture::from(storage.get_directory()).await {
        Ok(d) => d.unchecked_into(),
        Err(_) => return false,
    };
    let name = unique("auto-probe");
    let opts = FileSystemGetFileOptions::new();
    opts.set_create(true);
    let file: FileSystemFileHandle =
        JsFuture::from(root.get_file_handle_with_options(&name, &opts))
            .await
            .unwrap()
            .unchecked_into();
    let opened = JsFuture::from(file.create_sync_access_handle()).await;
    if let Ok(h) = &opened {
        h.unchecked_ref::<FileSystemSyncAccessHandle>().close();
    }
    JsFuture::from(root.remove_entry(&name)).await.unwrap();
    opened.is_ok()
}

#[wasm_bindgen_test]
async fn auto_picks_opfs_only_where_sync_handles_open() {
    let works = sync_handles_work().await;
    let store = open_store(Backend::Auto).await.unwrap();
    let expected = if works { "opfs" } else { "indexeddb" };
    assert_eq!(store.name(), expected, "sync handles work here: {works}");
    // The chosen store holds what is written to it.
    let path = format!("{}/1-open.raw.jsonl", unique("auto"));
    assert_eq!(store.append(&path, b"one\n").await.unwrap(), 4);
    assert_eq!(store.append(&path, b"two\n").await.unwrap(), 8);
    assert_eq!(store.read(&path, 0, 100).await.unwrap(), b"one\ntwo\n");
    store.remove(&path).await.unwrap();
}

#[wasm_bindgen_test]
async fn opfs_by_name_fails_at_open_where_sync_handles_do_not_open() {
    let works = sync_handles_work().await;
    let opened = open_store(Backend::Opfs).await;
    if works {
        assert_eq!(opened.unwrap().name(), "opfs");
    } else {
        let err = opened.unwrap_err().to_string();
        assert!(err.contains("sync access handles"), "{err}");
    }
}
