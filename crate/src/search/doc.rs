//! Documents: the searchable text of each row, folded from lines with the display fold's rule.
//!
//! A document is one row's text at the row's seq: a user message, an assistant message (its
//! deltas joined as [`crate::fold::Transcript`] joins them, [`continues`], so a phrase split
//! across deltas is one text), a tool call (name and input), a
//! tool result, a command event (command line and output), a queued message, an error. Status,
//! usage, settings, compaction and unknown events hold nothing to search.
//!
//! A tool result and a later `command` update are documents at their own seqs (the display
//! attaches them to an earlier row; the search opens the session at the line that says it).

use crate::fold::Event;
use crate::protocol::{continues, last_seq, EventKind, Line};
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;

/// The longest text kept for one document, in bytes (a megabyte tool output is cut: its head
/// is what a person remembers).
pub const MAX_TEXT: usize = 64 * 1024;

/// Room given up front to the text of a row that can still grow (a reply streaming in), so
/// that its first deltas are appended in place rather than each doubling of a short string
/// reallocating it. Larger room costs more to
/// allocate than it saves (`crate/examples/append_cost.rs`: 4 kB was worse than 512 bytes).
const OPEN_ROW_ROOM: usize = 512;

/// One indexed row, as stored in the index blob (one JSON line each).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Doc {
    /// The row's seq (its first line's).
    pub seq: u64,
    /// The last seq it covers + 1.
    pub end: u64,
    /// Its first line's timestamp.
    pub ts: f64,
    /// Its text.
    pub text: String,
    /// The indexer's live end when this document was written: every row ending below it is in
    /// the index. Read back from the blob's last line to resume after a reopen.
    pub at: u64,
    /// It was welded across a seam (a reply cut where the cached lines stopped, the lines
    /// on the other side cached since): it replaces every document written before it whose
    /// seq lies in `seq..end` (the pieces the reply was indexed as until then).
    #[serde(default)]
    pub welds: bool,
}

impl Doc {
    /// Appends this document as one line of the index blob: a JSON object and a newline,
    /// `welds` only when set. Written by hand rather than through serde (which reads it
    /// back): it runs for every row a live stream completes, and serde_json escapes a text
    /// byte by byte, where `write_str` copies it in runs of eight clean bytes.
    pub fn write_line(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"seq\":");
        number(out, self.seq);
        out.extend_from_slice(b",\"end\":");
        number(out, self.end);
        out.extend_from_slice(b",\"ts\":");
        number(out, self.ts);
        out.extend_from_slice(b",\"text\":");
        write_str(out, &self.text);
        out.extend_from_slice(b",\"at\":");
        number(out, self.at);
        if self.welds {
            out.extend_from_slice(b",\"welds\":true");
        }
        out.extend_from_slice(b"}\n");
    }
}

/// Appends a number as serde_json writes it.
fn number(out: &mut Vec<u8>, n: impl serde::Serialize) {
    serde_json::to_writer(out, &n).expect("a number serializes");
}

/// Appends `text` as a JSON string, escaped as serde_json escapes it (the two short escapes
/// it uses, `\u00xx` for other control bytes, nothing else): eight bytes at a time are tested
/// for a quote, a backslash or a control byte at once, and clean runs are copied whole.
fn write_str(out: &mut Vec<u8>, text: &str) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    // Whether some byte of `w` is below 0x20, or equals `"` or `\` (the classic "has a byte
    // less than n" and "has a zero byte" tests: exact about whether, not about where).
    let dirty = |w: u64| {
        let quote = w ^ (ONES * u64::from(b'"'));
        let slash = w ^ (ONES * u64::from(b'\\'));
        let below = w.wrapping_sub(ONES * 0x20) & !w;
        let zero = |x: u64| x.wrapping_sub(ONES) & !x;
        (below | zero(quote) | zero(slash)) & HIGH != 0
    };
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let (mut copied, mut i) = (0, 0);
    while i < bytes.len() {
        // Clean words skipped; then byte by byte through the word that was not (or the tail).
        while let Some(word) = bytes.get(i..i + 8) {
            if dirty(u64::from_le_bytes(word.try_into().expect("eight bytes"))) {
                break;
            }
            i += 8;
        }
        for &c in &bytes[i..bytes.len().min(i + 8)] {
            let escape: &[u8] = match c {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                0x08 => b"\\b",
                0x0c => b"\\f",
                0..0x20 => &[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(c >> 4)],
                    HEX[usize::from(c & 15)],
                ],
                _ => {
                    i += 1;
                    continue;
                }
            };
            out.extend_from_slice(&bytes[copied..i]);
            out.extend_from_slice(escape);
            i += 1;
            copied = i;
        }
    }
    out.extend_from_slice(&bytes[copied..]);
    out.push(b'"');
}

/// The searchable text of one line's event, or `None` when it holds none. A streamed delta's
/// is borrowed from the line (as [`Event::read`] reads it: any string `text`), so that the
/// row it starts is allocated once, with its room ([`Folder`]); one of blanks only (a reply's
/// first `"\n\n"`) starts its row too, which is at that delta's seq, as the row rule says.
fn text_of(line: &Line) -> Option<Cow<'_, str>> {
    if line.kind() == EventKind::AssistantText {
        return line.text().map(Cow::Borrowed);
    }
    let json = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let text = match Event::read(line).ok()? {
        Event::UserMessage { text, .. } => text,
        Event::MessageQueued { text, .. } => text,
        Event::ToolCall { name, input, .. } => format!("{name} {}", json(&input)),
        Event::ToolResult { output, .. } => json(&output),
        Event::Command {
            command, output, ..
        } => {
            let parts = [command.unwrap_or_default(), output.unwrap_or_default()];
            parts.join("\n").trim().to_string()
        }
        Event::Error { message } => message,
        _ => return None,
    };
    (!text.trim().is_empty()).then_some(Cow::Owned(text))
}

/// Cuts `text` to at most [`MAX_TEXT`] bytes on a character boundary.
fn cap(text: &mut String) {
    if text.len() > MAX_TEXT {
        let mut at = MAX_TEXT;
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.truncate(at);
    }
}

/// Folds lines, in seq order, into documents: a row is complete (and handed out) when the next
/// line does not join it. The row still open is held ([`Folder::pending`]).
#[derive(Debug, Default, Clone)]
pub struct Folder {
    /// The row being built (the row rule compares the next line with the line before it,
    /// which the caller gives: no copy of each delta is kept here).
    open: Option<Doc>,
    /// Every row ending below this is complete: the seq after the newest line folded, or after
    /// the last complete row while one is open.
    end: u64,
    /// The next row started is marked [`Doc::welds`].
    weld: bool,
}

impl Folder {
    /// A folder whose rows below `end` are done; when `welds`, the first row it starts is
    /// marked [`Doc::welds`].
    pub fn at(end: u64, welds: bool) -> Self {
        Folder {
            open: None,
            end,
            weld: welds,
        }
    }

    /// Replaces the open row with `doc`, the same row welded to what is now cached below it
    /// (it starts lower; it ends where the open row ends).
    pub fn weld_open(&mut self, doc: Doc) {
        if let Some(open) = &mut self.open {
            *open = doc;
        }
    }

    /// The seq up to which every row is complete (the open row starts there, if any).
    pub fn end(&self) -> u64 {
        self.open.as_ref().map_or(self.end, |doc| doc.seq)
    }

    /// The seq after the newest line folded.
    pub fn through(&self) -> u64 {
        self.end
    }

    /// The row still open (its text so far), taken: every row the lines made, the last one
    /// included, once the last is known to be complete.
    pub fn into_open(self) -> Option<Doc> {
        self.open
    }

    /// The row still open (its text so far).
    pub fn pending(&self) -> Option<&Doc> {
        self.open.as_ref()
    }

    /// Folds `lines` (in seq order; `prev`: the line just before the first, as last folded),
    /// appending to `out` the documents they completed.
    pub fn push_all(&mut self, prev: Option<&Line>, lines: &[Line], out: &mut Vec<Doc>) {
        let mut prev = prev;
        for line in lines {
            self.push(prev, line, out);
            prev = Some(line);
        }
    }

    /// Folds `line` (`prev`: the line folded just before it), appending to `out` the documents
    /// it completed: the open row when `line` does not join it, and `line`'s own row at once
    /// unless it can still grow (only an assistant delta can: the next one may join it). A
    /// line at or below what was folded is ignored.
    fn push(&mut self, prev: Option<&Line>, line: &Line, out: &mut Vec<Doc>) {
        if line.seq() < self.end {
            return;
        }
        let through = last_seq(line) + 1;
        if let (Some(doc), Some(prev)) = (&mut self.open, prev) {
            if continues(prev, line) {
                if doc.text.len() < MAX_TEXT {
                    doc.text.push_str(line.text().unwrap_or_default());
                    cap(&mut doc.text);
                }
                doc.end = through;
                self.end = through;
                return;
            }
        }
        out.extend(self.open.take());
        self.end = through;
        if let Some(text) = text_of(line) {
            // Only an assistant delta is ever joined by a later line (the row rule): any other
            // row is complete now, and is found at once (a session whose newest line is a
            // queued message or a command must not hide it until something follows).
            let open = line.kind() == EventKind::AssistantText;
            let mut text = match open {
                true => {
                    let mut room = String::with_capacity(text.len() + OPEN_ROW_ROOM);
                    room.push_str(&text);
                    room
                }
                false => text.into_owned(),
            };
            cap(&mut text);
            let doc = Doc {
                seq: line.seq(),
                end: through,
                ts: line.ts(),
                text,
                at: 0,
                welds: std::mem::take(&mut self.weld),
            };
            if open {
                self.open = Some(doc);
            } else {
                out.push(doc);
            }
        }
    }
}

/// The documents of a run of lines standing alone (a history page): every row, the last one
/// included.
pub fn docs_of(lines: &[Line]) -> Vec<Doc> {
    let mut folder = Folder::default();
    let mut out = Vec::new();
    folder.push_all(None, lines, &mut out);
    out.extend(folder.into_open());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts of every byte class the escaper tells apart, at every offset within its words:
    /// control bytes (the short escapes and the `\u00xx` ones), quotes, backslashes, DEL,
    /// multi-byte characters (whose bytes are above 0x7f) and plain ASCII.
    #[test]
    fn a_line_is_the_json_serde_writes_and_reads_back() {
        let pieces = [
            "a", "xyz ", "\"", "\\", "\n", "\r", "\t", "\u{8}", "\u{c}", "\u{0}", "\u{1f}",
            "\u{7f}", "é", "€", "😀", "\u{2028}", "abcdefgh", "/",
        ];
        let mut rng = oorandom::Rand64::new(18);
        for round in 0..3000 {
            let n = rng.rand_range(0..24) as usize;
            let text: String = (0..n)
                .map(|_| pieces[rng.rand_range(0..pieces.len() as u64) as usize])
                .collect();
            let doc = Doc {
                seq: rng.rand_u64() >> (round % 64),
                end: rng.rand_range(0..1 << 40),
                ts: rng.rand_float() * 2e9,
                text: text.clone(),
                at: rng.rand_range(0..1 << 20),
                welds: round % 3 == 0,
            };
            let mut line = Vec::new();
            doc.write_line(&mut line);
            assert_eq!(line.pop(), Some(b'\n'));
            assert_eq!(
                serde_json::from_slice::<Doc>(&line).unwrap(),
                doc,
                "{text:?}"
            );
            let mut quoted = Vec::new();
            write_str(&mut quoted, &text);
            assert_eq!(quoted, serde_json::to_vec(&text).unwrap(), "{text:?}");
        }
    }
}
