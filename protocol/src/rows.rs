//! The row rule: which adjacent lines make one row.
//!
//! There is one rule and this is it. The server uses it to coalesce a page
//! ([`coalesce`], [`RowWalk`]), and the client uses it to count rows over raw cached lines
//! ([`RowWalk`]). The display fold and the search index join more: every delta of a message
//! ([`continues`], of which [`joins`] is the clean-append part), since a message drawn from raw
//! deltas and one drawn from coalesced lines concatenate to the same text. design.md (cache
//! decision 5) warns that a client's copy of the server's rule drifts; here there is no copy.
//!
//! The rule is a predicate over two adjacent lines ([`joins`]), so it gives the same answer
//! whichever way a page is walked and wherever a page starts: a run cut by `after` or `limit`
//! is the partial it is, and welds back when the pages meet.

use crate::line::{EventKind, Line, LineError};
use serde_json::{Map, Value};

/// The field a coalesced line carries so that it can still be compared at a seam:
/// `"folded": {"through": N, "first": "...", "last": "..."}`: the seq of the run's last delta and
/// the texts of its first and last deltas.
///
/// Without it a coalesced line is indistinguishable from one long delta, and the row rule would
/// have to compare whole concatenated texts at a page seam, which decides differently from the
/// raw deltas it replaced (the deltas `"ab"`, `"a"`, `"c"` are two rows; `"ab"` beside the folded
/// `"ac"` would weld into one). With it, [`joins`] on folded lines decides exactly what it decides
/// on the raw deltas at the seam, so rows drawn from folded pages equal rows drawn from raw events.
pub const FOLDED: &str = "folded";

/// What [`joins`] needs of an `assistantText` line: the span of seqs it covers and the texts at
/// its two ends. A raw delta's span is itself; a folded line's comes from its [`FOLDED`] field.
struct Span<'a> {
    through: u64,
    first: &'a str,
    last: &'a str,
}

/// The line's span, or `None` when it is not joinable text: not `assistantText`, no string
/// `text`, or a [`FOLDED`] field that does not read (not an object, `through` below `seq`,
/// missing texts). A line that does not read never joins, which is always safe.
fn span(line: &Line) -> Option<Span<'_>> {
    if line.kind() != EventKind::AssistantText {
        return None;
    }
    let text = line.text()?;
    if !line.has_folded() {
        return Some(Span {
            through: line.seq(),
            first: text,
            last: text,
        });
    }
    match line.event().get(FOLDED) {
        None => Some(Span {
            through: line.seq(),
            first: text,
            last: text,
        }),
        Some(Value::Object(f)) => {
            let through = f.get("through").and_then(Value::as_u64)?;
            let first = f.get("first").and_then(Value::as_str)?;
            let last = f.get("last").and_then(Value::as_str)?;
            (line.seq()..=crate::MAX_SEQ)
                .contains(&through)
                .then_some(Span {
                    through,
                    first,
                    last,
                })
        }
        Some(_) => None,
    }
}

/// Whether `line` is one as a transcript file holds it and every raw answer carries it (a stream's line, a
/// catch-up's, a page not coalesced): refused ([`LineError::Folded`]) when its `folded` field
/// claims the lines after it. Only a coalesced page's lines fold others; a raw line that says
/// it does would hide the lines after it from every fold. The one rule the server applies to
/// what it reads and what a PUT writes, and the client to what it is sent.
pub fn check_raw(line: &Line) -> Result<(), LineError> {
    match last_seq(line) == line.seq() {
        true => Ok(()),
        false => Err(LineError::Folded),
    }
}

/// The last seq a line covers: its own seq, or for a coalesced line the seq of the last delta
/// folded into it. A page reaches as far as its last line's `last_seq`, never just its `seq`.
pub fn last_seq(line: &Line) -> u64 {
    if !line.has_folded() {
        return line.seq(); // only a folded line's span reaches past it (a streamed delta's)
    }
    span(line).map_or(line.seq(), |s| s.through)
}

/// Whether two events are of the same message: every field other than the text and the fold
/// marker is equal.
fn same_message(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    let rest = |m: &Map<String, Value>| m.keys().filter(|k| *k != "text" && *k != FOLDED).count();
    rest(a) == rest(b)
        && a.iter()
            .filter(|(k, _)| *k != "text" && *k != FOLDED)
            .all(|(k, v)| b.get(k) == Some(v))
}

/// Whether `newer` continues the assistant message that `older` (the line just before it) is
/// in: both `assistantText`, every field other than `text` equal (the same message), and
/// `newer` starting at the seq right after the last one `older` covers. Such deltas are one
/// message to a client that concatenates them (the desktop's semantics, seed 001): the client's
/// display fold and search index take them as one row, their texts concatenated. The wire's row
/// rule is narrower ([`joins`]): it folds only where every client renders the same.
///
/// Adjacency: a transcript's seqs have no holes, so the next delta of a message is the seq
/// right after the last one the older line covers. Anything else is a gap, a repeat, or another
/// file or session (two transcripts both numbered from 1): never one message. Either line may
/// be a coalesced one ([`coalesce`]): its [`FOLDED`] field gives its last seq.
pub fn continues(older: &Line, newer: &Line) -> bool {
    ends(older, newer).is_some()
}

/// The two lines' spans when `newer` continues `older`'s message ([`continues`]).
fn ends<'a>(older: &'a Line, newer: &'a Line) -> Option<(Span<'a>, Span<'a>)> {
    let (a, b) = (span(older)?, span(newer)?);
    if a.through.checked_add(1) != Some(newer.seq()) {
        return None;
    }
    let same = match (older.around_text(), newer.around_text()) {
        // Byte for byte the same around the text: the same in every other field.
        (Some(x), Some(y)) if x == y => true,
        _ => same_message(older.event(), newer.event()),
    };
    same.then_some((a, b))
}

/// Whether `newer` continues the row that `older` (the line just before it) is in: the row
/// rule, which the server coalesces pages by and rows are counted by.
///
/// Only streamed assistant text joins, and only when it is provably the same message rendered
/// the same way folded or not (design.md, fold rules F1-F3): `newer` continues `older`'s
/// message ([`continues`]) and `newer`'s first delta is a *clean append* ([`clean_append`]) of
/// `older`'s last delta. Any other event, and any unknown type, ends a run.
///
/// Either line may be a coalesced one ([`coalesce`]): its [`FOLDED`] field gives its last seq
/// and its end texts, so the answer is the one the raw deltas at the seam give.
pub fn joins(older: &Line, newer: &Line) -> bool {
    ends(older, newer).is_some_and(|(a, b)| clean_append(a.last, b.first))
}

/// The clean-append predicate (design.md, fold rule F1): `next` appended to `prev` renders the same whether a client
/// concatenates deltas or detects replays and overlaps. Both non-empty, not equal, neither a
/// prefix of the other, and no suffix of `prev` is a prefix of `next`.
///
/// Linear in the lengths of the two texts (the overlap test is one Knuth-Morris-Pratt pass), so
/// two megabyte deltas sharing a long prefix cost milliseconds, not minutes.
pub fn clean_append(prev: &str, next: &str) -> bool {
    if prev.is_empty() || next.is_empty() || prev == next {
        return false;
    }
    if prev.starts_with(next) || next.starts_with(prev) {
        return false;
    }
    overlap(prev.as_bytes(), next.as_bytes()) == 0
}

/// The longest `next` whose overlap [`overlap`] looks for directly: at most `NAIVE`² byte
/// comparisons.
const NAIVE: usize = 64;

/// The length of the longest suffix of `prev` that is a prefix of `next` (bytes; both texts
/// being UTF-8, a suffix equal to a prefix of `next` starts at a character boundary of `prev`).
///
/// For a streamed delta's few words ([`NAIVE`] bytes at most) a direct look at each place in
/// `prev`'s tail that starts with `next`'s first byte (this runs for every delta appended, and
/// allocates nothing); longer, one pass of the Knuth-Morris-Pratt automaton of `next` over the
/// last `next.len()` bytes of `prev`: O(|prev| + |next|) time, O(|next|) memory.
fn overlap(prev: &[u8], next: &[u8]) -> usize {
    let pattern = &next[..next.len().min(prev.len())];
    let tail = &prev[prev.len() - pattern.len()..];
    if pattern.len() <= NAIVE {
        // A suffix from `i` must start with `next`'s first byte and end with its byte at the
        // suffix's length: two byte tests that rule out nearly every place before comparing.
        let last = tail[tail.len() - 1];
        return (0..tail.len())
            .find(|&i| {
                tail[i] == pattern[0]
                    && pattern[tail.len() - i - 1] == last
                    && pattern.starts_with(&tail[i..])
            })
            .map_or(0, |i| tail.len() - i);
    }
    // fail[i]: the longest proper border of pattern[..=i].
    let mut fail = vec![0usize; pattern.len()];
    let mut k = 0;
    for i in 1..pattern.len() {
        while k > 0 && pattern[i] != pattern[k] {
            k = fail[k - 1];
        }
        if pattern[i] == pattern[k] {
            k += 1;
        }
        fail[i] = k;
    }
    let mut matched = 0;
    for &b in tail {
        if matched == pattern.len() {
            matched = fail[matched - 1];
        }
        while matched > 0 && b != pattern[matched] {
            matched = fail[matched - 1];
        }
        if b == pattern[matched] {
            matched += 1;
        }
    }
    matched
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
/// its first delta's seq and timestamp, carrying the run's texts concatenated, the first
/// delta's other fields, and a [`FOLDED`] field (`through`, the run's last seq; `first` and
/// `last`, its end deltas' texts). Every other line is returned as it came, byte for byte.
///
/// Coalescing lines that are already coalesced gives what coalescing their raw deltas gives.
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
            out.push(fold_run(&lines[i..j]));
        }
        i = j;
    }
    out
}

/// One line for a run of two or more lines that join.
fn fold_run(run: &[Line]) -> Line {
    let (head, tail) = (&run[0], &run[run.len() - 1]);
    let (Some(a), Some(b)) = (span(head), span(tail)) else {
        unreachable!("lines that join have spans")
    };
    let text: String = run.iter().filter_map(Line::text).collect();
    let mut folded = Map::new();
    folded.insert("through".into(), Value::from(b.through));
    folded.insert("first".into(), Value::from(a.first));
    folded.insert("last".into(), Value::from(b.last));
    let mut event = head.event().clone();
    event.insert("text".into(), Value::String(text));
    event.insert(FOLDED.into(), Value::Object(folded));
    Line::new(head.seq(), head.ts(), event).expect("a parsed line rebuilds")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The predicate as design.md, fold rule F1, states it, by brute force: the reference the linear one must
    /// agree with.
    fn clean_append_by_definition(prev: &str, next: &str) -> bool {
        if prev.is_empty() || next.is_empty() || prev == next {
            return false;
        }
        if prev.starts_with(next) || next.starts_with(prev) {
            return false;
        }
        !(1..=next.len().min(prev.len()))
            .filter(|&k| next.is_char_boundary(k))
            .any(|k| prev.ends_with(&next[..k]))
    }

    #[test]
    fn clean_append_agrees_with_its_definition_on_every_short_pair() {
        // Every pair of strings up to length 5 over a small alphabet with a multibyte letter.
        let alphabet = ["a", "b", "\u{e9}"];
        let mut words = vec![String::new()];
        let mut level = vec![String::new()];
        for _ in 0..5 {
            level = level
                .iter()
                .flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}")))
                .collect();
            words.extend(level.iter().cloned());
        }
        for prev in &words {
            for next in &words {
                assert_eq!(
                    clean_append(prev, next),
                    clean_append_by_definition(prev, next),
                    "{prev:?} then {next:?}"
                );
            }
        }
    }

    #[test]
    fn overlaps_are_found_whatever_their_length() {
        assert!(!clean_append("hello wor", "world"));
        assert!(!clean_append("abcab", "abd"));
        assert!(clean_append("abcab", "d"));
        assert!(!clean_append("aab", "ba"));
        assert!(clean_append("ab", "aab"));
    }

    #[test]
    fn the_direct_and_the_automaton_overlaps_agree_with_the_definition() {
        // Texts on both sides of the direct look's bound, over two letters so that overlaps
        // are common: the longest suffix of `prev` that is a prefix of `next`, by brute force.
        let by_definition = |prev: &[u8], next: &[u8]| {
            (1..=next.len().min(prev.len()))
                .rev()
                .find(|&k| prev.ends_with(&next[..k]))
                .unwrap_or(0)
        };
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut text = |len: usize| -> Vec<u8> {
            (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    if seed % 4 == 0 {
                        b'b'
                    } else {
                        b'a'
                    }
                })
                .collect()
        };
        for len in [1, 2, 7, NAIVE - 1, NAIVE, NAIVE + 1, 3 * NAIVE] {
            for other in [1, len / 2 + 1, len, 2 * len] {
                for _ in 0..20 {
                    let (prev, next) = (text(other), text(len));
                    assert_eq!(overlap(&prev, &next), by_definition(&prev, &next));
                    let (prev, next) = (text(len), text(other));
                    assert_eq!(overlap(&prev, &next), by_definition(&prev, &next));
                }
            }
        }
    }
}
