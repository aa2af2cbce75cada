//! The IndexedDB backend, on a page's main thread: every `Store` operation, plus what only a
//! browser can show: buffered appends seen by another connection after `flush`, a quota
//! failure, the database deleted between two operations (and under pending appends), two
//! unlocked writers on one blob losing and doubling nothing, and the automatic choice.
#![cfg(target_arch = "wasm32")]

use scrollback::store::{open_store, Backend, IdbStore, OpfsStore, Store, StoreError, WriterLock};
use scrollback::testing::{assert_reads_as_empty, size, unique};
use std::collections::HashSet;
use wasm_bindgen::JsValue;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
async fn auto_choice_on_a_page_is_indexeddb() {
    assert!(!OpfsStore::available());
    assert_eq!(open_store(Backend::Auto).await.unwrap().name(), "indexeddb");
    assert_eq!(open_store(Backend::Memory).await.unwrap().name(), "memory");
    // OPFS asked for by name on a page, where no sync handle can be had: refused when the
    // store opens, not at its first write.
    assert!(open_store(Backend::Opfs).await.is_err());
}

#[wasm_bindgen_test]
async fn another_connection_sees_appends_after_flush() {
    let name = unique("test-idb-reader");
    let writer = IdbStore::open_named(&name).await.unwrap();
    let reader = IdbStore::open_named(&name).await.unwrap();
    for i in 0..100 {
        writer
            .append("s/1-open.raw.jsonl", format!("{i:04}\n").as_bytes())
            .await
            .unwrap();
    }
    writer.flush().await.unwrap();
    assert_eq!(size(&reader, "s/1-open.raw.jsonl").await, 500);
    assert_eq!(
        reader.read("s/1-open.raw.jsonl", 495, 10).await.unwrap(),
        b"0099\n"
    );
    // Without an explicit flush they are committed within moments, too.
    writer
        .append("s/1-open.raw.jsonl", b"0100\n")
        .await
        .unwrap();
    scrollback::testing::sleep(100).await;
    assert_eq!(size(&reader, "s/1-open.raw.jsonl").await, 505);
    // A rotation (one transaction) as the reader sees it.
    writer
        .rename("s/1-open.raw.jsonl", "s/1-101.raw.jsonl")
        .await
        .unwrap();
    assert!(matches!(
        reader.read("s/1-open.raw.jsonl", 0, 5).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(
        reader.read("s/1-101.raw.jsonl", 0, 5).await.unwrap(),
        b"0000\n"
    );
}

/// Live appends commit a few lines at a time, each commit a piece of the blob's last segment
/// until one fills it and writes it whole (from what the commits before left, not read
/// again): every byte lands where it belongs across record boundaries, a truncate between
/// commits included, as another connection reads it.
#[wasm_bindgen_test]
async fn small_commits_across_records_keep_every_byte() {
    let name = unique("test-idb-commits");
    let writer = IdbStore::open_named(&name).await.unwrap();
    let reader = IdbStore::open_named(&name).await.unwrap();
    let path = "s/1-open.raw.jsonl";
    let mut model = Vec::new();
    for i in 0u32..240 {
        let line = format!("{i:05} {}\n", "x".repeat((i as usize * 37) % 700));
        writer.append(path, line.as_bytes()).await.unwrap();
        model.extend_from_slice(line.as_bytes());
        if i % 3 == 0 {
            scrollback::testing::sleep(6).await; // the delay timer commits what is buffered
        }
        if i == 150 {
            // A truncate between commits: the appends after it continue from the cut.
            let cut = model.len() - 1000;
            writer.truncate(path, cut as u64).await.unwrap();
            model.truncate(cut);
        }
    }
    assert!(model.len() > 3 * 16 * 1024, "crosses several records");
    writer.flush().await.unwrap();
    assert_eq!(reader.read(path, 0, usize::MAX).await.unwrap(), model);
}

/// A streamed reply commits each line on its own. Each commit writes that line's bytes, and a
/// segment's bytes once more when it fills, not the half-full segment again (8 kB a line on
/// average, when each commit rewrote it): what IndexedDB writes, and its log keeps until it
/// compacts, follows what is cached. The commit that fills a segment reads nothing back, with
/// lists and other blobs' writes and renames between the lines (a page of history stored, a
/// chunk closed). Reads, another connection's and after a truncate inside the pieces, answer
/// every byte.
#[wasm_bindgen_test]
async fn a_line_committed_on_its_own_writes_its_own_bytes() {
    let name = unique("test-idb-pieces");
    let writer = IdbStore::open_named(&name).await.unwrap();
    let reader = IdbStore::open_named(&name).await.unwrap();
    let path = "s/1-open.raw.jsonl";
    let mut model = Vec::new();
    for i in 0u32..400 {
        let line = format!("{i:05} {}\n", "y".repeat(100 + (i as usize * 53) % 300));
        writer.append(path, line.as_bytes()).await.unwrap();
        model.extend_from_slice(line.as_bytes());
        // Committed on its own, as a streamed line is (a `stat` commits what is buffered).
        assert_eq!(size(&writer, path).await, model.len() as u64);
        match i % 5 {
            1 => writer
                .write(&format!("s/{i}.page"), b"older")
                .await
                .unwrap(),
            2 => writer
                .rename(&format!("s/{}.page", i - 1), "s/p")
                .await
                .unwrap(),
            3 => assert!(!writer.list("s").await.unwrap().is_empty()),
            _ => {}
        }
        if i % 97 == 0 {
            // Read in the middle of the pieces, from another connection.
            let at = model.len() / 2;
            let got = reader.read(path, at as u64, model.len()).await.unwrap();
            assert_eq!(got, model[at..], "after line {i}");
        }
    }
    assert!(model.len() > 5 * 16 * 1024, "fills several segments");
    assert_eq!(writer.bytes_read(), 0, "a commit read a segment back");
    let put = writer.bytes_put() as usize;
    assert!(
        put <= 2 * model.len() + 16 * 1024,
        "{put} bytes put for {} bytes appended",
        model.len()
    );
    assert_eq!(reader.read(path, 0, usize::MAX).await.unwrap(), model);
    // A cut inside the last segment's pieces, then more lines.
    let cut = model.len() - 700;
    writer.truncate(path, cut as u64).await.unwrap();
    model.truncate(cut);
    for i in 0u32..30 {
        let line = format!("after {i}\n");
        writer.append(path, line.as_bytes()).await.unwrap();
        writer.flush().await.unwrap();
        model.extend_from_slice(line.as_bytes());
    }
    assert_eq!(reader.read(path, 0, usize::MAX).await.unwrap(), model);
    assert_eq!(size(&reader, path).await, model.len() as u64);
    let tail = model.len() - 100;
    assert_eq!(
        reader.read(path, tail as u64, 100).await.unwrap(),
        model[tail..]
    );
}

/// A store that flushes (as a writer does before it gives up the role) forgets what it knew
/// of its blobs (their sizes, their last segments' bytes): the next writer cuts a blob and
/// appends other bytes up to the same size, and the first store's appends after, filling the
/// segment, continue those bytes, not the ones it had written.
#[wasm_bindgen_test]
async fn a_blob_handed_over_is_read_again_by_the_next_commit() {
    let name = unique("test-idb-hand-over");
    let first = IdbStore::open_named(&name).await.unwrap();
    let second = IdbStore::open_named(&name).await.unwrap();
    let path = "s/1-open.raw.jsonl";
    let mut model = vec![b'a'; 5_000];
    first.append(path, &model).await.unwrap();
    first.flush().await.unwrap();
    first.hand_over("s").await;
    // The next writer: the same size, other bytes at the end.
    second.truncate(path, 4_000).await.unwrap();
    second.append(path, &[b'b'; 1_000]).await.unwrap();
    second.flush().await.unwrap();
    second.hand_over("s").await;
    model[4_000..].fill(b'b');
    // The first store writes again, through the segment's end.
    let more = vec![b'c'; 20_000];
    first.append(path, &more).await.unwrap();
    first.flush().await.unwrap();
    model.extend_from_slice(&more);
    assert_eq!(second.read(path, 0, usize::MAX).await.unwrap(), model);
}

/// A blob as the layout before pieces left it (a record per segment, the last one partial),
/// written straight into the database: it reads as it was, and appends, committed one at a time
/// and through the segment's end, and a truncate continue it byte for byte.
#[wasm_bindgen_test]
async fn a_blob_of_the_layout_before_pieces_reads_and_grows() {
    let name = unique("test-idb-old-layout");
    drop(IdbStore::open_named(&name).await.unwrap()); // (its object stores made)
    let path = "s/1-open.raw.jsonl";
    let mut model: Vec<u8> = (0..16 * 1024 + 5_000)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    // Blob 1000000: `meta` gives its id, size and stamp; `seg` a full record and a partial one.
    let write_old = js_sys::Function::new_with_args(
        "name, path, bytes",
        r#"return new Promise((resolve, reject) => {
          const open = indexedDB.open(name);
          open.onerror = () => reject(open.error);
          open.onsuccess = () => {
            const db = open.result;
            const tx = db.transaction(['meta', 'seg'], 'readwrite');
            tx.objectStore('meta').put([1000000, bytes.length, 1000], path);
            tx.objectStore('seg').put(bytes.slice(0, 16384), [1000000, 0]);
            tx.objectStore('seg').put(bytes.slice(16384), [1000000, 1]);
            tx.oncomplete = () => { db.close(); resolve(); };
            tx.onerror = () => reject(tx.error);
          };
        })"#,
    );
    let bytes = js_sys::Uint8Array::from(model.as_slice());
    let written = write_old
        .call3(&JsValue::NULL, &name.as_str().into(), &path.into(), &bytes)
        .unwrap();
    wasm_bindgen_futures::JsFuture::from(js_sys::Promise::from(written))
        .await
        .unwrap();
    let s = IdbStore::open_named(&name).await.unwrap();
    assert_eq!(s.read(path, 0, usize::MAX).await.unwrap(), model);
    for i in 0u32..60 {
        let line = format!("{i:04} {}\n", "z".repeat(300));
        s.append(path, line.as_bytes()).await.unwrap();
        s.flush().await.unwrap();
        model.extend_from_slice(line.as_bytes());
    }
    assert!(model.len() > 2 * 16 * 1024, "the old partial record filled");
    let reader = IdbStore::open_named(&name).await.unwrap();
    assert_eq!(reader.read(path, 0, usize::MAX).await.unwrap(), model);
    let cut = model.len() - 500;
    s.truncate(path, cut as u64).await.unwrap();
    model.truncate(cut);
    s.append(path, b"last\n").await.unwrap();
    s.flush().await.unwrap();
    model.extend_from_slice(b"last\n");
    assert_eq!(reader.read(path, 0, usize::MAX).await.unwrap(), model);
}

#[wasm_bindgen_test]
async fn database_deleted_between_operations_reads_as_empty() {
    let name = unique("test-idb-wiped");
    let s = IdbStore::open_named(&name).await.unwrap();
    s.write("v1/h_1/s/1-9.raw.jsonl", b"page\n").await.unwrap();
    s.append("v1/h_1/s/9-open.raw.jsonl", b"line\n")
        .await
        .unwrap();
    s.flush().await.unwrap();
    IdbStore::delete_database(&name).await.unwrap();
    let blobs = ["v1/h_1/s/1-9.raw.jsonl", "v1/h_1/s/9-open.raw.jsonl"];
    assert_reads_as_empty(&s, &blobs, "v1/h_1/s").await;
    // The next write starts the cache over (a cold open).
    assert_eq!(
        s.append("v1/h_1/s/20-open.raw.jsonl", b"x").await.unwrap(),
        1
    );
    s.flush().await.unwrap();
    assert_eq!(s.list("v1/h_1/s").await.unwrap().len(), 1);
}

#[wasm_bindgen_test]
async fn database_deleted_under_pending_appends_is_reported_not_panicked() {
    let name = unique("test-idb-pending");
    let s = IdbStore::open_named(&name).await.unwrap();
    s.append("s/open", &[b'a'; 300_000]).await.unwrap(); // past FLUSH_AT: committed
    s.append("s/open", b"pending\n").await.unwrap(); // buffered
    IdbStore::delete_database(&name).await.unwrap();
    // The buffered bytes either went before the deletion (and went with it) or their commit
    // finds the blob gone and is reported: never a blob missing its start, never a panic.
    let reported = s.flush().await;
    assert_eq!(s.stat("s/open").await.unwrap(), None, "{reported:?}");
    s.flush().await.unwrap();
    // A failed commit is kept for the blob's writer too: its next append learns the blob
    // lost what it appended; the one after starts the blob over.
    let mut fresh = s.append("s/open", b"fresh\n").await;
    if reported.is_err() {
        assert!(fresh.is_err(), "{fresh:?}");
        fresh = s.append("s/open", b"fresh\n").await;
    }
    assert_eq!(fresh.unwrap(), 6);
}

#[wasm_bindgen_test]
async fn two_unlocked_writers_double_nothing() {
    // Without the writer lock, two connections appending to one blob: the second commit sees
    // the blob changed under it and is refused whole, rather than interleaving or doubling.
    let name = unique("test-idb-two");
    let a = IdbStore::open_named(&name).await.unwrap();
    let b = IdbStore::open_named(&name).await.unwrap();
    assert_eq!(a.append("s/open", b"from a\n").await.unwrap(), 7);
    assert_eq!(b.append("s/open", b"from b\n").await.unwrap(), 7);
    let (ra, rb) = futures::future::join(a.flush(), b.flush()).await;
    assert!(
        ra.is_ok() != rb.is_ok(),
        "exactly one commit wins: {ra:?} {rb:?}"
    );
    let content = a.read("s/open", 0, 100).await.unwrap();
    assert!(
        content == b"from a\n" || content == b"from b\n",
        "{content:?}"
    );
}

#[wasm_bindgen_test]
async fn a_failed_commit_is_reported_by_the_next_rename() {
    // A chunk is closed by a rename: if its last buffered appends failed to commit, the rename
    // must fail too, or the chunk would be named for lines it does not hold.
    let name = unique("test-idb-rename");
    let a = IdbStore::open_named(&name).await.unwrap();
    let b = IdbStore::open_named(&name).await.unwrap();
    assert_eq!(a.append("s/1-open", b"one\n").await.unwrap(), 4);
    // Its delayed commit done (seen from the other connection), `a` knows the blob as 4 bytes.
    while b.stat("s/1-open").await.unwrap().map(|m| m.size) != Some(4) {
        scrollback::testing::sleep(1).await;
    }
    b.write("s/1-open", b"another writer\n").await.unwrap();
    assert_eq!(a.append("s/1-open", b"two\n").await.unwrap(), 8); // buffered
    let renamed = a.rename("s/1-open", "s/1-3").await;
    assert!(
        matches!(renamed, Err(StoreError::Contended(_))),
        "the failed commit is reported, as another writer's doing: {renamed:?}"
    );
    assert_eq!(a.stat("s/1-3").await.unwrap(), None, "nothing renamed");
    assert_eq!(
        a.read("s/1-open", 0, 100).await.unwrap(),
        b"another writer\n"
    );
}

/// A flush (another session's hand-over, the idle build, a worker closing) reports a failed
/// commit once and keeps it for its blob: the chunk's close still refuses to name it for
/// lines it does not hold.
#[wasm_bindgen_test]
async fn a_failed_commit_outlives_a_flush_that_reported_it() {
    let name = unique("test-idb-flush");
    let a = IdbStore::open_named(&name).await.unwrap();
    let b = IdbStore::open_named(&name).await.unwrap();
    assert_eq!(a.append("s/1-open", b"one\n").await.unwrap(), 4);
    while b.stat("s/1-open").await.unwrap().map(|m| m.size) != Some(4) {
        scrollback::testing::sleep(1).await;
    }
    b.write("s/1-open", b"another writer\n").await.unwrap();
    assert_eq!(a.append("s/1-open", b"two\n").await.unwrap(), 8); // buffered
    a.append("t/1-open", b"fine\n").await.unwrap();
    assert!(a.flush().await.is_err(), "the failed commit is reported");
    assert!(a.flush().await.is_ok(), "once");
    let renamed = a.rename("s/1-open", "s/1-3").await;
    assert!(renamed.is_err(), "and kept for its blob: {renamed:?}");
    assert_eq!(a.stat("s/1-3").await.unwrap(), None, "nothing renamed");
    assert_eq!(a.read("t/1-open", 0, 100).await.unwrap(), b"fine\n");
    // Given up with the writer role (the next writer reads the disk again), a failure is no
    // one's to report: the blob is written again from what it holds.
    assert_eq!(a.append("s/1-open", b"x\n").await.unwrap(), 17);
    while b.stat("s/1-open").await.unwrap().map(|m| m.size) != Some(17) {
        scrollback::testing::sleep(1).await;
    }
    b.write("s/1-open", b"b again\n").await.unwrap();
    a.append("s/1-open", b"lost\n").await.unwrap(); // buffered on the size it knew
    assert!(a.flush().await.is_err(), "its commit fails");
    a.hand_over("s").await;
    assert_eq!(a.append("s/1-open", b"again\n").await.unwrap(), 14);
    a.flush().await.unwrap();
    assert_eq!(
        a.read("s/1-open", 0, 100).await.unwrap(),
        b"b again\nagain\n"
    );
}

/// The roles held below a folder are the Web Locks any tab holds (or asks for) there, one
/// level down: what a search pack's build asks, in one query, before it trusts a session's record.
#[wasm_bindgen_test]
async fn the_roles_held_below_a_folder_are_the_web_locks_held_there() {
    let store = open_store(Backend::IndexedDb).await.unwrap();
    let dir = unique("held");
    let key = |name: &str| format!("{dir}/{name}");
    let a = store.writer(&key("a"), false).await.expect("free");
    let _deeper = store.writer(&key("b/c"), false).await.expect("free");
    let gone = store.writer(&key("d"), false).await.expect("free");
    drop(gone);
    let held = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<HashSet<_>>();
    // A lock let go is released a moment later, by the browser.
    let mut now = store.writers_held(&dir).await.expect("Web Locks tell");
    while now.contains("d") {
        scrollback::testing::sleep(5).await;
        now = store.writers_held(&dir).await.unwrap();
    }
    assert_eq!(now, held(&["a"]));
    let _elsewhere = store.writer(&format!("{dir}-other/f"), false).await;
    assert_eq!(store.writers_held(&dir).await.unwrap(), held(&["a"]));
    drop(a);
}

#[wasm_bindgen_test]
async fn writer_lock_works_on_a_page() {
    let key = unique("h_1/page-session");
    let lock = WriterLock::try_acquire(&key).await.unwrap().expect("free");
    assert!(WriterLock::try_acquire(&key).await.unwrap().is_none());
    lock.release().await;
    assert!(WriterLock::try_acquire(&key).await.unwrap().is_some());
}

#[wasm_bindgen_test]
async fn reads_issued_together_each_get_their_own_bytes() {
    // Reads issued at once share one read transaction: each still answers its own blob,
    // range and missing blob.
    let store = IdbStore::open_named(&unique("test-idb-together"))
        .await
        .unwrap();
    for i in 0..40 {
        let text = format!("blob {i} ").repeat(3000); // two to three segment records
        store
            .write(&format!("s/{i}"), text.as_bytes())
            .await
            .unwrap();
    }
    let reads = (0..41).map(|i| {
        let store = &store;
        async move { (i, store.read(&format!("s/{i}"), 16_000, 40).await) }
    });
    for (i, read) in futures::future::join_all(reads).await {
        match read {
            Ok(bytes) => {
                let text = format!("blob {i} ").repeat(3000);
                assert_eq!(bytes, &text.as_bytes()[16_000..16_040], "blob {i}");
            }
            Err(StoreError::NotFound(_)) => assert_eq!(i, 40),
            Err(e) => panic!("blob {i}: {e}"),
        }
    }
}

#[wasm_bindgen_test]
async fn a_write_is_not_held_back_by_reads_that_keep_coming() {
    // A read-write transaction waits for every read-only one begun before it. Reads that kept
    // joining one shared read transaction would hold a write back for as long as they came;
    // reads issued after a write began take a new one, queued behind the write.
    let store = IdbStore::open_named(&unique("test-idb-starve"))
        .await
        .unwrap();
    store.write("s/a", b"one").await.unwrap();
    let reads = std::cell::Cell::new(0);
    let written_after = std::cell::Cell::new(None);
    let reader = async {
        for _ in 0..300 {
            let bytes = store.read("s/a", 0, 3).await.unwrap();
            if written_after.get().is_some() {
                assert_eq!(bytes, b"two", "a read after the write completed");
            }
            reads.set(reads.get() + 1);
        }
    };
    let writer = async {
        store.write("s/a", b"two").await.unwrap();
        written_after.set(Some(reads.get()));
    };
    futures::join!(reader, writer);
    let after = written_after.get().expect("written");
    assert!(after < 300, "the write waited for all {after} reads");
    assert_eq!(store.read("s/a", 0, 3).await.unwrap(), b"two");
}

#[wasm_bindgen_test]
async fn reads_right_after_a_listing_answer_what_is_there() {
    // A listing keeps the records it read with its read transaction, and the reads that ride
    // that transaction (a search reads every session's index just after listing them) take
    // their blob's record from it: they must answer exactly what a read on its own does,
    // including what another connection or this store wrote since.
    let name = unique("test-idb-listed");
    let store = IdbStore::open_named(&name).await.unwrap();
    let other = IdbStore::open_named(&name).await.unwrap();
    let long: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    store.write("srv/a/x", &long).await.unwrap();
    store.write("srv/a/y", b"why").await.unwrap();
    store.write("srv/b/z", b"zed").await.unwrap();
    store.write("srvx/w", b"outside").await.unwrap();
    let read_all = || async {
        let entries = store.list("srv").await.unwrap();
        assert_eq!(entries.len(), 2, "{entries:?}");
        // Issued together, at once after the listing, as a search does.
        let (x, x_end, x_mid, y, z, gone, outside) = futures::join!(
            store.read("srv/a/x", 0, usize::MAX),
            store.read_end("srv/a/x", 100),
            store.read("srv/a/x", 16_000, 500),
            store.read("srv/a/y", 0, 10),
            store.read("srv/b/z", 1, 2),
            store.read("srv/a/none", 0, 10),
            store.read("srvx/w", 0, 7),
        );
        (
            x.unwrap(),
            x_end.unwrap(),
            x_mid.unwrap(),
            y.unwrap(),
            z.unwrap(),
            gone,
            outside.unwrap(),
        )
    };
    let (x, (x_size, x_end), x_mid, y, z, gone, outside) = read_all().await;
    assert_eq!(x, long);
    assert_eq!((x_size, x_end.as_slice()), (40_000, &long[39_900..]));
    assert_eq!(x_mid, &long[16_000..16_500]);
    assert_eq!((y.as_slice(), z.as_slice()), (&b"why"[..], &b"ed"[..]));
    assert!(matches!(gone, Err(StoreError::NotFound(_))), "{gone:?}");
    assert_eq!(outside, b"outside");

    // Another connection changes a blob and removes one: the next listing and its reads see it.
    other.append("srv/a/y", b" not").await.unwrap();
    other.flush().await.unwrap();
    other.remove("srv/b/z").await.unwrap();
    store.list("srv").await.unwrap();
    let (y, z) = futures::join!(store.read("srv/a/y", 0, 10), store.read("srv/b/z", 0, 3));
    assert_eq!(y.unwrap(), b"why not");
    assert!(matches!(z, Err(StoreError::NotFound(_))), "{z:?}");

    // This store's own appends, still buffered when the reads come, are read too.
    store.list("srv").await.unwrap();
    store.append("srv/a/y", b"?").await.unwrap();
    store.append("srv/a/new", b"fresh").await.unwrap();
    let (y, new) = futures::join!(store.read("srv/a/y", 0, 10), store.read("srv/a/new", 0, 5));
    assert_eq!(
        (y.unwrap(), new.unwrap()),
        (b"why not?".to_vec(), b"fresh".to_vec())
    );

    // And a read long after the listing (its transaction over) asks again.
    store.list("srv").await.unwrap();
    scrollback::testing::sleep(50).await;
    other.write("srv/a/y", b"later").await.unwrap();
    other.write("srv/a/brand-new", b"made since").await.unwrap();
    other.write("srv/a/emptied", b"").await.unwrap();
    assert_eq!(store.read("srv/a/y", 0, 10).await.unwrap(), b"later");
    // Nor does it take a blob the listing did not see for missing, or an empty one's size.
    assert_eq!(
        store.read("srv/a/brand-new", 0, 20).await.unwrap(),
        b"made since"
    );
    store.list("srv").await.unwrap();
    scrollback::testing::sleep(50).await;
    other.write("srv/a/emptied", b"full").await.unwrap();
    assert_eq!(
        store.read_end("srv/a/emptied", 0).await.unwrap(),
        (4, Vec::new())
    );
}

/// Locks asked for and given back leave nothing of theirs in the module: no JS object it still
/// holds (a closure the lock API never calls, and the functions it captured), however many are
/// asked for (a chat's every save takes one; a session's every open and reader wait do too).
#[wasm_bindgen_test]
async fn writer_locks_asked_for_leave_nothing_behind() {
    let key = unique("h_1/many-locks");
    let round = || async {
        let lock = WriterLock::try_acquire(&key).await.unwrap().expect("free");
        assert!(
            WriterLock::try_acquire(&key).await.unwrap().is_none(),
            "held"
        );
        // One that waits for it, given up before it comes (a reader's view closed).
        let waiting = Box::pin(WriterLock::acquire(&key));
        let gave_up =
            futures::future::select(waiting, Box::pin(scrollback::testing::sleep(1))).await;
        assert!(
            matches!(gave_up, futures::future::Either::Right(_)),
            "still held"
        );
        drop(gave_up);
        lock.release().await;
    };
    round().await;
    let before = wasm_bindgen::externref_heap_live_count();
    for _ in 0..50 {
        round().await;
    }
    let after = wasm_bindgen::externref_heap_live_count();
    assert!(
        after <= before + 2,
        "{} JS objects left behind by 50 rounds",
        after - before
    );
}
