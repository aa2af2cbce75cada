//! Documents: the searchable text of each row, folded from lines with the display fold's rule.
//!
//! A document is one row's text at the row's seq: a user message, an assistant message (its
//! deltas joined by the protocol's row rule, [`joins`], the rule [`crate::fold::Transcript`]
//! folds with, so a phrase split across deltas is one text), a tool call (name and input), a
//! tool result, a command event (command line and output), a queued message, an error. Status,
//! usage, settings, compaction and unknown events hold nothing to search.
//!
//! A tool result and a later `command` update are documents at their own seqs (the display
//! attaches them to an earlier row; the search opens the session at the line that says it).

use crate::fold::Event;
use crate::protocol::{joins, last_seq, EventKind, Line};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest text kept for one document, in bytes (a megabyte tool output is cut: its head
/// is what a person remembers).
pub const MAX_TEXT: usize = 64 * 1024;

/// Room given up front to the text of a row that can still grow (a reply streaming in), here
/// and in its published copy ([`super::live`]), so that its first deltas are appended in place
/// rather than each doubling of a short string reallocating it. Larger room costs more to
/// allocate than it saves (`crate/examples/append_cost.rs`: 4 kB was worse than 512 bytes).
pub(crate) const OPEN_ROW_ROOM: usize = 512;

/// One indexed row, as stored in the index blob (one JSON line each).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub welds: bool,
}

/// The searchable text of one line's event, or `None` when it holds none.
fn text_of(line: &Line) -> Option<String> {
    let json = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let text = match Event::read(line).ok()? {
        Event::UserMessage { text, .. } | Event::AssistantText { text, .. } => text,
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
    (!text.trim().is_empty()).then_some(text)
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
            if joins(prev, line) {
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
        if let Some(mut text) = text_of(line) {
            cap(&mut text);
            let doc = Doc {
                seq: line.seq(),
                end: through,
                ts: line.ts(),
                text,
                at: 0,
                welds: std::mem::take(&mut self.weld),
            };
            // Only an assistant delta is ever joined by a later line (the row rule): any other
            // row is complete now, and is found at once (a session whose newest line is a
            // queued message or a command must not hide it until something follows).
            if line.kind() == EventKind::AssistantText {
                let mut doc = doc;
                doc.text.reserve(OPEN_ROW_ROOM);
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
