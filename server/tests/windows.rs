//! `/transcript` over real HTTP: raw windows and coalesced pages, `before` / `after` / `limit`
//! / `bytes`, damaged files, and every bad parameter.

mod server_support;

use scrollback::protocol::{coalesce, last_seq, EventKind, Line, RowWalk};
use serde_json::json;
use server_support::{line, lines, seqs, transcript, Fixture};

/// What a page must be, computed over the whole transcript in memory with the protocol's row
/// rule: lines below `before` and above `after`, newest first, `limit` lines or rows.
fn expected(
    all: &[Line],
    before: Option<u64>,
    after: Option<u64>,
    limit: usize,
    rows: bool,
) -> Vec<Line> {
    let mut walk = RowWalk::new(limit);
    let mut taken: Vec<Line> = all
        .iter()
        .rev()
        .filter(|l| before.is_none_or(|b| l.seq() < b))
        .take_while(|l| after.is_none_or(|a| l.seq() > a))
        .take_while(|l| if rows { walk.take(l) } else { true })
        .take(if rows { usize::MAX } else { limit })
        .cloned()
        .collect();
    taken.reverse();
    if rows {
        coalesce(&taken)
    } else {
        taken
    }
}

fn raws(lines: &[Line]) -> Vec<&str> {
    lines.iter().map(Line::raw).collect()
}

#[tokio::test]
async fn the_newest_window_is_the_last_80_lines_byte_for_byte_and_never_coalesced() {
    let f = Fixture::new().await;
    let text = transcript(3_000);
    f.write("s", &text);
    let all = lines(&text);
    for query in ["", "coalesce=true", "limit=80"] {
        let page = f.page("s", query).await;
        assert_eq!(raws(&page), raws(&all[all.len() - 80..]), "{query}");
    }
    let page = f.page("s", "limit=1").await;
    assert_eq!(seqs(&page), vec![3_000]);
    // Past the newest, `before` is no bound.
    let page = f.page("s", "before=99999&limit=3").await;
    assert_eq!(seqs(&page), vec![2_998, 2_999, 3_000]);
}

#[tokio::test]
async fn raw_windows_match_the_transcript_for_every_before_after_and_limit() {
    let f = Fixture::new().await;
    let text = transcript(3_000);
    f.write("s", &text);
    let all = lines(&text);
    for before in [2u64, 3, 17, 500, 1_234, 2_048, 2_999, 3_000, 3_001] {
        for after in [
            None,
            Some(0),
            Some(1),
            Some(before.saturating_sub(40)),
            Some(before - 1),
        ] {
            if after.is_some_and(|a| a >= before) {
                continue;
            }
            for limit in [1usize, 40, 80, 1_000] {
                let mut query = format!("before={before}&limit={limit}");
                if let Some(a) = after {
                    query += &format!("&after={a}");
                }
                let page = f.page("s", &query).await;
                let want = expected(&all, Some(before), after, limit, false);
                assert_eq!(raws(&page), raws(&want), "{query}");
                if let Some(a) = after {
                    assert!(
                        page.iter().all(|l| l.seq() > a),
                        "nothing at or below after"
                    );
                }
            }
        }
    }
}

#[tokio::test]
async fn coalesced_pages_are_the_row_rule_applied_to_the_transcript() {
    let f = Fixture::new().await;
    let text = transcript(3_000);
    f.write("s", &text);
    let all = lines(&text);
    let mut joined = 0;
    for before in (2u64..=3_001).step_by(97).chain([3_001]) {
        for (limit, after) in [(40, None), (5, None), (40, Some(before.saturating_sub(30)))] {
            let mut query = format!("before={before}&limit={limit}&coalesce=true");
            if let Some(a) = after {
                query += &format!("&after={a}");
            }
            let page = f.page("s", &query).await;
            let want = expected(&all, Some(before), after, limit, true);
            assert_eq!(page, want, "{query}");
            assert!(page.len() <= limit);
            assert!(page.windows(2).all(|w| w[0].seq() < w[1].seq()));
            for row in &page {
                let source = &all[row.seq() as usize - 1];
                if row.raw() != source.raw() {
                    // A joined run: at its first delta's seq and ts, carrying the run's text.
                    joined += 1;
                    assert_eq!(row.kind(), EventKind::AssistantText);
                    assert_eq!(row.ts(), source.ts());
                    assert!(row.text().unwrap().starts_with(source.text().unwrap()));
                    assert_eq!(row.event()["messageId"], source.event()["messageId"]);
                }
            }
        }
    }
    assert!(joined > 50, "the fixture has runs to join ({joined})");

    // The default page is HISTORY_PAGE (40) rows.
    let page = f.page("s", "before=2000&coalesce=true").await;
    assert_eq!(page, expected(&all, Some(2_000), None, 40, true));
}

#[tokio::test]
async fn after_inside_a_delta_run_returns_the_partial_run_at_the_first_delta_above_after() {
    let f = Fixture::new().await;
    // 1 user, 2 status, 3..=10 deltas, 11 usage, 12 status.
    let mut text = line(1, json!({"type": "userMessage", "text": "hi"}));
    text += &line(2, json!({"type": "status", "status": "working"}));
    let words = [
        " The", " cat", " sat", " on", " the", " mat", " and", " slept",
    ];
    for (i, w) in words.iter().enumerate() {
        text += &line(3 + i as u64, json!({"type": "assistantText", "text": w}));
    }
    text += &line(11, json!({"type": "usageDelta", "context": 900}));
    text += &line(12, json!({"type": "status", "status": "idle"}));
    f.write("s", &text);

    let page = f.page("s", "before=13&after=5&coalesce=true").await;
    assert_eq!(seqs(&page), vec![6, 11, 12]);
    assert_eq!(page[0].text(), Some(" on the mat and slept"));
    assert_eq!(
        page[0].ts(),
        lines(&text)[5].ts(),
        "the partial carries its first delta's ts"
    );

    // The same cut raw: nothing at or below after.
    let page = f.page("s", "before=13&after=5").await;
    assert_eq!(seqs(&page), (6..=12).collect::<Vec<_>>());

    // Without after, the whole run is one row at seq 3.
    let page = f.page("s", "before=13&coalesce=true").await;
    assert_eq!(seqs(&page), vec![1, 2, 3, 11, 12]);
    assert_eq!(page[2].text(), Some(" The cat sat on the mat and slept"));

    // A limit that lands in the run still stops between rows.
    let page = f.page("s", "before=13&coalesce=true&limit=3").await;
    assert_eq!(seqs(&page), vec![3, 11, 12]);
}

/// Bytes of line text in a page.
fn size(page: &[Line]) -> usize {
    page.iter().map(|l| l.raw().len()).sum()
}

#[tokio::test]
async fn a_byte_budget_fills_the_page_up_to_the_budget_and_no_further() {
    let f = Fixture::new().await;
    let text = transcript(3_000);
    f.write("s", &text);
    let all = lines(&text);
    for budget in [1usize, 500, 4_000, 20_000, 100_000] {
        // Raw: the newest lines that fit; the next older one would not.
        let page = f.page("s", &format!("bytes={budget}")).await;
        assert!(!page.is_empty());
        assert!(page.len() == 1 || size(&page) <= budget, "raw {budget}");
        let first = page[0].seq() as usize;
        assert_eq!(
            raws(&page),
            raws(&all[first - 1..]),
            "the newest lines, in order"
        );
        if first > 1 {
            assert!(
                size(&page) + all[first - 2].raw().len() > budget,
                "raw {budget}: filled"
            );
        }

        // Coalesced: rows that fit; the next older row would not.
        let page = f
            .page("s", &format!("before=2500&coalesce=true&bytes={budget}"))
            .await;
        assert!(!page.is_empty());
        assert!(page.len() == 1 || size(&page) <= budget, "rows {budget}");
        let more = expected(&all, Some(2_500), None, page.len() + 1, true);
        let newest = more.last().unwrap();
        if page.len() == 1 && page[0] != *newest {
            // The newest row's text alone passes the budget: it is cut, its newest deltas sent
            // as a partial row (the rest is the next page's).
            let (cut, row) = (page[0].text().unwrap(), newest.text().unwrap());
            assert!(
                row.ends_with(cut) && cut.len() < row.len(),
                "rows {budget}: a cut"
            );
            assert_eq!(
                last_seq(&page[0]),
                last_seq(newest),
                "rows {budget}: its newest end"
            );
        } else if more.len() > page.len() {
            assert_eq!(more[1..], page[..], "whole rows, the newest ones");
            assert!(size(&more) > budget, "rows {budget}: filled");
        } else {
            assert_eq!(page, more, "the budget reached the first line");
        }
    }
    // A budget carries more conversation coalesced than raw.
    let raw = f.page("s", "before=2500&bytes=20000").await;
    let rows = f.page("s", "before=2500&bytes=20000&coalesce=true").await;
    assert!(rows.first().unwrap().seq() < raw.first().unwrap().seq());

    // Limit and after still bound a budgeted page.
    let page = f.page("s", "before=2500&bytes=100000&limit=7").await;
    assert_eq!(page.len(), 7);
    let page = f.page("s", "before=2500&after=2490&bytes=100000").await;
    assert_eq!(seqs(&page), (2_491..2_500).collect::<Vec<_>>());
}

#[tokio::test]
async fn damaged_lines_are_skipped_without_hiding_their_neighbours() {
    let f = Fixture::new().await;
    let mut text = String::new();
    for seq in 1..=6 {
        text += &line(
            seq,
            json!({"type": "userMessage", "text": format!("m{seq}")}),
        );
        match seq {
            2 => text += "\n",
            3 => text += "{not json at all\n",
            4 => text += "{\"seq\":99,\"ts\":1.5}\n",
            5 => text += "\u{feff}   \r\n",
            _ => {}
        }
    }
    f.write("s", &text);
    // A torn last line: another process is still writing it.
    f.append(
        "s",
        "{\"seq\":7,\"ts\":1788546972.1,\"event\":{\"type\":\"userMe",
    );
    let page = f.page("s", "limit=10").await;
    assert_eq!(seqs(&page), vec![1, 2, 3, 4, 5, 6]);
    let page = f.page("s", "before=6&limit=3").await;
    assert_eq!(seqs(&page), vec![3, 4, 5]);
    // Invalid UTF-8 in the middle.
    let mut bytes = std::fs::read(f.transcript_path("s")).unwrap();
    let at = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    bytes.splice(at..at, b"\xff\xfe\n".iter().copied());
    std::fs::write(f.transcript_path("s"), &bytes).unwrap();
    assert_eq!(seqs(&f.page("s", "limit=10").await), vec![1, 2, 3, 4, 5, 6]);
    // The torn line, completed, is served.
    f.append("s", "ssage\",\"text\":\"m7\"}}\n");
    assert_eq!(seqs(&f.page("s", "limit=2").await), vec![6, 7]);
    // A file that is only damage is an empty transcript, not an error.
    f.write("t", "\n\ngarbage\n{\"seq\":1}\n");
    assert!(f.page("t", "").await.is_empty());
}

#[tokio::test]
async fn lines_longer_than_a_block_are_read_whole() {
    let f = Fixture::new().await;
    let big = "x".repeat(300_000);
    let mut text = String::new();
    for seq in 1..=5 {
        let output = if seq % 2 == 0 {
            big.clone()
        } else {
            "small".into()
        };
        text += &line(
            seq,
            json!({"type": "toolResult", "id": "c", "output": output}),
        );
    }
    f.write("s", &text);
    let all = lines(&text);
    assert_eq!(raws(&f.page("s", "").await), raws(&all));
    assert_eq!(
        raws(&f.page("s", "before=5&limit=2").await),
        raws(&all[2..4])
    );
}

#[tokio::test]
async fn bad_parameters_are_400_naming_the_parameter() {
    let f = Fixture::new().await;
    f.write("s", &transcript(50));
    for (query, param) in [
        ("before=abc", "before"),
        ("before=-1", "before"),
        ("before=0", "before"),
        ("after=1.5", "after"),
        ("before=10&after=10", "after"),
        ("before=10&after=20", "after"),
        ("limit=0", "limit"),
        ("limit=99999999", "limit"),
        ("limit=18446744073709551616", "limit"),
        ("coalesce=maybe", "coalesce"),
        ("bytes=0", "bytes"),
        ("bytes=lots", "bytes"),
        ("limit=5&limit=6", "limit"),
    ] {
        let response = f.get(&format!("/sessions/s/transcript?{query}")).await;
        let (status, message) = f.error(response).await;
        assert_eq!(status, 400, "{query}");
        assert!(
            message.contains(&format!("`{param}`")),
            "{query}: {message}"
        );
    }
    // Unknown parameters are ignored (a token may travel there).
    assert_eq!(f.page("s", "limit=2&whatever=1").await.len(), 2);
}
