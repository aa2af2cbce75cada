//! The reader's side: the index blobs loaded into memory (incrementally, as they grow), and
//! queries ranked with BM25 over every session asked.

use super::doc::Doc;
use super::live::Live;
use super::postings::Indexed;
use super::query::Query;
use super::tokens::words;
use super::writer::INDEX;
use crate::chunks::names::{decode, encode};
use crate::store::Store;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// BM25's term-frequency saturation.
const K1: f64 = 1.2;
/// BM25's length normalization.
const B: f64 = 0.75;
/// How much the newest hit gains over the oldest among the candidates (a tie-break that lets
/// recent beat old at equal relevance, never a rare word lose to a common one by much).
const RECENCY: f64 = 0.2;
/// The bytes compared at a blob's start to notice it was rebuilt under us.
const HEAD: usize = 64;

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

/// A blob loaded: how far, its first bytes, what it holds.
#[derive(Debug, Default)]
struct Loaded {
    size: u64,
    head: Vec<u8>,
    index: Indexed,
}

/// How often a query re-reads every session's blob from the store (for what another tab's
/// writer did: this worker's own writes are told through [`Live`]), in milliseconds.
pub const RECHECK_MS: u64 = 30_000;

/// The index blobs of one server's sessions as loaded into memory, by session folder, with
/// their ids. A query reads only what a blob gained since it was loaded; a blob that shrank
/// or whose start changed was rebuilt and is reloaded. Which blobs to look at: those this
/// worker changed ([`Live`]), and every one on the first query and at most every
/// [`RECHECK_MS`] after (the store is the truth: a writer in another tab is seen then).
/// Queries take turns (an async lock): one loads, the next finds it loaded.
#[derive(Default)]
pub struct Memo(async_lock::Mutex<Loads>);

#[derive(Default)]
struct Loads {
    sessions: HashMap<String, (String, Loaded)>,
    /// When every session was last looked at in the store (0: never).
    checked: u64,
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Memo")
    }
}

/// Brings the memo up to the store: every session (listed again) when `full`, else only those
/// in `changed`. A session whose blob is gone leaves the memo.
async fn load<S: Store>(
    store: &S,
    dir: &str,
    loads: &mut Loads,
    changed: &HashSet<String>,
    full: bool,
) {
    let keys: Vec<String> = if full {
        let Ok(entries) = store.list(dir).await else {
            loads.sessions.clear();
            return;
        };
        let listed: Vec<String> = entries
            .into_iter()
            .filter(|e| e.is_dir && decode(&e.name).is_some())
            .map(|e| e.name)
            .collect();
        loads.sessions.retain(|k, _| listed.contains(k));
        loads.checked = crate::store::now_millis().max(1);
        listed
    } else {
        changed.iter().cloned().collect()
    };
    for key in keys {
        let Some(id) = decode(&key) else {
            continue;
        };
        let (_, mut loaded) = loads.sessions.remove(&key).unwrap_or_default();
        if refresh(store, &format!("{dir}/{key}/{INDEX}"), &mut loaded).await {
            loaded.index.prepare();
            loads.sessions.insert(key, (id, loaded));
        }
    }
}

/// Brings `loaded` up to the blob at `path`; `false` when there is no blob or it cannot be read.
async fn refresh<S: Store>(store: &S, path: &str, loaded: &mut Loaded) -> bool {
    let Ok(Some(meta)) = store.stat(path).await else {
        return false;
    };
    if meta.size < loaded.size {
        *loaded = Loaded::default();
    }
    if loaded.size > 0 {
        match store.read(path, 0, loaded.head.len()).await {
            Ok(head) if head == loaded.head => {}
            _ => *loaded = Loaded::default(),
        }
    }
    if meta.size == loaded.size {
        return true;
    }
    let Ok(bytes) = store
        .read(path, loaded.size, (meta.size - loaded.size) as usize)
        .await
    else {
        return false;
    };
    let Some(cut) = bytes.iter().rposition(|&b| b == b'\n') else {
        return true; // a line still being written
    };
    for line in bytes[..cut].split(|&b| b == b'\n') {
        // A line that does not read is skipped: the writer rebuilds the blob on its next open.
        if let Ok(doc) = serde_json::from_slice::<Doc>(line) {
            loaded.index.add(doc);
        }
    }
    if loaded.size == 0 {
        loaded.head = bytes[..bytes.len().min(HEAD)].to_vec();
    }
    loaded.size += cut as u64 + 1;
    true
}

/// Loads every session's index into memory ahead of the first query (the worker calls it in
/// idle time after it opens), so that query does not wait for the loading.
pub(crate) async fn warm<S: Store>(store: &S, dir: &str, memo: &Memo, live: &Live) {
    let mut loads = memo.0.lock().await;
    if loads.checked != 0 {
        return; // loaded already (by a query or an earlier warm-up): queries keep it fresh
    }
    live.take_changes(); // the full load below reads whatever they were
    load(store, dir, &mut loads, &HashSet::new(), true).await;
}

/// One query unit's matches in one session: document -> frequency.
type Matches<'a> = std::borrow::Cow<'a, [(u32, u32)]>;

/// The frequency of document `d` in `m` (sorted by document), if it is there.
fn tf_of(m: &[(u32, u32)], d: u32) -> Option<u32> {
    m.binary_search_by_key(&d, |&(doc, _)| doc)
        .ok()
        .map(|i| m[i].1)
}

/// Searches the sessions under `dir` (a server's folder): all of them, or those in `sessions`.
pub(crate) async fn search<S: Store>(
    store: &S,
    dir: &str,
    memo: &Memo,
    live: &Live,
    text: &str,
    limit: usize,
    sessions: Option<&[String]>,
) -> Vec<Hit> {
    let query = Query::parse(text);
    if query.is_empty() || limit == 0 {
        return Vec::new();
    }
    let mut loads = memo.0.lock().await;
    let (changed, relist) = live.take_changes();
    let stale = crate::store::now_millis().saturating_sub(loads.checked) >= RECHECK_MS;
    let unknown = changed.iter().any(|k| !loads.sessions.contains_key(k));
    load(store, dir, &mut loads, &changed, relist || stale || unknown).await;
    let wanted: Option<Vec<String>> =
        sessions.map(|ids| ids.iter().filter_map(|id| encode(id).ok()).collect());
    let mut loaded: Vec<(&String, &String, &mut Loaded)> = loads
        .sessions
        .iter_mut()
        .filter(|(key, _)| wanted.as_ref().is_none_or(|w| w.contains(key)))
        .map(|(key, (id, l))| (key, &*id, l))
        .collect();
    loaded.sort_by(|a, b| a.0.cmp(b.0));
    // The rows still streaming join their sessions for this query only (taken back below).
    let mut added = Vec::new();
    for (s, (key, _, l)) in loaded.iter_mut().enumerate() {
        l.index.prepare();
        let newest = l.index.docs.last().map(|(d, _)| d.seq);
        if let Some(doc) = live.open(key).filter(|d| newest.is_none_or(|n| d.seq > n)) {
            added.push((s, l.index.add(doc)));
        }
    }

    // The units every hit must match: each word, each phrase word, the prefix.
    let mut units: Vec<(&str, bool)> = query.words.iter().map(|w| (w.as_str(), false)).collect();
    units.extend(query.phrases.iter().flatten().map(|w| (w.as_str(), false)));
    units.extend(query.prefix.as_deref().map(|p| (p, true)));
    units.sort();
    units.dedup();

    let docs: u64 = loaded
        .iter()
        .map(|(_, _, l)| l.index.docs.len() as u64)
        .sum();
    let words: u64 = loaded.iter().map(|(_, _, l)| l.index.words).sum();
    let avg = words as f64 / docs.max(1) as f64;
    let per_session: Vec<Vec<Matches>> = loaded
        .iter()
        .map(|(_, _, l)| units.iter().map(|&(t, p)| l.index.postings(t, p)).collect())
        .collect();
    let df: Vec<f64> = (0..units.len())
        .map(|u| per_session.iter().map(|m| m[u].len() as f64).sum())
        .collect();
    let idf: Vec<f64> = df
        .iter()
        .map(|&n| (1.0 + (docs as f64 - n + 0.5) / (n + 0.5)).ln())
        .collect();

    // (score, session index, document)
    let mut found: Vec<(f64, usize, u32)> = Vec::new();
    for (s, matches) in per_session.iter().enumerate() {
        let index = &loaded[s].2.index;
        let Some(smallest) = matches.iter().min_by_key(|m| m.len()) else {
            continue;
        };
        'docs: for &(d, _) in smallest.iter() {
            let len = &index.docs[d as usize].1;
            let norm = K1 * (1.0 - B + B * f64::from(*len) / avg.max(1.0));
            let mut score = 0.0;
            for (m, idf) in matches.iter().zip(&idf) {
                let Some(tf) = tf_of(m, d) else {
                    continue 'docs;
                };
                let tf = f64::from(tf);
                score += idf * tf * (K1 + 1.0) / (tf + norm);
            }
            found.push((score, s, d));
        }
    }
    let doc = |s: usize, d: u32| &loaded[s].2.index.docs[d as usize].0;
    let (lo, hi) = found
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &(_, s, d)| {
            let ts = doc(s, d).ts;
            (lo.min(ts), hi.max(ts))
        });
    for (score, s, d) in &mut found {
        if hi > lo {
            *score *= 1.0 + RECENCY * (doc(*s, *d).ts - lo) / (hi - lo);
        }
    }
    let order = |a: &(f64, usize, u32), b: &(f64, usize, u32)| {
        b.0.total_cmp(&a.0)
            .then(doc(b.1, b.2).ts.total_cmp(&doc(a.1, a.2).ts))
            .then((&loaded[a.1].1, doc(a.1, a.2).seq).cmp(&(&loaded[b.1].1, doc(b.1, b.2).seq)))
    };
    // Without phrases only the best `limit` are ordered (a common word has every document).
    if query.phrases.is_empty() && found.len() > limit {
        found.select_nth_unstable_by(limit - 1, order);
        found.truncate(limit);
    }
    found.sort_by(order);
    // Phrases are checked best first, only until `limit` hold them (a phrase of common words
    // has many candidates; each check re-reads the document's words).
    if !query.phrases.is_empty() {
        let mut kept = Vec::with_capacity(limit);
        for hit in found {
            if kept.len() == limit {
                break;
            }
            if has_phrases(&doc(hit.1, hit.2).text, &query.phrases) {
                kept.push(hit);
            }
        }
        found = kept;
    }
    found.truncate(limit);
    let hits = found
        .into_iter()
        .map(|(score, s, d)| {
            let doc = doc(s, d);
            Hit {
                session: loaded[s].1.clone(),
                seq: doc.seq,
                ts: doc.ts,
                score,
                snippet: snippet(&doc.text, &query),
            }
        })
        .collect();
    for (s, before) in added {
        loaded[s].2.index.remove_last(before);
    }
    hits
}

/// Whether every phrase appears in `text` as adjacent words.
fn has_phrases(text: &str, phrases: &[Vec<String>]) -> bool {
    let terms: Vec<String> = words(text).into_iter().map(|w| w.term).collect();
    phrases
        .iter()
        .all(|p| terms.windows(p.len()).any(|w| w == p.as_slice()))
}

/// Bytes of context shown before the first match.
const BEFORE: usize = 60;
/// Bytes a snippet spans at most.
const SPAN: usize = 200;

/// An excerpt of `text` around its first matched word, the matched words marked.
fn snippet(text: &str, query: &Query) -> Vec<Piece> {
    let ws = words(text);
    let first = ws
        .iter()
        .find(|w| query.matches(&w.term))
        .map_or(0, |w| w.start);
    let floor = |mut i: usize| {
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let start = floor(first.saturating_sub(BEFORE));
    let end = floor((start + SPAN).min(text.len()));
    let mut out = Vec::new();
    let mut plain = String::new();
    if start > 0 {
        plain.push('…');
    }
    let mut at = start;
    let clean = |s: &str| s.replace(['\n', '\r', '\t'], " ");
    for w in ws.iter().filter(|w| w.start >= start && w.end <= end) {
        if !query.matches(&w.term) {
            continue;
        }
        plain.push_str(&clean(&text[at..w.start]));
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
