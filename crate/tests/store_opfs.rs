//! The OPFS backend in a dedicated worker (sync access handles exist only there): every `Store`
//! operation, plus what only a browser can show: a short write from a full disk, storage
//! removed between two operations, a reader in another store instance, a rotation seen by a
//! reader, bounded open handles, the automatic choice, and the writer lock.
#![cfg(target_arch = "wasm32")]

use scrollback::chunks::Cache;
use scrollback::protocol::SessionSummary;
use scrollback::store::{open_store, Backend, OpfsStore, Store, StoreError, WriterLock};
use scrollback::testing::{assert_reads_as_empty, size, unique};
use std::sync::Arc;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_dedicated_worker);

/// The names listed below `dir`, sorted.
async fn names(store: &OpfsStore, dir: &str) -> Vec<String> {
    let mut names: Vec<String> = store
        .list(dir)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    names.sort();
    names
}

async fn fresh(tag: &str) -> OpfsStore {
    OpfsStore::open_in(&format!("test-opfs/{}", unique(tag)))
        .await
        .unwrap()
}

#[wasm_bindgen_test]
async fn auto_choice_in_a_worker_is_opfs() {
    assert!(OpfsStore::available());
    assert_eq!(open_store(Backend::Auto).await.unwrap().name(), "opfs");
    assert_eq!(Backend::parse("IndexedDB"), Some(Backend::IndexedDb));
    assert_eq!(Backend::parse("opfs"), Some(Backend::Opfs));
    assert_eq!(Backend::parse("memory"), Some(Backend::Memory));
    assert_eq!(Backend::parse("floppy"), None);
}

#[wasm_bindgen_test]
async fn a_probe_that_passed_is_noted_and_later_opens_find_the_note() {
    let name = unique("probe");
    // What is at the store's root, seen from the folder above it.
    let above = OpfsStore::open_in("test-opfs").await.unwrap();
    let at_root = || async {
        let entries = above.list(&name).await.unwrap();
        entries.into_iter().map(|e| e.name).collect::<Vec<_>>()
    };
    let dir = format!("test-opfs/{name}");
    let first = OpfsStore::open_in(&dir).await.unwrap();
    assert_eq!(at_root().await, Vec::<String>::new());
    first.check_sync_handles().await.unwrap();
    // The note, and no probe file left behind.
    assert_eq!(at_root().await, [".sync-handles-work"]);
    let again = OpfsStore::open_in(&dir).await.unwrap();
    again.check_sync_handles().await.unwrap();
    assert_eq!(at_root().await, [".sync-handles-work"]);
    // The store works as probed.
    again.append("s/1-open.raw.jsonl", b"one\n").await.unwrap();
    assert_eq!(
        again.read("s/1-open.raw.jsonl", 0, 10).await.unwrap(),
        b"one\n"
    );
}

#[wasm_bindgen_test]
async fn a_second_instance_reads_what_the_writer_holds_open() {
    let dir = format!("test-opfs/{}", unique("reader"));
    let writer = OpfsStore::open_in(&dir).await.unwrap();
    let reader = OpfsStore::open_in(&dir).await.unwrap();
    writer.append("s/1-open.raw.jsonl", b"one\n").await.unwrap();
    writer.append("s/1-open.raw.jsonl", b"two\n").await.unwrap();
    // The writer holds the file's sync handle; the reader goes through getFile().
    assert_eq!(writer.open_handles(), 1);
    assert_eq!(
        reader.read("s/1-open.raw.jsonl", 0, 100).await.unwrap(),
        b"one\ntwo\n"
    );
    assert_eq!(size(&reader, "s/1-open.raw.jsonl").await, 8);
    // Rotation is one move(): the reader finds the old name gone and the new one whole.
    writer
        .rename("s/1-open.raw.jsonl", "s/1-3.raw.jsonl")
        .await
        .unwrap();
    assert!(matches!(
        reader.read("s/1-open.raw.jsonl", 0, 100).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(names(&reader, "s").await, ["1-3.raw.jsonl"]);
    assert_eq!(
        reader.read("s/1-3.raw.jsonl", 0, 100).await.unwrap(),
        b"one\ntwo\n"
    );
    // And a dropped writer leaves the data for a fresh store.
    drop(writer);
    let again = OpfsStore::open_in(&dir).await.unwrap();
    assert_eq!(again.append("s/1-3.raw.jsonl", b"x").await.unwrap(), 9);
}

/// The server's session list, which every tab writes when it lists, is not held: another
/// tab keeps its own list at once, and this one again after it.
#[wasm_bindgen_test]
async fn the_session_list_is_not_held() {
    let dir = format!("test-opfs/{}", unique("list"));
    let one = Arc::new(OpfsStore::open_in(&dir).await.unwrap());
    let two = Arc::new(OpfsStore::open_in(&dir).await.unwrap());
    let summary = |id: &str| SessionSummary {
        id: id.to_string(),
        title: String::new(),
        status: "idle".into(),
        model: String::new(),
        permission_mode: String::new(),
        seq: 1,
    };
    let tab_one = Cache::new(one.clone(), "example.com", 443).await;
    let tab_two = Cache::new(two.clone(), "example.com", 443).await;
    tab_one.remember_list(&[summary("a")]).await;
    // Held, its lock would fail the other's write (after a wait for it), and its list is lost.
    tab_two.remember_list(&[summary("a"), summary("b")]).await;
    assert_eq!(tab_one.remembered_list().await.len(), 2);
    tab_one.remember_list(&[summary("c")]).await;
    assert_eq!(tab_two.remembered_list().await.len(), 1);
    // An appended blob (an open chunk) stays held by its writer.
    one.append("s/1-open.raw.jsonl", b"one\n").await.unwrap();
    assert_eq!(one.open_handles(), 1);
}

/// A rewrite of the session list that the full origin refuses keeps the list before it: a
/// start without network still shows its titles (it once showed bare ids, the list emptied by
/// a rewrite done in place).
#[wasm_bindgen_test]
async fn a_refused_rewrite_keeps_the_remembered_list() {
    let store = Arc::new(fresh("remember").await);
    let cache = Cache::new(store.clone(), "example.com", 443).await;
    let summary = |id: &str| SessionSummary {
        id: id.to_string(),
        title: format!("Title of {id}"),
        status: "idle".into(),
        model: "m".into(),
        permission_mode: "default".into(),
        seq: 10,
    };
    cache.remember_list(&[summary("a"), summary("b")]).await;
    store.limit_writes(Some(20));
    let longer = [summary("a"), summary("b"), summary("c")];
    cache.remember_list(&longer).await;
    store.limit_writes(None);
    let kept = cache.remembered_list().await;
    assert_eq!(kept.len(), 2);
    assert_eq!(kept[1].title, "Title of b");
    cache.remember_list(&longer).await;
    assert_eq!(cache.remembered_list().await.len(), 3);
}

/// A rewrite goes through a hidden sibling moved over the blob: one a crash left behind is
/// never listed and is overwritten by the next rewrite; the blob's sync handle, open from an
/// append, is let go before the move, and what follows (appends, reads, another instance's
/// reads) sees the new file.
#[wasm_bindgen_test]
async fn a_rewrite_leaves_no_sibling_and_no_stale_handle() {
    let dir = format!("test-opfs/{}", unique("rewrite"));
    let store = OpfsStore::open_in(&dir).await.unwrap();
    // What a crash between a sibling's write and its move leaves.
    store.write("s/.~rewrite:sig", b"half of a").await.unwrap();
    store.append("s/sig", b"old record").await.unwrap();
    assert_eq!(store.open_handles(), 2);
    store.close_handles_below("s/.~rewrite:sig");
    assert_eq!(names(&store, "s").await, ["sig"]);
    assert_eq!(store.names("s").await.unwrap(), ["sig"]);
    store.write("s/sig", b"new").await.unwrap();
    assert_eq!(store.open_handles(), 0, "the blob's old handle is let go");
    assert_eq!(store.read("s/sig", 0, 100).await.unwrap(), b"new");
    assert_eq!(store.append("s/sig", b" record").await.unwrap(), 10);
    assert_eq!(store.read("s/sig", 0, 100).await.unwrap(), b"new record");
    store.write("s/sig", b"newer").await.unwrap();
    assert_eq!(store.stat("s/sig").await.unwrap().unwrap().size, 5);
    let other = OpfsStore::open_in(&dir).await.unwrap();
    assert_eq!(other.read("s/sig", 0, 100).await.unwrap(), b"newer");
    // The leftover was overwritten and moved over the blob: it is gone, not only unlisted.
    assert_eq!(other.stat("s/.~rewrite:sig").await.unwrap(), None);
    assert_eq!(names(&other, "s").await, ["sig"]);
}

#[wasm_bindgen_test]
async fn storage_removed_between_operations_reads_as_empty() {
    let top = format!("test-opfs/{}", unique("wiped"));
    let parent = OpfsStore::open_in(&top).await.unwrap();
    let s = OpfsStore::open_in(&format!("{top}/cache")).await.unwrap();
    s.append("v1/h_1/s/1-open.raw.jsonl", b"line\n")
        .await
        .unwrap();
    // While this store holds the file's handle, another context cannot remove it (OPFS
    // locks it); the removal fails cleanly and the store keeps working.
    assert!(parent.remove("cache").await.is_err());
    assert_eq!(
        s.append("v1/h_1/s/1-open.raw.jsonl", b"more\n")
            .await
            .unwrap(),
        10
    );
    // Handles released (as clearing site data does), the tree goes.
    s.close_handles();
    parent.remove("cache").await.unwrap();
    assert_reads_as_empty(&s, &["v1/h_1/s/1-open.raw.jsonl"], "v1/h_1/s").await;
    assert_eq!(s.list("v1").await.unwrap(), vec![]);
    assert!(matches!(
        s.append("v1/h_1/s/1-open.raw.jsonl", b"x").await,
        Err(StoreError::NotFound(_))
    ));
    s.remove("v1/h_1/s").await.unwrap();
    // A store opened afresh (the cold open) works.
    let cold = OpfsStore::open_in(&format!("{top}/cache")).await.unwrap();
    assert_eq!(
        cold.append("v1/h_1/s/1-open.raw.jsonl", b"x")
            .await
            .unwrap(),
        1
    );
}

#[wasm_bindgen_test]
async fn open_handles_stay_bounded() {
    let s = fresh("handles").await;
    for i in 0..40 {
        s.append(&format!("s/{i}"), format!("{i}\n").as_bytes())
            .await
            .unwrap();
        assert!(s.open_handles() <= OpfsStore::MAX_OPEN);
    }
    for i in 0..40 {
        let n = s.append(&format!("s/{i}"), b"again\n").await.unwrap();
        assert_eq!(n, format!("{i}\n").len() as u64 + 6);
    }
    assert_eq!(s.list("s").await.unwrap().len(), 40);
}

#[wasm_bindgen_test]
async fn writer_lock_is_exclusive_and_handed_on() {
    let key = unique("h_1/session");
    let first = WriterLock::try_acquire(&key).await.unwrap().expect("free");
    assert!(WriterLock::try_acquire(&key).await.unwrap().is_none());
    // Another key is independent.
    assert!(WriterLock::try_acquire(&format!("{key}-other"))
        .await
        .unwrap()
        .is_some());
    // A waiter gets it once the holder lets go.
    let waiter = WriterLock::acquire(&key);
    let release = async move {
        scrollback::testing::sleep(30).await;
        drop(first);
    };
    let (lock, ()) = futures::future::join(waiter, release).await;
    let lock = lock.unwrap();
    assert!(lock.name().ends_with(&key));
    assert!(WriterLock::try_acquire(&key).await.unwrap().is_none());
}

/// `names` answers what `list` does, without asking each file its size.
#[wasm_bindgen_test]
async fn names_are_the_listed_names() {
    let store = open_store(Backend::Opfs).await.unwrap();
    let dir = unique("names");
    for path in ["a", "b_1", "c/d"] {
        store.write(&format!("{dir}/{path}"), b"x").await.unwrap();
    }
    let mut names = store.names(&dir).await.unwrap();
    names.sort();
    assert_eq!(names, ["a", "b_1", "c"]);
    assert!(store
        .names(&format!("{dir}/none"))
        .await
        .unwrap()
        .is_empty());
}

#[wasm_bindgen_test]
async fn a_waiter_given_up_before_its_turn_never_holds_the_lock() {
    let key = unique("h_1/given-up");
    let first = WriterLock::try_acquire(&key).await.unwrap().expect("free");
    {
        // A reader waiting for the role, its request queued, then closed (dropped) before the
        // holder lets go.
        let mut waiter = Box::pin(WriterLock::acquire(&key));
        assert!(futures::poll!(waiter.as_mut()).is_pending());
        scrollback::testing::sleep(10).await;
        assert!(futures::poll!(waiter.as_mut()).is_pending());
    }
    first.release().await;
    // The next tab to ask gets the role: nobody holds it. (A request left queued was granted
    // the lock and held it until its worker ended.)
    let next = WriterLock::try_acquire(&key).await.unwrap();
    assert!(next.is_some(), "the lock is free once its holder let go");
}

#[wasm_bindgen_test]
async fn reads_after_a_listing_follow_folders_another_store_replaced() {
    // A listing keeps its subfolders' handles, so that the reads of their blobs that follow (a
    // search lists a server's sessions, then reads each one's index) start from them. Another
    // context may remove such a folder and make it again: the reads must find what is there now.
    let dir = format!("test-opfs/{}", unique("listed-dirs"));
    let reader = OpfsStore::open_in(&dir).await.unwrap();
    let other = OpfsStore::open_in(&dir).await.unwrap();
    other.write("srv/a/x", b"first a").await.unwrap();
    other.write("srv/b/x", b"first b").await.unwrap();
    assert_eq!(names(&reader, "srv").await, ["a", "b"]);
    let (a, b) = futures::join!(
        reader.read("srv/a/x", 0, 100),
        reader.read("srv/b/x", 0, 100)
    );
    assert_eq!(
        (a.unwrap(), b.unwrap()),
        (b"first a".to_vec(), b"first b".to_vec())
    );

    // `a` removed and made again, `b` removed for good, by the other store.
    other.remove("srv/a").await.unwrap();
    other.remove("srv/b").await.unwrap();
    other.write("srv/a/x", b"second a").await.unwrap();
    other.close_handles();
    // A stat starts from the listing's handles too (a search's recheck stats every session).
    let a = reader.stat("srv/a/x").await.unwrap().map(|m| m.size);
    let b = reader.stat("srv/b/x").await.unwrap();
    assert_eq!((a, b), (Some(8), None));
    assert_eq!(reader.read("srv/a/x", 0, 100).await.unwrap(), b"second a");
    assert!(matches!(
        reader.read("srv/b/x", 0, 100).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(size(&reader, "srv/a/x").await, 8);
    assert_eq!(names(&reader, "srv").await, ["a"]);

    // A blob deeper than a folder held is walked to from that folder (not from the root), and
    // from the root again when the folder was replaced under its handle.
    other.write("srv/c/d/x", b"first c").await.unwrap();
    assert_eq!(names(&reader, "srv").await, ["a", "c"]);
    assert_eq!(reader.read("srv/c/d/x", 0, 100).await.unwrap(), b"first c");
    other.remove("srv/c").await.unwrap();
    other.write("srv/c/d/x", b"second c").await.unwrap();
    other.write("srv/c/e/x", b"new e").await.unwrap();
    other.close_handles();
    assert_eq!(reader.read("srv/c/d/x", 0, 100).await.unwrap(), b"second c");
    assert_eq!(reader.read("srv/c/e/x", 0, 100).await.unwrap(), b"new e");
    assert_eq!(names(&reader, "srv/c").await, ["d", "e"]);
    other.remove("srv/c").await.unwrap();
    assert!(reader.stat("srv/c/e/x").await.unwrap().is_none());
    assert!(names(&reader, "srv/c").await.is_empty());
}

#[wasm_bindgen_test]
async fn a_read_after_a_stat_gives_what_the_file_holds_now() {
    // A stat keeps the file's snapshot for the reads that follow (a search stats its sessions'
    // blobs, then reads its hits' lines): a read must still give what the file holds when it
    // reads, whoever changed it since.
    let dir = format!("test-opfs/{}", unique("seen"));
    let reader = OpfsStore::open_in(&dir).await.unwrap();
    let other = OpfsStore::open_in(&dir).await.unwrap();
    other.write("f", b"first version").await.unwrap();
    other.close_handles();
    assert_eq!(size(&reader, "f").await, 13);
    assert_eq!(reader.read("f", 0, 5).await.unwrap(), b"first");
    // Rewritten in place, then cut shorter, by another store: never the old bytes.
    other.write("f", b"SECOND VERSION").await.unwrap();
    other.close_handles();
    assert_eq!(reader.read("f", 0, 6).await.unwrap(), b"SECOND");
    assert_eq!(size(&reader, "f").await, 14);
    other.truncate("f", 3).await.unwrap();
    other.close_handles();
    assert_eq!(reader.read("f", 0, 14).await.unwrap(), b"SEC");
    // Grown: a range past the snapshot reads the new bytes.
    assert_eq!(size(&reader, "f").await, 3);
    other.append("f", b"OND").await.unwrap();
    other.close_handles();
    assert_eq!(reader.read("f", 0, 6).await.unwrap(), b"SECOND");
    // Removed, and made again under the same name.
    assert_eq!(size(&reader, "f").await, 6);
    other.remove("f").await.unwrap();
    assert!(matches!(
        reader.read("f", 0, 3).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(reader.stat("f").await.unwrap().is_none());
    other.write("f", b"new").await.unwrap();
    other.close_handles();
    assert_eq!(reader.read("f", 0, 3).await.unwrap(), b"new");
}
