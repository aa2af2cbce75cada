//! Store-level checks of every `Store` operation, shared by the browser backends' test files
//! (`store_opfs.rs`, `store_idb.rs`). `store_tests!(open)` makes one wasm-bindgen test per
//! check, each on a store of its own (`open(tag)` gives a fresh directory or database).

#![allow(dead_code)]

use scrollback::store::{Entry, Store, StoreError};
use std::future::Future;
use std::pin::pin;
use std::task::Poll;

/// A name no other test (or earlier run in the same profile) uses.
pub fn unique(tag: &str) -> String {
    format!(
        "{tag}-{}-{}",
        js_sys::Date::now() as u64,
        (js_sys::Math::random() * 1e9) as u64
    )
}

/// Resolves after `ms` milliseconds.
pub async fn sleep(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let global = js_sys::global();
        let set_timeout: js_sys::Function = js_sys::Reflect::get(&global, &"setTimeout".into())
            .unwrap()
            .into();
        set_timeout.call2(&global, &resolve, &ms.into()).unwrap();
    });
    wasm_bindgen_futures::JsFuture::from(promise).await.unwrap();
}

/// Polls two futures to completion together.
pub async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (pin!(a), pin!(b));
    let (mut ra, mut rb) = (None, None);
    std::future::poll_fn(|cx| {
        if ra.is_none() {
            if let Poll::Ready(v) = a.as_mut().poll(cx) {
                ra = Some(v);
            }
        }
        if rb.is_none() {
            if let Poll::Ready(v) = b.as_mut().poll(cx) {
                rb = Some(v);
            }
        }
        if ra.is_some() && rb.is_some() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    (ra.unwrap(), rb.unwrap())
}

/// A small deterministic generator, so a failing case can be replayed.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next() & 0xff) as u8).collect()
    }
}

fn sorted(mut v: Vec<Entry>) -> Vec<(String, bool, u64)> {
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v.into_iter().map(|e| (e.name, e.is_dir, e.size)).collect()
}

pub async fn list_stat_read_write<S: Store>(s: &S) {
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
}

pub async fn append_matches_model<S: Store>(s: &S) {
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
    // Appending after a read and a stat continues where the blob ends.
    model.extend_from_slice(b"tail\n");
    assert_eq!(
        s.append("t/s/open", b"tail\n").await.unwrap(),
        model.len() as u64
    );
    s.flush().await.unwrap();
    let end = model.len() as u64;
    assert_eq!(s.read("t/s/open", end - 5, 5).await.unwrap(), b"tail\n");
    // An empty append changes nothing and creates the blob if missing.
    assert_eq!(s.append("t/s/open", b"").await.unwrap(), end);
    assert_eq!(s.append("t/s/empty", b"").await.unwrap(), 0);
    assert_eq!(s.stat("t/s/empty").await.unwrap().unwrap().size, 0);
}

pub async fn truncate_cuts<S: Store>(s: &S) {
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

pub async fn rename_moves_and_replaces<S: Store>(s: &S) {
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
    // The renamed blob takes appends.
    assert_eq!(s.append("t/dest", b"+more").await.unwrap(), 10);
    assert_eq!(s.read("t/dest", 0, 100).await.unwrap(), b"short+more");
}

pub async fn remove_blob_and_folder<S: Store>(s: &S) {
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

pub async fn invalid_paths_refused<S: Store>(s: &S) {
    for bad in [
        "", "/a", "a/", "a//b", "a/./b", "a/../b", "..", "a\\b", "a/\0",
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

pub async fn stamps_never_go_back<S: Store>(s: &S) {
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
    // Roughly the clock: within a day of now.
    let now = js_sys::Date::now() as u64;
    assert!(last.abs_diff(now) < 86_400_000, "{last} vs {now}");
}

/// Generates one test per check for a backend; `$open(tag)` opens a fresh store.
#[macro_export]
macro_rules! store_tests {
    ($open:path) => {
        #[wasm_bindgen_test]
        async fn list_stat_read_write() {
            store_checks::list_stat_read_write(&$open("lsrw").await).await;
        }
        #[wasm_bindgen_test]
        async fn append_matches_model() {
            store_checks::append_matches_model(&$open("append").await).await;
        }
        #[wasm_bindgen_test]
        async fn truncate_cuts() {
            store_checks::truncate_cuts(&$open("truncate").await).await;
        }
        #[wasm_bindgen_test]
        async fn rename_moves_and_replaces() {
            store_checks::rename_moves_and_replaces(&$open("rename").await).await;
        }
        #[wasm_bindgen_test]
        async fn remove_blob_and_folder() {
            store_checks::remove_blob_and_folder(&$open("remove").await).await;
        }
        #[wasm_bindgen_test]
        async fn invalid_paths_refused() {
            store_checks::invalid_paths_refused(&$open("invalid").await).await;
        }
        #[wasm_bindgen_test]
        async fn stamps_never_go_back() {
            store_checks::stamps_never_go_back(&$open("stamps").await).await;
        }
    };
}
