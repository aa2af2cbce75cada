//! The search index's costs, natively over the filesystem store:
//! `cargo run --release -p scrollback --example search_bench [MB] [SESSIONS]` (default 20 MB
//! over 50 sessions; the figure is `200 50`). `SEARCH_BENCH_STORE=memory`: the memory
//! store, so the append ratio is the index's CPU cost alone (as with IndexedDB, whose appends
//! are buffered).
//!
//! Generates sessions of user messages and assistant replies streamed in deltas of a few words
//! (words drawn from a Zipf law over a 20 000-word vocabulary), appends them line by line as a
//! live stream does, with the index and without it, and prints: the append rate both ways and
//! its ratio, the index's share of the cached bytes, and the time to the first 20 results for
//! 1-, 2- and 3-word queries and a phrase, with words at fixed document frequencies (rare,
//! medium, common): the first query before any segment is built (loads every blob into
//! memory), the segments' build (what the worker does in idle time), the first query after a
//! start (reads the segments), and the median of 5 after.

use scrollback::chunks::Cache;
use scrollback::protocol::Line;
use scrollback::search::pack;
use scrollback::search::segment::SEGMENT;
use scrollback::search::INDEX;
use scrollback::store::{FsStore, MemoryStore, Store};
use std::sync::Arc;
use std::time::{Duration, Instant};

const VOCAB: usize = 20_000;

/// A Zipf sampler (s = 1) over `VOCAB` word ranks.
struct Words {
    rng: oorandom::Rand64,
    cdf: Vec<f64>,
}

impl Words {
    fn new(seed: u128) -> Words {
        let mut cdf = Vec::with_capacity(VOCAB);
        let mut sum = 0.0;
        for r in 1..=VOCAB {
            sum += 1.0 / r as f64;
            cdf.push(sum);
        }
        cdf.iter_mut().for_each(|c| *c /= sum);
        Words {
            rng: oorandom::Rand64::new(seed),
            cdf,
        }
    }
    fn rank(&mut self) -> usize {
        let x = self.rng.rand_float();
        self.cdf.partition_point(|&c| c < x)
    }
    fn text(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| word(self.rank()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn word(rank: usize) -> String {
    format!("w{rank}x")
}

fn line(seq: u64, event: serde_json::Value) -> Line {
    let ts = 1_700_000_000.0 + seq as f64;
    Line::parse(&serde_json::json!({"seq": seq, "ts": ts, "event": event}).to_string()).unwrap()
}

/// One session's lines, about `bytes` of JSONL.
fn session(words: &mut Words, bytes: usize) -> Vec<Line> {
    let (mut out, mut size, mut seq) = (Vec::new(), 0, 0u64);
    while size < bytes {
        seq += 1;
        let user = line(
            seq,
            serde_json::json!({"type": "userMessage", "text": words.text(12)}),
        );
        size += user.raw().len() + 1;
        out.push(user);
        let id = format!("m{seq}");
        for _ in 0..20 {
            seq += 1;
            let text = format!("{} ", words.text(4));
            let d = line(
                seq,
                serde_json::json!({"type": "assistantText", "text": text, "messageId": id}),
            );
            size += d.raw().len() + 1;
            out.push(d);
        }
    }
    out
}

async fn fill<S: Store>(cache: &Cache<S>, sessions: &[Vec<Line>], indexing: bool) -> Duration {
    let start = Instant::now();
    for (i, lines) in sessions.iter().enumerate() {
        let mut s = cache.session(&format!("s{i}")).unwrap();
        s.set_indexing(indexing);
        s.open().await;
        for l in lines {
            s.append(l).await;
        }
    }
    start.elapsed()
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let mb = args.first().copied().unwrap_or(20);
    let n = args.get(1).copied().unwrap_or(50);
    let mut words = Words::new(7);
    let sessions: Vec<Vec<Line>> = (0..n)
        .map(|_| session(&mut words, mb * 1_000_000 / n))
        .collect();
    let raw: usize = sessions.iter().flatten().map(|l| l.raw().len() + 1).sum();
    let lines: usize = sessions.iter().map(Vec::len).sum();
    println!(
        "{n} sessions, {lines} lines, {:.1} MB raw",
        raw as f64 / 1e6
    );
    let tmp = tempfile::tempdir().unwrap();
    if std::env::var("SEARCH_BENCH_STORE").as_deref() == Ok("memory") {
        println!("memory store: the index's CPU cost alone");
        pollster::block_on(run(Arc::new(MemoryStore::new()), &sessions, raw, n));
    } else {
        pollster::block_on(run(Arc::new(FsStore::new(tmp.path())), &sessions, raw, n));
    }
}

async fn run<S: Store>(store: Arc<S>, sessions: &[Vec<Line>], raw: usize, n: usize) {
    {
        let plain = Cache::new(store.clone(), "plain", 1).await;
        let t_plain = fill(&plain, sessions, false).await;
        let cache = Cache::new(store.clone(), "indexed", 1).await;
        let t_index = fill(&cache, sessions, true).await;
        let rate = |t: Duration| raw as f64 / 1e6 / t.as_secs_f64();
        println!(
            "append: {:.1} MB/s without the index, {:.1} MB/s with it: ratio {:.2}",
            rate(t_plain),
            rate(t_index),
            t_plain.as_secs_f64() / t_index.as_secs_f64()
        );
        let mut index = 0;
        for i in 0..n {
            let path = format!("{}/s{i}/{INDEX}", cache.dir());
            index += store.stat(&path).await.unwrap().map_or(0, |m| m.size);
        }
        let cached: u64 = cache.sessions().await.iter().map(|s| s.size).sum();
        println!(
            "index: {:.1} MB, {:.1}% of the {:.1} MB cached",
            index as f64 / 1e6,
            100.0 * index as f64 / cached as f64,
            cached as f64 / 1e6
        );
        // Ranks with document frequencies roughly rare (< 0.1%), medium (~1-3%), common (> 20%).
        let (rare, medium, common) = ((15_000, 15_001, 15_002), (300, 301, 302), (1, 2, 3));
        let first = Instant::now();
        let hits = cache.search(&word(1), 20, None).await;
        println!(
            "first query without segments (loads {n} blobs): {} ({} hits)",
            ms(first.elapsed()),
            hits.len()
        );
        let t = Instant::now();
        let built = cache.build_search().await;
        let mut segments = 0;
        for i in 0..n {
            let path = format!("{}/s{i}/{SEGMENT}", cache.dir());
            segments += store.stat(&path).await.unwrap().map_or(0, |m| m.size);
        }
        println!(
            "segments built (idle time): {built} in {}, {:.1} MB",
            ms(t.elapsed()),
            segments as f64 / 1e6
        );
        // The server's pack, as a worker writes it once warmed up (what it then holds, merged).
        let warmed = Cache::new(store.clone(), "indexed", 1).await;
        let t = Instant::now();
        warmed.warm_search().await;
        let warm = t.elapsed();
        store.remove(&pack::path(cache.dir())).await.unwrap();
        let t = Instant::now();
        warmed.build_search_pack().await;
        println!(
            "warm-up {} (the pack built in it), the pack alone {}, {:.1} MB",
            ms(warm),
            ms(t.elapsed()),
            warmed.search_pack_size().await as f64 / 1e6
        );
        for (name, rank) in [("rare", 15_000), ("medium", 300), ("common", 1)] {
            let started = Cache::new(store.clone(), "indexed", 1).await;
            let t = Instant::now();
            let hits = started.search(&format!("{} ", word(rank)), 20, None).await;
            println!(
                "first query after a start, {name} word (reads the pack): {} ({} hits)",
                ms(t.elapsed()),
                hits.len()
            );
        }
        let cache = Cache::new(store.clone(), "indexed", 1).await;
        for (name, (a, b, c)) in [("rare", rare), ("medium", medium), ("common", common)] {
            let queries = [
                ("1 word", word(a)),
                ("2 words", format!("{} {}", word(a), word(b))),
                ("3 words", format!("{} {} {}", word(a), word(b), word(c))),
                ("phrase", format!("\"{} {}\"", word(a), word(b))),
            ];
            for (kind, q) in queries {
                let mut times = Vec::new();
                let mut found = 0;
                for _ in 0..5 {
                    let t = Instant::now();
                    found = cache.search(&format!("{q} "), 20, None).await.len();
                    times.push(t.elapsed());
                }
                times.sort();
                println!("{name:>6} {kind:<7}: {} ({found} hits)", ms(times[2]));
            }
        }
    }
}
