//! Browser storage benchmark (ignored by `npm test`; run it with
//! `scripts/wasm.sh test --release --test bench_storage -- --include-ignored --nocapture`).
//!
//! For OPFS and IndexedDB, in one dedicated worker of headless Chromium, side by side: lines/s
//! appended (800-byte lines, one `append` per line, as live streaming does) to an empty blob
//! and to a 20 MB one; lines/s committed one at a time (an `append` and a `flush` each: a
//! streamed reply's deltas arrive tens of milliseconds apart, so each is a commit of its own),
//! with, for IndexedDB, the bytes of records put per line; and the time to read the newest 80
//! lines, and a 40-row page's bytes from the end, of a 21 MB blob against a 210 KB one.
#![cfg(target_arch = "wasm32")]

use js_sys::Reflect;
use scrollback::store::{IdbStore, OpfsStore, Store};
use scrollback::testing::unique;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_dedicated_worker);

const LINE: usize = 800;
const APPENDS: usize = 3_000;
const READS: usize = 40;
/// A 40-row page of 800-byte lines.
const PAGE: usize = 40 * LINE;

fn now() -> f64 {
    let perf = Reflect::get(&js_sys::global(), &"performance".into()).unwrap();
    let f: js_sys::Function = Reflect::get(&perf, &"now".into()).unwrap().into();
    f.call0(&perf).unwrap().as_f64().unwrap()
}

fn line(seq: usize) -> Vec<u8> {
    let mut l = format!("{seq:08} ").into_bytes();
    l.resize(LINE - 1, b'x');
    l.push(b'\n');
    l
}

fn lines(n: usize) -> Vec<u8> {
    (0..n).flat_map(line).collect()
}

/// Lines per second appending `APPENDS` lines to `path` (including the final flush).
async fn append_rate<S: Store>(s: &S, path: &str) -> f64 {
    let t = now();
    for i in 0..APPENDS {
        s.append(path, &line(i)).await.unwrap();
    }
    s.flush().await.unwrap();
    APPENDS as f64 / ((now() - t) / 1000.0)
}

/// Lines committed one at a time.
const COMMITS: usize = 600;

/// Lines per second appending `COMMITS` lines to `path`, each committed before the next.
async fn commit_rate<S: Store>(s: &S, path: &str) -> f64 {
    let t = now();
    for i in 0..COMMITS {
        s.append(path, &line(i)).await.unwrap();
        s.flush().await.unwrap();
    }
    COMMITS as f64 / ((now() - t) / 1000.0)
}

/// Reads the newest `n` lines the way the cache does: backwards in 64 KB blocks until it has
/// `n` newlines before the last one.
async fn newest_lines<S: Store>(s: &S, path: &str, n: usize) -> usize {
    let size = s.stat(path).await.unwrap().unwrap().size;
    let mut end = size;
    let mut found = 0;
    let mut got = 0;
    while end > 0 && found <= n {
        let start = end.saturating_sub(64 * 1024);
        let block = s.read(path, start, (end - start) as usize).await.unwrap();
        found += block.iter().filter(|&&b| b == b'\n').count();
        got += block.len();
        end = start;
    }
    assert!(found > n.min(size as usize / LINE - 1));
    got
}

/// Mean milliseconds of `READS` runs of `f`.
async fn mean_ms<F, Fut>(mut f: F) -> f64
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    f().await; // warm
    let t = now();
    for _ in 0..READS {
        assert!(f().await > 0);
    }
    (now() - t) / READS as f64
}

struct Figures {
    empty: f64,
    committed: f64,
    big: f64,
    newest_small: f64,
    newest_big: f64,
    page_small: f64,
    page_big: f64,
}

async fn measure<S: Store>(s: &S) -> Figures {
    // Warm up (handle opening, the JIT) so that the first figure is not the cold one.
    append_rate(s, "b/warm").await;
    let empty = append_rate(s, "b/empty").await;
    let committed = commit_rate(s, "b/committed").await;
    s.write("b/big", &lines(20 * 1024 * 1024 / LINE))
        .await
        .unwrap();
    let big = append_rate(s, "b/big").await;
    s.write("b/r21", &lines(21 * 1000 * 1000 / LINE))
        .await
        .unwrap();
    s.write("b/r210", &lines(210 * 1000 / LINE)).await.unwrap();
    s.flush().await.unwrap();
    let newest_small = mean_ms(|| newest_lines(s, "b/r210", 80)).await;
    let newest_big = mean_ms(|| newest_lines(s, "b/r21", 80)).await;
    let page = |path: &'static str| async move {
        let size = s.stat(path).await.unwrap().unwrap().size;
        s.read(path, size - PAGE as u64, PAGE).await.unwrap().len()
    };
    let page_small = mean_ms(|| page("b/r210")).await;
    let page_big = mean_ms(|| page("b/r21")).await;
    s.remove("b").await.unwrap();
    Figures {
        empty,
        committed,
        big,
        newest_small,
        newest_big,
        page_small,
        page_big,
    }
}

fn print(name: &str, f: &Figures) {
    let out = format!(
        "{name:<10} appends (800 B lines): {:>8.0} lines/s to an empty blob, {:>8.0} lines/s to a \
         20 MB blob, ratio {:.2}\n{name:<10} lines committed one at a time: {:>6.0} lines/s\n\
         {name:<10} newest 80 lines: {:>6.2} ms from 210 KB, {:>6.2} ms \
         from 21 MB, ratio {:.2}\n{name:<10} 40-row page (32 KB) from the end: {:>6.2} ms from \
         210 KB, {:>6.2} ms from 21 MB, ratio {:.2}",
        f.empty,
        f.big,
        f.big / f.empty,
        f.committed,
        f.newest_small,
        f.newest_big,
        f.newest_big / f.newest_small,
        f.page_small,
        f.page_big,
        f.page_big / f.page_small,
    );
    web_sys::console::log_1(&out.into());
}

#[wasm_bindgen_test]
#[ignore = "benchmark: run with --include-ignored --nocapture"]
async fn bench_browser_storage() {
    let opfs = OpfsStore::open_in(&format!("bench/{}", unique("opfs")))
        .await
        .unwrap();
    let f = measure(&opfs).await;
    print("opfs", &f);
    drop(opfs);
    let idb = IdbStore::open_named(&unique("bench-idb")).await.unwrap();
    let f = measure(&idb).await;
    print("indexeddb", &f);
    // The bytes put for lines committed one at a time, alone.
    let before = idb.bytes_put();
    commit_rate(&idb, "b/put").await;
    let per_line = (idb.bytes_put() - before) as f64 / COMMITS as f64;
    web_sys::console::log_1(
        &format!("indexeddb  bytes of records put per {LINE}-byte line committed: {per_line:.0}")
            .into(),
    );
}
