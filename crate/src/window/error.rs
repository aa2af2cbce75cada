//! What the window layer can fail with: one kind per check, so callers (and the JS surface) can
//! tell a stale cursor from a bad request from a chat that belongs to someone else.

use super::Cursor;
use crate::store::StoreError;

/// An error of a windowed read or write. A refused write has changed nothing on disk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// The chat does not exist (and the read was not asked to answer as empty).
    #[error("chat not found: {0}")]
    NotFound(String),
    /// The file changed since the cursor was issued (its size or stamp differ): the window no
    /// longer describes the file. Reload the tail.
    #[error("cursor is stale: the chat changed since it was read (read at size {} and stamp {}, now size {size} and stamp {modified_millis}): read its tail again", cursor.size, cursor.modified_millis)]
    SignatureMismatch {
        /// The cursor that was given.
        cursor: Cursor,
        /// The file's size now.
        size: u64,
        /// The file's stamp now.
        modified_millis: u64,
    },
    /// The cursor's offset lies past the end of the file.
    #[error("cursor offset {offset} is out of bounds (file size {size})")]
    OffsetOutOfBounds {
        /// The cursor's offset.
        offset: u64,
        /// The file's size.
        size: u64,
    },
    /// The cursor's offset lies inside the header line.
    #[error("cursor offset {offset} is before the chat body (which starts at {body_start})")]
    OffsetBeforeBody {
        /// The cursor's offset.
        offset: u64,
        /// Where the first message line starts.
        body_start: u64,
    },
    /// The cursor's offset is not the start of a line.
    #[error("cursor offset {offset} is not at a line boundary")]
    NotAtLineBoundary {
        /// The cursor's offset.
        offset: u64,
    },
    /// The file holds a different number of lines after the cursor than the caller's window.
    #[error("window baseline mismatch: the caller expected {expected} lines after the cursor, the file has {actual}")]
    WindowBaselineMismatch {
        /// `expected_window_line_count` as given.
        expected: usize,
        /// The lines between the cursor and the end of the file.
        actual: usize,
    },
    /// `RewriteFromIndex` names a line past the end of the window.
    #[error("start index {start_index} is out of bounds (the window has {window_lines} lines)")]
    StartIndexOutOfBounds {
        /// The index given.
        start_index: usize,
        /// The lines between the cursor and the end of the file.
        window_lines: usize,
    },
    /// The header on disk names a different chat than the header written (their
    /// `chat_metadata.integrity` differ). The only check `force` skips.
    #[error("integrity mismatch: the chat on disk is {on_disk:?}, the write is for {incoming:?}")]
    IntegrityMismatch {
        /// The integrity slug in the header on disk.
        on_disk: String,
        /// The integrity slug in the header given.
        incoming: String,
    },
    /// A header or message line to write contains a newline (it would split into two lines),
    /// or the header is not a JSON object.
    #[error("invalid line: {0}")]
    InvalidLine(String),
    /// An argument out of its range (`max_lines` or `max_pages` of 0, a chat path that is not
    /// a `.jsonl` file in the store).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The chat's header on disk is not UTF-8 (a message line that is not is read with
    /// U+FFFD in place of its bad bytes).
    #[error("the line at byte {offset} is not UTF-8")]
    NotUtf8 {
        /// Where the line starts.
        offset: u64,
    },
    /// The storage backend failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl WindowError {
    /// A stable camelCase name for the kind, for a JS `error.kind` or a Tauri error payload.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "notFound",
            Self::SignatureMismatch { .. } => "signatureMismatch",
            Self::OffsetOutOfBounds { .. } => "offsetOutOfBounds",
            Self::OffsetBeforeBody { .. } => "offsetBeforeBody",
            Self::NotAtLineBoundary { .. } => "notAtLineBoundary",
            Self::WindowBaselineMismatch { .. } => "windowBaselineMismatch",
            Self::StartIndexOutOfBounds { .. } => "startIndexOutOfBounds",
            Self::IntegrityMismatch { .. } => "integrityMismatch",
            Self::InvalidLine(_) => "invalidLine",
            Self::InvalidArgument(_) => "invalidArgument",
            Self::NotUtf8 { .. } => "notUtf8",
            Self::Store(_) => "store",
        }
    }

    /// Whether the error says the cursor no longer fits the file (the window must be reloaded),
    /// as opposed to a bad request or a storage failure. Prompt backfill reports these and goes
    /// on with the window.
    pub fn is_stale_cursor(&self) -> bool {
        matches!(
            self,
            Self::SignatureMismatch { .. }
                | Self::OffsetOutOfBounds { .. }
                | Self::OffsetBeforeBody { .. }
                | Self::NotAtLineBoundary { .. }
        )
    }
}
