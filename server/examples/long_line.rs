//! Reading does not grow with a long line or a long row: the time of `?limit=1`, of the session
//! list (a 60 MB line the newest but one, then the newest), of a coalesced `limit=1&bytes=1` page
//! over a run of a million deltas, of a coalesced page over two 1.6M-character deltas sharing a
//! prefix, and of a page and a catch-up while the last 300 MB are one line still being written
//! (its first read, the next ones, and a read after 1 MB more of it), each read in-process from a
//! real file.
//!
//!     cargo run --release -p scrollback-server --example long_line

use scrollback_protocol::{CatchUpQuery, TranscriptQuery};
use scrollback_server::{session::Summaries, transcript};
use std::io::Write;
use std::path::Path;
use std::time::Instant;

fn line(seq: u64, event: serde_json::Value) -> String {
    format!(
        "{}\n",
        serde_json::json!({"seq": seq, "ts": seq as f64, "event": event})
    )
}

fn write(data: &Path, id: &str, text: &[String]) -> std::path::PathBuf {
    let dir = data.join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("transcript.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for l in text {
        f.write_all(l.as_bytes()).unwrap();
    }
    path
}

fn time<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    println!("{what}: {:.2} ms", started.elapsed().as_secs_f64() * 1e3);
    out
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();

    // A 60 MB line (the newest but one), then a short one.
    let huge = "x".repeat(60 << 20);
    let path = write(
        data,
        "huge",
        &[
            line(1, serde_json::json!({"type": "userMessage", "text": "go"})),
            line(
                2,
                serde_json::json!({"type": "toolResult", "id": "t", "output": huge}),
            ),
            line(3, serde_json::json!({"type": "status", "status": "idle"})),
        ],
    );
    let q = TranscriptQuery::parse("limit=1").unwrap();
    time("GET ?limit=1 with a 60 MB line before the newest", || {
        transcript::window(&path, &q).unwrap()
    });
    let summaries = Summaries::default();
    time("GET /sessions with a 60 MB line (cold)", || {
        summaries.list(data).unwrap()
    });
    // The 60 MB line the newest: its seq is read from its head (the first session is cached).
    write(
        data,
        "huge-last",
        &[
            line(1, serde_json::json!({"type": "userMessage", "text": "go"})),
            line(
                2,
                serde_json::json!({"type": "toolResult", "id": "t", "output": huge}),
            ),
        ],
    );
    let list = time("GET /sessions with a 60 MB newest line (cold)", || {
        summaries.list(data).unwrap()
    });
    let seqs: Vec<(String, u64)> = list.into_iter().map(|s| (s.id, s.seq)).collect();
    println!("  newest seqs: {seqs:?}");

    // A run of a million deltas.
    let deltas: Vec<String> = (1..=1_000_000u64)
        .map(|s| {
            line(
                s,
                serde_json::json!({"type": "assistantText", "text": format!("w{s} ")}),
            )
        })
        .collect();
    let path = write(data, "run", &deltas);
    let q = TranscriptQuery::parse("before=1000001&limit=1&coalesce=true&bytes=1").unwrap();
    let page = time("coalesced limit=1&bytes=1 over a run of 1M deltas", || {
        transcript::window(&path, &q).unwrap()
    });
    println!(
        "  answer: {} line(s), {} bytes",
        page.len(),
        page.iter().map(|l| l.raw().len()).sum::<usize>()
    );

    // Two adjacent deltas sharing a 1.6M-character prefix.
    let a = "a".repeat(1_600_000);
    let path = write(
        data,
        "seam",
        &[
            line(
                1,
                serde_json::json!({"type": "assistantText", "text": format!("{a}b")}),
            ),
            line(
                2,
                serde_json::json!({"type": "assistantText", "text": format!("{a}c")}),
            ),
            line(3, serde_json::json!({"type": "status", "status": "idle"})),
        ],
    );
    let q = TranscriptQuery::parse("before=3&coalesce=true").unwrap();
    let page = time("coalesced page over two 1.6M-char deltas", || {
        transcript::window(&path, &q).unwrap()
    });
    println!("  answer: {} row(s)", page.len());

    // 100 short lines, then a line of 300 MB with no newline yet (a writer mid-line).
    let lines: Vec<String> = (1..=100u64)
        .map(|s| line(s, serde_json::json!({"type": "userMessage", "text": "hi"})))
        .collect();
    let path = write(data, "torn", &lines);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    write!(
        file,
        r#"{{"seq":101,"ts":101.0,"event":{{"type":"toolResult","output":""#
    )
    .unwrap();
    let mb = "x".repeat(1 << 20);
    for _ in 0..300 {
        file.write_all(mb.as_bytes()).unwrap();
    }
    let page = TranscriptQuery::parse("limit=5").unwrap();
    let check = CatchUpQuery::parse("cursor=100").unwrap();
    let read = |what: &str| {
        time(&format!("{what}: ?limit=5"), || {
            transcript::window(&path, &page).unwrap()
        });
        time(&format!("{what}: catchup?cursor=100"), || {
            transcript::catch_up::catch_up(&path, &check).unwrap()
        });
    };
    read("a 300 MB torn last line, first read");
    read("the same, read again");
    file.write_all(mb.as_bytes()).unwrap();
    read("the same, 1 MB more of it");
    let newest = transcript::window(&path, &page).unwrap();
    println!("  newest seq: {}", newest.last().unwrap().seq());
}
