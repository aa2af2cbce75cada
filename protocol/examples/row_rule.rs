//! Times the row rule on a coalesced page over two adjacent deltas sharing a long prefix
//! (`"a"*m + "b"` then `"a"*m + "c"`): `cargo run --release -p scrollback-protocol --example
//! row_rule [m]` (m defaults to 1.6M characters).

use scrollback_protocol::{coalesce, Line};
use std::time::Instant;

fn delta(seq: u64, text: String) -> Line {
    let event = serde_json::json!({"type": "assistantText", "text": text});
    Line::new(seq, seq as f64, event.as_object().unwrap().clone()).unwrap()
}

fn main() {
    let m: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_600_000);
    let a = "a".repeat(m);
    let lines = [delta(1, format!("{a}b")), delta(2, format!("{a}c"))];
    let started = Instant::now();
    let page = coalesce(&lines);
    let took = started.elapsed();
    println!(
        "coalesced page over two {m}-char deltas sharing a prefix: {} row(s) in {:.1} ms",
        page.len(),
        took.as_secs_f64() * 1e3
    );
}
