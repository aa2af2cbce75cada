//! The chunk store's costs against chunk size, side by side:
//! `cargo run --release -p scrollback --example chunk_bench`
//!
//! For the memory and filesystem stores: the time to open a session and serve its newest 80
//! lines, and to serve a 40-row page from the middle of the chunk, from a 21 MB chunk and from
//! a 210 KB one; and live append throughput into an empty open chunk and into a 20 MB one.

use scrollback::chunks::Cache;
use scrollback::protocol::Line;
use scrollback::store::{FsStore, MemoryStore, Store};
use scrollback::testing::transcript;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Lines of the conformance transcript, repeated with fresh seqs, up to `bytes` of JSONL.
fn lines_of(bytes: usize) -> Vec<Line> {
    let mut out = Vec::new();
    let mut size = 0;
    let pattern = transcript(4096);
    while size < bytes {
        let seq = out.len() as u64 + 1;
        let src = &pattern[(seq as usize - 1) % pattern.len()];
        let raw = src.raw().replacen(
            &format!("\"seq\":{}", src.seq()),
            &format!("\"seq\":{seq}"),
            1,
        );
        let line = Line::parse(&raw).expect("a line");
        size += line.raw().len() + 1;
        out.push(line);
    }
    out
}

/// Appends made before the timed ones.
const WARM_UP: usize = 1000;

fn jsonl(lines: &[Line]) -> Vec<u8> {
    lines
        .iter()
        .flat_map(|l| format!("{}\n", l.raw()).into_bytes())
        .collect()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

struct Figures {
    newest: Duration,
    page: Duration,
    whole: Duration,
}

async fn serve<S: Store>(store: &Arc<S>, cache: &Cache<S>, id: &str, lines: &[Line]) -> Figures {
    let dir = format!("{}/{id}", cache.dir());
    let blob = jsonl(lines);
    store
        .write(&format!("{dir}/1-open.raw.jsonl"), &blob)
        .await
        .unwrap();
    let n = lines.len() as u64;
    let mut newest = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let mut s = cache.session(id).unwrap();
        let got = s.newest(80).await.expect("cached");
        newest.push(t.elapsed());
        assert_eq!(got.len(), 80);
    }
    let mut s = cache.session(id).unwrap();
    s.open().await;
    let mut page = Vec::new();
    for i in 0..200u64 {
        let before = n / 4 + (i * 7919) % (n / 2); // spread over the middle: no hint, a seek
        let t = Instant::now();
        let got = s.page(before, 40, true).await.expect("a hit");
        page.push(t.elapsed());
        assert!(!got.lines.is_empty());
    }
    let mut whole = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let bytes = store
            .read(&format!("{dir}/1-open.raw.jsonl"), 0, blob.len())
            .await
            .unwrap();
        let parsed = std::str::from_utf8(&bytes)
            .unwrap()
            .lines()
            .filter(|l| Line::parse(l).is_ok())
            .count();
        whole.push(t.elapsed());
        assert_eq!(parsed, lines.len());
    }
    Figures {
        newest: median(newest),
        page: median(page),
        whole: median(whole),
    }
}

/// Lines per second appending `count` live lines after `existing` ones.
async fn append_rate<S: Store>(
    store: &Arc<S>,
    cache: &Cache<S>,
    id: &str,
    existing: Vec<Line>,
    count: usize,
) -> f64 {
    let dir = format!("{}/{id}", cache.dir());
    if !existing.is_empty() {
        store
            .write(&format!("{dir}/1-open.raw.jsonl"), &jsonl(&existing))
            .await
            .unwrap();
    }
    let base = existing.len() as u64;
    drop(existing); // the same heap for both runs
    let fresh = lines_of((count + WARM_UP) * 400);
    let live: Vec<Line> = fresh
        .iter()
        .take(count + WARM_UP)
        .map(|l| {
            let raw = l.raw().replacen(
                &format!("\"seq\":{}", l.seq()),
                &format!("\"seq\":{}", l.seq() + base),
                1,
            );
            Line::parse(&raw).unwrap()
        })
        .collect();
    let mut s = cache.session(id).unwrap();
    s.open().await;
    // Warm up (not timed): the memory store's first append to a blob written whole grows its
    // buffer once (a 20 MB copy), which is not the per-line cost being measured.
    let (warm, timed) = live.split_at(WARM_UP);
    for line in warm {
        s.append(line).await;
    }
    let t = Instant::now();
    for line in timed {
        s.append(line).await;
    }
    let rate = timed.len() as f64 / t.elapsed().as_secs_f64();
    assert!(s.is_writing());
    assert_eq!(
        s.cursor().await.map(|l| l.seq()),
        Some(base + (count + WARM_UP) as u64)
    );
    rate
}

async fn bench<S: Store>(name: &str, store: S) {
    let store = Arc::new(store);
    let cache = Cache::new(store.clone(), "bench", 1).await;
    let small = lines_of(210 * 1024);
    let large = lines_of(21 * 1024 * 1024);
    let s = serve(&store, &cache, "small", &small).await;
    let l = serve(&store, &cache, "large", &large).await;
    let (small_n, large_n) = (small.len(), large.len());
    drop((small, large));
    println!(
        "{name}: chunks of 210 KB ({} lines) and 21 MB ({} lines)",
        small_n, large_n
    );
    println!(
        "  {:<34} {:>12} {:>12} {:>8}",
        "", "210 KB", "21 MB", "ratio"
    );
    let row = |what: &str, a: Duration, b: Duration| {
        println!(
            "  {what:<34} {:>12} {:>12} {:>7.2}x",
            ms(a),
            ms(b),
            b.as_secs_f64() / a.as_secs_f64()
        );
    };
    row("open + newest 80 lines", s.newest, l.newest);
    row("40-row page from the middle", s.page, l.page);
    row("(reading the chunk whole, parsed)", s.whole, l.whole);

    let count = 20_000;
    // Alternating rounds, the median of each: the machine is shared.
    let (mut empty, mut full) = (Vec::new(), Vec::new());
    for round in 0..3 {
        empty.push(append_rate(&store, &cache, &format!("empty-{round}"), Vec::new(), count).await);
        full.push(
            append_rate(
                &store,
                &cache,
                &format!("full-{round}"),
                lines_of(20 << 20),
                count,
            )
            .await,
        );
        cache.clear().await;
    }
    let mid = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (empty, full) = (mid(empty), mid(full));
    println!(
        "  {:<34} {:>12} {:>12} {:>8}",
        "", "empty", "20 MB", "ratio"
    );
    println!(
        "  {:<34} {:>12.0} {:>12.0} {:>7.2}x",
        format!("append {count} lines (lines/s)"),
        empty,
        full,
        full / empty
    );
    cache.clear().await;
}

fn main() {
    pollster::block_on(async {
        bench("memory", MemoryStore::new()).await;
        let dir = tempfile::tempdir().expect("a temporary folder");
        bench("filesystem", FsStore::new(dir.path())).await;
    });
}
