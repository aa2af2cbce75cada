//! The protocol module's tests. They run natively (`cargo test`) and, unchanged, as
//! wasm-bindgen tests in headless Chromium (`scripts/wasm.sh test`), which proves the wasm
//! pipeline end to end.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;
#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

use scrollback::protocol::{
    clean_append, coalesce, last_seq, page_json, parse_page, EventKind, Line, LineError, RowWalk,
    TranscriptQuery,
};

fn delta(seq: u64, text: &str) -> Line {
    Line::parse(&format!(
        r#"{{"seq":{seq},"ts":1788546972.{seq:07},"event":{{"type":"assistantText","text":"{text}"}}}}"#
    ))
    .unwrap()
}

fn other(seq: u64, ty: &str) -> Line {
    Line::parse(&format!(
        r#"{{"seq":{seq},"ts":1788546972.5,"event":{{"type":"{ty}","context":1000}}}}"#
    ))
    .unwrap()
}

/// Walks `lines` backwards as a page of `limit` rows; returns the lines taken, oldest first.
fn page(lines: &[Line], limit: usize) -> Vec<Line> {
    let mut walk = RowWalk::new(limit);
    let mut taken: Vec<Line> = lines
        .iter()
        .rev()
        .take_while(|l| walk.take(l))
        .cloned()
        .collect();
    taken.reverse();
    taken
}

fn seqs(lines: &[Line]) -> Vec<u64> {
    lines.iter().map(Line::seq).collect()
}

#[test]
fn a_delta_run_cut_by_the_limit_is_returned_as_the_partial_it_is() {
    // user, then a run of five deltas, then a status: three rows; a page of two rows takes the
    // status and the whole run, and stops between rows.
    let words = [" The", " cat", " sat", " on", " mats"];
    let mut lines = vec![other(1, "userMessage")];
    lines.extend(
        words
            .iter()
            .enumerate()
            .map(|(i, w)| delta(i as u64 + 2, w)),
    );
    lines.push(other(7, "status"));
    let taken = page(&lines, 2);
    assert_eq!(seqs(&taken), vec![2, 3, 4, 5, 6, 7]);
    let rows = coalesce(&taken);
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[0].seq(),
        2,
        "a joined run carries its oldest delta's seq"
    );
    assert_eq!(rows[0].text(), Some(" The cat sat on mats"));
    assert_eq!(
        rows[1].raw(),
        lines[6].raw(),
        "other lines pass byte for byte"
    );

    // A run cut by where the lines start (the server's `after`) is the partial it is.
    let rows = coalesce(&lines[3..6]);
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].seq(), rows[0].text()), (4, Some(" sat on mats")));
}

#[test]
fn a_usage_delta_inside_a_run_makes_two_rows() {
    let lines = vec![
        delta(1, " a"),
        delta(2, " b"),
        other(3, "usageDelta"),
        delta(4, " c"),
    ];
    let rows = coalesce(&lines);
    assert_eq!(seqs(&rows), vec![1, 3, 4]);
    assert_eq!(rows[0].text(), Some(" a b"));
    let mut walk = RowWalk::new(usize::MAX);
    lines.iter().rev().for_each(|l| assert!(walk.take(l)));
    assert_eq!(walk.rows(), 3);
}

#[test]
fn a_page_that_is_all_one_run_is_one_row() {
    let lines: Vec<Line> = (1..=50).map(|i| delta(i, &format!(" w{i}"))).collect();
    let taken = page(&lines, 1);
    assert_eq!(taken.len(), 50, "one row never stops inside itself");
    let rows = coalesce(&taken);
    assert_eq!(rows.len(), 1);
    assert!(rows[0].text().unwrap().starts_with(" w1 w2"));
    assert!(rows[0].text().unwrap().ends_with(" w50"));
}

#[test]
fn only_clean_appends_join() {
    assert!(clean_append("Hello", " world"));
    assert!(!clean_append("abc", "abc"), "a repeat");
    assert!(!clean_append("abc", "ab"), "a prefix of the previous");
    assert!(
        !clean_append("ab", "abc"),
        "the previous as a prefix (cumulative text)"
    );
    assert!(!clean_append("the end", "d of it"), "overlap at the seam");
    assert!(
        !clean_append("", "x") && !clean_append("x", ""),
        "empty deltas"
    );
    // A run broken by a non-clean append is two rows, and unknown types never join.
    let rows = coalesce(&[delta(1, "abc"), delta(2, "abc"), delta(3, " d")]);
    assert_eq!(seqs(&rows), vec![1, 2]);
    let unknown = |seq| {
        Line::parse(&format!(
            r#"{{"seq":{seq},"ts":1,"event":{{"type":"thinking","text":"x{seq}"}}}}"#
        ))
        .unwrap()
    };
    assert_eq!(coalesce(&[unknown(1), unknown(2)]).len(), 2);
}

#[test]
fn deltas_of_different_messages_or_files_never_join() {
    let msg = |seq: u64, id: &str, text: &str| {
        Line::parse(&format!(
            r#"{{"seq":{seq},"ts":1,"event":{{"type":"assistantText","messageId":"{id}","text":"{text}"}}}}"#
        ))
        .unwrap()
    };
    assert_eq!(coalesce(&[msg(1, "a", "x"), msg(2, "b", " y")]).len(), 2);
    assert_eq!(coalesce(&[msg(1, "a", "x"), msg(2, "a", " y")]).len(), 1);
    // Two transcripts both numbered from 1 side by side: a seq that does not grow ends the run.
    assert_eq!(coalesce(&[delta(5, "x"), delta(1, " y")]).len(), 2);
}

#[test]
fn unknown_event_types_survive_byte_for_byte() {
    let raw = r#"{"seq":9,"ts":1788546972.6030757,"event":{"type":"futureThing","nested":{"b":[1,2.50,"é"]},"a":null}}"#;
    let line = Line::parse(raw).unwrap();
    assert_eq!(line.kind(), EventKind::Unknown);
    assert_eq!(line.event_type(), "futureThing");
    assert_eq!(line.raw(), raw);
    let body = format!("[{raw},{}]", delta(10, "x").raw());
    let page = parse_page(&body).unwrap();
    assert_eq!(page_json(&page), body, "a page round-trips byte for byte");
}

#[test]
fn malformed_lines_are_clear_errors_not_panics() {
    let cases: &[(&str, LineError)] = &[
        (
            "{\"seq\":1,\"ts\":1,\"event\":{\"type\":\"status\"}",
            LineError::NotJson(String::new()),
        ),
        ("[1,2]", LineError::NotJson(String::new())),
        (r#"{"ts":1,"event":{"type":"status"}}"#, LineError::BadSeq),
        (
            r#"{"seq":0,"ts":1,"event":{"type":"status"}}"#,
            LineError::BadSeq,
        ),
        (
            r#"{"seq":-3,"ts":1,"event":{"type":"status"}}"#,
            LineError::BadSeq,
        ),
        // Past 2^53-1: not a JavaScript integer, and `seq + 1` would overflow near u64::MAX.
        (
            r#"{"seq":9007199254740992,"ts":1,"event":{"type":"status"}}"#,
            LineError::BadSeq,
        ),
        (
            r#"{"seq":18446744073709551615,"ts":1,"event":{"type":"status"}}"#,
            LineError::BadSeq,
        ),
        (r#"{"seq":1,"event":{"type":"status"}}"#, LineError::BadTs),
        (r#"{"seq":1,"ts":1}"#, LineError::NoEvent),
        (
            r#"{"seq":1,"ts":1,"event":{"text":"x"}}"#,
            LineError::NoType,
        ),
        ("", LineError::NotJson(String::new())),
    ];
    for (raw, want) in cases {
        let got = Line::parse(raw).unwrap_err();
        assert_eq!(
            std::mem::discriminant(&got),
            std::mem::discriminant(want),
            "{raw:?} gave {got}"
        );
        assert!(!got.to_string().is_empty());
    }
    let top = r#"{"seq":9007199254740991,"ts":1,"event":{"type":"status"}}"#;
    assert_eq!(
        Line::parse(top).unwrap().seq(),
        scrollback::protocol::MAX_SEQ
    );
    // A coalesced line whose run claims to end past it is no run.
    let far = r#"{"seq":5,"ts":1,"event":{"type":"assistantText","text":"ab","folded":{"through":18446744073709551615,"first":"a","last":"b"}}}"#;
    assert_eq!(last_seq(&Line::parse(far).unwrap()), 5);
    assert!(parse_page("[{\"seq\":1}]").is_err());
    assert!(parse_page("not json").is_err());
}

#[test]
fn a_string_cut_between_the_halves_of_a_surrogate_pair_still_reads() {
    // JavaScript writers cut strings by UTF-16 unit (a tool output truncated with `slice`, a
    // reply streamed as JS strings) and `JSON.stringify` escapes the lone half. Such a line is
    // JSON; it was refused whole, so the server skipped it and the screen lost the row.
    let cut = r#"{"seq":4,"ts":1,"event":{"type":"toolResult","callId":"c","output":"ok \ud83d","text":"a\ud83d"}}"#;
    let line = Line::parse(cut).unwrap();
    assert_eq!(line.raw(), cut, "the cache keeps the bytes as sent");
    assert_eq!(line.text(), Some("a\u{fffd}"));
    assert_eq!(line.event()["output"], "ok \u{fffd}");
    assert_eq!(line.event()["type"], "toolResult");
    // A low half alone, a pair split across two deltas, and the keys too.
    for (raw, text) in [
        (
            r#"{"seq":5,"ts":1,"event":{"type":"assistantText","text":"\ude00!"}}"#,
            "\u{fffd}!",
        ),
        (
            r#"{"seq":5,"ts":1,"event":{"type":"assistantText","text":"\ude00\ud83d"}}"#,
            "\u{fffd}\u{fffd}",
        ),
        (
            r#"{"seq":5,"ts":1,"event":{"type":"assistantText","text":"\ud83d\ude00"}}"#,
            "\u{1f600}",
        ),
        (
            r#"{"seq":5,"ts":1,"event":{"type":"assistantText","text":"\\ud83d"}}"#,
            "\\ud83d",
        ),
        (
            r#"{"seq":5,"ts":1,"event":{"type":"assistantText","text":"x","\udfff":1}}"#,
            "x",
        ),
    ] {
        let line = Line::parse(raw).unwrap_or_else(|e| panic!("{raw}: {e}"));
        assert_eq!(line.text(), Some(text), "{raw}");
        assert_eq!(line.event()["text"], text, "{raw}");
        assert_eq!(line.raw(), raw);
    }
    // Read as U+FFFD everywhere, equality included: the same line respelled is equal.
    assert_eq!(Line::parse(&cut.replace(':', ": ")).unwrap(), line);
    // Other faults in such a line are still named.
    let no_seq = r#"{"ts":1,"event":{"type":"assistantText","text":"\ud83d"}}"#;
    assert_eq!(Line::parse(no_seq).unwrap_err(), LineError::BadSeq);
}

#[test]
fn floats_come_back_exactly_as_written() {
    let raw = r#"{"seq":30,"ts":1788546972.6030757,"event":{"type":"status","status":"idle"}}"#;
    let line = Line::parse(raw).unwrap();
    assert_eq!(line.ts().to_bits(), 1788546972.6030757f64.to_bits());
    // The one-bit-off neighbour the seed's server produced is a different line.
    let off = Line::parse(&raw.replace("6030757", "6030755")).unwrap();
    assert_ne!(line, off, "the probe must see a one-bit difference in ts");
    // Rebuilt from its parts, it serializes to the same text and parses equal.
    let rebuilt = Line::new(line.seq(), line.ts(), line.event().clone()).unwrap();
    assert_eq!(rebuilt.raw(), raw);
    assert_eq!(rebuilt, line);
    // Parsed equality ignores spelling: whitespace and key order.
    let respelled =
        r#"{ "event": {"status":"idle","type":"status"}, "ts": 1788546972.6030757, "seq": 30 }"#;
    assert_eq!(Line::parse(respelled).unwrap(), line);
}

#[test]
fn queries_parse_validate_and_name_the_bad_parameter() {
    let q = TranscriptQuery::parse("before=306&after=201&coalesce=true&token=abc").unwrap();
    assert_eq!(
        (q.before, q.after, q.coalesce),
        (Some(306), Some(201), true)
    );
    assert_eq!(q.limit(), scrollback::protocol::HISTORY_PAGE);
    assert_eq!(TranscriptQuery::parse(&q.to_query_string()).unwrap(), q);
    assert!(
        !TranscriptQuery::parse("coalesce=true").unwrap().coalesced(),
        "newest window is raw"
    );
    for (query, param) in [
        ("before=abc", "before"),
        ("before=0", "before"),
        ("limit=0", "limit"),
        ("limit=99999999", "limit"),
        ("after=-1", "after"),
        ("before=10&after=10", "after"),
        ("coalesce=maybe", "coalesce"),
        ("limit=1&limit=2", "limit"),
        ("before=+7", "before"),
        ("bytes= 9", "bytes"),
    ] {
        let err = TranscriptQuery::parse(query).unwrap_err();
        assert_eq!(err.param, param, "{query}: {err}");
    }
    // Percent-encoded as a browser's URL may carry them: read as `URLSearchParams` reads them.
    let q = TranscriptQuery::parse("%61fter=%35&before=1%30&coalesce=%74rue").unwrap();
    assert_eq!((q.before, q.after, q.coalesce), (Some(10), Some(5), true));
    for (query, param) in [("after=%35&after=5", "after"), ("after=%2B5", "after")] {
        let err = TranscriptQuery::parse(query).unwrap_err();
        assert_eq!(err.param, param, "{query}: {err}");
    }
    let check = scrollback::protocol::CatchUpQuery::parse("cursor=%37&limit=3").unwrap();
    assert_eq!((check.cursor, check.limit), (7, 3));
    // The reopen's check reads its numbers by the same rule.
    for (query, param) in [("cursor=+7", "cursor"), ("cursor=7&limit=+1", "limit")] {
        let err = scrollback::protocol::CatchUpQuery::parse(query).unwrap_err();
        assert_eq!(err.param, param, "{query}: {err}");
    }
}
