//! What the search index adds to an append, in instructions (exact, where the shared machine
//! makes times noisy), natively over the memory store (so, as with IndexedDB's buffered
//! appends, the index's CPU cost is what differs):
//!
//! ```text
//! cargo build --release -p scrollback --example append_cost
//! APPEND_INDEX=0 valgrind --tool=callgrind --toggle-collect=append_cost::append_lines target/release/examples/append_cost
//! APPEND_INDEX=1 valgrind --tool=callgrind --toggle-collect=append_cost::append_lines target/release/examples/append_cost
//! ```
//!
//! Each run's `I refs` over the lines it prints is the cost of an append, without and with the
//! index. The lines: 2 MB generated (a user message, then a reply of 20 deltas, repeated),
//! appended to one session one line per append, as a live stream does.

use scrollback::chunks::Cache;
use scrollback::protocol::Line;
use scrollback::store::MemoryStore;
use std::sync::Arc;

fn line(seq: u64, event: serde_json::Value) -> Line {
    let ts = 1_700_000_000.0 + seq as f64;
    Line::parse(&serde_json::json!({"seq": seq, "ts": ts, "event": event}).to_string()).unwrap()
}

fn main() {
    let indexing = std::env::var("APPEND_INDEX").as_deref() != Ok("0");
    let mut rng = oorandom::Rand64::new(7);
    let mut text = |n: usize| {
        (0..n)
            .map(|_| format!("w{}x", rng.rand_range(0..20_000)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let (mut lines, mut seq) = (Vec::new(), 0u64);
    let mut push = |lines: &mut Vec<Line>, event| {
        seq += 1;
        lines.push(line(seq, event));
        seq
    };
    while lines
        .iter()
        .map(|l: &Line| l.raw().len() + 1)
        .sum::<usize>()
        < 2_000_000
    {
        let id = format!(
            "m{}",
            push(
                &mut lines,
                serde_json::json!({"type": "userMessage", "text": text(12)})
            )
        );
        for _ in 0..20 {
            let delta = format!("{} ", text(4));
            push(
                &mut lines,
                serde_json::json!({"type": "assistantText", "text": delta, "messageId": id}),
            );
        }
    }
    append_lines(&lines, indexing);
    println!("{} lines appended, index {indexing}", lines.len());
}

/// The appends alone, for `--toggle-collect`.
#[inline(never)]
fn append_lines(lines: &[Line], indexing: bool) {
    pollster::block_on(async {
        let cache = Cache::new(Arc::new(MemoryStore::new()), "bench", 1).await;
        let mut s = cache.session("s").unwrap();
        s.set_indexing(indexing);
        s.open().await;
        for l in lines {
            s.append(l).await;
        }
    });
}
