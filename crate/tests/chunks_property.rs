//! Property: over random chunk layouts built from a random transcript (delta runs, coalesced
//! and raw pages, gaps, a live run), every page the cache serves is the page computed from the
//! full transcript with the protocol's functions, and every miss is a `before` outside the
//! suffix.
#![cfg(not(target_arch = "wasm32"))]

use proptest::prelude::*;
use scrollback::chunks::Cache;
use scrollback::protocol::{coalesce, Line, RowWalk};
use scrollback::store::{FsStore, MemoryStore, Store};
use scrollback::testing::{line, KINDS};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Seg {
    Rows,
    Raw,
    Gap,
}

#[derive(Debug, Clone)]
struct Case {
    kinds: Vec<u8>,
    cuts: Vec<usize>,
    segs: Vec<Seg>,
    open_last: bool,
    requests: Vec<(usize, usize, bool, bool)>,
}

fn case() -> impl Strategy<Value = Case> {
    // Kinds past KINDS are more deltas of message "a", so runs are long and common.
    let kinds = prop::collection::vec(0..KINDS + 6, 1..300);
    kinds.prop_flat_map(|kinds| {
        let n = kinds.len();
        let kinds = kinds
            .into_iter()
            .map(|k| if k >= KINDS { 1 } else { k })
            .collect::<Vec<_>>();
        (
            Just(kinds),
            prop::collection::vec(1..n.max(2), 0..6),
            prop::collection::vec(
                prop_oneof![Just(Seg::Rows), Just(Seg::Raw), Just(Seg::Gap)],
                7,
            ),
            any::<bool>(),
            prop::collection::vec((0..n + 3, 1..30usize, any::<bool>(), any::<bool>()), 1..25),
        )
            .prop_map(|(kinds, cuts, segs, open_last, requests)| Case {
                kinds,
                cuts,
                segs,
                open_last,
                requests,
            })
    })
}

/// A chunk of the model: its coverage and the lines it holds.
struct Model {
    first: u64,
    end: u64,
    lines: Vec<Line>,
}

fn run<S: Store>(store: Arc<S>, case: &Case) {
    pollster::block_on(async {
        let t: Vec<Line> = case
            .kinds
            .iter()
            .enumerate()
            .map(|(i, k)| line(i as u64 + 1, *k))
            .collect();
        let n = t.len() as u64;
        let mut bounds: Vec<u64> = case
            .cuts
            .iter()
            .map(|&c| c as u64 + 1)
            .filter(|&c| c > 1 && c <= n)
            .collect();
        bounds.extend([1, n + 1]);
        bounds.sort();
        bounds.dedup();
        let segments: Vec<(u64, u64)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();

        let cache = Cache::new(store.clone(), "property", 1).await;
        cache.clear().await;
        let mut s = cache.session("s").unwrap();
        let mut model: Vec<Model> = Vec::new();
        let slice = |f: u64, e: u64| t[f as usize - 1..e as usize - 1].to_vec();
        // The newest segment: the live run, or a raw page.
        let (f, e) = *segments.last().unwrap();
        if case.open_last {
            for l in slice(f, e) {
                s.append(&l).await;
            }
        } else {
            assert!(s.store_page(&slice(f, e), e, false).await);
        }
        model.push(Model {
            first: f,
            end: e,
            lines: slice(f, e),
        });
        for (i, &(f, e)) in segments.iter().rev().skip(1).enumerate() {
            let lines = match case.segs[i % case.segs.len()] {
                Seg::Gap => continue,
                Seg::Raw => slice(f, e),
                Seg::Rows => coalesce(&slice(f, e)),
            };
            let coalesced = case.segs[i % case.segs.len()] == Seg::Rows;
            assert!(s.store_page(&lines, e, coalesced).await, "[{f}, {e})");
            model.push(Model {
                first: f,
                end: e,
                lines,
            });
        }
        model.sort_by_key(|m| m.first);
        let mut start = model.len() - 1;
        while start > 0 && model[start - 1].end == model[start].first {
            start -= 1;
        }
        let (lo, hi) = (model[start].first, n + 1);
        let cached: Vec<&Line> = model[start..].iter().flat_map(|m| &m.lines).collect();
        assert_eq!(s.suffix().await, Some((lo, hi)));

        for (k, &(pick, limit, rows, reopen)) in case.requests.iter().enumerate() {
            if reopen {
                s = cache.session("s").unwrap();
            }
            let before = pick as u64;
            let got = s.page(before, limit, rows).await;
            let gap = model
                .iter()
                .filter(|m| m.end <= before)
                .map(|m| m.end - 1)
                .max();
            assert_eq!(
                s.gap_after(before).await,
                gap,
                "request {k}: gap_after({before})"
            );
            if !(lo < before && before <= hi) {
                assert_eq!(
                    got, None,
                    "request {k}: before {before} is outside [{lo}, {hi})"
                );
                continue;
            }
            let page = got.unwrap_or_else(|| panic!("request {k}: before {before} is a hit"));
            // The model's page: the cached lines, walked back the same way.
            let mut walk = RowWalk::new(limit);
            let mut expected: Vec<&Line> = cached
                .iter()
                .rev()
                .filter(|l| l.seq() < before)
                .take_while(|l| if rows { walk.take(l) } else { true })
                .copied()
                .collect();
            if !rows {
                expected.truncate(limit);
            }
            expected.reverse();
            let raw = |ls: &[&Line]| ls.iter().map(|l| l.raw().to_string()).collect::<Vec<_>>();
            let got_refs: Vec<&Line> = page.lines.iter().collect();
            assert_eq!(
                raw(&got_refs),
                raw(&expected),
                "request {k}: before {before} limit {limit} rows {rows}"
            );
            assert_eq!(
                page.at_start,
                page.lines[0].seq() == lo,
                "request {k}: at_start"
            );

            // Where `before` is a line boundary of the cache, the page is the server's: the
            // same rows over the full raw transcript, stopping at the suffix's first seq.
            let boundary = before == hi || cached.iter().any(|l| l.seq() == before);
            if rows && boundary {
                let mut walk = RowWalk::new(limit);
                let mut server: Vec<Line> = t
                    .iter()
                    .rev()
                    .filter(|l| l.seq() < before && l.seq() >= lo)
                    .take_while(|l| walk.take(l))
                    .cloned()
                    .collect();
                server.reverse();
                assert_eq!(
                    coalesce(&page.lines),
                    coalesce(&server),
                    "request {k}: the server's rows"
                );
            }
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn pages_from_random_layouts_are_the_transcripts_pages_in_memory(case in case()) {
        run(Arc::new(MemoryStore::new()), &case);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn pages_from_random_layouts_are_the_transcripts_pages_on_disk(case in case()) {
        let dir = tempfile::tempdir().unwrap();
        run(Arc::new(FsStore::new(dir.path())), &case);
    }
}
