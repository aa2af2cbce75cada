//! Reading stays bounded by what the page needs, however long a line or a row (issue rows 3 and
//! 8): a 60 MB line is not read for a page that does not hold it, and a row longer than the
//! byte budget is cut and sent as a partial row that pages and folds back; the session list
//! holds a bounded part of any line, however long. A line longer than the catch-up bound is
//! still sent whole by every route (over real HTTP), and one being written is no change until
//! it ends.

mod server_support;

use scrollback::protocol::{parse_catch_up, CatchUpState, RESET_EVENT};
use scrollback_protocol::{coalesce, last_seq, Line, TranscriptQuery};
use scrollback_server::session::{Summaries, SUMMARY_LINE_BYTES};
use scrollback_server::transcript::reader::{offset_of_seq, seq_and_fingerprint_at, HEAD_BYTES};
use scrollback_server::transcript::torn::{Ends, MOST, REMEMBER_FROM};
use scrollback_server::transcript::{window_in, FileId, RUN_BYTES};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{Cursor, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

/// The system allocator, counting per thread the bytes allocated and not yet freed, and the
/// most at once: what a call made on this thread held.
struct Tracking;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call goes to `System` unchanged; the counting touches only const-initialised
// thread-locals (no allocation) and is skipped while they are torn down.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        note(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            note(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Tracking = Tracking;

/// Runs `f` and returns its answer and the most bytes it held allocated at once.
fn most_held<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(base));
    let out = f();
    let peak = PEAK.with(Cell::get);
    (out, (peak - base).max(0) as usize)
}

/// A file (in memory unless said) that counts the bytes read from it.
struct Counting<F = Cursor<Vec<u8>>> {
    inner: F,
    read: usize,
}

impl<F: Read> Read for Counting<F> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n;
        Ok(n)
    }
}

impl<F: Seek> Seek for Counting<F> {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(pos)
    }
}

fn file(text: String) -> (Counting, u64) {
    let end = text.len() as u64;
    let inner = Cursor::new(text.into_bytes());
    (Counting { inner, read: 0 }, end)
}

fn line(seq: u64, event: serde_json::Value) -> String {
    format!(
        "{}\n",
        serde_json::json!({"seq": seq, "ts": seq as f64, "event": event})
    )
}

fn page(f: &mut Counting, end: u64, query: &str) -> Vec<Line> {
    let query = TranscriptQuery::parse(query).unwrap();
    window_in(Path::new("test.jsonl"), f, end, &query).unwrap()
}

/// Asks for a page from a fresh count and checks its seqs and the bytes it read.
fn page_reading_at_most(f: &mut Counting, end: u64, query: &str, seqs: &[u64], most: usize) {
    f.read = 0;
    let lines = page(f, end, query);
    assert_eq!(
        lines.iter().map(Line::seq).collect::<Vec<_>>(),
        seqs,
        "{query}"
    );
    assert!(f.read <= most, "{query}: read {} bytes", f.read);
}

/// seq 1 a status, seq 2 a 60 MB tool result, seqs 3..=5 short user messages.
fn with_a_huge_line() -> String {
    let mut text = line(1, serde_json::json!({"type": "status", "status": "idle"}));
    let huge = "x".repeat(60 << 20);
    text.push_str(&line(
        2,
        serde_json::json!({"type": "toolResult", "text": huge}),
    ));
    for seq in 3..=5 {
        text.push_str(&line(
            seq,
            serde_json::json!({"type": "userMessage", "text": "hi"}),
        ));
    }
    text
}

#[test]
fn a_page_of_one_reads_no_line_before_it() {
    let (mut f, end) = file(with_a_huge_line());
    page_reading_at_most(&mut f, end, "limit=1", &[5], 8 << 10);
    // Three lines: the walk stops at seq 3 and never reads the 60 MB line before it.
    page_reading_at_most(&mut f, end, "limit=3", &[3, 4, 5], 64 << 10);
}

/// A page down to `after` stops at the long line at `after` holding only its head (a page
/// after a line of 300 MB held it, and its parse); a page that holds the long line has it whole.
#[test]
fn a_page_after_a_long_line_does_not_hold_it() {
    let text = with_a_huge_line();
    let huge = Line::parse(text.lines().nth(1).unwrap()).unwrap();
    let (mut f, end) = file(text);
    let (lines, held) = most_held(|| page(&mut f, end, "after=2"));
    assert_eq!(lines.iter().map(Line::seq).collect::<Vec<_>>(), [3, 4, 5]);
    assert!(held < 1 << 20, "the page held {held} bytes at once");
    let lines = page(&mut f, end, "after=1");
    assert_eq!(
        lines.iter().map(Line::seq).collect::<Vec<_>>(),
        [2, 3, 4, 5]
    );
    assert_eq!(lines[0], huge, "whole");
    let lines = page(&mut f, end, "after=1&before=3");
    assert_eq!(lines, [huge]);
}

#[test]
fn a_budget_does_not_read_a_line_it_cannot_hold() {
    let (mut f, end) = file(with_a_huge_line());
    page_reading_at_most(&mut f, end, "bytes=1000", &[3, 4, 5], 256 << 10);
    // Before seq 3 the huge line is the page (a page always has one line). The bisection may
    // cross the long line a few times and the walk reads it once: linear in it.
    page_reading_at_most(&mut f, end, "before=3&limit=1", &[2], 4 * (60 << 20));
}

#[test]
fn a_row_longer_than_the_budget_is_cut_into_pageable_partial_rows() {
    // One message streamed as 100,000 deltas, then a user message.
    let deltas = 100_000u64;
    let mut text = String::new();
    let mut raw = Vec::new();
    for seq in 1..=deltas {
        let l = line(
            seq,
            serde_json::json!({"type": "assistantText", "text": format!("w{seq} ")}),
        );
        raw.push(Line::parse(&l).unwrap());
        text.push_str(&l);
    }
    let user = line(
        deltas + 1,
        serde_json::json!({"type": "userMessage", "text": "ok"}),
    );
    raw.push(Line::parse(&user).unwrap());
    text.push_str(&user);
    let (mut f, end) = file(text);

    // limit=1&bytes=1 before the user message: one line (the newest delta), a partial row.
    let first = page(
        &mut f,
        end,
        &format!("before={}&limit=1&coalesce=true&bytes=1", deltas + 1),
    );
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].seq(), deltas);
    assert!(
        f.read <= 256 << 10,
        "read {} bytes for a one-line page",
        f.read
    );

    // A budget of 64 KiB: partial rows of about that much text each, paged back to seq 1; put
    // together they fold into the one row the whole run is.
    let mut pages: Vec<Vec<Line>> = Vec::new();
    let mut before = deltas + 1;
    while before > 1 {
        f.read = 0;
        let query = format!("before={before}&limit=1&coalesce=true&bytes=65536");
        let got = page(&mut f, end, &query);
        assert_eq!(got.len(), 1, "one partial row per page");
        assert!(
            got[0].raw().len() < 3 * 65536,
            "the row is cut near the budget"
        );
        assert!(f.read < 1 << 20, "read {} bytes for a 64 KiB page", f.read);
        assert_eq!(last_seq(&got[0]), before - 1);
        before = got[0].seq();
        pages.push(got);
    }
    let joined: Vec<Line> = pages.into_iter().rev().flatten().collect();
    assert_eq!(coalesce(&joined), coalesce(&raw[..deltas as usize]));
}

/// Without a budget a coalesced page held every line of the row it gathered: a reply of
/// millions of deltas cost hundreds of megabytes per request. It gathers at most
/// [`RUN_BYTES`] of a row's lines, sends that part as a partial row, and the pages before it
/// bring the rest, which folds back into the one row.
#[test]
fn a_page_with_no_budget_holds_a_bounded_part_of_a_long_row() {
    const TEXTS: [&str; 2] = [" ab", " cd"];
    let deltas = 200_000u64;
    let mut text = String::new();
    let mut raw = Vec::new();
    for seq in 1..=deltas {
        let l = line(
            seq,
            // (Alternating: a delta equal to the one before would be a replay, not a join.)
            serde_json::json!({"type": "assistantText", "text": TEXTS[seq as usize % 2], "messageId": "m"}),
        );
        raw.push(Line::parse(&l).unwrap());
        text.push_str(&l);
    }
    let whole = text.len();
    assert!(whole > 4 * RUN_BYTES, "the run is {whole} bytes");
    let (mut f, end) = file(text);
    let mut pages: Vec<Vec<Line>> = Vec::new();
    let mut before = deltas + 1;
    while before > 1 {
        let query = format!("before={before}&limit=1&coalesce=true");
        let (got, held) = most_held(|| page(&mut f, end, &query));
        assert_eq!(got.len(), 1, "one (partial) row per page");
        assert!(
            held < 4 * RUN_BYTES,
            "held {held} bytes for a page of a {whole}-byte run"
        );
        before = got[0].seq();
        pages.push(got);
    }
    assert!(pages.len() > 4, "{} pages", pages.len());
    let joined: Vec<Line> = pages.into_iter().rev().flatten().collect();
    assert_eq!(coalesce(&joined), coalesce(&raw));
}

#[test]
fn the_session_list_reads_heads_of_long_lines_and_holds_a_bounded_part_of_them() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("long")).unwrap();
    let path = tmp.path().join("long").join("transcript.jsonl");
    let append = |text: &str| {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    };
    // Settings, the first user message and a status, then two 24 MB lines, the newest last.
    let big = "x".repeat(24 << 20);
    append(&line(
        1,
        serde_json::json!({"type": "settings", "model": "m1", "permissionMode": "plan"}),
    ));
    append(&line(
        2,
        serde_json::json!({"type": "userMessage", "text": "fix the build"}),
    ));
    append(&line(
        3,
        serde_json::json!({"type": "status", "status": "running"}),
    ));
    append(&line(
        4,
        serde_json::json!({"type": "toolResult", "output": big}),
    ));
    append(&line(
        5,
        serde_json::json!({"type": "assistantText", "text": big}),
    ));
    let summaries = Summaries::default();
    let bound = SUMMARY_LINE_BYTES + 1024 * 1024;
    let check = |seq: u64, status: &str| {
        let (list, held) = most_held(|| summaries.list(tmp.path()).unwrap());
        assert_eq!(list.len(), 1);
        let s = &list[0];
        assert_eq!(
            (s.seq, s.status.as_str(), s.model.as_str()),
            (seq, status, "m1")
        );
        assert_eq!(
            (s.permission_mode.as_str(), s.title.as_str()),
            ("plan", "fix the build")
        );
        // The newest seq comes from the head of a 24 MB line, status and settings from the
        // short lines past both: never a long line held whole.
        assert!(held < bound, "listing held {held} bytes at once");
    };
    check(5, "running");
    // Appended to (the cached summary is brought up to date): another long line, then a
    // short status.
    append(&line(
        6,
        serde_json::json!({"type": "toolResult", "output": big}),
    ));
    check(6, "running");
    append(&line(
        7,
        serde_json::json!({"type": "status", "status": "idle"}),
    ));
    check(7, "idle");
}

/// A stream asking for what follows a long line (`/events?after=2`, its client's cursor line
/// checked by `at`) finds where seq 3 starts, and the long line's fingerprint, holding a bounded
/// part of it: six such streams held 1.8 GB at once, reading and parsing it whole.
#[test]
fn the_line_after_a_long_one_and_its_fingerprint_are_found_holding_its_head() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("transcript.jsonl");
    let big = "x".repeat(24 << 20);
    let long = line(2, serde_json::json!({"type": "toolResult", "output": big}));
    let text = line(1, serde_json::json!({"type": "userMessage", "text": "hi"}))
        + &long
        + &line(
            3,
            serde_json::json!({"type": "userMessage", "text": "next"}),
        );
    std::fs::write(&path, &text).unwrap();
    let (end, second) = (text.len() as u64, text.find(&long).unwrap() as u64);
    let third = second + long.len() as u64;
    let fingerprint = Line::parse(&long).unwrap().fingerprint();
    drop(big);
    let mut file = std::fs::File::open(&path).unwrap();
    let bound = HEAD_BYTES + 1024 * 1024;
    let (at, held) = most_held(|| offset_of_seq(&path, &mut file, end, 3).unwrap());
    assert_eq!(at, third);
    assert!(held < bound, "the search held {held} bytes at once");
    let (found, held) =
        most_held(|| seq_and_fingerprint_at(&path, &mut file, second, end).unwrap());
    assert_eq!(found, Some((2, fingerprint)));
    assert!(held < bound, "the fingerprint held {held} bytes at once");
    // A short line's, as before.
    let first = seq_and_fingerprint_at(&path, &mut file, 0, end).unwrap();
    let want = Line::parse(text.lines().next().unwrap()).unwrap();
    assert_eq!(first, Some((1, want.fingerprint())));
}

/// A post appends after the newest line: the seq of a long one is read from its head, and its
/// bytes are never held whole (six posts after 100 MB lines held 1.1 GB at once); a long line
/// with another key first is read whole, so that no seq is given twice.
#[test]
fn an_append_after_a_long_line_reads_its_seq_from_its_head() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("transcript.jsonl");
    let big = "x".repeat(24 << 20);
    let text = line(1, serde_json::json!({"type": "userMessage", "text": "hi"}))
        + &line(2, serde_json::json!({"type": "toolResult", "output": big}));
    std::fs::write(&path, text).unwrap();
    let event = || match serde_json::json!({"type": "userMessage", "text": "next"}) {
        serde_json::Value::Object(map) => map,
        _ => unreachable!(),
    };
    let (appended, held) = most_held(|| scrollback_server::transcript::append(&path, event()));
    assert_eq!(appended.unwrap().seq(), 3);
    let bound = SUMMARY_LINE_BYTES + 1024 * 1024;
    assert!(held < bound, "the append held {held} bytes at once");
    // Its seq last: read whole.
    let seq_last =
        serde_json::json!({"ts": 1.0, "event": {"type": "toolResult", "output": big}, "seq": 4});
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(format!("{seq_last}\n").as_bytes()).unwrap();
    let appended = scrollback_server::transcript::append(&path, event()).unwrap();
    assert_eq!(appended.seq(), 5);
    let text = std::fs::read_to_string(&path).unwrap();
    let seqs: Vec<u64> = text
        .lines()
        .map(|l| Line::parse(l).unwrap().seq())
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
}

/// The number of looks streams have made at their files so far (`/stats`).
async fn looks(f: &server_support::Fixture) -> u64 {
    let stats: serde_json::Value = f.get("/stats").await.json().await.unwrap();
    stats["streams"]["looks"].as_u64().unwrap()
}

#[tokio::test]
async fn a_long_line_being_written_is_no_change_until_its_newline() {
    let f = server_support::Fixture::new().await;
    f.write("s", &server_support::transcript(1_100));
    let mut sse = f.events("s", "after=1100").await;
    // Another process writes a 3 MiB line in 64 KiB pieces; the stream looks at each piece
    // before the next is written (its torn tail passes the catch-up bound half way).
    let long = line(
        1_101,
        serde_json::json!({"type": "toolResult", "output": "x".repeat(3 << 20)}),
    );
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(f.transcript_path("s"))
        .unwrap();
    let (head, newline) = long.as_bytes().split_at(long.len() - 1);
    for piece in head.chunks(64 << 10) {
        let before = looks(&f).await;
        file.write_all(piece).unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while looks(&f).await <= before {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the stream never looked"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    file.write_all(newline).unwrap();
    // No reset while it was torn: the next event is the line, whole, then what follows it.
    let event = sse.next().await;
    assert_eq!(
        (event.event.as_str(), event.id.as_str()),
        ("message", "1101")
    );
    assert_eq!(event.data, long.trim_end());
    f.append(
        "s",
        &line(
            1_102,
            serde_json::json!({"type": "status", "status": "idle"}),
        ),
    );
    let event = sse.next().await;
    assert_eq!(
        (event.event.as_str(), event.id.as_str()),
        ("message", "1102")
    );
}

#[tokio::test]
async fn a_line_longer_than_the_catch_up_bound_is_sent_whole_by_every_route() {
    let f = server_support::Fixture::new().await;
    // seqs 1 and 2 short, seq 3 a 1.5 MiB tool result.
    let long = line(
        3,
        serde_json::json!({"type": "toolResult", "output": "x".repeat(3 << 19)}),
    );
    let text = server_support::transcript(2) + &long;
    let put = f.put("/sessions/big/transcript", text.clone()).await;
    assert!(put.status().is_success(), "{}", put.status());
    let all = server_support::lines(&text);
    let raws = |lines: &[Line]| lines.iter().map(|l| l.raw().to_owned()).collect::<Vec<_>>();

    // `/transcript`: the newest window holds it.
    assert_eq!(raws(&f.page("big", "").await), raws(&all));
    // `/catchup` after seq 2: nothing is skipped, so caught up with the cursor's line and it.
    let body = f
        .get("/sessions/big/catchup?cursor=2")
        .await
        .text()
        .await
        .unwrap();
    let answer = parse_catch_up(&body).unwrap();
    assert_eq!(answer.state, CatchUpState::CaughtUp);
    assert_eq!(raws(&answer.lines), raws(&all[1..]));
    // `/events` after seq 2: the line, no reset.
    let mut sse = f.events("big", "after=2").await;
    let event = sse.next().await;
    assert_eq!((event.event.as_str(), event.id.as_str()), ("message", "3"));
    assert_eq!(event.data, long.trim_end());
    // After seq 1 the lines pass the bound and seq 2 does not fit the window: behind, and the
    // window is the long line. Past the newest: ahead, with the same window.
    for (after, reason) in [(1, "behind"), (9, "ahead")] {
        let mut reset = f.events("big", &format!("after={after}")).await;
        let frame = reset.next().await;
        assert_eq!(frame.event, RESET_EVENT, "after={after}");
        let data: serde_json::Value = serde_json::from_str(&frame.data).unwrap();
        assert_eq!(data, serde_json::json!({"reason": reason, "first": 3}));
        let event = reset.next().await;
        assert_eq!(
            (event.id.as_str(), event.data.as_str()),
            ("3", long.trim_end())
        );
    }

    // Live: a posted message longer than the bound reaches the open stream as its line.
    let text = "y".repeat(1_200_000);
    let response = f
        .post_json("/sessions/big/messages", &serde_json::json!({"text": text}))
        .await;
    assert_eq!(response.status(), 200);
    let posted = response.text().await.unwrap();
    let event = sse.next().await;
    assert_eq!((event.event.as_str(), event.id.as_str()), ("message", "4"));
    assert_eq!(event.data, posted);
}

#[tokio::test]
async fn a_catch_up_past_the_bound_never_repeats_a_line_at_or_before_the_cursor() {
    let f = server_support::Fixture::new().await;
    // 20 short lines, three of 512 KiB, one short.
    let mut text = server_support::transcript(20);
    for seq in 21..=23 {
        let output = format!("{seq} {}", "z".repeat(512 << 10));
        text.push_str(&line(
            seq,
            serde_json::json!({"type": "toolResult", "output": output}),
        ));
    }
    text.push_str(&line(
        24,
        serde_json::json!({"type": "status", "status": "idle"}),
    ));
    f.write("s", &text);
    let all = server_support::lines(&text);
    // (query, state, seqs): the window reaching down to the cursor skips nothing (caught up);
    // a window of 2 skips seqs 21 and 22 (behind).
    let want: [(&str, CatchUpState, Vec<u64>); 3] = [
        ("cursor=20", CatchUpState::CaughtUp, (20..=24).collect()),
        ("cursor=5", CatchUpState::CaughtUp, (5..=24).collect()),
        ("cursor=20&limit=2", CatchUpState::Behind, vec![20, 23, 24]),
    ];
    for (query, state, seqs) in want {
        let body = f
            .get(&format!("/sessions/s/catchup?{query}"))
            .await
            .text()
            .await
            .unwrap();
        let answer = parse_catch_up(&body).unwrap();
        assert_eq!(answer.state, state, "{query}");
        assert_eq!(server_support::seqs(&answer.lines), seqs, "{query}");
        for l in &answer.lines {
            assert_eq!(l.raw(), all[l.seq() as usize - 1].raw(), "{query}");
        }
    }
}

/// The end of `path`'s complete lines through `ends`, and the bytes that read.
fn end_through(ends: &Ends, path: &Path) -> (u64, usize) {
    let inner = std::fs::File::open(path).unwrap();
    let meta = inner.metadata().unwrap();
    let mut file = Counting { inner, read: 0 };
    let end = ends
        .complete_end(&mut file, FileId::of(&meta), meta.len())
        .unwrap();
    (end, file.read)
}

#[test]
fn a_long_torn_line_is_searched_once_and_what_is_appended_to_it_after() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("transcript.jsonl");
    let head = server_support::transcript(100);
    let torn = |n: usize| {
        format!(
            r#"{{"seq":101,"ts":1.0,"event":{{"type":"toolResult","output":"{}"#,
            "x".repeat(n)
        )
    };
    std::fs::write(&path, format!("{head}{}", torn(4 << 20))).unwrap();
    let append = |text: &str| {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    };
    let ends = Ends::default();
    let want = head.len() as u64;
    // (What tells the file apart: its head and the bytes before the end, a few kB.)
    let small = 8 << 10;

    // The first read searches the whole torn part; the next ones only what was appended.
    let (end, read) = end_through(&ends, &path);
    assert_eq!(end, want);
    assert!(read >= 4 << 20, "read {read}");
    assert_eq!(ends.len(), 1);
    let (end, read) = end_through(&ends, &path);
    assert_eq!((end, read <= small), (want, true), "read {read}");
    append(&"x".repeat(512 << 10));
    let (end, read) = end_through(&ends, &path);
    assert_eq!(
        (end, read <= small + (512 << 10)),
        (want, true),
        "read {read}"
    );

    // The line ends and a short one starts: its end is found, and nothing is remembered.
    append("\"}}\n{\"seq\":102");
    let (end, read) = end_through(&ends, &path);
    let len = std::fs::metadata(&path).unwrap().len();
    assert_eq!(end, len - r#"{"seq":102"#.len() as u64);
    assert!(read <= small + 64, "read {read}");
    assert!(ends.is_empty());

    // Torn again, then rewritten in place (the same inode), longer than was searched, with
    // other lines: what was remembered is not what the file holds, so it is searched whole.
    append(&"y".repeat(2 << 20));
    assert_eq!(end_through(&ends, &path).0, end);
    assert_eq!(ends.len(), 1);
    let other = server_support::transcript(300);
    let rewritten = format!("{other}{}", torn(8 << 20));
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all(rewritten.as_bytes()).unwrap();
    f.set_len(rewritten.len() as u64).unwrap();
    drop(f);
    assert_eq!(end_through(&ends, &path).0, other.len() as u64);

    // A file whose only line is torn (its first, still being written) is remembered too, told
    // apart by that line's first bytes: searched once, then only what was appended.
    let only = dir.path().join("only.jsonl");
    std::fs::write(&only, torn(2 << 20)).unwrap();
    let before = ends.len();
    assert_eq!(end_through(&ends, &only).0, 0);
    assert_eq!(ends.len(), before + 1);
    let (end, read) = end_through(&ends, &only);
    assert_eq!((end, read <= small), (0, true), "read {read}");
    // Rewritten in place with whole lines and another torn one: searched whole again.
    let mut f = std::fs::OpenOptions::new().write(true).open(&only).unwrap();
    f.write_all(format!("{head}{}", torn(2 << 20)).as_bytes())
        .unwrap();
    drop(f);
    assert_eq!(end_through(&ends, &only).0, want);

    // Remembered files are bounded.
    for i in 0..MOST + 8 {
        let path = dir.path().join(format!("{i}.jsonl"));
        std::fs::write(&path, format!("{head}{}", torn(REMEMBER_FROM as usize))).unwrap();
        assert_eq!(end_through(&ends, &path).0, want);
    }
    assert_eq!(ends.len(), MOST);
}

/// Session `s`'s newest line as a page, a catch-up from seq 90 and the session list say it.
async fn newest(f: &server_support::Fixture) -> (Option<u64>, Option<u64>, u64) {
    let page = f.page("s", "limit=1").await;
    let body = f.get("/sessions/s/catchup?cursor=90").await.text().await;
    let caught = parse_catch_up(&body.unwrap()).unwrap();
    let list: serde_json::Value = f.get("/sessions").await.json().await.unwrap();
    let listed = list.as_array().unwrap().iter().find(|s| s["id"] == "s");
    (
        page.last().map(Line::seq),
        server_support::seqs(&caught.lines).last().copied(),
        listed.unwrap()["seq"].as_u64().unwrap(),
    )
}

/// What a writer does to a transcript, drawn at random: a line, a piece of a long torn line, its
/// newline, a rewrite in place (the same inode) with other lines, or a truncation to a line end.
#[test]
fn remembered_ends_agree_with_a_whole_search_over_random_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("transcript.jsonl");
    std::fs::write(&path, "").unwrap();
    let ends = Ends::default();
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let mut seq = 0;
    let mut remembered = 0;
    for step in 0..400 {
        let text = std::fs::read(&path).unwrap();
        let torn = !text.is_empty() && !text.ends_with(b"\n");
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        match next(10) {
            0..=2 if !torn => {
                seq += 1;
                let words = format!("w{} w{}", next(1 << 40), next(1 << 40));
                let line = line(
                    seq,
                    serde_json::json!({"type": "userMessage", "text": words}),
                );
                file.write_all(line.as_bytes()).unwrap();
            }
            0..=5 => {
                if !torn {
                    seq += 1;
                    write!(
                        file,
                        r#"{{"seq":{seq},"ts":1.0,"event":{{"type":"toolResult","output":""#
                    )
                    .unwrap();
                }
                let piece = "x".repeat(next(700 << 10) as usize + 1);
                file.write_all(piece.as_bytes()).unwrap();
            }
            6 | 7 if torn => file.write_all(b"\"}}\n").unwrap(),
            8 => {
                // Rewritten in place: other lines, then maybe a long torn one.
                drop(file);
                let mut other = String::new();
                for s in 1..=next(40) + 1 {
                    let words = format!("r{} r{}", next(1 << 40), next(1 << 40));
                    other.push_str(&line(
                        s,
                        serde_json::json!({"type": "userMessage", "text": words}),
                    ));
                    seq = s;
                }
                if next(2) == 0 {
                    seq += 1;
                    other.push_str(&format!(
                        r#"{{"seq":{seq},"output":"{}"#,
                        "y".repeat(next(8 << 20) as usize)
                    ));
                }
                let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                f.write_all(other.as_bytes()).unwrap();
                f.set_len(other.len() as u64).unwrap();
            }
            _ => {
                // Truncated to the end of its complete lines.
                drop(file);
                let end = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .unwrap()
                    .set_len(end as u64)
                    .unwrap();
                seq = std::fs::read_to_string(&path).unwrap().lines().count() as u64;
            }
        }
        let text = std::fs::read(&path).unwrap();
        let want = text
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i as u64 + 1);
        assert_eq!(end_through(&ends, &path).0, want, "step {step}");
        remembered += ends.len();
    }
    // (The walk did remember torn parts, so the remembered path was taken.)
    assert!(remembered > 50, "remembered {remembered}");
}

#[tokio::test]
async fn every_route_answers_the_complete_lines_while_a_long_line_is_written_and_after() {
    let f = server_support::Fixture::new().await;
    f.write("s", &server_support::transcript(100));
    // A 3 MiB line written in pieces of 1 MiB: at every piece, the newest line is 100.
    let long = line(
        101,
        serde_json::json!({"type": "toolResult", "output": "x".repeat(3 << 20)}),
    );
    let (body, newline) = long.split_at(long.len() - 1);
    for piece in body.as_bytes().chunks(1 << 20) {
        f.append("s", std::str::from_utf8(piece).unwrap());
        assert_eq!(newest(&f).await, (Some(100), Some(100), 100));
        // (Through the process's ends: this file's torn part, 1 MiB or more, is remembered.)
        assert!(!Ends::process().is_empty());
    }
    f.append("s", newline);
    assert_eq!(newest(&f).await, (Some(101), Some(101), 101));

    // Replaced by another transcript, then torn at its end: the new file's lines.
    let response = f
        .put("/sessions/s/transcript", server_support::transcript(95))
        .await;
    assert_eq!(response.status(), 200);
    f.append("s", body);
    assert_eq!(newest(&f).await, (Some(95), Some(95), 95));
}
