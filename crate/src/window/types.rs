//! The values that cross the window API: the cursor, what reads return, what writes take.
//! All serialize in camelCase, so a Tauri command can take and return them as they are.

use serde::{Deserialize, Serialize};

/// Where a window starts in a chat file, and which version of the file it was read from.
///
/// `offset` is the byte offset of the window's first message line (always a line boundary, never
/// inside the header). `size` and `modified_millis` are the file's signature: a cursor is only
/// accepted while the file still has that signature, so a window read before any other write is
/// refused rather than written over newer data. `modified_millis` is the file's modification
/// time where the window layer has seen no write of its own; after its own writes it is a stamp
/// the layer issues (see the module's documentation) that changes on every write even when the
/// clock does not. Treat it as opaque.
///
/// A chat that does not exist has the cursor [`Cursor::default()`] (all zeros).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cursor {
    /// Byte offset of the window's first line.
    pub offset: u64,
    /// The file's size when the cursor was issued.
    pub size: u64,
    /// The file's signature stamp when the cursor was issued.
    pub modified_millis: u64,
}

impl Cursor {
    /// `offset:size:modifiedMillis`, the cursor as one cache key (the seed's page-cache key).
    pub fn signature(&self) -> String {
        format!("{}:{}:{}", self.offset, self.size, self.modified_millis)
    }

    /// Whether two cursors were issued for the same version of the file.
    pub fn same_file_version(&self, other: &Cursor) -> bool {
        (self.size, self.modified_millis) == (other.size, other.modified_millis)
    }
}

/// What [`ChatFile::tail`](super::ChatFile::tail) returns: the header and the newest lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatTail {
    /// The header line (without its newline); `None` for a chat that does not exist, or whose
    /// file is empty (no header yet: the app writes its own).
    pub header: Option<String>,
    /// The newest message lines, oldest first, without their newlines.
    pub lines: Vec<String>,
    /// Where `lines` start, and the file's signature.
    pub cursor: Cursor,
    /// Whether older message lines exist before `cursor.offset`.
    pub has_more_before: bool,
}

/// One page read backwards by [`ChatFile::before`](super::ChatFile::before).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatChunk {
    /// The message lines just before the cursor it was asked with, oldest first.
    pub lines: Vec<String>,
    /// Where `lines` start (same signature as the cursor asked with): the cursor of the window
    /// once these lines are prepended to it.
    pub cursor: Cursor,
    /// Whether older message lines exist before `cursor.offset`.
    pub has_more_before: bool,
}

/// One chat of a folder ([`Chats::list`](super::Chats::list)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatEntry {
    /// Its name (the file's name without `.jsonl`).
    pub name: String,
    /// The file's size in bytes.
    pub size: u64,
    /// The store's modification time of the file, in milliseconds since the epoch (what the
    /// backend keeps: a file's mtime, OPFS's `lastModified`, IndexedDB's write time).
    pub modified_millis: u64,
}

/// A windowed patch, relative to the window that starts at the cursor.
///
/// As JSON (what the JS API's `patch` takes, and what a Tauri command taking a `PatchOp` gets
/// from `invoke`, so that `ChatWindow` writes through either): `{"append": lines}` or
/// `{"rewriteFromIndex": n, "lines": lines}`; anything else is refused, naming both shapes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "PatchShape", into = "PatchShape")]
pub enum PatchOp {
    /// Appends lines at the end of the file; the window keeps its start.
    Append {
        /// The new message lines, without newlines.
        lines: Vec<String>,
    },
    /// Cuts the window at its `start_index`-th line (0-based, counted from the cursor) and
    /// writes `lines` in place of everything from there on. `start_index` equal to the window's
    /// line count appends.
    RewriteFromIndex {
        /// The first window line replaced.
        start_index: usize,
        /// The lines written from there on, without newlines.
        lines: Vec<String>,
    },
}

/// [`PatchOp`] as JSON: the fields of both shapes, exactly one shape's given.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PatchShape {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    append: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rewrite_from_index: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lines: Option<Vec<String>>,
}

impl TryFrom<PatchShape> for PatchOp {
    type Error = &'static str;

    fn try_from(shape: PatchShape) -> Result<PatchOp, Self::Error> {
        match shape {
            PatchShape {
                append: Some(lines),
                rewrite_from_index: None,
                lines: None,
            } => Ok(PatchOp::Append { lines }),
            PatchShape {
                append: None,
                rewrite_from_index: Some(start_index),
                lines: Some(lines),
            } => Ok(PatchOp::RewriteFromIndex { start_index, lines }),
            _ => Err("a patch is {append: lines} or {rewriteFromIndex: n, lines}"),
        }
    }
}

impl From<PatchOp> for PatchShape {
    fn from(op: PatchOp) -> PatchShape {
        match op {
            PatchOp::Append { lines } => PatchShape {
                append: Some(lines),
                rewrite_from_index: None,
                lines: None,
            },
            PatchOp::RewriteFromIndex { start_index, lines } => PatchShape {
                append: None,
                rewrite_from_index: Some(start_index),
                lines: Some(lines),
            },
        }
    }
}

/// The checks a write may be asked for beyond the ones it always makes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteOptions {
    /// How many message lines the caller believes lie between the cursor and the end of the
    /// file (its saved window). When given, a different count on disk refuses the write with
    /// [`WindowError::WindowBaselineMismatch`](super::WindowError::WindowBaselineMismatch).
    #[serde(default)]
    pub expected_window_line_count: Option<usize>,
    /// Skips the integrity check, and only that one: the cursor's signature, bounds and line
    /// boundary, the baseline and the start index are checked anyway.
    #[serde(default)]
    pub force: bool,
}
