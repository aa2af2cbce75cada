//! Full-text search over the cache (crate::search), natively over the memory and file stores:
//! phrases across delta seams, prefixes, folding, purge, damage and rebuild, segments (built,
//! read by a worker that starts, damaged), and the property that an index rebuilt from the
//! chunks, or read through a segment built part way, answers as the incrementally written one.
#![cfg(not(target_arch = "wasm32"))]

use proptest::prelude::*;
use scrollback::chunks::Cache;
use scrollback::protocol::{coalesce, Line};
use scrollback::search::doc::docs_of;
use scrollback::search::pack;
use scrollback::search::segment::{self, SEGMENT};
use scrollback::search::tokens::terms;
use scrollback::search::{Hit, INDEX};
use scrollback::store::{FsStore, MemoryStore, Store};
use std::sync::Arc;

fn line(seq: u64, event: &str) -> Line {
    let ts = 1_700_000_000.0 + seq as f64;
    Line::parse(&format!(r#"{{"seq":{seq},"ts":{ts},"event":{event}}}"#)).unwrap()
}

fn user(seq: u64, text: &str) -> Line {
    line(
        seq,
        &format!(r#"{{"type":"userMessage","text":{}}}"#, json(text)),
    )
}

fn delta(seq: u64, text: &str, message: &str) -> Line {
    line(
        seq,
        &format!(
            r#"{{"type":"assistantText","text":{},"messageId":"{message}"}}"#,
            json(text)
        ),
    )
}

fn json(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// A conversation whose answer streams "The quick brown fox jumps over the lazy dog" in deltas
/// cut inside words, then a tool call, its result, a command and a status.
fn conversation() -> Vec<Line> {
    vec![
        user(1, "Where did you show me the Été migration?"),
        delta(2, "The quick br", "m1"),
        delta(3, "own fox ju", "m1"),
        delta(4, "mps over the lazy dog.", "m1"),
        line(
            5,
            r#"{"type":"toolCall","id":"c1","name":"grep","input":{"pattern":"tokio::select!"}}"#,
        ),
        line(
            6,
            r#"{"type":"toolResult","id":"c1","output":"src/main.rs: tokio::select! { ... }"}"#,
        ),
        line(
            7,
            r#"{"type":"command","id":"k1","command":"/compact now","done":true}"#,
        ),
        line(8, r#"{"type":"status","status":"idle"}"#),
        user(9, "thanks"),
    ]
}

async fn cache<S: Store>(store: &Arc<S>) -> Cache<S> {
    Cache::new(store.clone(), "example.com", 443).await
}

async fn fill<S: Store>(cache: &Cache<S>, id: &str, lines: &[Line]) {
    let mut session = cache.session(id).unwrap();
    session.open().await;
    for l in lines {
        session.append(l).await;
    }
}

fn seqs(hits: &[Hit]) -> Vec<(String, u64)> {
    hits.iter().map(|h| (h.session.clone(), h.seq)).collect()
}

async fn finds_what_was_said<S: Store>(store: Arc<S>) {
    let cache = cache(&store).await;
    fill(&cache, "s1", &conversation()).await;
    let one = |seq| vec![("s1".to_string(), seq)];

    // A phrase split across three deltas, cut inside words, is found at the row's seq.
    let hits = cache.search(r#""brown fox jumps""#, 10, None).await;
    assert_eq!(seqs(&hits), one(2));
    assert_eq!(
        hits[0].marked(),
        "The quick [brown] [fox] [jumps] over the lazy dog."
    );
    // Case and accents fold; the last word typed is a prefix.
    assert_eq!(seqs(&cache.search("ETE migr", 10, None).await), one(1));
    assert!(
        cache.search("ETE migr ", 10, None).await.is_empty(),
        "a finished word is whole"
    );
    // Tool calls, tool results, commands.
    let tokio = cache.search("tokio select", 10, None).await;
    assert_eq!(seqs(&tokio).len(), 2, "{tokio:?}");
    assert_eq!(seqs(&cache.search("compact", 10, None).await), one(7));
    // Words in the wrong order are not the phrase; words that are not there find nothing.
    assert!(cache.search(r#""fox brown""#, 10, None).await.is_empty());
    assert!(cache.search("giraffe", 10, None).await.is_empty());
    // The newest row is found at once when nothing can join it (a user message, a queued
    // message, a command: a session ending in one must not hide it)...
    assert_eq!(seqs(&cache.search("thanks", 10, None).await), one(9));
    let mut session = cache.session("s1").unwrap();
    session
        .append(&line(
            10,
            r#"{"type":"messageQueued","id":"q1","text":"and zanzibar?"}"#,
        ))
        .await;
    assert_eq!(seqs(&cache.search("zanzibar", 10, None).await), one(10));
    // ...and a reply still streaming (the next delta may join it) is found from the writer's
    // memory, as it grows; it reaches the index blob (what another worker reads) once the next
    // row starts.
    let other = || Cache::new(store.clone(), "example.com", 443);
    session.append(&delta(11, "Streaming wom", "m2")).await;
    assert_eq!(seqs(&cache.search("wombat", 10, None).await), vec![]);
    session.append(&delta(12, "bat words", "m2")).await;
    assert_eq!(seqs(&cache.search("wombat words", 10, None).await), one(11));
    assert!(other().await.search("wombat", 10, None).await.is_empty());
    session.append(&user(13, "bye")).await;
    assert_eq!(seqs(&cache.search("wombat words", 10, None).await), one(11));
    assert_eq!(
        seqs(&other().await.search("wombat words", 10, None).await),
        one(11)
    );
    // A reply with a delta repeated at a seam (not a clean append: the wire folds it as two
    // rows) is one message, and one text to search.
    for (seq, text) in [
        (14, "Down the Missi"),
        (15, "s"),
        (16, "s"),
        (17, "ippi river"),
    ] {
        session.append(&delta(seq, text, "m3")).await;
    }
    session.append(&user(18, "ok")).await;
    let river = cache.search(r#""mississippi river""#, 10, None).await;
    assert_eq!(seqs(&river), one(14));
    // A reply whose first delta is blanks only (as a stream often starts) is found at its
    // row's seq, that delta's.
    for (seq, text) in [(19, "\n\n"), (20, "Kinkajou sle"), (21, "eps by day")] {
        session.append(&delta(seq, text, "m4")).await;
    }
    session.append(&user(22, "ok")).await;
    let rows: Vec<u64> = coalesce(&[delta(19, "\n\n", "m4"), delta(20, "K", "m4")])
        .iter()
        .map(Line::seq)
        .collect();
    assert_eq!(rows, [19], "one row");
    let kinkajou = cache.search(r#""kinkajou sleeps""#, 10, None).await;
    assert_eq!(seqs(&kinkajou), one(19));
}

/// Chinese, Japanese, Korean and Thai do not put spaces between words: a word in the middle of
/// a sentence, across a delta seam, is found (its characters in order), from the blob and, in a
/// worker that starts after the warm-up, from the server's pack. So is an emoji, a word each,
/// and an Arabic or Hebrew word typed without the vowel marks its text carries, and kana or
/// Hangul written decomposed.
async fn finds_words_in_scripts_written_without_spaces<S: Store>(store: Arc<S>) {
    let writer = cache(&store).await;
    fill(
        &writer,
        "cjk",
        &[
            user(1, "データベースの移行について教えて"),
            // "手順" (steps) is cut by the seam between two deltas.
            delta(2, "移行には三つの手", "m1"),
            delta(3, "順があります。", "m1"),
            user(4, "학교에서 공부했어요"),
            user(5, "我们讨论了数据库迁移"),
            // Emoji are words too, with no space around them.
            user(6, "デプロイ完了🚀👍🏽"),
            // Thai: "I don't know about this yet", "ไม่รู้" (don't know) cut by a seam, its
            // tone marks (U+0E48, U+0E49) on either side of it.
            delta(7, "ฉันไม่", "m7"),
            delta(8, "รู้เรื่องนี้เลย", "m7"),
            user(9, "ขอบคุณ"),
            // Arabic with its vowel marks and a stretched word; Hebrew with its points.
            user(10, "هذا كِتَابٌ جَمِيـــلٌ"),
            user(11, "שָׁלוֹם עוֹלָם"),
            // Katakana in half width, and kana decomposed (a sound mark after its kana).
            user(12, "ｶﾞｲﾄﾞを読んだ"),
            user(13, "ト\u{3099}アを開けて"),
            // Hangul decomposed, as macOS writes a file name and `ls` prints it: 보고서.pdf.
            user(
                14,
                "ls: \u{1107}\u{1169}\u{1100}\u{1169}\u{1109}\u{1165}.pdf",
            ),
        ],
    )
    .await;
    let queries: [(&str, &[u64]); 25] = [
        ("手順", &[2]),
        ("移行", &[1, 2]),
        ("データベ", &[1]),
        ("공부", &[4]),
        ("학교", &[4]),
        ("数据库 迁移", &[5]),
        ("\"讨论了数据库\"", &[5]),
        // The characters out of order, or not together, are not the word.
        ("順手", &[]),
        ("手 順 数据库", &[]),
        ("🚀", &[6]),
        ("👍", &[6]),
        ("完了🚀", &[6]),
        ("🚀完了", &[]),
        ("ไม่รู้", &[7]),
        ("เรื่อง", &[7]),
        // Reversed, the characters are not the word.
        ("รู้ไม่", &[]),
        // Without its tone marks, as accents are folded away.
        ("ไมรู", &[7]),
        // Typed without the marks (as people type), or with them.
        ("كتاب جميل", &[10]),
        ("كِتَاب", &[10]),
        ("שלום", &[11]),
        // Half width or composed, decomposed or not: the same kana.
        ("ガイド", &[12]),
        ("ｶﾞｲﾄﾞ", &[12]),
        ("ドア", &[13]),
        ("보고서", &[14]),
        ("보고", &[14]),
    ];
    let answers = |cache: Cache<S>| async move {
        let mut out = Vec::new();
        for (q, _) in queries {
            let mut found: Vec<u64> = cache
                .search(q, 10, None)
                .await
                .iter()
                .map(|h| h.seq)
                .collect();
            found.sort();
            out.push(found);
        }
        out
    };
    let expected: Vec<Vec<u64>> = queries.iter().map(|(_, s)| s.to_vec()).collect();
    let hits = writer.search("手順", 10, None).await;
    assert_eq!(hits[0].marked(), "移行には三つの[手順]があります。");
    let hits = writer.search("ไม่รู้", 10, None).await;
    assert_eq!(hits[0].marked(), "ฉัน[ไม่รู้]เรื่องนี้เลย");
    let hits = writer.search("ドア", 10, None).await;
    assert_eq!(hits[0].marked(), "[ト\u{3099}ア]を開けて");
    let hits = writer.search("보고서", 10, None).await;
    assert_eq!(
        hits[0].marked(),
        "ls: [\u{1107}\u{1169}\u{1100}\u{1169}\u{1109}\u{1165}].pdf"
    );
    assert_eq!(answers(writer).await, expected);
    // A worker that starts after the warm-up (which built the pack) answers from the pack.
    let warmed = cache(&store).await;
    warmed.warm_search().await;
    let pack = pack::path(warmed.dir());
    assert!(store.stat(&pack).await.unwrap().is_some(), "a pack");
    assert_eq!(answers(cache(&store).await).await, expected);
}

async fn ranks_and_scopes_sessions<S: Store>(store: Arc<S>) {
    let cache = cache(&store).await;
    fill(
        &cache,
        "rare",
        &[user(1, "zebra"), user(2, "horse"), user(3, "x")],
    )
    .await;
    let common: Vec<Line> = (1..=20).map(|s| user(s, "horse horse")).collect();
    fill(&cache, "common", &common).await;
    let hits = cache.search("horse", 100, None).await;
    assert_eq!(hits.len(), 21, "every user message, the newest too");
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    let only: Vec<String> = vec!["rare".into()];
    let scoped = cache.search("horse", 100, Some(&only)).await;
    assert_eq!(seqs(&scoped), vec![("rare".to_string(), 2)]);
    assert_eq!(cache.search("horse", 3, None).await.len(), 3, "limit");

    // Purge removes a session's hits; retain-only too; the index is counted in its size.
    let before = cache.session_size("common").await;
    let index = format!("{}/{}/{INDEX}", cache.dir(), "common");
    let index_size = store.stat(&index).await.unwrap().unwrap().size;
    assert!(index_size > 0 && before > index_size);
    cache.purge("common").await;
    assert!(seqs(&cache.search("horse", 100, None).await)
        .iter()
        .all(|(s, _)| s == "rare"));
    cache.retain_only(&["other"]).await;
    assert!(cache.search("zebra", 10, None).await.is_empty());
}

async fn a_damaged_index_is_rebuilt<S: Store>(store: Arc<S>) {
    let cache = cache(&store).await;
    fill(&cache, "s1", &conversation()).await;
    let want = cache.search("the", 10, None).await;
    assert!(!want.is_empty());
    let path = format!("{}/s1/{INDEX}", cache.dir());
    for damage in [&b"{not json\n"[..], b"\"torn", b""] {
        store.append(&path, damage).await.unwrap();
        let mut session = cache.session("s1").unwrap();
        session.open().await;
        let fresh = Cache::new(store.clone(), "example.com", 443).await;
        assert_eq!(fresh.search("the", 10, None).await, want, "{damage:?}");
        assert_eq!(cache.search("the", 10, None).await, want, "{damage:?}");
    }
    // Missing altogether (removed behind this cache's back: a new one reads the store): the
    // next open rebuilds it from the chunks.
    store.remove(&path).await.unwrap();
    let fresh = Cache::new(store.clone(), "example.com", 443).await;
    assert!(fresh.search("the", 10, None).await.is_empty());
    cache.session("s1").unwrap().open().await;
    assert_eq!(cache.search("the", 10, None).await, want);
}

/// Damages the index blob of session `id` inside its line `n` (0-based), where no write could
/// have torn it: that line no longer reads.
async fn damage_line<S: Store>(store: &S, cache: &Cache<S>, id: &str, n: usize) {
    let path = format!("{}/{id}/{INDEX}", cache.dir());
    let mut blob = store.read(&path, 0, usize::MAX).await.unwrap();
    let at: usize = (blob.split(|&b| b == b'\n').take(n))
        .map(|l| l.len() + 1)
        .sum();
    blob[at] = b'X';
    store.write(&path, &blob).await.unwrap();
}

/// A line damaged inside the index blob (not a torn end, which an open cuts) would hide its row
/// for good: the first query that meets it has the index rebuilt from the chunks, and an idle
/// build that meets it rebuilds the index rather than build a segment without the row.
async fn a_line_damaged_inside_the_index_is_rebuilt<S: Store>(store: Arc<S>) {
    let cache = cache(&store).await;
    let lines: Vec<Line> = (1..=300)
        .map(|seq| user(seq, &format!("word{seq} among the usual filler words")))
        .collect();
    fill(&cache, "s", &lines).await;
    let fresh = || Cache::new(store.clone(), "example.com", 443);
    for build_first in [false, true] {
        damage_line(&*store, &cache, "s", 2).await;
        let worker = fresh().await;
        if build_first {
            assert_eq!(worker.build_search().await, 0, "no segment without a row");
            assert_eq!(worker.build_search().await, 1, "the rebuilt index builds");
        }
        let hits = worker.search("word3 ", 10, None).await;
        assert_eq!(
            seqs(&hits),
            vec![("s".into(), 3)],
            "build first: {build_first}"
        );
        assert_eq!(worker.search("filler", 500, None).await.len(), 300);
        // Whole again: another worker finds it too, from the blob or the segment.
        assert_eq!(
            seqs(&fresh().await.search("word3 ", 10, None).await),
            seqs(&hits)
        );
    }
}

/// A segment damaged where no check of its own sees it (its postings naming other documents):
/// a query never shows a row that lacks the words; the session's blob answers instead.
async fn a_damaged_segment_shows_no_row_without_the_words<S: Store>(store: Arc<S>) {
    let cache = cache(&store).await;
    let lines: Vec<Line> = (1..=40)
        .map(|seq| user(seq, &format!("alpha{} beta{}", seq % 7, seq % 5)))
        .collect();
    fill(&cache, "s", &lines).await;
    build(&cache, "s").await;
    let path = format!("{}/s/{SEGMENT}", cache.dir());
    let good = store.read(&path, 0, usize::MAX).await.unwrap();
    let queries = [
        "alpha3",
        "beta2",
        "alpha1 beta1",
        "alph",
        r#""alpha4 beta4""#,
    ];
    let mut want = Vec::new();
    for q in queries {
        want.push(seqs(&cache.search(q, 100, None).await));
    }
    // Each bit of the postings' end of the file flipped in turn (the postings are last).
    for at in good.len().saturating_sub(200)..good.len() {
        let mut bad = good.clone();
        bad[at] ^= 1;
        store.write(&path, &bad).await.unwrap();
        let worker = Cache::new(store.clone(), "example.com", 443).await;
        // (A row left out is possible: nothing checks the postings' bytes as a query reads
        // them, a few at a time. A row shown is one with the words.)
        for (q, want) in queries.iter().zip(&want) {
            let got = seqs(&worker.search(q, 100, None).await);
            let wrong: Vec<_> = got.iter().filter(|hit| !want.contains(hit)).collect();
            assert!(wrong.is_empty(), "{q}, byte {at} flipped: {wrong:?}");
        }
    }
}

/// A session whose cache is thrown away and filled again (a Reload, a replaced file) with a
/// transcript that starts with the same row and grows past the old index: a worker that had
/// loaded the old index answers from the new one, not from the old rows.
async fn a_rebuilt_index_is_not_taken_for_the_old_one_grown<S: Store>(store: Arc<S>) {
    let cache = cache(&store).await;
    let old = [user(1, "hello there"), user(2, "the old aardvark")];
    fill(&cache, "s", &old).await;
    assert_eq!(
        seqs(&cache.search("aardvark", 10, None).await),
        vec![("s".into(), 2)]
    );
    cache.purge("s").await;
    let new: Vec<Line> = std::iter::once(user(1, "hello there"))
        .chain((2..=40).map(|seq| user(seq, &format!("the new zebu number {seq}"))))
        .collect();
    fill(&cache, "s", &new).await;
    assert!(
        cache.search("aardvark", 10, None).await.is_empty(),
        "nothing of the old conversation"
    );
    assert_eq!(
        seqs(&cache.search("zebu number 2 ", 10, None).await),
        vec![("s".into(), 2)]
    );
    assert_eq!(cache.search("zebu", 100, None).await.len(), 39);
}

/// A reply still streaming (no row after it yet) is searched from its writer's memory, after
/// its view closed too; not once its session, or the whole cache, is removed.
async fn a_removed_session_leaves_no_streaming_row<S: Store>(store: Arc<S>) {
    let cache = cache(&store).await;
    let reply = [user(1, "tell me"), delta(2, "about the okapi", "m1")];
    fill(&cache, "s", &reply).await;
    assert_eq!(
        seqs(&cache.search("okapi", 10, None).await),
        vec![("s".into(), 2)]
    );
    cache.purge("s").await;
    assert!(cache.search("okapi", 10, None).await.is_empty());
    fill(&cache, "s", &reply).await;
    assert_eq!(
        seqs(&cache.search("okapi", 10, None).await),
        vec![("s".into(), 2)]
    );
    cache.clear().await;
    assert!(cache.search("okapi", 10, None).await.is_empty());
}

/// A write of several rows cut short (a crash: only whole rows of it kept) loses none: the
/// next open re-folds every row after the last one written.
async fn a_write_cut_short_loses_no_row<S: Store>(store: Arc<S>) {
    let cache = cache(&store).await;
    let lines: Vec<Line> = (1..=6)
        .map(|seq| user(seq, &format!("word{seq}")))
        .collect();
    let mut session = cache.session("s").unwrap();
    session.open().await;
    session.append_all(&lines).await;
    let path = format!("{}/s/{INDEX}", cache.dir());
    let blob = store.read(&path, 0, usize::MAX).await.unwrap();
    let text = String::from_utf8(blob).unwrap();
    assert_eq!(text.lines().count(), 6, "one write of six rows");
    // Only the first two rows reached the disk.
    let kept: usize = text.lines().take(2).map(|l| l.len() + 1).sum();
    store.truncate(&path, kept as u64).await.unwrap();
    drop(session);
    let fresh = Cache::new(store.clone(), "example.com", 443).await;
    let mut session = fresh.session("s").unwrap();
    session.open().await;
    session.append(&user(7, "word7")).await;
    for seq in 1..=7 {
        assert_eq!(
            seqs(&fresh.search(&format!("word{seq}"), 10, None).await),
            vec![("s".into(), seq)],
            "word{seq}"
        );
    }
    // A limit far past what is found is not a reservation.
    assert_eq!(
        fresh.search("word1", u32::MAX as usize, None).await.len(),
        1
    );
}

/// A user message, a reply streamed in four deltas cut inside words (2..=5), a user message.
fn cut_reply() -> [Line; 6] {
    [
        user(1, "hello"),
        delta(2, "The quick br", "m1"),
        delta(3, "own fox ju", "m1"),
        delta(4, "mps over the la", "m1"),
        delta(5, "zy dog and a yak", "m1"),
        user(6, "thanks"),
    ]
}

/// A reply cut where the cache started (the first window opened mid-reply) is one row once
/// the page below is stored: a phrase across that seam is found at the reply's first seq,
/// and the piece indexed until then is no hit of its own; the same from a worker that starts,
/// through a segment, and from the index rebuilt from the chunks.
async fn a_reply_cut_where_the_cache_started_is_found_whole<S: Store>(store: Arc<S>) {
    let lines = cut_reply();
    let cache = cache(&store).await;
    fill(&cache, "s", &lines[3..]).await; // the window: 4..=6
    let at = |seq| vec![("s".to_string(), seq)];
    assert!(cache.search(r#""fox jumps""#, 10, None).await.is_empty());
    assert_eq!(seqs(&cache.search("yak", 10, None).await), at(4));
    let mut session = cache.session("s").unwrap();
    assert!(session.store_page(&lines[..3], 4, false).await);
    let queries = [r#""fox jumps over the lazy""#, "yak", "quick", "hello"];
    let want = [at(2), at(2), at(2), at(1)];
    for (q, want) in queries.iter().zip(&want) {
        assert_eq!(&seqs(&cache.search(q, 10, None).await), want, "{q}");
    }
    let mut answers = Vec::new();
    for q in queries {
        answers.push(cache.search(q, 10, None).await);
    }
    let started = || Cache::new(store.clone(), "example.com", 443);
    for round in ["blob", "segment", "rebuilt"] {
        match round {
            "segment" => build(&cache, "s").await,
            "rebuilt" => {
                store
                    .remove(&format!("{}/s/{INDEX}", cache.dir()))
                    .await
                    .unwrap();
                drop(session);
                session = cache.session("s").unwrap();
                session.open().await;
            }
            _ => {}
        }
        let fresh = started().await;
        for (q, want) in queries.iter().zip(&answers) {
            assert_eq!(&fresh.search(q, 10, None).await, want, "{round}: {q}");
        }
    }
}

/// The same seam while the reply still streams: the row held in memory takes the page's piece
/// as its start (found there at once, once), the piece is written for other tabs and for a
/// reopen (a page of the reply's deltas alone writes nothing else), and the row is written
/// whole once it completes, after a reopen too.
async fn a_reply_still_streaming_takes_the_page_below<S: Store>(store: Arc<S>) {
    let cache = cache(&store).await;
    let at = |seq| vec![("s".to_string(), seq)];
    let lines = cut_reply();
    fill(&cache, "s", &lines[3..5]).await; // 4..=5, streaming
    let mut session = cache.session("s").unwrap();
    assert!(session.store_page(&lines[1..3], 4, false).await); // 2..=3: the reply alone
    for q in [r#""fox jumps over the lazy""#, "lazy", "quick"] {
        assert_eq!(seqs(&cache.search(q, 10, None).await), at(2), "{q}");
    }
    let other = || Cache::new(store.clone(), "example.com", 443);
    assert_eq!(seqs(&other().await.search("quick", 10, None).await), at(2));
    // A reload while it streams: the next worker resumes from the reply's start.
    drop(session);
    let cache = other().await;
    let mut session = cache.session("s").unwrap();
    session.open().await;
    session.append(&delta(6, " and an emu", "m1")).await;
    assert_eq!(seqs(&cache.search(r#""brown fox""#, 10, None).await), at(2));
    assert!(session.store_page(&lines[..1], 2, false).await);
    session.append(&user(7, "thanks")).await;
    let fresh = other().await;
    for q in [
        r#""fox jumps over the lazy dog and a yak and an emu""#,
        "quick",
        "hello",
    ] {
        let want = if q == "hello" { at(1) } else { at(2) };
        assert_eq!(seqs(&fresh.search(q, 10, None).await), want, "{q}");
    }
    assert_eq!(seqs(&fresh.search("thanks", 10, None).await), at(7));
}

/// A page fetched into a gap between two cached stretches (a reset's window above, older
/// history below) can cut a reply at both of its edges: each is welded, while the reply
/// streams and once it is complete.
async fn a_page_in_a_gap_welds_both_edges<S: Store>(store: Arc<S>) {
    let lines = cut_reply();
    let cache = cache(&store).await;
    fill(&cache, "s", &lines[4..5]).await; // 5, streaming
    let mut session = cache.session("s").unwrap();
    assert!(session.store_page(&lines[..2], 3, false).await); // 1..=2, a gap at 3..=4
    assert!(session.store_page(&lines[2..4], 5, false).await); // the gap
    let at = |seq| vec![("s".to_string(), seq)];
    let queries = [
        r#""quick brown fox jumps over the lazy dog""#,
        "yak",
        "quick",
    ];
    for q in queries {
        assert_eq!(
            seqs(&cache.search(q, 10, None).await),
            at(2),
            "streaming: {q}"
        );
    }
    session.append(&lines[5]).await;
    for q in queries {
        assert_eq!(seqs(&cache.search(q, 10, None).await), at(2), "{q}");
    }
    let fresh = Cache::new(store.clone(), "example.com", 443).await;
    assert_eq!(seqs(&fresh.search("quick yak", 10, None).await), at(2));
    build(&cache, "s").await;
    let fresh = Cache::new(store.clone(), "example.com", 443).await;
    assert_eq!(seqs(&fresh.search("quick yak", 10, None).await), at(2));
}

/// The segment of session `id` (built as the worker's idle time builds it, whatever its size).
async fn build<S: Store>(cache: &Cache<S>, id: &str) {
    let dir = format!("{}/{id}", cache.dir());
    assert!(segment::build(&**cache.store(), &dir).await.unwrap());
}

async fn a_segment_answers_as_the_blob<S: Store>(store: Arc<S>) {
    let cache = cache(&store).await;
    fill(&cache, "s1", &conversation()).await;
    let queries = [
        "the",
        "tokio select",
        r#""brown fox jumps""#,
        "ETE migr",
        "thanks",
    ];
    let mut want = Vec::new();
    for q in queries {
        want.push(cache.search(q, 10, None).await);
    }
    assert!(want.iter().all(|hits| !hits.is_empty()));
    build(&cache, "s1").await;
    let seg = format!("{}/s1/{SEGMENT}", cache.dir());
    assert!(store.stat(&seg).await.unwrap().is_some());
    // A worker that starts reads the segment: the same answers, snippets and all.
    let fresh = || Cache::new(store.clone(), "example.com", 443);
    let started = fresh().await;
    for (q, want) in queries.iter().zip(&want) {
        assert_eq!(&started.search(q, 10, None).await, want, "{q}");
    }
    // Warmed up (the segment held in memory), before a query or after one: the same.
    let warmed = fresh().await;
    warmed.warm_search().await;
    started.warm_search().await;
    for (q, want) in queries.iter().zip(&want) {
        assert_eq!(&warmed.search(q, 10, None).await, want, "{q}");
        assert_eq!(&started.search(q, 10, None).await, want, "{q}");
    }
    // What the blob gains past the segment is found too, by a new worker and the writer's.
    let mut session = cache.session("s1").unwrap();
    session.open().await;
    session.append(&user(10, "quokka habitat")).await;
    assert_eq!(
        seqs(&fresh().await.search("quokka", 10, None).await),
        vec![("s1".into(), 10)]
    );
    assert_eq!(
        seqs(&cache.search("quokka", 10, None).await),
        vec![("s1".into(), 10)]
    );
    let started = fresh().await;
    for (q, want) in queries.iter().zip(want.iter_mut()) {
        *want = cache.search(q, 10, None).await;
        assert_eq!(&started.search(q, 10, None).await, want, "{q}");
    }
    // More past it than a new worker reads of the blob's end beside the segment's header
    // (16 kB): the rest is read after, and found the same.
    let before = store.stat(&format!("{}/s1/{INDEX}", cache.dir())).await;
    let many: Vec<Line> = (11..=260)
        .map(|s| {
            user(
                s,
                &format!("wombat burrow number {s} {}", "dig ".repeat(20)),
            )
        })
        .collect();
    session.append_all(&many).await;
    let grown = store.stat(&format!("{}/s1/{INDEX}", cache.dir())).await;
    let gained = grown.unwrap().unwrap().size - before.unwrap().unwrap().size;
    assert!(gained > 20_000, "{gained} bytes past the segment");
    let started = fresh().await;
    for q in ["wombat number 11 ", "wombat number 200", "quokka", "the"] {
        let hits = cache.search(q, 10, None).await;
        assert!(!hits.is_empty(), "{q}");
        assert_eq!(started.search(q, 10, None).await, hits, "{q}");
    }
    for (q, want) in queries.iter().zip(want.iter_mut()) {
        *want = cache.search(q, 10, None).await;
    }
    // A damaged segment is not used: the blob answers (and a build replaces it). (Without
    // the server's pack the warm-ups above built, which a worker that starts would read
    // instead of the session's segment.)
    store.remove(&pack::path(cache.dir())).await.unwrap();
    let bytes = store.read(&seg, 0, 1 << 20).await.unwrap();
    for damage in [
        bytes[..bytes.len() / 2].to_vec(),
        b"SBI1 nonsense".to_vec(),
        {
            // One of the format before (a run of Japanese characters one word): built again.
            let mut b = bytes.clone();
            b[..4].copy_from_slice(b"SBI3");
            b
        },
        {
            let mut b = bytes.clone();
            let n = b.len();
            b[n / 2..].fill(0xff);
            b
        },
    ] {
        store.write(&seg, &damage).await.unwrap();
        let f = fresh().await;
        for (q, want) in queries.iter().zip(&want) {
            assert_eq!(&f.search(q, 10, None).await, want, "{q} {:?}", &damage[..4]);
        }
        // Met by a query, it is removed; a cut one is also seen by the idle build's check.
        store.write(&seg, &damage).await.unwrap();
        let dir = format!("{}/s1", cache.dir());
        if damage.len() != bytes.len() {
            assert!(segment::stale(&*store, &dir).await, "{:?}", &damage[..4]);
        }
        f.search("the", 10, None).await; // loaded before: its segment is not read again
        assert_eq!(fresh().await.search("the", 10, None).await, want[0]);
        assert!(
            store.stat(&seg).await.unwrap().is_none(),
            "removed once met"
        );
        build(&cache, "s1").await;
    }
    // A segment of another blob (the blob rebuilt under it) is not used either.
    let index = format!("{}/s1/{INDEX}", cache.dir());
    store.append(&index, b"{not json\n").await.unwrap();
    cache.session("s1").unwrap().open().await; // the writer's next open rebuilds the blob...
    assert!(
        store.stat(&seg).await.unwrap().is_none(),
        "...and removes the segment"
    );
    assert_eq!(fresh().await.search("the", 10, None).await, want[0]);
    // Purge removes it with the session.
    build(&cache, "s1").await;
    cache.purge("s1").await;
    assert!(store.stat(&seg).await.unwrap().is_none());
    assert!(fresh().await.search("the", 10, None).await.is_empty());
}

async fn a_query_during_the_warm_up_does_not_wait_for_it<S: Store>(store: Arc<S>) {
    let cache = cache(&store).await;
    for n in 0..20 {
        fill(&cache, &format!("s{n}"), &conversation()).await;
        build(&cache, &format!("s{n}")).await;
    }
    let want = cache.search("fox", 40, None).await;
    assert_eq!(want.len(), 20);
    // A worker that starts warms up, and a query comes as soon as the warm-up has begun: it
    // is answered between two of the warm-up's turns (before, it waited for every session
    // to be loaded whole), and as it is once the warm-up is done.
    let started = Cache::new(store.clone(), "example.com", 443).await;
    let order = std::cell::RefCell::new(Vec::new());
    let warm = async {
        started.warm_search().await;
        order.borrow_mut().push("warmed up");
    };
    let query = async {
        let hits = started.search("fox", 40, None).await;
        order.borrow_mut().push("answered");
        hits
    };
    let ((), hits) = futures::join!(warm, query);
    assert_eq!(hits, want);
    assert_eq!(*order.borrow(), ["answered", "warmed up"]);
    assert_eq!(started.search("fox", 40, None).await, want);
}

async fn idle_builds_only_what_is_worth_it<S: Store>(store: Arc<S>) {
    let cache = cache(&store).await;
    fill(&cache, "small", &conversation()).await;
    let big: Vec<Line> = (1..=400)
        .map(|s| {
            user(
                s,
                &format!("message {s} about the migration of database number {s}"),
            )
        })
        .collect();
    fill(&cache, "big", &big).await;
    // Only a blob of at least MIN_TAIL bytes gets a segment; a worker that searched before
    // the build answers the same after it (the session loaded again, from the segment).
    let reader = Cache::new(store.clone(), "example.com", 443).await;
    let before = reader.search("number 250", 10, None).await;
    assert_eq!(seqs(&before), vec![("big".into(), 250)]);
    reader.warm_search().await;
    assert_eq!(reader.search("number 250", 10, None).await, before);
    assert_eq!(
        cache.build_search().await,
        0,
        "built by the other worker's warm-up"
    );
    store
        .remove(&format!("{}/big/{SEGMENT}", cache.dir()))
        .await
        .unwrap();
    assert_eq!(cache.build_search().await, 1);
    // A session whose writer role is held elsewhere waits (where the store has roles).
    let dir = format!("{}/big", cache.dir());
    let mut s = cache.session("big").unwrap();
    s.open().await;
    s.append(&user(401, "one more")).await;
    let extra: Vec<Line> = (402..=600)
        .map(|s| user(s, "padding words to grow the blob past a tail"))
        .collect();
    s.append_all(&extra).await;
    let held = store.writer(&dir, false).await;
    let shared = store.writer(&dir, false).await.is_none();
    assert_eq!(cache.build_search().await, usize::from(!shared));
    drop(held);
    if shared {
        assert_eq!(
            cache.build_search().await,
            1,
            "built once the writer lets go"
        );
    }
    let seg = |id: &str| format!("{}/{id}/{SEGMENT}", cache.dir());
    assert!(store.stat(&seg("big")).await.unwrap().is_some());
    assert!(store.stat(&seg("small")).await.unwrap().is_none());
    assert_eq!(cache.build_search().await, 0, "nothing new since");
    // Every minute the worker looks only at the sessions it wrote since.
    assert_eq!(cache.build_written().await, 0);
    let more: Vec<Line> = (601..=900)
        .map(|s| user(s, &format!("later words {s} to grow the blob")))
        .collect();
    fill(&cache, "big", &more).await;
    assert_eq!(cache.build_written().await, 1);
    assert_eq!(cache.build_written().await, 0);
    let fresh = Cache::new(store.clone(), "example.com", 443).await;
    assert_eq!(
        seqs(&fresh.search("number 250", 10, None).await),
        vec![("big".into(), 250)]
    );
    let big = ["big".to_string()];
    assert_eq!(fresh.search("migration", 1000, Some(&big)).await.len(), 400);
    assert_eq!(fresh.search("padding", 1000, None).await.len(), 199);
}

#[test]
fn a_full_disk_builds_no_segment_and_search_still_answers() {
    pollster::block_on(async {
        let store = Arc::new(MemoryStore::new());
        let cache = cache(&store).await;
        let rows: Vec<Line> = (1..=400)
            .map(|s| user(s, &format!("words about the migration number {s}")))
            .collect();
        fill(&cache, "big", &rows).await;
        store.limit_writes(Some(1024));
        assert_eq!(cache.build_search().await, 0);
        for name in [SEGMENT, segment::SEGMENT_NEW] {
            let path = format!("{}/big/{name}", cache.dir());
            assert!(store.stat(&path).await.unwrap().is_none(), "{name}");
        }
        let fresh = Cache::new(store.clone(), "example.com", 443).await;
        let hits = fresh.search("number 250", 10, None).await;
        assert_eq!(seqs(&hits), vec![("big".into(), 250)]);
        store.limit_writes(None);
        assert_eq!(cache.build_search().await, 1, "built once there is room");
    });
}

macro_rules! both_stores {
    ($($name:ident),*) => {
        mod memory {
            use super::*;
            $(#[test] fn $name() { pollster::block_on(super::$name(Arc::new(MemoryStore::new()))) })*
        }
        mod fs {
            use super::*;
            $(#[test] fn $name() {
                let dir = tempfile::tempdir().unwrap();
                pollster::block_on(super::$name(Arc::new(FsStore::new(dir.path()))))
            })*
        }
    };
}

both_stores!(
    finds_what_was_said,
    finds_words_in_scripts_written_without_spaces,
    ranks_and_scopes_sessions,
    a_damaged_index_is_rebuilt,
    a_line_damaged_inside_the_index_is_rebuilt,
    a_damaged_segment_shows_no_row_without_the_words,
    a_segment_answers_as_the_blob,
    a_query_during_the_warm_up_does_not_wait_for_it,
    idle_builds_only_what_is_worth_it,
    a_rebuilt_index_is_not_taken_for_the_old_one_grown,
    a_write_cut_short_loses_no_row,
    a_removed_session_leaves_no_streaming_row,
    a_reply_cut_where_the_cache_started_is_found_whole,
    a_reply_still_streaming_takes_the_page_below,
    a_page_in_a_gap_welds_both_edges,
    a_purge_removes_the_server_pack,
    search_off_indexes_nothing_and_on_again_rebuilds
);

/// The server's pack holds every session's words: purging a session removes it (and what a
/// build cut short left under its new name), and the next warm-up builds it without them.
async fn a_purge_removes_the_server_pack<S: Store>(store: Arc<S>) {
    let cache = cache(&store).await;
    fill(&cache, "s1", &conversation()).await;
    fill(&cache, "s2", &[user(1, "a quokka")]).await;
    cache.warm_search().await;
    let path = pack::path(cache.dir());
    assert!(store.stat(&path).await.unwrap().is_some(), "built");
    let cut_short = format!("{path}.new");
    store.write(&cut_short, b"SBP1").await.unwrap();
    cache.purge("s1").await;
    for p in [&path, &cut_short] {
        assert!(store.stat(p).await.unwrap().is_none(), "{p} removed");
    }
    let started = Cache::new(store.clone(), "example.com", 443).await;
    started.warm_search().await;
    assert!(store.stat(&path).await.unwrap().is_some(), "built again");
    let fresh = Cache::new(store.clone(), "example.com", 443).await;
    assert!(
        fresh.search("the", 10, None).await.is_empty(),
        "nothing of s1"
    );
    assert_eq!(
        seqs(&fresh.search("quokka", 10, None).await),
        vec![("s2".into(), 1)]
    );
}

/// With search off nothing is indexed: a session opened loses the index it had, and what it
/// is written then (a live line, a history page below) leaves none behind; the warm-up
/// removes the other sessions' indexes and segments and the server's pack; a search finds
/// nothing. Turned on again, each session's index is rebuilt from its chunks at its open,
/// and finds what was written while search was off, the reply the page completed whole.
async fn search_off_indexes_nothing_and_on_again_rebuilds<S: Store>(store: Arc<S>) {
    let lines = cut_reply();
    let quokkas: Vec<Line> = (1..=300)
        .map(|seq| user(seq, &format!("a quokka, number {seq} of many")))
        .collect();
    let on = cache(&store).await;
    fill(&on, "s1", &lines[3..]).await; // the window: 4..=6
    fill(&on, "s2", &quokkas).await;
    on.warm_search().await;
    let file = |key: &str, name: &str| format!("{}/{key}/{name}", on.dir());
    let exists = |path: String| {
        let store = store.clone();
        async move { store.stat(&path).await.unwrap().is_some() }
    };
    let pack = pack::path(on.dir());
    assert!(exists(file("s1", INDEX)).await && exists(file("s2", INDEX)).await);
    assert!(exists(file("s2", SEGMENT)).await && exists(pack.clone()).await);

    let mut off = cache(&store).await;
    off.set_search(false);
    assert!(!off.searches());
    let mut session = off.session("s1").unwrap();
    session.open().await;
    assert!(!exists(file("s1", INDEX)).await, "removed at the open");
    assert!(
        exists(file("s2", INDEX)).await,
        "not opened: left to the warm-up"
    );
    session.append(&user(7, "a wombat")).await;
    assert!(session.store_page(&lines[..3], 4, false).await);
    assert!(!exists(file("s1", INDEX)).await, "nothing indexed");
    assert!(off.search("quokka", 10, None).await.is_empty());
    off.warm_search().await;
    for path in [file("s2", INDEX), file("s2", SEGMENT), pack] {
        assert!(!exists(path.clone()).await, "{path} removed");
    }
    assert_eq!(off.build_search().await, 0);
    drop(session);

    let on = cache(&store).await;
    for id in ["s1", "s2"] {
        on.session(id).unwrap().open().await;
    }
    let at = |id: &str, seq| vec![(id.to_string(), seq)];
    assert_eq!(seqs(&on.search("wombat", 10, None).await), at("s1", 7));
    let phrase = r#""fox jumps over the lazy""#;
    assert_eq!(seqs(&on.search(phrase, 10, None).await), at("s1", 2));
    assert_eq!(seqs(&on.search("hello", 10, None).await), at("s1", 1));
    assert_eq!(
        seqs(&on.search("number 250", 10, None).await),
        at("s2", 250)
    );
}

// The property: a random transcript appended in random batches, with reopens between them,
// its start stored as history pages below the first window (which may open mid-reply, as may
// each page: replies cut at the seams; raw or coalesced), searched for every word of the vocabulary, each
// two-word phrase and each prefix, answers the same as the index rebuilt from the chunks
// (removed, then the session reopened).

const VOCAB: Vocab = ["alpha", "Beta", "gämma", "delta", "alphabet", "omega"];
/// Chinese, Japanese and Thai words (a word a character: `日本` is in `日本語`, `本日` is the
/// same characters the other way; `ไม่รู้`'s tone marks belong to the characters before them;
/// `データ` written decomposed, its sound mark apart from its kana, and a delta may end between
/// the two), beside a Latin one.
const CJK: Vocab = ["日本語", "本日", "ไม่รู้", "alpha", "テ\u{3099}ータ", "日本"];

type Vocab = [&'static str; 6];

fn random_line(vocab: &Vocab, seq: u64, kind: u8, a: usize, b: usize) -> Line {
    let text = format!("{} {}", vocab[a], vocab[b]);
    let half = (0..=text.len() / 2)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    match kind {
        0 => user(seq, &text),
        // Deltas cut words: "alp" + "ha beta": the row rule joins clean appends only.
        1 | 2 => delta(seq, &format!("{}{seq} ", &text[..half]), "m"),
        3 => delta(seq, &format!("x{seq} {text}"), "n"),
        4 => line(seq, r#"{"type":"status","status":"working"}"#),
        _ => line(
            seq,
            &format!(
                r#"{{"type":"toolResult","id":"t","output":{}}}"#,
                json(&text)
            ),
        ),
    }
}

/// Every word, the first three bytes of each (a prefix; a character of the CJK words), and
/// each two-word phrase.
fn queries(vocab: &Vocab) -> Vec<String> {
    let mut out: Vec<String> = vocab.iter().map(|w| w.to_string()).collect();
    out.extend(vocab.iter().map(|w| w[..3].to_string()));
    for a in vocab {
        for b in vocab {
            out.push(format!(r#""{a} {b}""#));
        }
    }
    out
}

async fn answers(cache: &Cache<MemoryStore>, vocab: &Vocab) -> Vec<Vec<Hit>> {
    let mut out = Vec::new();
    for q in queries(vocab) {
        out.push(cache.search(&q, 1000, None).await);
    }
    out
}

/// The property, over transcripts of `vocab`'s words.
fn rebuilt_answers_as_incremental(
    vocab: &Vocab,
    events: &[(u8, usize, usize)],
    cuts: &[usize],
    segment_after: usize,
    window: usize,
    pages: &[(usize, bool)],
) -> Result<(), TestCaseError> {
    pollster::block_on(async {
        let lines: Vec<Line> = events
            .iter()
            .enumerate()
            .map(|(i, &(k, a, b))| random_line(vocab, i as u64 + 1, k, a, b))
            .collect();
        let store = Arc::new(MemoryStore::new());
        let cache = cache(&store).await;
        // The window starts at `lines[below]`; the pages below it are stored one after
        // each batch (while its reply may still stream), the rest at the end.
        let mut below = window.min(lines.len() - 1);
        let mut rest = &lines[below..];
        let mut cuts = cuts.iter().cycle();
        let mut pages = pages.iter().cycle();
        let mut batches = 0;
        while !rest.is_empty() || below > 0 {
            let n = (*cuts.next().unwrap()).min(rest.len());
            let mut session = cache.session("p").unwrap();
            session.open().await;
            session.append_all(&rest[..n]).await;
            rest = &rest[n..];
            if below > 0 {
                // Raw, or coalesced as the server sends history (a run of deltas one line).
                let &(size, coalesced) = pages.next().unwrap();
                let from = below.saturating_sub(size);
                let page = match coalesced {
                    true => coalesce(&lines[from..below]),
                    false => lines[from..below].to_vec(),
                };
                let before = lines[below].seq();
                prop_assert!(session.store_page(&page, before, coalesced).await);
                below = from;
            }
            batches += 1;
            if batches == segment_after {
                drop(session);
                build(&cache, "p").await;
            }
        }
        let incremental = answers(&cache, vocab).await;
        let found: usize = incremental.iter().map(Vec::len).sum();
        prop_assert!(found > 0 || lines.len() < 12, "the index holds the rows");
        // Every phrase finds exactly the rows whose words hold it (the postings' follower
        // signatures narrow the candidates; they never drop one).
        let rows = docs_of(&lines);
        for (q, hits) in queries(vocab).iter().zip(&incremental) {
            let Some(phrase) = q.strip_prefix('"').and_then(|q| q.strip_suffix('"')) else {
                continue;
            };
            let phrase = terms(phrase);
            let mut want: Vec<u64> = rows
                .iter()
                .filter(|d| {
                    terms(&d.text)
                        .windows(phrase.len())
                        .any(|w| w == phrase.as_slice())
                })
                .map(|d| d.seq)
                .collect();
            let mut got: Vec<u64> = hits.iter().map(|h| h.seq).collect();
            want.sort_unstable();
            got.sort_unstable();
            prop_assert_eq!(got, want, "phrase {}", q);
        }
        // A worker that starts reads the segment built part way, and the blob past it.
        let started = Cache::new(store.clone(), "example.com", 443).await;
        started.session("p").unwrap().open().await; // the row still streaming, if any
        prop_assert_eq!(answers(&started, vocab).await, incremental.clone());
        started.warm_search().await; // the segment held in memory, and the pack built
        prop_assert_eq!(answers(&started, vocab).await, incremental.clone());
        // A worker that starts after that reads the server's pack (where it holds the
        // session: not one a welded row left pieces in until its next segment build).
        let packed = Cache::new(store.clone(), "example.com", 443).await;
        packed.session("p").unwrap().open().await;
        prop_assert_eq!(answers(&packed, vocab).await, incremental.clone());

        store
            .remove(&format!("{}/p/{INDEX}", cache.dir()))
            .await
            .unwrap();
        let rebuilt = Cache::new(store.clone(), "example.com", 443).await;
        rebuilt.session("p").unwrap().open().await;
        prop_assert_eq!(answers(&rebuilt, vocab).await, incremental);
        Ok(())
    })
}
/// A random transcript (event kind and two words, per line) and how it is cached: the batches
/// appended, after which batch a segment is built, where the first window starts, and the
/// history pages below it (size, coalesced).
type Case = (
    Vec<(u8, usize, usize)>,
    Vec<usize>,
    usize,
    usize,
    Vec<(usize, bool)>,
);

fn cases() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((0u8..6, 0usize..6, 0usize..6), 1..120),
        prop::collection::vec(1usize..20, 1..20),
        1usize..6,
        0usize..60,
        prop::collection::vec((1usize..12, any::<bool>()), 1..8),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_rebuilt_index_answers_as_the_incremental_one(
        (events, cuts, segment_after, window, pages) in cases()
    ) {
        rebuilt_answers_as_incremental(&VOCAB, &events, &cuts, segment_after, window, &pages)?;
    }

    #[test]
    fn a_rebuilt_index_answers_as_the_incremental_one_in_chinese_japanese_and_korean(
        (events, cuts, segment_after, window, pages) in cases()
    ) {
        rebuilt_answers_as_incremental(&CJK, &events, &cuts, segment_after, window, &pages)?;
    }
}
