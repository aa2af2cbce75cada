//! The windowed chat file's cost against the chat's size, on the filesystem:
//!
//!     cargo run --release -p scrollback --example window_bench
//!
//! Builds a 500 KB chat and a 50 MB one (same message lines) in a temporary folder and times,
//! alternating between them, the median of many runs of: `tail(50)`, a 100-line `before` from
//! the tail's cursor, a one-line `patch` append, and a cold prompt backfill of 8,000 tokens.
//! The ratio column is 50 MB over 500 KB: near 1 means the cost does not grow with the file.

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    bench::run();
}

#[cfg(not(target_arch = "wasm32"))]
mod bench {
    use scrollback::store::{FsStore, Store};
    use scrollback::window::{
        BackfillRequest, CharsPerToken, ChatFile, Chats, PatchOp, PromptBackfill, WriteOptions,
    };
    use std::time::{Duration, Instant};

    const HEADER: &str =
        r#"{"user_name":"User","character_name":"Alice","chat_metadata":{"integrity":"bench"}}"#;
    const RUNS: usize = 101;

    /// A message line of about 500 bytes.
    fn message(i: usize) -> String {
        let text = "The quick brown fox jumps over the lazy dog. ".repeat(10);
        format!(
            r#"{{"name":"Alice","is_user":false,"send_date":"2024-01-01T00:00:00Z","mes":"{i}: {text}"}}"#
        )
    }

    async fn build(chats: &Chats<FsStore>, path: &str, bytes: usize) -> (usize, u64) {
        let chat = chats.chat(path).unwrap();
        let line_len = message(0).len() + 1;
        let n = bytes / line_len;
        let lines: Vec<String> = (0..n).map(message).collect();
        chat.replace(HEADER, &lines, WriteOptions::default())
            .await
            .unwrap();
        let size = chats.store().stat(path).await.unwrap().unwrap().size;
        (n, size)
    }

    fn median(mut v: Vec<Duration>) -> Duration {
        v.sort();
        v[v.len() / 2]
    }

    /// The four operations once on a chat; their durations.
    async fn once(chat: &ChatFile<'_, FsStore>, i: usize) -> [Duration; 4] {
        let t0 = Instant::now();
        let tail = chat.tail(50, false).await.unwrap();
        let tail_time = t0.elapsed();
        assert_eq!(tail.lines.len(), 50);

        let t0 = Instant::now();
        let page = chat.before(tail.cursor, 100).await.unwrap();
        let before_time = t0.elapsed();
        assert_eq!(page.lines.len(), 100);

        let t0 = Instant::now();
        let append = PatchOp::Append {
            lines: vec![message(1_000_000 + i)],
        };
        let cursor = chat
            .patch(tail.cursor, HEADER, &append, WriteOptions::default())
            .await
            .unwrap();
        let patch_time = t0.elapsed();
        // Put the chat back as it was, so every run sees the same file size.
        let restore = PatchOp::RewriteFromIndex {
            start_index: 50,
            lines: vec![],
        };
        chat.patch(cursor, HEADER, &restore, WriteOptions::default())
            .await
            .unwrap();

        let tail = chat.tail(50, false).await.unwrap();
        let backfill = PromptBackfill::new(PromptBackfill::DESKTOP_PAGES);
        let request = BackfillRequest {
            window: &tail.lines,
            cursor: tail.cursor,
            has_more_before: tail.has_more_before,
            budget_tokens: 8_000,
            page_lines: 20,
            max_pages: 100,
            max_messages: 10_000,
        };
        let t0 = Instant::now();
        let b = backfill
            .collect(chat, &request, &CharsPerToken::default())
            .await
            .unwrap();
        let backfill_time = t0.elapsed();
        assert!(!b.older.is_empty() && !b.is_stale());
        [tail_time, before_time, patch_time, backfill_time]
    }

    pub fn run() {
        pollster::block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let chats = Chats::new(FsStore::new(dir.path()));
            let (small_n, small_size) = build(&chats, "bench/small.jsonl", 500 * 1000).await;
            let (big_n, big_size) = build(&chats, "bench/big.jsonl", 50 * 1000 * 1000).await;
            let small = chats.chat("bench/small.jsonl").unwrap();
            let big = chats.chat("bench/big.jsonl").unwrap();
            let mut times: [[Vec<Duration>; 4]; 2] = Default::default();
            for i in 0..RUNS {
                for (k, chat) in [&small, &big].into_iter().enumerate() {
                    for (op, d) in once(chat, i).await.into_iter().enumerate() {
                        times[k][op].push(d);
                    }
                }
            }
            println!(
                "windowed chat file on the filesystem, median of {RUNS} runs, alternating\n\
                 small: {small_n} messages, {:.1} KB; big: {big_n} messages, {:.1} MB\n",
                small_size as f64 / 1e3,
                big_size as f64 / 1e6
            );
            println!(
                "{:<34} {:>12} {:>12} {:>8}",
                "operation", "500 KB", "50 MB", "ratio"
            );
            let names = [
                "tail(50)",
                "before(cursor, 100)",
                "patch append 1 line",
                "prompt backfill 8k tokens, cold",
            ];
            for (op, name) in names.iter().enumerate() {
                let s = median(times[0][op].clone());
                let b = median(times[1][op].clone());
                println!(
                    "{:<34} {:>9.1} µs {:>9.1} µs {:>7.2}x",
                    name,
                    s.as_secs_f64() * 1e6,
                    b.as_secs_f64() * 1e6,
                    b.as_secs_f64() / s.as_secs_f64()
                );
            }
        });
    }
}
