//! The windowed chat file (design.md, Part C) and prompt backfill.
//!
//! For apps that keep chats locally and edit them (a Tauri app's backend natively over the
//! filesystem; a browser over OPFS or IndexedDB): a chat is a JSONL file, a header line then one
//! message a line, of which the UI holds only a window, the newest lines. The rest stays on
//! disk and is read backwards in pages; edits are written as a windowed save or patch that
//! never touches the bytes before the window.
//!
//! Everything goes through the [`Store`](crate::store::Store) trait, reading ranges: a tail or
//! a page costs its own lines, not the file.
//!
//! # The cursor and its checks
//!
//! [`tail`](ChatFile::tail) returns the header, the last lines and a [`Cursor`]
//! `{offset, size, modifiedMillis}`: where the window starts, and the file's signature. Every
//! operation that takes a cursor checks, in this order, each with its own [`WindowError`]:
//!
//! 1. the signature: the file is still the version the cursor was read from
//!    ([`SignatureMismatch`](WindowError::SignatureMismatch));
//! 2. the offset is within the file ([`OffsetOutOfBounds`](WindowError::OffsetOutOfBounds)),
//!    not inside the header ([`OffsetBeforeBody`](WindowError::OffsetBeforeBody)), and at the
//!    start of a line ([`NotAtLineBoundary`](WindowError::NotAtLineBoundary)).
//!
//! Writes then check:
//!
//! 3. integrity, unless forced: when both the header on disk and the header written carry
//!    `chat_metadata.integrity` (the seed app's chat identity slug), they are equal
//!    ([`IntegrityMismatch`](WindowError::IntegrityMismatch)); this catches a write meant for
//!    another chat, or a chat replaced under the same name. `force` skips this check only;
//! 4. the baseline, when `expected_window_line_count` is given: the file holds exactly that many
//!    lines from the cursor on, i.e. the caller's saved window is the file's suffix
//!    ([`WindowBaselineMismatch`](WindowError::WindowBaselineMismatch));
//! 5. for `RewriteFromIndex`, the start index is within the window
//!    ([`StartIndexOutOfBounds`](WindowError::StartIndexOutOfBounds)).
//!
//! A refused write changes nothing. Writes are serialized per chat (one async lock per chat
//! path in [`Chats`]), keep a backup of the bytes they replace (`<chat>.bak`, see
//! [`ChatFile::restore_backup`]) and return the new cursor. A write whose header equals the one
//! on disk (as JSON) costs the lines it writes (truncate at the cut, append); a changed header
//! rewrites the file through `<chat>.tmp` and a rename.
//!
//! # The signature changes on every write
//!
//! The stamp in `modifiedMillis` comes from a sidecar blob `<chat>.sig` (see the `signature`
//! module): strictly increasing over the window layer's own writes even within one tick of the
//! storage clock (or with no clock at all, in a browser), and re-issued whenever the file's size
//! or mtime change behind the layer's back, so an outside edit invalidates every cursor too.
//!
//! # In a Tauri command handler
//!
//! ```no_run
//! use scrollback::store::FsStore;
//! use scrollback::window::{ChatTail, Chats, Cursor, PatchOp, WindowError, WriteOptions};
//!
//! // Held in the app's managed state: one `Chats` for the app's life.
//! async fn get_chat_payload_tail(chats: &Chats<FsStore>, file: &str) -> Result<ChatTail, String> {
//!     let chat = chats.chat(&format!("chats/{file}.jsonl")).map_err(|e| e.to_string())?;
//!     chat.tail(50, true).await.map_err(|e| e.to_string())
//! }
//!
//! async fn patch_chat_payload_windowed(
//!     chats: &Chats<FsStore>,
//!     file: &str,
//!     cursor: Cursor,
//!     header: String,
//!     op: PatchOp,
//!     options: WriteOptions,
//! ) -> Result<Cursor, (String, String)> {
//!     let to_js = |e: WindowError| (e.kind().to_string(), e.to_string());
//!     let chat = chats.chat(&format!("chats/{file}.jsonl")).map_err(to_js)?;
//!     chat.patch(cursor, &header, &op, options).await.map_err(to_js)
//! }
//! ```

mod backfill;
mod chat;
mod error;
mod lines;
mod name;
mod signature;
mod types;

pub use backfill::{
    Backfill, BackfillRequest, BackfillStop, CharsPerToken, PromptBackfill, TokenEstimator,
};
pub use chat::{ChatFile, Chats};
pub use error::WindowError;
pub use name::{chat_path, normalize_chat_name, CHAT_EXTENSION, MAX_CHAT_NAME};
pub use types::{ChatChunk, ChatEntry, ChatTail, Cursor, PatchOp, WriteOptions};
