//! The storage trait's operations, as every backend must answer them (each check on a fresh
//! store of its own).

use super::{Lcg, LimitWrites};
use crate::store::{Entry, Store, StoreError};
use std::sync::Arc;

fn sorted(mut v: Vec<Entry>) -> Vec<(String, bool, u64)> {
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v.into_iter().map(|e| (e.name, e.is_dir, e.size)).collect()
}

/// Whole writes replace; reads take byte ranges and stop at the end; stat gives size and stamp;
/// list shows blobs (with sizes and stamps) and folders, and a missing folder lists empty.
pub async fn list_stat_read_write<S: Store>(s: Arc<S>) {
    assert_eq!(s.list("t").await.unwrap(), vec![]);
    assert_eq!(s.stat("t/a").await.unwrap(), None);
    assert!(matches!(
        s.read("t/a", 0, 10).await,
        Err(StoreError::NotFound(_))
    ));

    s.write("t/a", b"hello world").await.unwrap();
    s.write("t/d/b", b"xyz").await.unwrap();
    s.write("t/d/e/c", b"").await.unwrap();
    s.write("tx/other", b"not below t").await.unwrap();
    assert_eq!(s.stat("t/a").await.unwrap().unwrap().size, 11);
    assert_eq!(s.stat("t/d").await.unwrap(), None, "a folder is no blob");
    assert_eq!(
        sorted(s.list("t").await.unwrap()),
        vec![("a".into(), false, 11), ("d".into(), true, 0)]
    );
    assert_eq!(
        sorted(s.list("t/d").await.unwrap()),
        vec![("b".into(), false, 3), ("e".into(), true, 0)]
    );
    let a = s
        .list("t")
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.name == "a")
        .unwrap();
    assert_eq!(a.modified, s.stat("t/a").await.unwrap().unwrap().modified);
    assert!(a.modified > 0);

    assert_eq!(s.read("t/a", 0, 5).await.unwrap(), b"hello");
    assert_eq!(s.read("t/a", 6, 100).await.unwrap(), b"world");
    assert_eq!(s.read("t/a", 11, 5).await.unwrap(), b"");
    assert_eq!(s.read("t/a", 500, 5).await.unwrap(), b"");
    assert_eq!(s.read("t/d/e/c", 0, 5).await.unwrap(), b"");
    // A blob's end with its size, in one step; all of it when it is smaller.
    assert_eq!(s.read_end("t/a", 5).await.unwrap(), (11, b"world".to_vec()));
    assert_eq!(
        s.read_end("t/a", 100).await.unwrap(),
        (11, b"hello world".to_vec())
    );
    assert_eq!(s.read_end("t/d/e/c", 5).await.unwrap(), (0, Vec::new()));
    // Several reads at once: each as a read alone answers it, in order.
    let many = [
        ("t/a", 6, 5),
        ("t/d/b", 1, 100),
        ("t/none", 0, 5),
        ("t/a", 0, 5),
        ("t/a", 500, 5),
        ("t/d/e/c", 0, 5),
    ];
    let got = s.read_many(&many).await;
    assert_eq!(got.len(), many.len());
    for (&(path, offset, len), got) in many.iter().zip(got) {
        match s.read(path, offset, len).await {
            Ok(bytes) => assert_eq!(got.unwrap(), bytes, "{path} at {offset}"),
            Err(_) => assert!(matches!(got, Err(StoreError::NotFound(_))), "{path}"),
        }
    }
    assert!(s.read_many(&[]).await.is_empty());
    let mut names = s.names("t").await.unwrap();
    names.sort();
    assert_eq!(names, ["a", "d"], "list's names");
    assert!(matches!(
        s.read_end("t/none", 5).await,
        Err(StoreError::NotFound(_))
    ));

    // Replacing with something shorter leaves nothing of the old blob.
    s.write("t/a", b"hi").await.unwrap();
    assert_eq!(s.read("t/a", 0, 100).await.unwrap(), b"hi");
    assert_eq!(s.stat("t/a").await.unwrap().unwrap().size, 2);
    // A large whole write, across many segments.
    let big = Lcg(7).bytes(100_000);
    s.write("t/big", &big).await.unwrap();
    assert_eq!(s.read("t/big", 0, usize::MAX).await.unwrap(), big);
    assert_eq!(
        s.read("t/big", 40_000, 30_000).await.unwrap(),
        &big[40_000..70_000]
    );
    assert_eq!(
        s.read_end("t/big", 30_000).await.unwrap(),
        (100_000, big[70_000..].to_vec())
    );
}

/// Appends create the blob, grow it and return its new size, in order, across sizes that cross
/// a backend's segments and flush points.
pub async fn append_matches_model<S: Store>(s: Arc<S>) {
    let mut model = Vec::new();
    let mut rng = Lcg(42);
    for i in 0..400 {
        // Mostly line-sized, sometimes large enough to cross segments and flush points.
        let n = if i % 50 == 49 {
            40_000
        } else {
            1 + rng.below(1_500) as usize
        };
        let bytes = rng.bytes(n);
        model.extend_from_slice(&bytes);
        let size = s.append("t/s/open", &bytes).await.unwrap();
        assert_eq!(size, model.len() as u64, "size after append {i}");
    }
    assert_eq!(
        s.stat("t/s/open").await.unwrap().unwrap().size,
        model.len() as u64
    );
    assert_eq!(s.read("t/s/open", 0, usize::MAX).await.unwrap(), model);
    for _ in 0..30 {
        let at = rng.below(model.len() as u64 + 10);
        let len = rng.below(70_000) as usize;
        let start = (at as usize).min(model.len());
        let end = start.saturating_add(len).min(model.len());
        assert_eq!(
            s.read("t/s/open", at, len).await.unwrap(),
            &model[start..end]
        );
    }
    // Appending after a read and a stat continues where the blob ends, and the blob's end
    // read right after holds it (an append a backend still buffers included).
    model.extend_from_slice(b"tail\n");
    assert_eq!(
        s.append("t/s/open", b"tail\n").await.unwrap(),
        model.len() as u64
    );
    for len in [5, 1, 40_000] {
        let (size, end) = s.read_end("t/s/open", len).await.unwrap();
        assert_eq!(size, model.len() as u64);
        assert_eq!(end, &model[model.len() - len..]);
    }
    s.flush().await.unwrap();
    let end = model.len() as u64;
    assert_eq!(s.read("t/s/open", end - 5, 5).await.unwrap(), b"tail\n");
    // An empty append changes nothing and creates the blob if missing.
    assert_eq!(s.append("t/s/open", b"").await.unwrap(), end);
    assert_eq!(s.append("t/s/empty", b"").await.unwrap(), 0);
    assert_eq!(s.stat("t/s/empty").await.unwrap().unwrap().size, 0);
}

/// Truncate cuts a blob (never grows it) and appends continue at the cut; a missing blob is
/// `NotFound`.
pub async fn truncate_cuts<S: Store>(s: Arc<S>) {
    assert!(matches!(
        s.truncate("t/none", 0).await,
        Err(StoreError::NotFound(_))
    ));
    let bytes = Lcg(3).bytes(50_000);
    s.append("t/x", &bytes).await.unwrap();
    s.truncate("t/x", 20_001).await.unwrap();
    assert_eq!(s.stat("t/x").await.unwrap().unwrap().size, 20_001);
    assert_eq!(
        s.read("t/x", 0, usize::MAX).await.unwrap(),
        &bytes[..20_001]
    );
    // Longer than the blob: nothing changes.
    s.truncate("t/x", 90_000).await.unwrap();
    assert_eq!(s.stat("t/x").await.unwrap().unwrap().size, 20_001);
    // Appends continue at the cut.
    assert_eq!(s.append("t/x", b"abc").await.unwrap(), 20_004);
    assert_eq!(
        s.read("t/x", 20_000, 10).await.unwrap(),
        [&bytes[20_000..20_001], b"abc"].concat()
    );
    s.truncate("t/x", 0).await.unwrap();
    assert_eq!(s.read("t/x", 0, 10).await.unwrap(), b"");
    assert_eq!(s.append("t/x", b"new").await.unwrap(), 3);
    assert_eq!(s.read("t/x", 0, 10).await.unwrap(), b"new");
}

/// Rename moves a blob within its folder (a chunk's rotation), replacing one of the new name;
/// a failed rename changes nothing.
pub async fn rename_moves_and_replaces<S: Store>(s: Arc<S>) {
    assert!(matches!(
        s.rename("t/none", "t/other").await,
        Err(StoreError::NotFound(_))
    ));
    s.append("t/7-open.raw.jsonl", b"line 7\nline 8\n")
        .await
        .unwrap();
    s.rename("t/7-open.raw.jsonl", "t/7-9.raw.jsonl")
        .await
        .unwrap();
    assert_eq!(s.stat("t/7-open.raw.jsonl").await.unwrap(), None);
    assert_eq!(
        s.read("t/7-9.raw.jsonl", 0, 100).await.unwrap(),
        b"line 7\nline 8\n"
    );
    assert_eq!(
        sorted(s.list("t").await.unwrap()),
        vec![("7-9.raw.jsonl".into(), false, 14)]
    );
    // A new open chunk after the rotation starts empty.
    assert_eq!(s.append("t/7-open.raw.jsonl", b"x").await.unwrap(), 1);
    // Replacing: the destination's old bytes are gone entirely.
    s.write("t/dest", &Lcg(1).bytes(40_000)).await.unwrap();
    s.write("t/src", b"short").await.unwrap();
    s.rename("t/src", "t/dest").await.unwrap();
    assert_eq!(s.read("t/dest", 0, usize::MAX).await.unwrap(), b"short");
    assert_eq!(s.stat("t/src").await.unwrap(), None);
    assert!(matches!(
        s.rename("t/src", "t/dest").await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(
        s.read("t/dest", 0, 100).await.unwrap(),
        b"short",
        "a failed rename changes nothing"
    );
    // The renamed blob takes appends.
    assert_eq!(s.append("t/dest", b"+more").await.unwrap(), 10);
    assert_eq!(s.read("t/dest", 0, 100).await.unwrap(), b"short+more");
}

/// Remove takes a blob, or a folder and everything below it (never a sibling whose name starts
/// the same); a missing path is not an error.
pub async fn remove_blob_and_folder<S: Store>(s: Arc<S>) {
    s.write("t/s1/a", b"1").await.unwrap();
    s.append("t/s1/b", b"2").await.unwrap();
    s.write("t/s1/deep/c", b"3").await.unwrap();
    s.write("t/s10/a", b"keep: a sibling whose name starts the same")
        .await
        .unwrap();
    s.write("t/s1x", b"keep").await.unwrap();
    s.remove("t/s1/a").await.unwrap();
    assert_eq!(s.stat("t/s1/a").await.unwrap(), None);
    assert_eq!(s.stat("t/s1/b").await.unwrap().unwrap().size, 1);
    s.remove("t/s1").await.unwrap();
    assert_eq!(s.stat("t/s1/b").await.unwrap(), None);
    assert_eq!(s.stat("t/s1/deep/c").await.unwrap(), None);
    assert_eq!(s.list("t/s1").await.unwrap(), vec![]);
    assert_eq!(
        sorted(s.list("t").await.unwrap()),
        vec![("s10".into(), true, 0), ("s1x".into(), false, 4)]
    );
    // Missing paths are not an error.
    s.remove("t/s1").await.unwrap();
    s.remove("t/nothing/here").await.unwrap();
    // A removed blob can be written again from scratch.
    assert_eq!(s.append("t/s1/b", b"again").await.unwrap(), 5);
}

/// No path with an empty segment, `.`, `..`, `\\` or NUL reaches a backend, whatever the
/// operation.
pub async fn invalid_paths_refused<S: Store>(s: Arc<S>) {
    for bad in [
        "", "/a", "a/", "a//b", ".", "a/./b", "a/../b", "..", "../x", "a\\b", "a/\0", "a\0b",
    ] {
        assert!(
            matches!(s.write(bad, b"x").await, Err(StoreError::InvalidPath(_))),
            "write {bad:?}"
        );
        assert!(matches!(
            s.append(bad, b"x").await,
            Err(StoreError::InvalidPath(_))
        ));
        assert!(matches!(
            s.read(bad, 0, 1).await,
            Err(StoreError::InvalidPath(_))
        ));
        assert!(matches!(s.stat(bad).await, Err(StoreError::InvalidPath(_))));
        assert!(matches!(s.list(bad).await, Err(StoreError::InvalidPath(_))));
        assert!(matches!(
            s.truncate(bad, 0).await,
            Err(StoreError::InvalidPath(_))
        ));
        assert!(matches!(
            s.remove(bad).await,
            Err(StoreError::InvalidPath(_))
        ));
        assert!(matches!(
            s.rename("t/a", bad).await,
            Err(StoreError::InvalidPath(_))
        ));
    }
    assert_eq!(s.list("t").await.unwrap(), vec![]);
}

/// A blob's stamp never goes back, through writes and appends.
pub async fn stamps_never_go_back<S: Store>(s: Arc<S>) {
    let mut last = 0;
    for i in 0..20 {
        if i % 3 == 0 {
            s.write("t/m", b"whole").await.unwrap();
        } else {
            s.append("t/m", b"more").await.unwrap();
        }
        let m = s.stat("t/m").await.unwrap().unwrap().modified;
        assert!(m >= last, "stamp went back: {m} < {last}");
        last = m;
    }
}

/// The stamps of a backend with a clock are the clock's (milliseconds since the epoch, within
/// a day of now): for every backend but the in-memory one, whose stamps are a counter.
pub async fn stamps_follow_the_clock<S: Store>(s: Arc<S>) {
    s.write("t/clock", b"now").await.unwrap();
    let stamp = s.stat("t/clock").await.unwrap().unwrap().modified;
    #[cfg(target_arch = "wasm32")]
    let now = js_sys::Date::now() as u64;
    #[cfg(not(target_arch = "wasm32"))]
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as u64;
    assert!(stamp.abs_diff(now) < 86_400_000, "{stamp} vs {now}");
}

/// A write past the quota fails with `QuotaExceeded` and leaves nothing of itself: the blob
/// keeps its bytes, a new blob holds none; lifting the limit lets writes go on.
pub async fn a_quota_failure_changes_nothing<S: LimitWrites>(s: Arc<S>) {
    s.append("t/q/open", &[b'a'; 600]).await.unwrap();
    s.limit_writes(Some(1_000));
    s.append("t/q/open", &[b'b'; 600]).await.unwrap();
    // 400 bytes would fit: none of them may stay.
    assert_eq!(
        s.append("t/q/open", &[b'c'; 600]).await,
        Err(StoreError::QuotaExceeded)
    );
    assert_eq!(
        s.write("t/q/page", &[b'd'; 500]).await,
        Err(StoreError::QuotaExceeded)
    );
    assert_eq!(s.stat("t/q/open").await.unwrap().unwrap().size, 1_200);
    // Nothing of the refused whole write stays (OPFS may leave the new blob empty).
    let page = s.stat("t/q/page").await.unwrap();
    assert!(page.is_none_or(|m| m.size == 0), "{page:?}");
    assert_eq!(
        s.read("t/q/open", 1_100, 500).await.unwrap(),
        vec![b'b'; 100]
    );
    s.limit_writes(None);
    assert_eq!(s.append("t/q/open", b"ok").await.unwrap(), 1_202);
}

/// A whole-blob rewrite past the quota fails with `QuotaExceeded` and leaves the blob it would
/// have replaced as it was, byte for byte: the remembered session list, a chat's signature or
/// backup record. Whether the blob was last written whole or appended to (OPFS then holds it
/// open), and whether the new bytes are longer or shorter than the old; nothing of the refused
/// write shows in the folder's listing, and lifting the limit lets the blob be rewritten and
/// appended to.
pub async fn a_refused_rewrite_keeps_the_old_bytes<S: LimitWrites>(s: Arc<S>) {
    let old = Lcg(3).bytes(3_000);
    s.write("t/r/list", &old).await.unwrap();
    s.append("t/r/log", &old[..2_000]).await.unwrap();
    s.limit_writes(Some(1_000));
    for (path, was) in [("t/r/list", &old[..]), ("t/r/log", &old[..2_000])] {
        for len in [5_000, 1_500] {
            assert_eq!(
                s.write(path, &Lcg(4).bytes(len)).await,
                Err(StoreError::QuotaExceeded),
                "{path}: {len} bytes"
            );
            let now = s.read(path, 0, usize::MAX).await.unwrap();
            // Compared whole, reported by length (thousands of bytes would drown the message).
            assert!(
                now == was,
                "{path}: a refused rewrite of {len} bytes left {} bytes, not the {} it had",
                now.len(),
                was.len()
            );
            assert_eq!(s.stat(path).await.unwrap().unwrap().size, was.len() as u64);
        }
    }
    assert_eq!(
        sorted(s.list("t/r").await.unwrap()),
        vec![("list".into(), false, 3_000), ("log".into(), false, 2_000)]
    );
    s.limit_writes(None);
    s.write("t/r/list", b"new").await.unwrap();
    assert_eq!(s.read("t/r/list", 0, 100).await.unwrap(), b"new");
    assert_eq!(s.append("t/r/list", b"+").await.unwrap(), 4);
    assert_eq!(s.read("t/r/list", 0, 100).await.unwrap(), b"new+");
    assert_eq!(s.names("t/r").await.unwrap().len(), 2);
}
