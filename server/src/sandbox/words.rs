//! The sandbox's words: a small deterministic random source and the text it strings together.

use scrollback_protocol::clean_append;
use serde_json::{json, Value};

/// SplitMix64: small, fast, and the same sequence on every machine for a seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// A number in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `n` lowercase hex digits.
    pub fn hex(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| char::from_digit(self.below(16) as u32, 16).unwrap_or('0'))
            .collect()
    }

    /// A UUID-shaped string.
    pub fn uuid(&mut self) -> String {
        format!(
            "{}-{}-4{}-a{}-{}",
            self.hex(8),
            self.hex(4),
            self.hex(3),
            self.hex(3),
            self.hex(12)
        )
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &[
    "the",
    "cache",
    "keeps",
    "every",
    "line",
    "that",
    "server",
    "sent",
    "and",
    "reads",
    "them",
    "back",
    "when",
    "screen",
    "opens",
    "again",
    "stream",
    "resumes",
    "from",
    "newest",
    "event",
    "so",
    "nothing",
    "is",
    "skipped",
    "or",
    "duplicated",
    "page",
    "rows",
    "folded",
    "deltas",
    "message",
    "window",
    "file",
    "bytes",
    "offset",
    "block",
    "reader",
    "walks",
    "backwards",
    "until",
    "limit",
    "reached",
    "this",
    "means",
    "cost",
    "does",
    "not",
    "grow",
    "with",
    "transcript",
    "size",
    "we",
    "can",
    "check",
    "test",
    "build",
    "run",
    "again",
    "before",
    "after",
    "sequence",
    "number",
    "probe",
    "compares",
    "parsed",
    "value",
    "timestamp",
    "float",
    "round",
    "trip",
    "exactly",
    "storage",
    "budget",
    "evicts",
    "least",
    "recently",
    "opened",
    "session",
    "list",
    "prunes",
    "deleted",
    "ones",
    "reset",
    "leaves",
    "gap",
    "filled",
    "by",
    "paging",
    "only",
    "what",
    "reader",
    "scrolls",
    "to",
    "here",
    "is",
    "plan",
    "first",
    "then",
    "next",
    "finally",
    "should",
    "would",
    "could",
    "because",
    "which",
    "where",
    "while",
    "function",
    "module",
    "returns",
    "error",
    "result",
    "option",
    "field",
    "struct",
    "trait",
    "async",
    "await",
    "worker",
    "thread",
    "lock",
    "writer",
    "append",
    "chunk",
    "coverage",
];

const ENDS: &[&str] = &[".", ",", ":", ";", ".\n\n", ".\n\n- ", "!", "?"];

/// The next streamed delta after `prev`: one or two words, now and then punctuation, always a
/// clean append of `prev` (so a reply is one row by the row rule).
pub fn delta(rng: &mut Rng, prev: &str) -> String {
    loop {
        let mut text = String::new();
        if !prev.is_empty() && rng.below(9) == 0 {
            text.push_str(rng.pick(ENDS));
        }
        for _ in 0..=rng.below(2) {
            if !text.ends_with(' ') {
                text.push(' ');
            }
            text.push_str(rng.pick(WORDS));
        }
        if prev.is_empty() {
            text = text.trim_start().to_owned();
            let mut chars = text.chars();
            if let Some(c) = chars.next() {
                text = c.to_uppercase().chain(chars).collect();
            }
        }
        if prev.is_empty() || clean_append(prev, &text) {
            return text;
        }
    }
}

const ASKS: &[&str] = &[
    "Why does the reader walk backwards instead of loading the file?",
    "Can you add a test for the reset path?",
    "Refactor the chunk writer so appends cost one line.",
    "What happens when the file is replaced while streaming?",
    "Measure the page time against a bigger transcript.",
    "Explain the row rule with an example.",
    "Fix the flaky test in the stream module.",
    "Write the release notes for this week.",
    "Review the budget eviction code.",
    "Trace where the seq gets lost after a reconnect.",
];

/// Something a user asks.
pub fn ask(rng: &mut Rng) -> String {
    rng.pick(ASKS).to_owned()
}

/// A tool the agent uses: name, input, and a realistic output (a few hundred bytes to a few KB).
pub fn tool_use(rng: &mut Rng) -> (&'static str, Value, String) {
    match rng.below(3) {
        0 => {
            let path = format!("src/{}/{}.rs", rng.pick(WORDS), rng.pick(WORDS));
            let lines = 10 + rng.below(60);
            let body: String = (1..=lines)
                .map(|n| format!("{n:>4}  {}\n", sentence(rng, 8)))
                .collect();
            ("read", json!({"path": path}), body)
        }
        1 => {
            let out: String = (0..5 + rng.below(30))
                .map(|_| format!("test {}::{} ... ok\n", rng.pick(WORDS), rng.pick(WORDS)))
                .collect();
            (
                "bash",
                json!({"command": "cargo test --release", "timeout": 120_000}),
                out,
            )
        }
        _ => {
            let pattern = rng.pick(WORDS);
            let out: String = (0..3 + rng.below(20))
                .map(|_| {
                    format!(
                        "src/{}.rs:{}: {}\n",
                        rng.pick(WORDS),
                        rng.below(900),
                        sentence(rng, 6)
                    )
                })
                .collect();
            ("grep", json!({"pattern": pattern, "path": "src"}), out)
        }
    }
}

fn sentence(rng: &mut Rng, words: usize) -> String {
    (0..words)
        .map(|_| rng.pick(WORDS))
        .collect::<Vec<_>>()
        .join(" ")
}
