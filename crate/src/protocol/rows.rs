//! The row rule: which adjacent lines make one row.
//!
//! There is one rule and this is it. The server uses it to coalesce a page
//! ([`coalesce`], [`RowWalk`]), the client uses it to count rows over raw cached lines
//! ([`RowWalk`]), and the display fold uses it to decide what it may fold. Seed 000 warns that a
//! client's copy of the server's rule drifts; here there is no copy.
//!
//! The rule is a predicate over two adjacent lines ([`joins`]), so it gives the same answer
//! whichever way a page is walked and wherever a page starts: a run cut by `after` or `limit`
//! is the partial it is, and welds back when the pages meet.

use super::line::{EventKind, Line};
use serde_json::Value;

/// Whether `newer` continues the row that `older` (the line just before it) is in.
///
/// Only streamed assistant text joins, and only when it is provably the same message rendered
/// the same way folded or not (seed 001): both are `assistantText`, every field other than
/// `text` is equal (the same message), and `newer`'s text is a *clean append* of `older`'s
/// ([`clean_append`]). Any other event, and any unknown type, ends a run.
pub fn joins(older: &Line, newer: &Line) -> bool {
    if older.kind() != EventKind::AssistantText || newer.kind() != EventKind::AssistantText {
        return false;
    }
    // Adjacency is order, not arithmetic: a coalesced row carries its first delta's seq, so the
    // line after it is more than one seq above. A seq that does not grow means another file or
    // another session (two transcripts both numbered from 1): never one row.
    if newer.seq() <= older.seq() {
        return false;
    }
    let (a, b) = (older.event(), newer.event());
    let same_message = a.len() == b.len()
        && a.iter()
            .all(|(k, v)| k == "text" || b.get(k).is_some_and(|w| w == v));
    match (a.get("text"), b.get("text")) {
        (Some(Value::String(x)), Some(Value::String(y))) => same_message && clean_append(x, y),
        _ => false,
    }
}

/// Seed 001's predicate: `next` appended to `prev` renders the same whether a client
/// concatenates deltas or detects replays and overlaps. Both non-empty, not equal, neither a
/// prefix of the other, and no suffix of `prev` is a prefix of `next`.
pub fn clean_append(prev: &str, next: &str) -> bool {
    if prev.is_empty() || next.is_empty() || prev == next {
        return false;
    }
    if prev.starts_with(next) || next.starts_with(prev) {
        return false;
    }
    let overlap = next
        .char_indices()
        .map(|(i, c)| i + c.len_utf8())
        .take_while(|&k| k <= prev.len())
        .any(|k| prev.ends_with(&next[..k]));
    !overlap
}

/// Counts rows walking a page backwards (newest line first), stopping only between rows.
///
/// Offer lines newest-first with [`RowWalk::take`]; it answers `false` for the first line that
/// would start row `limit + 1`, which is not part of the page.
#[derive(Debug, Clone)]
pub struct RowWalk {
    limit: usize,
    rows: usize,
    newer: Option<Line>,
}

impl RowWalk {
    /// A walk that takes `limit` complete rows.
    pub fn new(limit: usize) -> Self {
        RowWalk {
            limit,
            rows: 0,
            newer: None,
        }
    }

    /// Offers the next older line; `true` when it belongs to the page.
    pub fn take(&mut self, line: &Line) -> bool {
        let starts_row = match &self.newer {
            None => true,
            Some(newer) => !joins(line, newer),
        };
        if starts_row {
            if self.rows == self.limit {
                return false;
            }
            self.rows += 1;
        }
        self.newer = Some(line.clone());
        true
    }

    /// Rows taken so far (the last one may still grow older).
    pub fn rows(&self) -> usize {
        self.rows
    }
}

/// Coalesces lines (oldest first): each run that [`joins`] becomes one `assistantText` line at
/// its first delta's seq and timestamp, carrying the run's texts concatenated and the first
/// delta's other fields. Every other line is returned as it came, byte for byte.
pub fn coalesce(lines: &[Line]) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let mut j = i + 1;
        while j < lines.len() && joins(&lines[j - 1], &lines[j]) {
            j += 1;
        }
        if j - i == 1 {
            out.push(lines[i].clone());
        } else {
            let first = &lines[i];
            let text: String = lines[i..j].iter().filter_map(Line::text).collect();
            let mut event = first.event().clone();
            event.insert("text".into(), Value::String(text));
            let joined = Line::new(first.seq(), first.ts(), event).expect("a parsed line rebuilds");
            out.push(joined);
        }
        i = j;
    }
    out
}
