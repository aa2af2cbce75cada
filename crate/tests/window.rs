//! The windowed chat file's suite (`window_suite`) on the in-memory store and, natively, on the
//! filesystem; in a browser also on IndexedDB (`scripts/wasm.sh test --test window`).

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

#[macro_use]
mod window_suite;

mod memory {
    use scrollback::store::MemoryStore;
    window_cases!(async { ((), MemoryStore::new()) });
}

/// In the browser, on IndexedDB: each case in a database of its own (what a page's chat store
/// is; OPFS's sync handles are a worker's, and the JS tests run the chats there).
#[cfg(target_arch = "wasm32")]
mod idb {
    use scrollback::store::IdbStore;
    use scrollback::testing::unique;
    window_cases!(async {
        let store = IdbStore::open_named(&unique("test-window")).await.unwrap();
        ((), store)
    });
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

/// A Tauri async command's future must be `Send`: so must every window call's over `FsStore`.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn window_futures_are_send_for_tauri_commands() {
    use scrollback::store::FsStore;
    use scrollback::window::{
        BackfillRequest, CharsPerToken, Chats, Cursor, PatchOp, PromptBackfill, WriteOptions,
    };
    fn send<T: Send>(_: T) {}
    fn sync<T: Send + Sync>(_: &T) {}
    let chats = Chats::new(FsStore::new("unused"));
    sync(&chats);
    let chat = chats.chat("a.jsonl").unwrap();
    let (c, o) = (Cursor::default(), WriteOptions::default());
    send(chats.named("chats", "a"));
    send(chat.tail(1, true));
    send(chat.before(c, 1));
    send(chat.before_pages(c, 1, 1));
    send(chat.save(c, "{}", &[], o));
    send(chat.patch(c, "{}", &PatchOp::Append { lines: vec![] }, o));
    send(chat.replace("{}", &[], o));
    send(chat.restore_backup());
    send(chat.delete());
    send(chats.list("chats"));
    let backfill = PromptBackfill::new(PromptBackfill::DESKTOP_PAGES);
    sync(&backfill);
    let request = BackfillRequest {
        window: &[],
        cursor: c,
        has_more_before: true,
        budget_tokens: 1,
        page_lines: 1,
        max_pages: 1,
        max_messages: 1,
    };
    send(backfill.collect(&chat, &request, &CharsPerToken(4)));
}
