//! The fold's tests: display rows drawn from coalesced pages equal rows drawn from the raw
//! events, whatever the pages' seams; non-foldable types pass through untouched; two sessions
//! numbered from 1 never mix; malformed lines pass through. They run natively (`cargo test`)
//! and, unchanged, as wasm-bindgen tests in headless Chromium (`scripts/wasm.sh test`).

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;
#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

use scrollback::engine::{SavedScreen, View};
use scrollback::fold::{Change, FoldError, Row, SessionState, Transcript};
use scrollback::protocol::{
    coalesce, joins, last_seq, CatchUpAnswer, CatchUpState, Line, RowWalk, SessionSummary, FOLDED,
};
use serde_json::{json, Value};

/// SplitMix64: a small seeded generator, the same on every platform (no `getrandom` in wasm).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

fn line(seq: u64, event: Value) -> Line {
    let Value::Object(event) = event else {
        panic!("events are objects")
    };
    Line::new(seq, 1788546972.0 + seq as f64 / 1000.0, event).unwrap()
}

fn delta(seq: u64, text: &str) -> Line {
    line(seq, json!({"type": "assistantText", "text": text}))
}

/// A random transcript of `n` events numbered from 1. Delta texts come from a tiny alphabet so
/// that repeats, prefixes and overlaps (the appends that must not fold) are common; every event
/// type appears, with unknown types and malformed known ones among them.
fn random_events(rng: &mut Rng, n: u64) -> Vec<Line> {
    const TEXTS: &[&str] = &[
        "a", "b", "ab", "ba", " a", "a ", "c", "abc", "bc", " the", "",
    ];
    const IDS: &[&str] = &["t1", "t2", "t3"];
    let mut out = Vec::new();
    let mut seq = 1;
    while seq <= n {
        let roll = rng.below(100);
        if roll < 55 {
            // A burst of deltas, mostly of one message.
            let burst = 1 + rng.below(12);
            for _ in 0..burst {
                if seq > n {
                    break;
                }
                let text = *rng.pick(TEXTS);
                let event = match rng.below(12) {
                    0 => json!({"type": "assistantText", "text": text, "messageId": "m2"}),
                    1 => json!({"type": "assistantText", "text": text}),
                    2 => json!({"type": "assistantText", "text": text, "messageId": 5}),
                    _ => json!({"type": "assistantText", "text": text, "messageId": "m1"}),
                };
                out.push(line(seq, event));
                seq += 1;
            }
            continue;
        }
        let id = *rng.pick(IDS);
        let event = match roll {
            55..=59 => {
                json!({"type": "userMessage", "text": "hi", "queuedId": if rng.chance(50) { Value::from("q1") } else { Value::Null }})
            }
            60..=64 => {
                json!({"type": "toolCall", "id": id, "name": "read", "input": {"path": "a.rs"}})
            }
            65..=69 => {
                json!({"type": "toolResult", "id": id, "output": "ok", "isError": rng.chance(20)})
            }
            70..=73 => {
                json!({"type": "command", "id": id, "command": "/compact", "done": rng.chance(50), "output": "done"})
            }
            74..=76 => json!({"type": "usageDelta", "context": rng.below(100_000)}),
            77..=78 => json!({"type": "status", "status": *rng.pick(&["idle", "working"])}),
            79 => json!({"type": "settings", "model": "m", "permissionMode": "ask"}),
            80..=81 => json!({"type": "messageQueued", "id": "q1", "text": "later"}),
            82 => json!({"type": "compacting", "active": rng.chance(50)}),
            83 => json!({"type": "error", "message": "boom"}),
            // Unknown types, one of which looks like text: never folded.
            84..=87 => json!({"type": "thinking", "text": *rng.pick(TEXTS), "messageId": "m1"}),
            88..=89 => json!({"type": "futureThing", "nested": {"x": [1, 2.5]}}),
            // Known types of the wrong shape.
            90 => json!({"type": "toolCall", "name": "no id"}),
            91 => json!({"type": "assistantText", "text": 7, "messageId": "m1"}),
            92 => json!({"type": "assistantText", "text": "x", "messageId": "m1", FOLDED: "junk"}),
            93 => json!({"type": "assistantText", "text": *rng.pick(TEXTS), "messageId": 5}),
            _ => json!({"type": "assistantText", "text": *rng.pick(TEXTS), "messageId": "m1"}),
        };
        out.push(line(seq, event));
        seq += 1;
    }
    out
}

/// The server's page: lines with `after < seq < before`, the newest `limit` rows of them by
/// the row rule, coalesced. Built from the protocol's functions, as the server builds it.
fn server_page(lines: &[Line], before: u64, after: u64, limit: usize) -> Vec<Line> {
    let mut walk = RowWalk::new(limit);
    let mut taken: Vec<Line> = lines
        .iter()
        .filter(|l| l.seq() < before && l.seq() > after)
        .rev()
        .take_while(|l| walk.take(l))
        .cloned()
        .collect();
    taken.reverse();
    coalesce(&taken)
}

fn rows(t: &Transcript) -> Vec<Row> {
    t.rows().iter().cloned().collect()
}

fn raw_rows(lines: &[Line]) -> Vec<Row> {
    rows(&Transcript::from_lines(lines).unwrap())
}

#[test]
fn rows_from_coalesced_pages_cut_anywhere_equal_rows_from_raw_events() {
    let mut rng = Rng(0x5eed_0001);
    for case in 0..150 {
        let n = 20 + rng.below(180);
        let events = random_events(&mut rng, n);
        let want = raw_rows(&events);

        // Pages tiling the transcript at random seams, each coalesced on its own, loaded
        // newest first.
        let mut cuts: Vec<usize> = (0..rng.below(8))
            .map(|_| rng.below(events.len() as u64) as usize)
            .collect();
        cuts.extend([0, events.len()]);
        cuts.sort();
        cuts.dedup();
        let pages: Vec<Vec<Line>> = cuts
            .windows(2)
            .map(|w| coalesce(&events[w[0]..w[1]]))
            .collect();
        let mut t = Transcript::new();
        for page in pages.iter().rev() {
            t.push_older(page).unwrap();
        }
        assert_eq!(rows(&t), want, "case {case}: pages cut at {cuts:?}");

        // The same pages concatenated (chunks read in a row) coalesce to what the raw events
        // coalesce to, and count the same rows.
        let joined: Vec<Line> = pages.concat();
        assert_eq!(coalesce(&joined), coalesce(&events), "case {case}");
        let count = |lines: &[Line]| {
            let mut walk = RowWalk::new(usize::MAX);
            lines.iter().rev().for_each(|l| assert!(walk.take(l)));
            walk.rows()
        };
        assert_eq!(count(&joined), count(&events), "case {case}");
    }
}

#[test]
fn a_client_paging_back_with_limits_and_after_cuts_draws_the_raw_rows() {
    let mut rng = Rng(0x5eed_0002);
    for case in 0..150 {
        let n = 20 + rng.below(180);
        let events = random_events(&mut rng, n);
        let want = raw_rows(&events);
        let n = events.len();

        // An opening window of raw events somewhere in the middle, history paged back from it
        // (limits in rows, sometimes cut by `after`), then the rest streamed in.
        let start = rng.below(n as u64 + 1) as usize;
        let stop = start + rng.below((n - start) as u64 + 1) as usize;
        let mut t = Transcript::new();
        for l in &events[start..stop] {
            t.push_newer(l).unwrap();
        }
        let mut before = events.get(start).map_or(n as u64 + 1, Line::seq);
        if start == stop {
            // Nothing held yet: the first page is asked for below `start`.
            before = start as u64 + 1;
        }
        let mut trace = Vec::new();
        while before > 1 {
            let after = if rng.chance(30) {
                rng.below(before - 1)
            } else {
                0
            };
            let limit = 1 + rng.below(6) as usize;
            let page = server_page(&events, before, after, limit);
            assert!(
                !page.is_empty(),
                "case {case}: an empty page before {before}"
            );
            assert_eq!(
                last_seq(page.last().unwrap()),
                before - 1,
                "case {case}: coverage"
            );
            trace.push((before, after, limit));
            t.push_older(&page).unwrap();
            before = page[0].seq();
        }
        for l in &events[stop..] {
            t.push_newer(l).unwrap();
        }
        assert_eq!(
            rows(&t),
            want,
            "case {case}: window {start}..{stop}, pages {trace:?}"
        );
        assert_eq!(t.first_seq(), Some(1));
        assert_eq!(t.last_seq(), Some(n as u64));
    }
}

#[test]
fn every_non_foldable_line_passes_through_untouched() {
    let mut rng = Rng(0x5eed_0003);
    let events = random_events(&mut rng, 3000);
    let page = coalesce(&events);
    let mut folded = page.iter().peekable();
    for l in &events {
        let joinable = l.event_type() == "assistantText"
            && l.text().is_some_and(|t| !t.is_empty())
            && l.event().get(FOLDED).is_none();
        if joinable {
            // A delta is either the first of its row (it starts a line of the page) or inside it.
            if folded.peek().is_some_and(|f| f.seq() == l.seq()) {
                folded.next();
            }
            continue;
        }
        let out = folded.next().expect("every other line is in the page");
        assert_eq!(out.raw(), l.raw(), "byte for byte");
    }
    assert!(folded.next().is_none());

    // Identical neighbours of every other type stay separate lines and separate rows.
    let others = [
        json!({"type": "userMessage", "text": "a"}),
        json!({"type": "usageDelta", "context": 5}),
        json!({"type": "status", "status": "working"}),
        json!({"type": "settings", "model": "x"}),
        json!({"type": "messageQueued", "id": "q", "text": "a"}),
        json!({"type": "toolCall", "id": "t", "name": "n", "input": {}}),
        json!({"type": "compacting", "active": true}),
        json!({"type": "error", "message": "a"}),
        json!({"type": "thinking", "text": "a"}),
        json!({"type": "futureThing"}),
    ];
    for event in others {
        let lines = [line(1, event.clone()), line(2, event.clone())];
        assert_eq!(coalesce(&lines).len(), 2, "{event}");
        assert_eq!(raw_rows(&lines).len(), 2, "{event}");
    }
}

#[test]
fn a_page_seam_in_the_middle_of_a_run_welds() {
    let words = [" The", " cat", " sat", " on", " the", " mat"];
    let lines: Vec<Line> = std::iter::once(line(1, json!({"type": "userMessage", "text": "go"})))
        .chain(words.iter().zip(2..).map(|(w, s)| delta(s, w)))
        .collect();
    let whole = raw_rows(&lines);
    assert_eq!(whole.len(), 2);
    let Row::Assistant {
        seq,
        last_seq,
        text,
        ..
    } = &whole[1]
    else {
        panic!("{whole:?}")
    };
    assert_eq!(
        (*seq, *last_seq, text.as_str()),
        (2, 7, " The cat sat on the mat")
    );

    // Raw newest window from " on", a coalesced older page up to " sat": one row.
    let mut t = Transcript::new();
    for l in &lines[5..] {
        t.push_newer(l).unwrap();
    }
    assert_eq!(t.rows().len(), 1);
    let older = coalesce(&lines[..5]);
    assert_eq!(older.len(), 2);
    t.push_older(&older).unwrap();
    assert_eq!(rows(&t), whole);

    // Two coalesced pages meeting inside the run, and a coalesced line streamed in after.
    let mut t = Transcript::new();
    t.push_older(&coalesce(&lines[3..])).unwrap();
    t.push_older(&coalesce(&lines[..3])).unwrap();
    assert_eq!(rows(&t), whole);
    let mut t = Transcript::from_lines(&coalesce(&lines[..4])).unwrap();
    for l in coalesce(&lines[4..]) {
        assert_eq!(t.push_newer(&l), Ok(Change::Grew));
    }
    assert_eq!(rows(&t), whole);
}

#[test]
fn a_seam_where_the_raw_deltas_do_not_join_stays_a_seam_of_the_wire() {
    // "ab" then "a" is not a clean append ("a" is a prefix of "ab"): two rows on the wire (the
    // server does not fold them, pages count them apart). Folded, the newer row reads "ac",
    // which *would* be a clean append of "ab"; the fold marker makes the rule compare the
    // deltas at the seam, as it would on the raw lines.
    let lines = [delta(1, "ab"), delta(2, "a"), delta(3, "c")];
    let mut walk = RowWalk::new(usize::MAX);
    assert!(lines.iter().rev().all(|l| walk.take(l)));
    assert_eq!(walk.rows(), 2);
    let newer = coalesce(&lines[1..]);
    assert_eq!(newer.len(), 1);
    assert_eq!(newer[0].text(), Some("ac"));
    assert!(!joins(&lines[0], &newer[0]));
    // On screen it is one message all the same, from raw lines or from pages.
    let want = raw_rows(&lines);
    assert_eq!(texts(&want), ["abac"]);
    let mut t = Transcript::from_lines(&newer).unwrap();
    t.push_older(&lines[..1]).unwrap();
    assert_eq!(rows(&t), want);

    // And the other way: " t" cleanly appends " cat", but not the whole " the cat".
    let lines = [delta(1, " the"), delta(2, " cat"), delta(3, " t")];
    assert_eq!(raw_rows(&lines).len(), 1);
    let older = coalesce(&lines[..2]);
    assert!(joins(&older[0], &lines[2]));
    let mut t = Transcript::from_lines(&older).unwrap();
    t.push_newer(&lines[2]).unwrap();
    assert_eq!(rows(&t), raw_rows(&lines));
}

/// The assistant rows' texts.
fn texts(rows: &[Row]) -> Vec<String> {
    let text = |r: &Row| match r {
        Row::Assistant { text, .. } => Some(text.clone()),
        _ => None,
    };
    rows.iter().filter_map(text).collect()
}

#[test]
fn a_message_streamed_in_repeated_or_overlapping_deltas_is_one_row() {
    // Token shapes a model streams: a repeated letter, a newline twice, a dot three times, an
    // overlap at the seam, empty deltas. The wire folds none of these seams; the screen shows
    // each message whole, as a client that concatenates deltas does.
    let shapes: [&[&str]; 7] = [
        &["He", "l", "l", "o"],
        &["It costs $", "1", "0", "0", "."],
        &["First paragraph.", "\n", "\n", "Second."],
        &["Wait", ".", ".", "."],
        &["def f():\n", "    ", " ", "return 1"],
        &["Mississi", "ippi"],
        &["", "Hello", "", " world"],
    ];
    for deltas in shapes {
        let lines: Vec<Line> = (1..).zip(deltas).map(|(seq, t)| delta(seq, t)).collect();
        let rows = raw_rows(&lines);
        assert_eq!(texts(&rows), [deltas.concat()], "{deltas:?}");
        assert_eq!(rows.len(), 1, "{deltas:?}");
        // From pages cut anywhere, coalesced or not: the same row.
        for cut in 1..lines.len() {
            let mut t = Transcript::from_lines(&coalesce(&lines[cut..])).unwrap();
            t.push_older(&coalesce(&lines[..cut])).unwrap();
            assert_eq!(self::rows(&t), rows, "{deltas:?} cut at {cut}");
        }
    }
}

#[test]
fn an_emoji_streamed_in_halves_is_shown_not_lost() {
    // A reply streamed as JavaScript strings, cut by UTF-16 unit: each half alone is a lone
    // surrogate escape, read as U+FFFD (a Rust string cannot hold it). Both lines were refused
    // before, and the emoji's place in the reply was simply gone.
    let lines: Vec<Line> = (1..)
        .zip(["Nice ", r"\ud83d", r"\ude00", "!"])
        .map(|(seq, t)| {
            let raw = format!(
                r#"{{"seq":{seq},"ts":1,"event":{{"type":"assistantText","text":"{t}"}}}}"#
            );
            Line::parse(&raw).unwrap()
        })
        .collect();
    assert_eq!(texts(&raw_rows(&lines)), ["Nice \u{fffd}\u{fffd}!"]);
}

#[test]
fn two_sessions_both_numbered_from_one_never_mix() {
    let a: Vec<Line> = (1..=5).map(|s| delta(s, &format!(" a{s}"))).collect();
    let b: Vec<Line> = (1..=5).map(|s| delta(s, &format!(" b{s}"))).collect();

    // Side by side in one list (a re-seeded file read after the old one): B's run starts anew.
    let both: Vec<Line> = a.iter().chain(&b).cloned().collect();
    let rows = coalesce(&both);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].text(), Some(" b1 b2 b3 b4 b5"));
    assert!(!joins(&rows[0], &b[0]) && !joins(&a[4], &b[0]));

    // A transcript holding A refuses B's lines, newer or older, and stays as it was.
    let mut t = Transcript::from_lines(&a).unwrap();
    let before = t.rows().clone();
    assert_eq!(
        t.push_newer(&b[0]),
        Err(FoldError::NotNewer { through: 5, got: 1 })
    );
    assert_eq!(
        t.push_older(&coalesce(&b)),
        Err(FoldError::NotOlder {
            through: 5,
            first: 1
        })
    );
    assert_eq!(
        t.push_older(&both),
        Err(FoldError::PageOutOfOrder { through: 5, got: 1 })
    );
    assert_eq!(t.rows(), &before);

    // A gap (a reset's) never joins: the deltas on both sides are different rows.
    let mut t = Transcript::from_lines(&a[..2]).unwrap();
    t.push_newer(&a[4]).unwrap();
    assert_eq!(t.rows().len(), 2);

    // After clear (what a reload does) B folds on its own.
    t.clear();
    assert!(t.is_empty());
    for l in &b {
        t.push_newer(l).unwrap();
    }
    assert_eq!(raw_rows(&b), crate::rows(&t));
}

#[test]
fn malformed_lines_pass_through_the_fold() {
    let text = [
        r#"{"seq":1,"ts":1,"event":{"type":"userMessage","text":"hi"}}"#,
        r#"{"seq":2,"ts":1}"#,
        r#"not json at all"#,
        r#"{"seq":2,"ts":1,"event":{"no":"type"}}"#,
        r#"{"ts":1,"event":{"type":"status","status":"idle"}}"#,
        r#"{"seq":2,"ts":1,"event":{"type":"toolCall","name":"no id"}}"#,
        r#"{"seq":3,"ts":1,"event":{"type":"assistantText","text":" a"}}"#,
        r#"{"seq":4,"ts":1,"event":{"type":"assistantText","text":null}}"#,
        r#"{"seq":5,"ts":1,"event":{"type":"assistantText","text":" b"}}"#,
        r#"{"seq":6,"ts":1,"event":{"type":"assistantText","text":" c","folded":{"through":2}}}"#,
        r#"{"seq":7,"ts":1,"event":{"type":"usageDelta","context":"lots"}}"#,
        r#"{"seq":8,"ts":1,"event":{"type":"command","id":"c","done":"maybe"}}"#,
        r#"{"seq":9,"ts":1,"event":{"type":"toolResult","output":"no id"}}"#,
        "",
    ];
    // Text that is not a line has no seq and no place in the order: the caller drops it.
    let lines: Vec<Line> = text.iter().filter_map(|t| Line::parse(t).ok()).collect();
    assert_eq!(lines.len(), 9);
    let t = Transcript::from_lines(&lines).unwrap();
    let kinds: Vec<&str> = t.rows().iter().map(Row::kind).collect();
    assert_eq!(
        kinds,
        [
            "user",
            "malformed",
            "assistant",
            "malformed",
            "assistant",
            "assistant",
            "malformed",
            "malformed",
            "malformed"
        ]
    );
    let Row::Malformed {
        event_type, reason, ..
    } = &t.rows()[1]
    else {
        unreachable!()
    };
    assert_eq!(event_type, "toolCall");
    assert!(reason.contains("id"), "{reason}");
    // The coalescer passes them through too, and a page of them welds like any other.
    assert_eq!(coalesce(&lines).len(), lines.len());
    let mut paged = Transcript::from_lines(&lines[5..]).unwrap();
    paged.push_older(&coalesce(&lines[..5])).unwrap();
    assert_eq!(paged.rows(), t.rows());
    let mut state = SessionState::new();
    lines.iter().for_each(|l| state.apply(l));
    assert_eq!(
        state,
        SessionState::new(),
        "malformed events change no state"
    );
}

#[test]
fn tool_results_and_commands_attach_across_pages() {
    let lines = [
        line(
            1,
            json!({"type": "toolCall", "id": "t1", "name": "read", "input": {"path": "a"}}),
        ),
        line(
            2,
            json!({"type": "command", "id": "c1", "command": "/compact", "done": false}),
        ),
        delta(3, " reading"),
        line(
            4,
            json!({"type": "toolResult", "id": "t1", "output": "fn main", "isError": false}),
        ),
        line(
            5,
            json!({"type": "command", "id": "c1", "done": true, "output": "compacted"}),
        ),
        line(
            6,
            json!({"type": "toolResult", "id": "t9", "output": "orphan"}),
        ),
    ];
    let want = raw_rows(&lines);
    assert_eq!(want.len(), 4, "{want:?}");
    let Row::Tool { result, .. } = &want[0] else {
        panic!("{want:?}")
    };
    assert_eq!(
        result.as_ref().map(|r| (r.seq, &r.output)),
        Some((4, &json!("fn main")))
    );
    let Row::Command {
        command,
        done,
        output,
        ..
    } = &want[1]
    else {
        panic!("{want:?}")
    };
    assert_eq!(
        (command.as_str(), *done, output.as_deref()),
        ("/compact", true, Some("compacted"))
    );
    assert_eq!(
        want[3].kind(),
        "toolResult",
        "a result whose call never came is its own row"
    );

    // The newer half alone shows the result and the command update as their own rows; the
    // older page brings their call and command, and they attach.
    let mut t = Transcript::from_lines(&lines[3..]).unwrap();
    assert_eq!(
        t.rows().iter().map(Row::kind).collect::<Vec<_>>(),
        ["toolResult", "command", "toolResult"]
    );
    t.push_older(&lines[..3]).unwrap();
    assert_eq!(rows(&t), want);

    // Streaming reports what changed.
    let mut t = Transcript::new();
    let changes: Vec<Change> = lines.iter().map(|l| t.push_newer(l).unwrap()).collect();
    assert_eq!(
        changes,
        [
            Change::Added,
            Change::Added,
            Change::Added,
            Change::Updated(1),
            Change::Updated(2),
            Change::Added
        ]
    );
}

#[test]
fn rows_serialize_in_camel_case_tagged_by_kind() {
    let lines = [
        line(
            1,
            json!({"type": "userMessage", "text": "hi", "queuedId": "q1"}),
        ),
        line(
            2,
            json!({"type": "assistantText", "text": "a", "messageId": "m"}),
        ),
        line(
            3,
            json!({"type": "assistantText", "text": " b", "messageId": "m"}),
        ),
        line(
            4,
            json!({"type": "toolCall", "id": "t", "name": "n", "input": {}}),
        ),
        line(
            5,
            json!({"type": "toolResult", "id": "t", "output": "x", "isError": true}),
        ),
        line(6, json!({"type": "futureThing", "a": 1})),
    ];
    let t = Transcript::from_lines(&lines).unwrap();
    let value = serde_json::to_value(t.rows()).unwrap();
    assert_eq!(
        value,
        json!([
            {"kind": "user", "seq": 1, "ts": lines[0].ts(), "text": "hi", "queuedId": "q1"},
            {"kind": "assistant", "seq": 2, "ts": lines[1].ts(), "lastSeq": 3, "text": "a b", "messageId": "m"},
            {"kind": "tool", "seq": 4, "ts": lines[3].ts(), "id": "t", "name": "n", "input": {},
             "result": {"seq": 5, "ts": lines[4].ts(), "output": "x", "isError": true}},
            {"kind": "unknown", "seq": 6, "ts": lines[5].ts(), "eventType": "futureThing",
             "event": {"type": "futureThing", "a": 1}},
        ])
    );
    let state = serde_json::to_value(SessionState::new()).unwrap();
    assert_eq!(
        state,
        json!({"status": "idle", "model": "", "permissionMode": "", "contextTokens": null,
               "queued": [], "waitingCommands": [], "compactingSince": null})
    );
}

#[test]
fn session_state_folds_queued_waiting_context_and_takes_the_summary() {
    let lines = [
        line(
            1,
            json!({"type": "settings", "model": "opus", "permissionMode": "ask"}),
        ),
        line(2, json!({"type": "status", "status": "working"})),
        line(
            3,
            json!({"type": "usageDelta", "context": 1200, "output": 30}),
        ),
        line(4, json!({"type": "usageDelta", "context": 900})),
        line(
            5,
            json!({"type": "messageQueued", "id": "q1", "text": "next"}),
        ),
        line(
            6,
            json!({"type": "messageQueued", "id": "q2", "text": "after"}),
        ),
        line(
            7,
            json!({"type": "userMessage", "text": "next", "queuedId": "q1"}),
        ),
        line(
            8,
            json!({"type": "command", "id": "c1", "command": "/compact", "done": false}),
        ),
        line(
            9,
            json!({"type": "command", "id": "c2", "command": "/review", "done": false}),
        ),
        line(10, json!({"type": "command", "id": "c1", "done": true})),
        line(11, json!({"type": "compacting", "active": true})),
        line(12, json!({"type": "settings", "permissionMode": "auto"})),
    ];
    let mut s = SessionState::new();
    lines.iter().for_each(|l| s.apply(l));
    assert_eq!(s.status, "working");
    assert_eq!(
        (s.model.as_str(), s.permission_mode.as_str()),
        ("opus", "auto")
    );
    assert_eq!(
        s.context_tokens,
        Some(900),
        "context is absolute, the latest wins"
    );
    assert_eq!(
        s.queued.iter().map(|q| q.id.as_str()).collect::<Vec<_>>(),
        ["q2"]
    );
    assert_eq!(
        s.waiting_commands
            .iter()
            .map(|w| (w.id.as_str(), w.command.as_str(), w.seq))
            .collect::<Vec<_>>(),
        [("c2", "/review", 9)]
    );
    assert_eq!(s.compacting_since, Some(lines[10].ts()));
    s.apply(&line(13, json!({"type": "compacting", "active": false})));
    assert_eq!(s.compacting_since, None);

    // A reset: the events that would resolve the pending items may be in the gap.
    s.clear_pending();
    assert!(s.queued.is_empty() && s.waiting_commands.is_empty());
    assert_eq!(
        s.context_tokens,
        Some(900),
        "a reset keeps what the window corrects anyway"
    );

    // The list's entry is newer than a replayed cache.
    s.apply_summary(&SessionSummary {
        id: "s".into(),
        title: "t".into(),
        status: "idle".into(),
        model: "sonnet".into(),
        permission_mode: "plan".into(),
        seq: 13,
    });
    assert_eq!(
        (
            s.status.as_str(),
            s.model.as_str(),
            s.permission_mode.as_str()
        ),
        ("idle", "sonnet", "plan")
    );
}

#[test]
fn streaming_grows_the_last_row_in_place() {
    let mut t = Transcript::new();
    assert_eq!(
        t.push_newer(&line(1, json!({"type": "userMessage", "text": "go"}))),
        Ok(Change::Added)
    );
    assert_eq!(t.push_newer(&delta(2, "Hello")), Ok(Change::Added));
    for s in 3..1000 {
        assert_eq!(t.push_newer(&delta(s, &format!(" w{s}"))), Ok(Change::Grew));
    }
    assert_eq!(t.rows().len(), 2);
    let Some(Row::Assistant { last_seq, text, .. }) = t.rows().back() else {
        panic!()
    };
    assert_eq!(*last_seq, 999);
    assert!(text.starts_with("Hello w3 w4") && text.ends_with(" w999"));
    // A repeated delta (the same seq again) is refused, not appended twice.
    assert_eq!(
        t.push_newer(&delta(999, " w999")),
        Err(FoldError::NotNewer {
            through: 999,
            got: 999
        })
    );
}

/// The catch-up answer for a client at `tail`: that line and every line after it.
fn caught_up(lines: &[Line], tail: usize) -> CatchUpAnswer {
    CatchUpAnswer {
        state: CatchUpState::CaughtUp,
        summary: SessionSummary {
            id: "s".into(),
            title: "t".into(),
            status: "working".into(),
            model: "from-the-list".into(),
            permission_mode: "plan".into(),
            seq: lines.last().map_or(0, Line::seq),
        },
        lines: lines[tail..].to_vec(),
    }
}

/// A view saved as the page saves it (the JSON of its state) and read back.
fn saved(view: &View) -> SavedScreen {
    serde_json::from_str(&serde_json::to_string(view).unwrap()).unwrap()
}

/// What a UI draws of a view: its rows and every field but the counters.
fn drawn(view: &View) -> Value {
    let mut v = serde_json::to_value(view).unwrap();
    v.as_object_mut().unwrap().remove("counters");
    v
}

#[test]
fn a_saved_screen_resumed_with_its_catch_up_is_what_the_whole_fold_shows() {
    for seed in 0..400 {
        let mut rng = Rng(seed);
        let n = 2 + rng.below(150);
        let lines = random_events(&mut rng, n);
        let k = 1 + rng.below(n - 1) as usize; // lines shown when the screen was saved
        let screen = View::opening("s", &lines[..k]).unwrap();
        let resumed = View::resumed(saved(&screen), caught_up(&lines, k - 1))
            .unwrap_or_else(|| panic!("seed {seed}: the screen resumes"));
        let mut whole = View::opening("s", &lines).unwrap();
        whole.state.apply_summary(&caught_up(&lines, 0).summary);
        assert_eq!(
            drawn(&resumed),
            drawn(&whole),
            "seed {seed}, saved at {k} of {n}"
        );
        assert!(resumed.ready && !resumed.verified && !resumed.live);
        // And it keeps growing as the whole fold does (a delta that joins grows the last row).
        let next = delta(n + 1, "a");
        let (mut a, mut b) = (resumed.clone(), whole.clone());
        a.transcript.push_newer(&next).unwrap();
        b.transcript.push_newer(&next).unwrap();
        assert_eq!(rows(&a.transcript), rows(&b.transcript), "seed {seed}");
    }
}

#[test]
fn a_saved_screen_is_resumed_only_when_the_line_at_its_cursor_is_the_servers_byte_for_byte() {
    let lines: Vec<Line> = (1..=10).map(|s| delta(s, "a")).collect();
    let screen = View::opening("s", &lines[..6]).unwrap();
    // The file was replaced by one as long: the line at the cursor differs.
    let mut replaced = caught_up(&lines, 5);
    replaced.lines[0] = delta(6, "b");
    assert!(View::resumed(saved(&screen), replaced).is_none());
    // Shorter: the server has no line there.
    let mut ahead = caught_up(&lines[..3], 2);
    ahead.state = CatchUpState::Ahead;
    assert!(View::resumed(saved(&screen), ahead).is_none());
    // Nothing new: the saved screen is already what there is.
    assert!(View::resumed(saved(&screen), caught_up(&lines[..6], 5)).is_none());
    // The same line in other bytes (parsed equal): not taken for the same, so no screen (the
    // worker's view, which compares parsed lines, comes instead).
    let mut respelled = caught_up(&lines, 5);
    respelled.lines[0] = Line::parse(&lines[5].raw().replace(':', ": ")).unwrap();
    assert_eq!(respelled.lines[0], lines[5]);
    assert!(View::resumed(saved(&screen), respelled).is_none());
    // A screen whose fingerprint is not its cursor's, or whose rows end past it, is not this
    // fold's.
    let mut wrong = saved(&screen);
    wrong.cursor = 5;
    assert!(View::resumed(wrong, caught_up(&lines, 4)).is_none());
    let mut wrong = saved(&screen);
    wrong.cursor_fingerprint = lines[4].fingerprint();
    wrong.cursor = 5;
    assert!(View::resumed(wrong, caught_up(&lines, 4)).is_none());
    // Behind: the newest window alone, pending items cleared, as the engine shows it.
    let mut lines = lines;
    lines[2] = line(3, json!({"type": "messageQueued", "id": "q", "text": "x"}));
    let screen = View::opening("s", &lines[..6]).unwrap();
    assert_eq!(screen.state.queued.len(), 1);
    let mut behind = caught_up(&lines, 5);
    behind.state = CatchUpState::Behind;
    behind.lines.drain(1..3); // the cursor's line, then the newest window: 9 and 10
    let resumed = View::resumed(saved(&screen), behind).unwrap();
    assert_eq!(rows(&resumed.transcript), raw_rows(&lines[8..]));
    assert!(resumed.state.queued.is_empty());
    assert_eq!((resumed.oldest, resumed.more_history), (Some(9), true));
}
