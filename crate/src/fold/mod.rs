//! Events to display rows, and session state, for a chat UI.
//!
//! - [`Transcript`]: the rows of a contiguous stretch of transcript, grown by streaming at the
//!   newest end and by history pages at the oldest; a delta run cut by a page seam welds back
//!   into one row. Every delta of a message is one row, its texts concatenated
//!   ([`crate::protocol::continues`]: the protocol's row rule without its clean-append test, so
//!   repeated or overlapping deltas are one message too), so rows drawn from coalesced pages
//!   equal rows drawn from raw events.
//! - [`Row`]: one row (a user message, an assistant message built from its deltas, a tool call
//!   with its result, a command with its state, status, usage, settings, queued, compacting,
//!   error, unknown and malformed events). Serializable, camelCase, tagged by `kind`.
//! - [`SessionState`]: status, model, permission mode, context tokens, queued messages, waiting
//!   commands, compaction, folded from the newest events.
//!
//! The fold takes [`Line`](crate::protocol::Line)s, which have a seq, a timestamp and an event
//! with a type. Text that does not parse as a line has no seq and so no place in the
//! transcript's order: the caller drops it (the cache treats it as damage, design.md
//! decision 10), and nothing about it reaches the fold. A line whose event is of a known type
//! but not of its shape (a `toolCall` without an id) is kept as a [`Row::Malformed`] and
//! changes no state; an event of an unknown type is a [`Row::Unknown`]. Neither is ever folded.

mod event;
mod row;
mod state;
mod transcript;

pub use event::Event;
pub use row::{Row, ToolOutput};
pub use state::{Queued, SessionState, Waiting};
pub use transcript::{Change, FoldError, Transcript};
