//! Every rule of the chunk store, as every backend must serve it.

use super::{line, seqs, stamp_after, transcript, LimitWrites};
use crate::chunks::{Cache, KeyError, SessionCache};
use crate::protocol::{coalesce, joins, Line, RowWalk};
use crate::store::{Store, StoreError};
use std::sync::Arc;

async fn cache<S: Store>(store: &Arc<S>, test: &str) -> Cache<S> {
    Cache::new(store.clone(), test, 1).await
}

async fn appended<S: Store>(cache: &Cache<S>, id: &str, lines: &[Line]) -> SessionCache<S> {
    let mut session = cache.session(id).expect("a valid id");
    for line in lines {
        session.append(line).await;
    }
    session
}

/// The chunk files of a session, sorted.
async fn files<S: Store>(store: &S, cache: &Cache<S>, id: &str) -> Vec<String> {
    let dir = format!(
        "{}/{}",
        cache.dir(),
        crate::chunks::names::encode(id).unwrap()
    );
    let mut names: Vec<String> = store
        .list(&dir)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    names.retain(|n| {
        ![
            crate::chunks::names::TOUCH,
            crate::search::INDEX,
            crate::search::segment::SEGMENT,
            crate::search::segment::SEGMENT_NEW,
        ]
        .contains(&n.as_str())
    });
    names.sort();
    names
}

/// The page a server would count before `before` over the raw transcript, stopping at `floor`.
fn expected_rows(transcript: &[Line], before: u64, limit: usize, floor: u64) -> Vec<Line> {
    let mut walk = RowWalk::new(limit);
    let mut out: Vec<Line> = transcript
        .iter()
        .rev()
        .filter(|l| l.seq() < before && l.seq() >= floor)
        .take_while(|l| walk.take(l))
        .cloned()
        .collect();
    out.reverse();
    out
}

fn raws(lines: &[Line]) -> Vec<&str> {
    lines.iter().map(Line::raw).collect()
}

/// The newest lines come from the open chunk and, when it holds too few, from adjacent older
/// chunks; byte for byte, oldest first; the cursor is the newest line.
pub async fn newest_lines_cross_chunks<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "newest").await;
    let t = transcript(300);
    let mut s = appended(&cache, "s", &t[100..]).await;
    assert!(s.store_page(&t[..100], 101, false).await);
    assert_eq!(
        s.newest(80).await.map(|l| seqs(&l)),
        Some((221..=300).collect())
    );
    let many = s.newest(250).await.unwrap();
    assert_eq!(raws(&many), raws(&t[50..]));
    assert_eq!(
        s.newest(1000).await.map(|l| l.len()),
        Some(300),
        "a short answer is an answer"
    );
    assert_eq!(s.cursor().await.map(|l| l.seq()), Some(300));
    assert_eq!(s.suffix().await, Some((1, 301)));

    let mut again = cache.session("s").unwrap();
    assert_eq!(
        again.newest(250).await.map(|l| seqs(&l)),
        Some((51..=300).collect())
    );
    assert_eq!(again.cursor().await.as_ref(), t.last());
    let mut empty = cache.session("nothing").unwrap();
    assert_eq!(empty.newest(80).await, None);
    assert_eq!(empty.cursor().await, None);
}

/// A `before` in the middle of a chunk is a hit (the seed's corrected rule); outside the
/// suffix's coverage, a miss.
pub async fn a_cursor_inside_a_chunk_is_a_hit<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "inside").await;
    let t = transcript(500);
    let mut s = appended(&cache, "s", &t).await;
    let page = s.page(421, 40, false).await.expect("inside the open chunk");
    assert_eq!(seqs(&page.lines), (381..=420).collect::<Vec<_>>());
    assert!(!page.at_start);
    for limit in [1, 5, 40] {
        let page = s.page(421, limit, true).await.expect("a rows page");
        assert_eq!(raws(&page.lines), raws(&expected_rows(&t, 421, limit, 1)));
    }
    assert!(
        s.page(501, 3, false).await.is_some(),
        "before = end is the newest page"
    );
    assert_eq!(s.page(502, 3, false).await, None, "above the end: a miss");
    assert_eq!(
        s.page(1, 3, false).await,
        None,
        "at the suffix's first: a miss"
    );
    let short = s.page(3, 40, false).await.unwrap();
    assert_eq!((seqs(&short.lines), short.at_start), (vec![1, 2], true));
    assert_eq!(s.page(300, 0, true).await, None, "never an empty page");
}

fn straddling() -> Vec<Line> {
    // 1 user, 2..=9 one delta run, 10 user, 11..=14 a run, 15 usage.
    let kinds = [0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 3];
    kinds
        .iter()
        .enumerate()
        .map(|(i, k)| line(i as u64 + 1, *k))
        .collect()
}

/// A delta run that crosses a chunk boundary counts as one row, from a raw or a coalesced chunk.
pub async fn a_delta_run_straddling_a_boundary_is_one_row<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "straddle").await;
    let t = straddling();
    for (id, coalesced) in [("raw", false), ("rows", true)] {
        let mut s = appended(&cache, id, &t[5..]).await; // open chunk 6..=15
        let older = if coalesced {
            coalesce(&t[..5])
        } else {
            t[..5].to_vec()
        };
        assert!(s.store_page(&older, 6, coalesced).await, "{id}");
        let page = s.page(16, 3, true).await.unwrap();
        assert_eq!(seqs(&page.lines), (10..=15).collect::<Vec<_>>(), "{id}");
        let page = s.page(10, 1, true).await.unwrap();
        assert_eq!(page.lines[0].seq(), 2, "{id}: the run's oldest delta");
        assert_eq!(seqs(&page.lines).last(), Some(&9));
        assert!(!page.at_start, "{id}: the user message at 1 is still there");
        let joined = coalesce(&page.lines);
        assert_eq!(joined.len(), 1, "{id}: one row");
        assert_eq!(joined[0].text(), Some("t2 t3 t4 t5 t6 t7 t8 t9 "), "{id}");
        let page = s.page(10, 2, true).await.unwrap();
        assert_eq!((page.lines[0].seq(), page.at_start), (1, true), "{id}");
    }
}

/// A rows page stops only between rows, is counted like the server counts, and is short (never
/// empty) at the suffix's start.
pub async fn pages_stop_between_rows_and_may_be_short<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "rows").await;
    let t = transcript(64);
    let mut s = appended(&cache, "s", &t).await;
    for before in [65, 40, 17, 9] {
        for limit in 1..=8 {
            let page = s.page(before, limit, true).await.unwrap();
            assert_eq!(
                raws(&page.lines),
                raws(&expected_rows(&t, before, limit, 1)),
                "{before} {limit}"
            );
            let first = page.lines[0].seq() as usize;
            if first > 1 {
                assert!(
                    !joins(&t[first - 2], &page.lines[0]),
                    "stopped inside a row"
                );
            }
            assert_eq!(
                page.at_start,
                first == 1 && coalesce(&page.lines).len() <= limit
            );
        }
    }
    let short = s.page(5, 40, true).await.unwrap();
    assert_eq!(
        (seqs(&short.lines), short.at_start),
        (vec![1, 2, 3, 4], true)
    );
}

/// Paging back through a long open chunk (many blocks) yields the whole transcript, and a
/// page before any seq is found by seeking, not by reading the chunk whole.
pub async fn paging_back_through_a_long_chunk<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "long").await;
    let t = transcript(3000);
    let mut s = appended(&cache, "s", &t).await;
    let mut before = 3001;
    let mut got: Vec<Line> = Vec::new();
    loop {
        let page = s.page(before, 40, true).await.expect("inside the suffix");
        before = page.lines[0].seq();
        let at_start = page.at_start;
        got.splice(0..0, page.lines);
        if at_start {
            break;
        }
    }
    assert_eq!(raws(&got), raws(&t));
    let mut fresh = cache.session("s").unwrap();
    for before in [1234, 2999, 2, 1500, 64] {
        let page = fresh.page(before, 25, false).await.unwrap();
        let from = before.saturating_sub(26) as usize;
        assert_eq!(
            raws(&page.lines),
            raws(&t[from..before as usize - 1]),
            "before {before}"
        );
    }
}

/// Chunks behind a gap are kept but not served; `gap_after` bounds the fetch; a page that
/// fills the gap joins the runs.
pub async fn only_the_suffix_is_served_and_gaps_bound_fetches<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "gap").await;
    let t = transcript(400);
    let mut s = appended(&cache, "s", &t[300..]).await; // [301, 401)
    assert!(s.store_page(&t[100..200], 201, false).await); // [101, 201)
    assert!(s.store_page(&coalesce(&t[..100]), 101, true).await); // [1, 101)
    assert_eq!(s.suffix().await, Some((301, 401)));
    for before in [301, 250, 201, 150, 2] {
        assert_eq!(
            s.page(before, 10, false).await,
            None,
            "before {before} is behind the gap"
        );
    }
    assert_eq!(s.gap_after(301).await, Some(200));
    assert_eq!(s.gap_after(150).await, Some(100));
    assert_eq!(s.gap_after(100).await, None);
    assert!(s.store_page(&coalesce(&t[200..300]), 301, true).await); // the gap, [201, 301)
    assert_eq!(s.suffix().await, Some((1, 401)));
    assert_eq!(s.gap_after(301).await, Some(300));
    let page = s.page(150, 10, false).await.unwrap();
    assert_eq!(raws(&page.lines), raws(&t[139..149]));
    let mut reopened = cache.session("s").unwrap();
    assert_eq!(reopened.suffix().await, Some((1, 401)));
    let all = reopened.newest(10_000).await.unwrap();
    assert_eq!(
        coalesce(&all),
        coalesce(&t),
        "the whole run is the transcript"
    );
}

/// A closed chunk left empty (OPFS creates a blob before filling it: a full disk or a tab closed
/// in between leaves it so) is a gap, fetched again, never a seam the chunk below is read
/// across; the writer removes it.
pub async fn an_empty_chunk_is_a_gap_not_a_seam<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "empty").await;
    let t = transcript(300);
    let mut s = appended(&cache, "s", &t[200..]).await; // [201, 301)
    assert!(s.store_page(&t[100..200], 201, false).await); // [101, 201)
    assert!(s.store_page(&t[..100], 101, false).await); // [1, 101)
    let middle = format!("{}/s/101-201.raw.jsonl", cache.dir());
    store.write(&middle, b"").await.unwrap();

    let mut reopened = cache.session("s").unwrap();
    assert_eq!(reopened.suffix().await, Some((201, 301)));
    assert_eq!(
        reopened.page(201, 10, false).await,
        None,
        "lines 101-200 are not cached: asked of the server, not skipped"
    );
    assert_eq!(reopened.gap_after(201).await, Some(100));
    let all = reopened.newest(10_000).await.unwrap();
    assert_eq!(raws(&all), raws(&t[200..]));
    assert_eq!(
        files(&*store, &cache, "s").await,
        ["1-101.raw.jsonl", "201-open.raw.jsonl"]
    );
    // The gap is filled again as any gap is.
    assert!(reopened.store_page(&t[100..200], 201, false).await);
    assert_eq!(reopened.suffix().await, Some((1, 301)));
    let page = reopened.page(201, 10, false).await.unwrap();
    assert_eq!(raws(&page.lines), raws(&t[190..200]));
}

/// An open chunk whose first append failed (a full disk after a seq jump; OPFS had created
/// the blob) is left empty: it is no open chunk, the writer removes it, and the stream's next
/// open chunk does not make two (which purges the session).
pub async fn an_empty_open_chunk_is_no_open_chunk<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "empty-open").await;
    let t = transcript(40);
    let mut s = appended(&cache, "s", &t[..20]).await; // [1, 21) open
    let stray = format!("{}/s/31-open.raw.jsonl", cache.dir());
    s.append(&t[30]).await; // a jump: [1, 21) closed, [31, 32) open
    store.write(&stray, b"").await.unwrap(); // as a failed first append leaves it
    let mut reopened = cache.session("s").unwrap();
    assert_eq!(reopened.suffix().await, Some((1, 21)));
    reopened.open().await;
    assert_eq!(files(&*store, &cache, "s").await, ["1-21.raw.jsonl"]);
    reopened.append_all(&t[20..40]).await; // the stream resumes at 21
    let mut again = cache.session("s").unwrap();
    assert_eq!(again.suffix().await, Some((1, 41)), "kept, not purged");
    let all = again.newest(100).await.unwrap();
    assert_eq!(raws(&all), raws(&t));
}

/// A reader's purge (its view's Reload, or damage it read) cannot remove the writer's chunks,
/// and does not read them again either: it opens cold; made the writer, it removes them.
pub async fn a_readers_purge_opens_it_cold<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "reader").await;
    let t = transcript(50);
    let mut writer = appended(&cache, "s", &t).await;
    let mut reader = cache.session("s").unwrap();
    reader.set_reader(true);
    assert_eq!(raws(&reader.newest(5).await.unwrap()), raws(&t[45..]));
    reader.purge().await;
    reader.open_untouched().await; // the reopen that follows a reload
    assert_eq!(
        reader.newest(5).await,
        None,
        "a miss: its rows come from the server"
    );
    assert_eq!(reader.cursor().await, None);
    assert_eq!(reader.page(40, 5, false).await, None);
    assert_eq!(
        files(&*store, &cache, "s").await,
        ["1-open.raw.jsonl"],
        "the writer's chunks stay"
    );
    assert_eq!(raws(&writer.newest(5).await.unwrap()), raws(&t[45..]));
    // Made the writer (its holder went away): what it threw away goes, and is never served.
    drop(writer);
    reader.set_reader(false);
    reader.open_untouched().await;
    assert_eq!(reader.newest(5).await, None);
    assert_eq!(files(&*store, &cache, "s").await, Vec::<String>::new());
    reader.append(&t[49]).await;
    assert_eq!(raws(&reader.newest(5).await.unwrap()), raws(&t[49..]));
}

/// A page that overlaps a chunk is never stored; nor a coalesced page as the newest chunk, a
/// page reaching past its `before`, or lines out of order. (One that stops short of it is the
/// server's answer that nothing lies between: `a_line_the_server_skips_is_a_hole_not_a_gap`.)
pub async fn an_overlapping_page_is_refused<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "overlap").await;
    let t = transcript(200);
    let mut s = appended(&cache, "s", &t[100..]).await; // [101, 201)
    assert!(!s.store_page(&t[50..120], 121, false).await);
    assert!(!s.store_page(&coalesce(&t[..101]), 102, true).await);
    assert!(!s.store_page(&t[150..160], 161, false).await);
    assert!(
        !s.store_page(&t[..30], 20, false).await,
        "a page reaching past its before"
    );
    let shuffled = [t[3].clone(), t[2].clone()];
    assert!(!s.store_page(&shuffled, 5, false).await);
    assert!(!s.store_page(&[], 5, false).await);
    assert!(s.store_page(&t[..100], 101, false).await);
    assert!(!s.store_page(&t[..100], 101, false).await, "not twice");
    assert_eq!(
        files(&*store, &cache, "s").await,
        ["1-101.raw.jsonl", "101-open.raw.jsonl"]
    );

    let mut fresh = cache.session("fresh").unwrap();
    assert!(
        !fresh.store_page(&coalesce(&t[..50]), 51, true).await,
        "the newest is raw"
    );
    assert!(fresh.store_page(&t[..50], 51, false).await);
    assert_eq!(fresh.cursor().await.map(|l| l.seq()), Some(50));
}

/// Live lines append to the open chunk; a seq below its end is dropped; a jump closes it with
/// its real end and opens a new one.
pub async fn a_seq_jump_rotates_the_open_chunk<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "rotate").await;
    let t = transcript(70);
    let mut s = appended(&cache, "s", &t[..10]).await;
    assert_eq!(files(&*store, &cache, "s").await, ["1-open.raw.jsonl"]);
    let size = s.size().await;
    s.append(&t[4]).await;
    s.append(&t[9]).await;
    assert_eq!(s.size().await, size, "covered seqs are not written again");
    s.append(&t[10]).await;
    for line in &t[49..60] {
        s.append(line).await; // a reset's window: 50..=60
    }
    assert_eq!(
        files(&*store, &cache, "s").await,
        ["1-12.raw.jsonl", "50-open.raw.jsonl"]
    );
    assert_eq!(s.cursor().await.map(|l| l.seq()), Some(60));
    assert_eq!(s.suffix().await, Some((50, 61)));
    assert_eq!(s.page(50, 10, false).await, None);
    assert_eq!(s.gap_after(50).await, Some(11));
    let mut again = cache.session("s").unwrap();
    assert_eq!(again.cursor().await.map(|l| l.seq()), Some(60));
    again.append(&t[60]).await;
    assert_eq!(
        files(&*store, &cache, "s").await,
        ["1-12.raw.jsonl", "50-open.raw.jsonl"]
    );
    assert_eq!(
        again.newest(100).await.map(|l| seqs(&l)),
        Some((50..=61).collect())
    );
    assert!(
        again.store_page(&t[11..49], 50, false).await,
        "the gap fills"
    );
    assert_eq!(raws(&again.newest(100).await.unwrap()), raws(&t[..61]));
}

/// A batch of live lines (a catch-up, a cold window) is written as appending them one by one
/// would write it: covered seqs dropped, a jump rotating the open chunk, the same bytes.
pub async fn a_batch_appends_as_lines_one_by_one<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "batch").await;
    let t = transcript(80);
    let batch: Vec<Line> = [&t[..10], &t[4..12], &t[30..45], &t[44..50], &t[60..61]].concat();
    let mut one = appended(&cache, "one", &t[..3]).await;
    let mut all = appended(&cache, "all", &t[..3]).await;
    for line in &batch {
        one.append(line).await;
    }
    all.append_all(&batch).await;
    let names = files(&*store, &cache, "one").await;
    assert_eq!(names, files(&*store, &cache, "all").await);
    assert_eq!(
        names,
        ["1-13.raw.jsonl", "31-51.raw.jsonl", "61-open.raw.jsonl"]
    );
    for name in &names {
        let read = |id: &str| {
            let path = format!("{}/{id}/{name}", cache.dir());
            let store = store.clone();
            async move { store.read(&path, 0, usize::MAX).await.unwrap() }
        };
        assert_eq!(read("one").await, read("all").await, "{name}");
    }
    let mut again = cache.session("all").unwrap();
    assert_eq!(again.cursor().await.map(|l| l.seq()), Some(61));
    assert_eq!(all.cursor().await.map(|l| l.seq()), Some(61));
    assert_eq!(again.suffix().await, Some((61, 62)));
}

/// A line the server skips (one it cannot read) leaves a hole in the seqs, not a gap in the
/// cache: inside one answer, or after the line a stream or catch-up follows, it stays inside
/// the open chunk; a page whose newest line stops short of its `before`, or an `after`-bounded
/// page that comes back empty, gives the hole to the chunk above (renamed to start lower). The
/// suffix then reaches across every hole, and what is read back is every line served.
pub async fn a_line_the_server_skips_is_a_hole_not_a_gap<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "holes").await;
    let t = transcript(60);
    // Lines 20, 33, 39, 40 and 50 are not served.
    let served: Vec<Line> = t
        .iter()
        .filter(|l| ![20, 33, 39, 40, 50].contains(&l.seq()))
        .cloned()
        .collect();
    let upto = |seq: u64| served.iter().take_while(|l| l.seq() <= seq).count();
    let mut s = cache.session("s").unwrap();
    s.append_served(None, &served[upto(40)..upto(45)]).await; // a window: 41..=45
    s.append_served(Some(45), &served[upto(45)..upto(49)]).await; // a catch-up: 46..=49
    s.append_served(Some(49), &served[upto(50)..upto(51)]).await; // the stream: 51
    assert_eq!(files(&*store, &cache, "s").await, ["41-open.raw.jsonl"]);
    // A page stopping short of its `before` (39 and 40 are not served) gives the open chunk its
    // hole; so does an empty page between two chunks.
    assert!(s.store_page(&served[upto(33)..upto(38)], 41, false).await); // 34..=38
    assert!(s.store_page(&served[..upto(32)], 33, false).await); // 1..=32
    assert_eq!(
        files(&*store, &cache, "s").await,
        ["1-33.raw.jsonl", "34-39.raw.jsonl", "39-open.raw.jsonl"]
    );
    assert_eq!(s.gap_after(34).await, Some(32));
    assert!(s.none_between(33, 34).await);
    assert!(!s.none_between(33, 34).await, "nothing left to join");
    assert_eq!(s.suffix().await, Some((1, 52)));
    let mut again = cache.session("s").unwrap();
    let all = again.newest(1000).await.unwrap();
    assert_eq!(raws(&all), raws(&served[..upto(51)]));
    let page = again.page(41, 3, false).await.unwrap();
    assert_eq!(seqs(&page.lines), [36, 37, 38]);
    // Without a line to follow (a reset's window), a jump is a gap.
    again.append_served(None, &served[upto(55)..upto(57)]).await;
    assert_eq!(again.suffix().await, Some((56, 58)));
    assert_eq!(again.gap_after(56).await, Some(51));
}

/// A torn last line of the open chunk is cut off before anything is served.
pub async fn a_torn_tail_is_cut_off<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "torn").await;
    let t = transcript(30);
    let _s = appended(&cache, "s", &t[..20]).await;
    let path = format!("{}/s/1-open.raw.jsonl", cache.dir());
    let good = store.stat(&path).await.unwrap().unwrap().size;
    store
        .append(&path, br#"{"seq":21,"ts":1.5,"ev"#)
        .await
        .unwrap();
    let mut s = cache.session("s").unwrap();
    assert_eq!(s.cursor().await.map(|l| l.seq()), Some(20));
    assert_eq!(
        store.stat(&path).await.unwrap().unwrap().size,
        good,
        "truncated"
    );
    assert_eq!(s.newest(3).await.map(|l| seqs(&l)), Some(vec![18, 19, 20]));
    s.append(&t[20]).await;
    store.append(&path, b"garbage\n").await.unwrap(); // torn in a way that kept a newline
    let mut s = cache.session("s").unwrap();
    assert_eq!(s.newest(2).await.map(|l| seqs(&l)), Some(vec![20, 21]));
    s.append(&t[21]).await;
    assert_eq!(
        raws(&cache.session("s").unwrap().newest(100).await.unwrap()),
        raws(&t[..22])
    );

    // A torn line longer than the tail read at an open (a large tool output cut by a crash).
    let long = vec![b'x'; 600 << 10];
    store
        .append(&path, br#"{"seq":23,"ts":1.5,"#)
        .await
        .unwrap();
    store.append(&path, &long).await.unwrap();
    let mut s = cache.session("s").unwrap();
    assert_eq!(s.newest(2).await.map(|l| seqs(&l)), Some(vec![21, 22]));
    s.append(&t[22]).await;
    assert_eq!(
        raws(&cache.session("s").unwrap().newest(100).await.unwrap()),
        raws(&t[..23])
    );

    // Nothing but a fragment: the chunk goes, the session is empty.
    let frag = format!("{}/f/1-open.raw.jsonl", cache.dir());
    store.append(&frag, br#"{"seq":1,"ts""#).await.unwrap();
    let mut f = cache.session("f").unwrap();
    assert_eq!(f.newest(5).await, None);
    assert_eq!(store.stat(&frag).await.unwrap(), None);
    f.append(&t[0]).await;
    assert_eq!(f.newest(5).await.map(|l| seqs(&l)), Some(vec![1]));
}

async fn damage<S: Store>(store: &S, path: &str, seq: u64, with: &str) {
    let size = store.stat(path).await.unwrap().unwrap().size as usize;
    let bytes = store.read(path, 0, size).await.unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let out: Vec<String> = text
        .lines()
        .map(|l| match Line::parse(l) {
            Ok(line) if line.seq() == seq => with.to_string(),
            _ => l.to_string(),
        })
        .collect();
    store
        .write(path, format!("{}\n", out.join("\n")).as_bytes())
        .await
        .unwrap();
}

/// A bad line anywhere but the open chunk's tail purges the session when a read reaches it.
pub async fn damage_mid_file_purges_the_session<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "damage").await;
    let t = transcript(200);
    let cases: [(&str, &str, &str); 3] = [
        ("closed", "1-101.raw.jsonl", "not json"),
        ("open", "101-open.raw.jsonl", "{\"seq\":3}"),
        ("order", "1-101.raw.jsonl", t[10].raw()),
    ];
    for (id, file, with) in cases {
        let mut s = appended(&cache, id, &t[100..]).await;
        assert!(s.store_page(&t[..100], 101, false).await);
        let seq = if file.starts_with("101") { 150 } else { 50 };
        damage(&*store, &format!("{}/{id}/{file}", cache.dir()), seq, with).await;
        let mut s = cache.session(id).unwrap();
        assert_eq!(
            s.newest(20).await.map(|l| seqs(&l)),
            Some((181..=200).collect()),
            "{id}"
        );
        assert_eq!(
            s.page(seq + 10, 30, false).await,
            None,
            "{id}: the read reached the damage"
        );
        assert_eq!(cache.session_size(id).await, 0, "{id}: purged");
        assert_eq!(s.newest(20).await, None, "{id}");
        assert_eq!(cache.session(id).unwrap().newest(20).await, None, "{id}");
    }
    // A closed chunk that lost whole lines at its end (a write cut between two lines) still
    // ends in a newline: its newest line falls short of the end its name claims, and the
    // lines between would be skipped without a word.
    let mut s = appended(&cache, "short", &t[100..]).await;
    assert!(s.store_page(&t[..100], 101, false).await);
    let kept: String = t[..98].iter().map(|l| format!("{}\n", l.raw())).collect();
    let path = format!("{}/short/1-101.raw.jsonl", cache.dir());
    store.write(&path, kept.as_bytes()).await.unwrap();
    let mut s = cache.session("short").unwrap();
    assert_eq!(
        s.page(101, 30, false).await,
        None,
        "the read reached the damage"
    );
    assert_eq!(cache.session_size("short").await, 0, "purged");
}

/// What this code never writes purges the session on open: a coalesced newest chunk, two open
/// chunks, overlapping chunks, a newest chunk that does not end at its end.
pub async fn a_coalesced_newest_chunk_purges_the_session<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "newest-rows").await;
    let t = transcript(60);
    let text = |lines: &[Line]| {
        lines
            .iter()
            .map(|l| format!("{}\n", l.raw()))
            .collect::<String>()
    };
    let layouts: [(&str, Vec<(&str, String)>); 4] = [
        (
            "rows",
            vec![
                ("1-50.raw.jsonl", text(&t[..49])),
                ("50-60.rows.jsonl", text(&coalesce(&t[49..59]))),
            ],
        ),
        (
            "twoopen",
            vec![
                ("1-open.raw.jsonl", text(&t[..5])),
                ("6-open.raw.jsonl", text(&t[5..9])),
            ],
        ),
        (
            "overlap",
            vec![
                ("1-11.raw.jsonl", text(&t[..10])),
                ("5-open.raw.jsonl", text(&t[4..20])),
            ],
        ),
        ("short", vec![("1-30.raw.jsonl", text(&t[..20]))]),
    ];
    for (id, blobs) in layouts {
        for (name, bytes) in &blobs {
            store
                .write(&format!("{}/{id}/{name}", cache.dir()), bytes.as_bytes())
                .await
                .unwrap();
        }
        let mut s = cache.session(id).unwrap();
        assert_eq!(s.newest(10).await, None, "{id}");
        assert_eq!(
            files(&*store, &cache, id).await,
            Vec::<String>::new(),
            "{id}: purged"
        );
        s.append(&t[59]).await;
        assert_eq!(
            s.newest(10).await.map(|l| seqs(&l)),
            Some(vec![60]),
            "{id}: writes go on"
        );
    }
}

/// A folder of another format version is deleted on first use; this version's stays.
pub async fn another_format_version_is_deleted<S: Store>(store: Arc<S>) {
    let t = transcript(3);
    store
        .write("transcripts/v0/old_1/s/1-open.raw.jsonl", b"{}\n")
        .await
        .unwrap();
    store.write("transcripts/v2-beta/x", b"").await.unwrap();
    let keep = cache(&store, "version").await;
    appended(&keep, "s", &t).await;
    let cache = cache(&store, "version").await;
    let versions: Vec<String> = store
        .list("transcripts")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(versions, ["v1"]);
    assert_eq!(
        cache.session("s").unwrap().newest(5).await.map(|l| l.len()),
        Some(3)
    );
}

/// Ids that could escape their folder or collide are encoded (each its own folder below the
/// server's), or refused; host names likewise.
pub async fn hostile_ids_are_encoded_or_refused<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "hostile").await;
    let ids = [
        "../../etc",
        "..",
        ".",
        "a/b",
        "a\\b",
        "A",
        "a",
        "x:y",
        "<img src=x onerror=alert(1)>",
        "%41",
        "\0",
        "touch",
        "CON",
        " ",
        "ü",
    ];
    for (i, id) in ids.iter().enumerate() {
        let mut s = cache.session(id).expect("encoded, not refused");
        s.append(&line(i as u64 + 1, 0)).await;
    }
    let mut listed = cache.sessions().await;
    listed.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(
        listed.len(),
        ids.len(),
        "one folder each, all below the server's"
    );
    for (i, id) in ids.iter().enumerate() {
        assert!(
            listed.iter().any(|s| s.id.as_deref() == Some(id)),
            "{id:?} listed"
        );
        let mut s = cache.session(id).unwrap();
        assert_eq!(
            s.cursor().await.map(|l| l.seq()),
            Some(i as u64 + 1),
            "{id:?} kept its own"
        );
    }
    assert!(matches!(cache.session(""), Err(KeyError::Empty)));
    assert!(matches!(
        cache.session(&"x".repeat(300)),
        Err(KeyError::TooLong(_))
    ));
    for host in ["../evil", "a/b", "..", "[::1]"] {
        let evil = Cache::new(store.clone(), host, 9).await;
        assert_eq!(evil.dir().split('/').count(), 3, "{host:?}: {}", evil.dir());
        assert!(evil.dir().starts_with("transcripts/v1/"));
    }
    for prefix in [
        "/../evil",
        "/a/b",
        "/..",
        "/.",
        "/a/../../b",
        "/%2e%2e",
        "/x\\y",
    ] {
        let evil = Cache::for_server(store.clone(), ("example.com", 443, prefix)).await;
        assert_eq!(
            evil.dir().split('/').count(),
            3,
            "{prefix:?}: {}",
            evil.dir()
        );
        assert!(evil.dir().starts_with("transcripts/v1/example.com_443_"));
    }
}

/// The budget evicts the least recently opened sessions first and never the one kept.
pub async fn eviction_takes_the_least_recently_opened<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "evict").await;
    let t = transcript(20);
    let scratch = "conformance/evict/scratch";
    let mut last = 0;
    for id in ["s1", "s2", "s3", "s4", "s1"] {
        stamp_after(&*store, scratch, last).await;
        let mut s = cache.session(id).unwrap();
        s.open().await;
        if s.cursor().await.is_none() {
            appended(&cache, id, &t).await;
        }
        last = cache
            .sessions()
            .await
            .iter()
            .map(|s| s.opened)
            .max()
            .unwrap();
    }
    let one = cache.session_size("s1").await;
    assert!(one > 0);
    assert_eq!(
        cache.enforce_budget(4 * one, "s2").await,
        Vec::<String>::new(),
        "within budget"
    );
    assert_eq!(cache.enforce_budget(2 * one, "s2").await, ["s3", "s4"]);
    assert_eq!(
        cache.enforce_budget(0, "s1").await,
        ["s2"],
        "over budget, the kept one stays"
    );
    let left: Vec<Option<String>> = cache.sessions().await.into_iter().map(|s| s.id).collect();
    assert_eq!(left, [Some("s1".to_string())]);
    assert_eq!(
        cache
            .session("s1")
            .unwrap()
            .newest(30)
            .await
            .map(|l| l.len()),
        Some(20)
    );
}

/// `retain_only` prunes sessions the server no longer has (and folders that are not sessions);
/// purges empty one session, and `clear` all of them with the remembered list; sizes are what is
/// on disk.
pub async fn retain_only_and_purges<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "retain").await;
    let t = transcript(30);
    for id in ["a", "b", "c"] {
        appended(&cache, id, &t).await;
    }
    store
        .write(&format!("{}/Junk/1-open.raw.jsonl", cache.dir()), b"x\n")
        .await
        .unwrap();
    cache.retain_only(&["a", "c", "not-cached"]).await;
    let mut ids: Vec<Option<String>> = cache.sessions().await.into_iter().map(|s| s.id).collect();
    ids.sort();
    assert_eq!(ids, [Some("a".to_string()), Some("c".to_string())]);

    let mut c = cache.session("c").unwrap();
    let size = cache.session_size("c").await;
    assert_eq!(c.size().await, size);
    assert!(size >= t.iter().map(|l| l.raw().len() as u64 + 1).sum::<u64>());
    c.purge().await;
    assert_eq!((c.size().await, c.newest(5).await), (0, None));
    c.append(&t[29]).await;
    assert_eq!(
        c.newest(5).await.map(|l| seqs(&l)),
        Some(vec![30]),
        "writes go on after a purge"
    );
    cache.purge("a").await;
    assert_eq!(cache.session_size("a").await, 0);
    let listed = crate::protocol::SessionSummary {
        id: "c".into(),
        title: "c".into(),
        status: "idle".into(),
        model: String::new(),
        permission_mode: String::new(),
        seq: 30,
    };
    cache.remember_list(&[listed]).await;
    assert_eq!(cache.remembered_list().await.len(), 1);
    assert_eq!(cache.clear().await, Vec::<String>::new(), "nothing kept");
    assert_eq!(cache.sessions().await, Vec::new());
    assert_eq!(
        cache.remembered_list().await,
        Vec::new(),
        "the list goes too"
    );
    assert_eq!(
        store.list(cache.dir()).await.unwrap_or_default(),
        Vec::new()
    );
}

/// Storage cleared under an open session answers as if empty: misses, no writes that would
/// claim coverage the blob no longer has.
pub async fn a_wiped_store_gives_misses<S: Store>(store: Arc<S>) {
    let cache = cache(&store, "wiped").await;
    let t = transcript(60);
    let mut reader = appended(&cache, "r", &t[..50]).await;
    let mut writer = appended(&cache, "w", &t[..50]).await;
    store.remove(cache.dir()).await.unwrap(); // as a browser clearing site data
    assert_eq!(reader.newest(10).await, None);
    assert_eq!(reader.page(40, 10, false).await, None);
    reader.append(&t[50]).await;
    writer.append(&t[50]).await; // lands in a blob that lost lines 1..=50
    assert_eq!(writer.newest(10).await, None);
    for id in ["r", "w"] {
        let mut fresh = cache.session(id).unwrap();
        assert_eq!(
            fresh.newest(100).await,
            None,
            "{id}: nothing claims seqs it does not hold"
        );
        fresh.append(&t[51]).await;
        assert_eq!(
            fresh.newest(100).await.map(|l| seqs(&l)),
            Some(vec![52]),
            "{id}"
        );
    }
}

/// A full quota stops the session's writing (no line is half-stored) and loses nothing
/// already shown: what fit is whole and served, a page arriving later is not stored by this
/// instance, even after the limit is lifted, while a new one writes again.
pub async fn a_full_quota_stops_writing_and_loses_nothing_shown<S: LimitWrites>(store: Arc<S>) {
    let cache = cache(&store, "quota").await;
    let t = transcript(200);
    let mut s = appended(&cache, "s", &t[100..150]).await;
    let shown = s.newest(30).await.unwrap();
    store.limit_writes(Some(3 * 1024));
    for line in &t[150..] {
        s.append(line).await;
    }
    assert!(!s.is_writing(), "a write failed and writing stopped");
    assert_eq!(
        s.write_error(),
        Some(&StoreError::QuotaExceeded),
        "and says why"
    );
    let cursor = s.cursor().await.unwrap().seq();
    assert!(
        (151..200).contains(&cursor),
        "some lines fit, then none: {cursor}"
    );
    // What was shown is still served, and what fit is whole.
    assert_eq!(s.page(151, 30, false).await.unwrap().lines, shown);
    let mut fresh = cache.session("s").unwrap();
    let all = fresh.newest(1000).await.unwrap();
    assert_eq!(seqs(&all), (101..=cursor).collect::<Vec<_>>());
    // A page arriving now is shown by the caller but not stored.
    assert!(!s.store_page(&coalesce(&t[..100]), 101, true).await);
    store.limit_writes(None);
    assert!(
        !s.store_page(&coalesce(&t[..100]), 101, true).await,
        "this instance stays off"
    );
    assert!(
        fresh.store_page(&coalesce(&t[..100]), 101, true).await,
        "a new one writes"
    );
    // A purge (the view's Reload) removes what this instance no longer knew: it writes again.
    s.purge().await;
    assert_eq!(s.write_error(), None);
    for line in &t[190..] {
        s.append(line).await;
    }
    assert!(s.is_writing());
    let again = cache.session("s").unwrap().newest(100).await.unwrap();
    assert_eq!(seqs(&again), (191..=200).collect::<Vec<_>>());
}

/// A page that does not fit the quota is not stored, and stops the session's writing; the
/// lines already stored are kept.
pub async fn a_quota_hit_by_a_page_stops_writing<S: LimitWrites>(store: Arc<S>) {
    let cache = cache(&store, "quota-page").await;
    let t = transcript(100);
    let mut s = appended(&cache, "s", &t[50..]).await;
    store.limit_writes(Some(100));
    assert!(!s.store_page(&t[..50], 51, false).await);
    assert!(!s.is_writing());
    assert_eq!(s.newest(100).await.map(|l| l.len()), Some(50));
    assert_eq!(s.page(51, 10, false).await, None, "the page was not stored");
}

/// A write refused for the quota, far under the budget: [`Cache::relieve_quota`] deletes the
/// least recently opened sessions until half of what the others held is gone, never the one
/// kept nor one whose writer role another holds; the kept one writes again once opened anew.
pub async fn a_refused_write_relieves_the_quota<S: LimitWrites>(store: Arc<S>) {
    let cache = cache(&store, "relieve").await;
    let t = transcript(40);
    let scratch = "conformance/relieve/scratch";
    let mut last = 0;
    for id in ["held", "s1", "s2", "s3", "s4", "new"] {
        stamp_after(&*store, scratch, last).await;
        let mut s = cache.session(id).unwrap();
        s.open().await;
        appended(&cache, id, &t[..20]).await;
        last = (cache.sessions().await.iter().map(|s| s.opened))
            .max()
            .unwrap();
    }
    // Another tab writes `held`, where the store's roles are shared (Web Locks are the
    // `BrowserStore`'s, not the OPFS or IndexedDB store's own: those grant every role).
    let role = cache.session("held").unwrap().try_writer().await;
    assert!(role.is_some());
    let shared = cache.session("held").unwrap().try_writer().await.is_none();
    store.limit_writes(Some(0));
    let mut new = appended(&cache, "new", &t[20..]).await;
    assert_eq!(new.write_error(), Some(&StoreError::QuotaExceeded));
    // Five others of one size: half of them is three (`held` skipped if written, `new` kept).
    let (evicted, kept) = match shared {
        true => (["s1", "s2", "s3"], ["held", "new", "s4"]),
        false => (["held", "s1", "s2"], ["new", "s3", "s4"]),
    };
    assert_eq!(cache.relieve_quota("new").await, evicted);
    let mut left: Vec<String> = cache
        .sessions()
        .await
        .into_iter()
        .filter_map(|s| s.id)
        .collect();
    left.sort();
    assert_eq!(left, kept);
    // The room they held is the origin's again (a test store's limit does not give removed
    // bytes back): a new open of `new` writes; the one that was refused stays off.
    store.limit_writes(None);
    new.append(&t[20]).await;
    assert!(!new.is_writing(), "this open stays off");
    let mut again = cache.session("new").unwrap();
    again.open().await;
    for line in &t[20..] {
        again.append(line).await;
    }
    assert_eq!(again.write_error(), None);
    assert_eq!(again.cursor().await.map(|l| l.seq()), Some(40));
    drop(role);
}
