//! Ranking a query over the sessions loaded ([`super::reader`]): BM25 over their postings (a
//! recency tie-break), phrases checked in their texts, and the best hits with their snippets.

use super::query::Query;
use super::reader::Loaded;
use super::segment::Post;
use super::tokens::{combining, follower_bit, words};
use super::writer::INDEX;
use crate::store::Store;
use serde::Serialize;
use std::collections::HashSet;

/// BM25's term-frequency saturation.
const K1: f64 = 1.2;
/// BM25's length normalization.
const B: f64 = 0.75;
/// How many candidates a phrase is checked in at most, in `limit`s (each check reads the
/// candidate's text): a phrase of common words that never meet stops there.
const PHRASE_BATCHES: usize = 100;
/// How much the newest hit gains over the oldest among the candidates (a tie-break that lets
/// recent beat old at equal relevance, never a rare word lose to a common one by much).
const RECENCY: f64 = 0.2;

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hit {
    /// The session it is in.
    pub session: String,
    /// The seq of the row it is in: open the session there (the engine's anchor).
    pub seq: u64,
    /// Its row's timestamp.
    pub ts: f64,
    /// Its relevance (BM25 with a recency tie-break); higher first.
    pub score: f64,
    /// A short excerpt around the first match, in pieces; the matched words are `hit`.
    pub snippet: Vec<Piece>,
}

/// A piece of a snippet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Piece {
    /// The text.
    pub text: String,
    /// Whether it is a matched word.
    pub hit: bool,
}

impl Hit {
    /// The snippet with its matched words in `[` `]` (for a terminal).
    pub fn marked(&self) -> String {
        self.snippet
            .iter()
            .map(|p| match p.hit {
                true => format!("[{}]", p.text),
                false => p.text.clone(),
            })
            .collect()
    }
}

/// The postings of one query unit in one session: from its segment, then from memory (whose
/// document ids follow the segment's). `None`: the segment did not read.
async fn posts<S: Store>(
    store: &S,
    dir: &str,
    loaded: &Loaded,
    term: &str,
    prefix: bool,
) -> Option<Vec<Post>> {
    let mut out = match &loaded.segment {
        Some(segment) => segment.postings(store, dir, term, prefix).await?,
        None => Vec::new(),
    };
    let base = loaded.base();
    let index = &loaded.index;
    out.retain(|p| !loaded.dead.contains(&p.doc));
    let alive = index.postings(term, prefix);
    let alive = alive
        .iter()
        .filter(|p| !loaded.dead.contains(&(base + p.doc)));
    out.extend(alive.map(|p| {
        let (doc, len) = &index.docs[p.doc as usize];
        Post {
            doc: base + p.doc,
            tf: p.tf,
            len: *len,
            seq: doc.seq,
            ts: doc.ts,
            next: p.next,
        }
    }));
    Some(out)
}

/// The texts of documents (session, document) of `loaded`: from memory (a document past the
/// segment, or one whose text a query read before), or read through their segments, all in
/// one [`Store::read_many`]; and whether each was read. `None`: it does not read.
async fn texts_of<S: Store>(
    store: &S,
    loaded: &[(String, &String, &mut Loaded)],
    docs: impl Iterator<Item = (usize, u32)>,
) -> Vec<Option<(String, bool)>> {
    let mut out = Vec::new();
    let mut asked = Vec::new();
    for (s, doc) in docs {
        let (folder, _, l) = &loaded[s];
        let known = match doc.checked_sub(l.base()) {
            Some(d) => l.index.docs.get(d as usize).map(|(d, _)| d.text.clone()),
            None => l.texts.get(&doc).cloned(),
        };
        if known.is_none() && doc < l.base() {
            if let Some(line) = l.segment.as_ref().and_then(|seg| seg.line(doc)) {
                asked.push((out.len(), format!("{folder}/{INDEX}"), line));
            }
        }
        out.push(known.map(|text| (text, false)));
    }
    let reads: Vec<(&str, u64, usize)> = (asked.iter())
        .map(|(_, path, line)| (path.as_str(), line.at, (line.end - line.at) as usize))
        .collect();
    let read = store.read_many(&reads).await;
    for ((i, _, line), bytes) in asked.iter().zip(read) {
        let doc = bytes.ok().and_then(|b| line.doc(&b));
        out[*i] = doc.map(|d| (d.text, true));
    }
    out
}

/// Document `d`'s posting in `m` (sorted by document), if it is there.
fn post_of(m: &[Post], d: u32) -> Option<&Post> {
    m.binary_search_by_key(&d, |p| p.doc).ok().map(|i| &m[i])
}

/// What a query found, the sessions whose segment did not read, and the texts it read from
/// the blobs.
pub(super) struct Ranked {
    pub(super) hits: Vec<Hit>,
    /// By index into the sessions ranked.
    pub(super) broken: Vec<usize>,
    /// Session (by index), document, text.
    pub(super) read: Vec<(usize, u32, String)>,
}

/// Ranks the documents of `loaded` (folder, id, index) that match `query`: the best `limit`.
pub(super) async fn rank<S: Store>(
    store: &S,
    loaded: &[(String, &String, &mut Loaded)],
    query: &Query,
    limit: usize,
) -> Ranked {
    // The units every hit must match: each word, each phrase word, the prefix.
    let mut units: Vec<(&str, bool)> = query.words.iter().map(|w| (w.as_str(), false)).collect();
    units.extend(query.phrases.iter().flatten().map(|w| (w.as_str(), false)));
    units.extend(query.prefix.as_deref().map(|p| (p, true)));
    units.sort();
    units.dedup();

    let docs: u64 = loaded.iter().map(|(_, _, l)| l.worded()).sum();
    let words: u64 = loaded.iter().map(|(_, _, l)| l.words()).sum();
    let avg = words as f64 / docs.max(1) as f64;
    // Each adjacent pair of a phrase, as the unit of its first word and the follower bit of
    // its second: a document whose posting of the first lacks the bit cannot hold the phrase.
    let pairs: Vec<(usize, u8)> = query
        .phrases
        .iter()
        .flat_map(|p| p.windows(2))
        .filter_map(|w| {
            let unit = units.iter().position(|&u| u == (w[0].as_str(), false))?;
            Some((unit, follower_bit(&w[1])))
        })
        .collect();
    let reads = loaded.iter().map(|(folder, _, l)| {
        let units = &units;
        async move {
            let mut out = Vec::with_capacity(units.len());
            for &(t, p) in units {
                out.push(posts(store, folder, l, t, p).await?);
            }
            Some(out)
        }
    });
    let per_session = futures::future::join_all(reads.collect::<Vec<_>>()).await;
    let mut broken: Vec<usize> = (0..per_session.len())
        .filter(|&s| per_session[s].is_none())
        .collect();
    let none = Vec::new();
    let per_session: Vec<&Vec<Vec<Post>>> = per_session
        .iter()
        .map(|m| m.as_ref().unwrap_or(&none))
        .collect();
    let df: Vec<f64> = (0..units.len())
        .map(|u| {
            per_session
                .iter()
                .map(|m| m.get(u).map_or(0.0, |l| l.len() as f64))
                .sum()
        })
        .collect();
    let idf: Vec<f64> = df
        .iter()
        .map(|&n| (1.0 + (docs as f64 - n + 0.5) / (n + 0.5)).ln())
        .collect();

    // (score, session index, the document's posting)
    let mut found: Vec<(f64, usize, Post)> = Vec::new();
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for (s, matches) in per_session.iter().enumerate() {
        let Some(smallest) = matches.iter().min_by_key(|m| m.len()) else {
            continue;
        };
        'docs: for post in smallest.iter() {
            let norm = K1 * (1.0 - B + B * f64::from(post.len) / avg.max(1.0));
            let mut score = 0.0;
            for (m, idf) in matches.iter().zip(&idf) {
                let Some(p) = post_of(m, post.doc) else {
                    continue 'docs;
                };
                let tf = f64::from(p.tf);
                score += idf * tf * (K1 + 1.0) / (tf + norm);
            }
            // The recency range spans every document with the words, as the texts would.
            (lo, hi) = (lo.min(post.ts), hi.max(post.ts));
            let lacks = |&(u, bit): &(usize, u8)| {
                post_of(&matches[u], post.doc).is_none_or(|p| p.next & bit == 0)
            };
            if !pairs.iter().any(lacks) {
                found.push((score, s, *post));
            }
        }
    }
    for (score, _, p) in &mut found {
        if hi > lo {
            *score *= 1.0 + RECENCY * (p.ts - lo) / (hi - lo);
        }
    }
    let order = |a: &(f64, usize, Post), b: &(f64, usize, Post)| {
        b.0.total_cmp(&a.0)
            .then(b.2.ts.total_cmp(&a.2.ts))
            .then((loaded[a.1].1, a.2.seq).cmp(&(loaded[b.1].1, b.2.seq)))
    };
    // Without phrases only the best `limit` are ordered (a common word has every document).
    if query.phrases.is_empty() && found.len() > limit {
        found.select_nth_unstable_by(limit - 1, order);
        found.truncate(limit);
    }
    found.sort_by(order);
    // Each candidate's text (for its snippet; for a phrase, to check it), fetched in batches,
    // best first, until `limit` hold: `limit` first, then twice as many each time (a rare
    // phrase checks every candidate: fewer rounds of reads).
    let mut hits = Vec::with_capacity(limit.min(found.len()));
    let mut read = Vec::new();
    let most = limit.saturating_mul(PHRASE_BATCHES).min(found.len());
    let (mut from, mut size) = (0, limit);
    while from < most && hits.len() < limit {
        let batch = &found[from..most.min(from + size)];
        (from, size) = (from + batch.len(), size * 2);
        let texts = texts_of(store, loaded, batch.iter().map(|(_, s, p)| (*s, p.doc))).await;
        for (&(score, s, p), text) in batch.iter().zip(texts) {
            // A document that does not read is left out (its segment is built again).
            let Some((text, fresh)) = text else {
                broken.push(s);
                continue;
            };
            let (words, phrases) = holds(&text, query);
            if !words {
                // The postings named a document that lacks a word (a segment or pack damaged
                // where no check sees it): never shown; the session's blob answers instead.
                if p.doc < loaded[s].2.base() {
                    broken.push(s);
                }
                continue;
            }
            if hits.len() < limit && phrases {
                hits.push(Hit {
                    session: loaded[s].1.clone(),
                    seq: p.seq,
                    ts: p.ts,
                    score,
                    snippet: snippet(&text, query),
                });
            }
            if fresh {
                read.push((s, p.doc, text));
            }
        }
    }
    broken.sort_unstable();
    broken.dedup();
    Ranked { hits, broken, read }
}

/// What `text` holds of `query`: every word and one the prefix starts (as the postings
/// that named it said), and every phrase as adjacent words (which they could only suggest).
fn holds(text: &str, query: &Query) -> (bool, bool) {
    let terms: Vec<String> = words(text).into_iter().map(|w| w.term).collect();
    let set: HashSet<&str> = terms.iter().map(String::as_str).collect();
    let words = (query.words.iter().chain(query.phrases.iter().flatten()))
        .all(|w| set.contains(w.as_str()))
        && (query.prefix.as_deref()).is_none_or(|p| terms.iter().any(|t| t.starts_with(p)));
    let phrases = (query.phrases.iter()).all(|p| terms.windows(p.len()).any(|w| w == p.as_slice()));
    (words, phrases)
}

/// Whether a cut at byte `i` would part a character from what joins it: a combining mark, a
/// joiner, a variation selector or an emoji modifier right after it, or a joiner right before.
fn inside_cluster(text: &str, i: usize) -> bool {
    let joins = |c: char| {
        combining(c)
            || matches!(c,
                '\u{200d}'                      // zero-width joiner
                | '\u{1ab0}'..='\u{1aff}'       // combining marks, extended
                | '\u{1dc0}'..='\u{1dff}'       // and supplement
                | '\u{20d0}'..='\u{20ff}'       // for symbols
                | '\u{fe00}'..='\u{fe0f}'       // variation selectors
                | '\u{fe20}'..='\u{fe2f}'       // half marks
                | '\u{1f3fb}'..='\u{1f3ff}'     // skin tones
                | '\u{e0020}'..='\u{e007f}') // tags (subdivision flags)
    };
    text[i..].chars().next().is_some_and(joins) || text[..i].ends_with('\u{200d}')
}

/// Bytes of context shown before the first match.
const BEFORE: usize = 60;
/// Bytes a snippet spans at most.
const SPAN: usize = 200;

/// An excerpt of `text` around its first matched word, the matched words marked.
fn snippet(text: &str, query: &Query) -> Vec<Piece> {
    let ws = words(text);
    let marks = query.marks(&ws);
    let (first, first_end) = ws
        .iter()
        .zip(&marks)
        .find(|(_, &hit)| hit)
        .map_or((0, 0), |(w, _)| (w.start, w.end));
    let floor = |mut i: usize| {
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    // Each end at a word's edge, so that no word is cut in two (`…mily`), nor a letter from
    // its accents or an emoji from what joins it (`…\u{301}ééé`, `…\u{200d}👧`).
    let from = floor(first.saturating_sub(BEFORE));
    let start = match from {
        0 => 0,
        _ => (ws.iter().map(|w| w.start))
            .find(|&s| s >= from && s <= first && !inside_cluster(text, s))
            .unwrap_or(first),
    };
    // The first match whole, however long (a hash found by its first letters).
    let to = floor((start + SPAN).max(first_end).min(text.len()));
    let mut end = match to == text.len() {
        true => to,
        false => (ws.iter().rev().map(|w| w.end))
            .find(|&e| e <= to && e > start && !inside_cluster(text, e))
            .unwrap_or(to),
    };
    while end > start && inside_cluster(text, end) {
        end = floor(end - 1);
    }
    let mut out = Vec::new();
    let mut plain = String::new();
    if start > 0 {
        plain.push('…');
    }
    let mut at = start;
    let clean = |s: &str| s.replace(['\n', '\r', '\t'], " ");
    for (w, _) in ws
        .iter()
        .zip(&marks)
        .filter(|(w, &hit)| hit && w.start >= start && w.end <= end)
    {
        plain.push_str(&clean(&text[at..w.start]));
        match out.last_mut() {
            // Matched words that touch (`勉強`, a character each) are one piece.
            Some(Piece {
                text: last,
                hit: true,
            }) if plain.is_empty() && at == w.start => {
                last.push_str(&text[w.start..w.end]);
            }
            _ => {
                if !plain.is_empty() {
                    out.push(Piece {
                        text: std::mem::take(&mut plain),
                        hit: false,
                    });
                }
                out.push(Piece {
                    text: text[w.start..w.end].to_string(),
                    hit: true,
                });
            }
        }
        at = w.end;
    }
    plain.push_str(&clean(&text[at..end]));
    if end < text.len() {
        plain.push('…');
    }
    if !plain.is_empty() {
        out.push(Piece {
            text: plain,
            hit: false,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The snippet's text as shown, the matched pieces in brackets.
    fn shown(text: &str, query: &str) -> String {
        (snippet(text, &Query::parse(query)).iter())
            .map(|p| match p.hit {
                true => format!("[{}]", p.text),
                false => p.text.clone(),
            })
            .collect()
    }

    #[test]
    fn a_snippet_is_cut_between_words_never_inside_one_nor_a_cluster() {
        let text = format!("{}target{}", "word ".repeat(30), " tail".repeat(60));
        let s = shown(&text, "target");
        assert!(s.starts_with("…word ") && s.ends_with(" tail…"), "{s}");
        assert!(s.contains("[target]"), "{s}");

        // A letter and its accents, an emoji and what joins it: never parted at either end.
        for run in ["e\u{301}", "👨\u{200d}👩\u{200d}👧", "👍🏽", "x"] {
            for pad in 0..4 {
                let text = format!(
                    "{}{} target {}",
                    "a".repeat(pad),
                    run.repeat(40),
                    run.repeat(60)
                );
                let s = shown(&text, "target");
                for piece in s.split(['…', '[', ']']).filter(|p| !p.is_empty()) {
                    let (first, last) = (piece.chars().next(), piece.chars().next_back());
                    let parted = |c: Option<char>| {
                        c.is_some_and(|c| {
                            combining(c) || matches!(c, '\u{200d}' | '\u{1f3fb}'..='\u{1f3ff}')
                        })
                    };
                    assert!(!parted(first), "{run:?} pad {pad}: starts parted: {s:?}");
                    assert!(
                        last != Some('\u{200d}'),
                        "{run:?} pad {pad}: ends on a joiner: {s:?}"
                    );
                }
                assert!(s.contains("[target]"), "{s}");
            }
        }

        // A match longer than the span (a hash found by its first letters) is still marked.
        let hash = format!("deadbeef{}", "a".repeat(300));
        let s = shown(&format!("the hash is {hash} ok"), "deadbeef");
        assert!(s.starts_with("the hash is [deadbeef"), "{s}");

        // Short texts are whole, with no ellipsis.
        assert_eq!(
            shown("  say the target word", "target"),
            "  say the [target] word"
        );
    }
}
