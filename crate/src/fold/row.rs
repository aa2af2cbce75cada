//! A display row: what a chat UI draws for one or more lines.

use super::event::Event;
use crate::protocol::{last_seq, Line};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One row of a chat transcript. Every row sits at the seq of the line that started it and
/// carries that line's timestamp; it serializes (for JavaScript) as an object whose `kind` names
/// the variant, fields in camelCase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Row {
    /// The user's message.
    User {
        /// Its line's seq.
        seq: u64,
        /// Its line's timestamp.
        ts: f64,
        /// The message.
        text: String,
        /// The queued message it delivers, if it was queued.
        #[serde(skip_serializing_if = "Option::is_none")]
        queued_id: Option<String>,
    },
    /// An assistant message: a run of streamed deltas (raw or coalesced) that join.
    Assistant {
        /// The seq of its first delta.
        seq: u64,
        /// The first delta's timestamp.
        ts: f64,
        /// The last seq it covers (its last delta's).
        last_seq: u64,
        /// The deltas' texts, concatenated.
        text: String,
        /// The message id its deltas carry.
        #[serde(skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
    },
    /// A tool call, with its result once the result is in the transcript.
    Tool {
        /// The call's seq.
        seq: u64,
        /// The call's timestamp.
        ts: f64,
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
        /// The call's input.
        input: Value,
        /// The result, when it has arrived.
        result: Option<ToolOutput>,
    },
    /// A tool result whose call is not in the transcript (older history not loaded yet, or a
    /// call that never came). It becomes part of its call's row when the call is loaded.
    ToolResult {
        /// The result's seq.
        seq: u64,
        /// Its timestamp.
        ts: f64,
        /// The call's id.
        id: String,
        /// The answer.
        output: Value,
        /// Whether the tool failed.
        is_error: bool,
    },
    /// A slash command and its state: later `command` events with the same id update it until
    /// one is `done`.
    Command {
        /// The seq of its first event.
        seq: u64,
        /// The first event's timestamp.
        ts: f64,
        /// The command's id.
        id: String,
        /// The command line (the latest non-empty one given).
        command: String,
        /// Whether it finished.
        done: bool,
        /// Its output (the latest one given).
        output: Option<String>,
    },
    /// The agent's status changed.
    Status {
        /// Its line's seq.
        seq: u64,
        /// Its line's timestamp.
        ts: f64,
        /// The new status.
        status: String,
    },
    /// Context usage.
    Usage {
        /// Its line's seq.
        seq: u64,
        /// Its line's timestamp.
        ts: f64,
        /// Tokens in the context (absolute).
        context: u64,
        /// Output tokens, when given.
        output: Option<u64>,
    },
    /// The session's settings changed.
    Settings {
        /// Its line's seq.
        seq: u64,
        /// Its line's timestamp.
        ts: f64,
        /// The model, when it changed.
        model: Option<String>,
        /// The permission mode, when it changed.
        permission_mode: Option<String>,
    },
    /// A message was queued for the agent. (The pending bubble is session state:
    /// [`super::SessionState::queued`].)
    Queued {
        /// Its line's seq.
        seq: u64,
        /// Its line's timestamp.
        ts: f64,
        /// The queued message's id.
        id: String,
        /// The message.
        text: String,
    },
    /// Context compaction started or ended.
    Compacting {
        /// Its line's seq.
        seq: u64,
        /// Its line's timestamp.
        ts: f64,
        /// Whether it started.
        active: bool,
    },
    /// An error the agent reported.
    Error {
        /// Its line's seq.
        seq: u64,
        /// Its line's timestamp.
        ts: f64,
        /// What went wrong.
        message: String,
    },
    /// An event of a type this build does not know, shown as unknown and never folded.
    Unknown {
        /// Its line's seq.
        seq: u64,
        /// Its line's timestamp.
        ts: f64,
        /// The event's `type`, as sent.
        event_type: String,
        /// The whole event.
        event: Map<String, Value>,
    },
    /// An event of a known type whose fields do not have the protocol's shape: shown, never
    /// folded, never applied to session state.
    Malformed {
        /// Its line's seq.
        seq: u64,
        /// Its line's timestamp.
        ts: f64,
        /// The event's `type`.
        event_type: String,
        /// What is wrong with it.
        reason: String,
        /// The whole event.
        event: Map<String, Value>,
    },
}

/// A tool's answer, attached to its call's row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutput {
    /// The result line's seq.
    pub seq: u64,
    /// Its timestamp.
    pub ts: f64,
    /// The answer.
    pub output: Value,
    /// Whether the tool failed.
    pub is_error: bool,
}

impl Row {
    /// The row for one line, before any folding or attaching.
    pub(super) fn from_line(line: &Line) -> Row {
        let (seq, ts) = (line.seq(), line.ts());
        let event = match Event::read(line) {
            Ok(event) => event,
            Err(reason) => {
                return Row::Malformed {
                    seq,
                    ts,
                    event_type: line.event_type().to_owned(),
                    reason,
                    event: line.event().clone(),
                }
            }
        };
        match event {
            Event::UserMessage { text, queued_id } => Row::User {
                seq,
                ts,
                text,
                queued_id,
            },
            Event::AssistantText { text, message_id } => Row::Assistant {
                seq,
                ts,
                last_seq: last_seq(line),
                text,
                message_id,
            },
            Event::UsageDelta { context, output } => Row::Usage {
                seq,
                ts,
                context,
                output,
            },
            Event::Status { status } => Row::Status { seq, ts, status },
            Event::Settings {
                model,
                permission_mode,
            } => Row::Settings {
                seq,
                ts,
                model,
                permission_mode,
            },
            Event::MessageQueued { id, text } => Row::Queued { seq, ts, id, text },
            Event::ToolCall { id, name, input } => Row::Tool {
                seq,
                ts,
                id,
                name,
                input,
                result: None,
            },
            Event::ToolResult {
                id,
                output,
                is_error,
            } => Row::ToolResult {
                seq,
                ts,
                id,
                output,
                is_error,
            },
            Event::Command {
                id,
                command,
                done,
                output,
            } => Row::Command {
                seq,
                ts,
                id,
                command: command.unwrap_or_default(),
                done,
                output,
            },
            Event::Compacting { active } => Row::Compacting { seq, ts, active },
            Event::Error { message } => Row::Error { seq, ts, message },
            Event::Unknown => Row::Unknown {
                seq,
                ts,
                event_type: line.event_type().to_owned(),
                event: line.event().clone(),
            },
        }
    }

    /// The seq the row sits at: that of the line that started it.
    pub fn seq(&self) -> u64 {
        match self {
            Row::User { seq, .. }
            | Row::Assistant { seq, .. }
            | Row::Tool { seq, .. }
            | Row::ToolResult { seq, .. }
            | Row::Command { seq, .. }
            | Row::Status { seq, .. }
            | Row::Usage { seq, .. }
            | Row::Settings { seq, .. }
            | Row::Queued { seq, .. }
            | Row::Compacting { seq, .. }
            | Row::Error { seq, .. }
            | Row::Unknown { seq, .. }
            | Row::Malformed { seq, .. } => *seq,
        }
    }

    /// The timestamp of the line that started the row.
    pub fn ts(&self) -> f64 {
        match self {
            Row::User { ts, .. }
            | Row::Assistant { ts, .. }
            | Row::Tool { ts, .. }
            | Row::ToolResult { ts, .. }
            | Row::Command { ts, .. }
            | Row::Status { ts, .. }
            | Row::Usage { ts, .. }
            | Row::Settings { ts, .. }
            | Row::Queued { ts, .. }
            | Row::Compacting { ts, .. }
            | Row::Error { ts, .. }
            | Row::Unknown { ts, .. }
            | Row::Malformed { ts, .. } => *ts,
        }
    }

    /// The `kind` the row serializes with (`"user"`, `"assistant"`, `"tool"`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Row::User { .. } => "user",
            Row::Assistant { .. } => "assistant",
            Row::Tool { .. } => "tool",
            Row::ToolResult { .. } => "toolResult",
            Row::Command { .. } => "command",
            Row::Status { .. } => "status",
            Row::Usage { .. } => "usage",
            Row::Settings { .. } => "settings",
            Row::Queued { .. } => "queued",
            Row::Compacting { .. } => "compacting",
            Row::Error { .. } => "error",
            Row::Unknown { .. } => "unknown",
            Row::Malformed { .. } => "malformed",
        }
    }
}
