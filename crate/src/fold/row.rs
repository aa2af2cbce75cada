//! A display row: what a chat UI draws for one or more lines.

use super::event::Event;
use crate::protocol::{last_seq, Line};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One row of a chat transcript. Every row sits at the seq of the line that started it and
/// carries that line's timestamp; it serializes (for JavaScript) as an object whose `kind` names
/// the variant, fields in camelCase, and reads back from the same (through its `RowFields`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    try_from = "RowFields"
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

/// A row's object as it reads: every variant's fields, each optional, in one pass, then checked
/// against its `kind` ([`Row`]'s `TryFrom`). Serde's derive for an internally tagged enum buffers
/// each object whole before it reads its variant, and took a sixth of the page's small module
/// (which reads the rows of a saved screen); this reads them in place.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RowFields {
    kind: String,
    seq: u64,
    ts: f64,
    text: Option<String>,
    queued_id: Option<String>,
    last_seq: Option<u64>,
    message_id: Option<String>,
    id: Option<String>,
    name: Option<String>,
    input: Option<Value>,
    result: Option<ToolOutput>,
    /// A tool result's answer (any JSON), a command's output (a string) or a usage's output
    /// tokens (a count), by `kind`.
    output: Option<Value>,
    is_error: Option<bool>,
    command: Option<String>,
    done: Option<bool>,
    status: Option<String>,
    context: Option<u64>,
    model: Option<String>,
    permission_mode: Option<String>,
    active: Option<bool>,
    message: Option<String>,
    event_type: Option<String>,
    reason: Option<String>,
    event: Option<Map<String, Value>>,
}

/// `field`'s value, or the error that names it as missing.
fn need<T>(value: Option<T>, field: &str) -> Result<T, String> {
    value.ok_or_else(|| format!("missing field `{field}`"))
}

impl TryFrom<RowFields> for Row {
    type Error = String;

    fn try_from(f: RowFields) -> Result<Row, String> {
        let (seq, ts) = (f.seq, f.ts);
        Ok(match f.kind.as_str() {
            "user" => Row::User {
                seq,
                ts,
                text: need(f.text, "text")?,
                queued_id: f.queued_id,
            },
            "assistant" => Row::Assistant {
                seq,
                ts,
                last_seq: need(f.last_seq, "lastSeq")?,
                text: need(f.text, "text")?,
                message_id: f.message_id,
            },
            "tool" => Row::Tool {
                seq,
                ts,
                id: need(f.id, "id")?,
                name: need(f.name, "name")?,
                input: f.input.unwrap_or_default(),
                result: f.result,
            },
            "toolResult" => Row::ToolResult {
                seq,
                ts,
                id: need(f.id, "id")?,
                output: f.output.unwrap_or_default(),
                is_error: need(f.is_error, "isError")?,
            },
            "command" => Row::Command {
                seq,
                ts,
                id: need(f.id, "id")?,
                command: need(f.command, "command")?,
                done: need(f.done, "done")?,
                output: match f.output {
                    None => None,
                    Some(Value::String(output)) => Some(output),
                    Some(_) => return Err("a command's `output` must be a string".into()),
                },
            },
            "status" => Row::Status {
                seq,
                ts,
                status: need(f.status, "status")?,
            },
            "usage" => Row::Usage {
                seq,
                ts,
                context: need(f.context, "context")?,
                output: match f.output {
                    None => None,
                    Some(output) => Some(
                        output
                            .as_u64()
                            .ok_or("a usage's `output` must be a count of tokens")?,
                    ),
                },
            },
            "settings" => Row::Settings {
                seq,
                ts,
                model: f.model,
                permission_mode: f.permission_mode,
            },
            "queued" => Row::Queued {
                seq,
                ts,
                id: need(f.id, "id")?,
                text: need(f.text, "text")?,
            },
            "compacting" => Row::Compacting {
                seq,
                ts,
                active: need(f.active, "active")?,
            },
            "error" => Row::Error {
                seq,
                ts,
                message: need(f.message, "message")?,
            },
            "unknown" => Row::Unknown {
                seq,
                ts,
                event_type: need(f.event_type, "eventType")?,
                event: need(f.event, "event")?,
            },
            "malformed" => Row::Malformed {
                seq,
                ts,
                event_type: need(f.event_type, "eventType")?,
                reason: need(f.reason, "reason")?,
                event: need(f.event, "event")?,
            },
            other => return Err(format!("unknown row kind `{other}`")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A row of each kind, with every optional field both given and not.
    fn every_kind() -> Vec<Row> {
        let event = json!({"type": "x", "n": [1, {"a": null}]})
            .as_object()
            .unwrap()
            .clone();
        let output = ToolOutput {
            seq: 4,
            ts: 4.25,
            output: json!(["o", 1]),
            is_error: true,
        };
        vec![
            Row::User {
                seq: 1,
                ts: 1788546972.6030757,
                text: "a \"q\" ü".into(),
                queued_id: None,
            },
            Row::User {
                seq: 2,
                ts: 2.0,
                text: String::new(),
                queued_id: Some("q1".into()),
            },
            Row::Assistant {
                seq: 3,
                ts: 3.5,
                last_seq: 9,
                text: "b".into(),
                message_id: None,
            },
            Row::Assistant {
                seq: 3,
                ts: 3.5,
                last_seq: 3,
                text: "b".into(),
                message_id: Some("m".into()),
            },
            Row::Tool {
                seq: 3,
                ts: 3.0,
                id: "t".into(),
                name: "n".into(),
                input: json!({"k": 1}),
                result: Some(output),
            },
            Row::Tool {
                seq: 3,
                ts: 3.0,
                id: "t".into(),
                name: "n".into(),
                input: Value::Null,
                result: None,
            },
            Row::ToolResult {
                seq: 5,
                ts: 5.0,
                id: "t".into(),
                output: json!("text"),
                is_error: false,
            },
            Row::ToolResult {
                seq: 5,
                ts: 5.0,
                id: "t".into(),
                output: Value::Null,
                is_error: true,
            },
            Row::Command {
                seq: 6,
                ts: 6.0,
                id: "c".into(),
                command: "/x".into(),
                done: true,
                output: Some("out".into()),
            },
            Row::Command {
                seq: 6,
                ts: 6.0,
                id: "c".into(),
                command: String::new(),
                done: false,
                output: None,
            },
            Row::Status {
                seq: 7,
                ts: 7.0,
                status: "working".into(),
            },
            Row::Usage {
                seq: 8,
                ts: 8.0,
                context: 12_000,
                output: Some(7),
            },
            Row::Usage {
                seq: 8,
                ts: 8.0,
                context: 0,
                output: None,
            },
            Row::Settings {
                seq: 9,
                ts: 9.0,
                model: Some("m".into()),
                permission_mode: None,
            },
            Row::Settings {
                seq: 9,
                ts: 9.0,
                model: None,
                permission_mode: Some("p".into()),
            },
            Row::Queued {
                seq: 10,
                ts: 10.0,
                id: "q".into(),
                text: "d".into(),
            },
            Row::Compacting {
                seq: 11,
                ts: 11.0,
                active: true,
            },
            Row::Error {
                seq: 12,
                ts: 12.0,
                message: "e".into(),
            },
            Row::Unknown {
                seq: 13,
                ts: 13.0,
                event_type: "x".into(),
                event: event.clone(),
            },
            Row::Malformed {
                seq: 14,
                ts: 14.0,
                event_type: "status".into(),
                reason: "r".into(),
                event,
            },
        ]
    }

    /// Every row reads back from its JSON as it was, from text and from a parsed value alike.
    #[test]
    fn every_kind_reads_back_as_it_was_written() {
        for row in every_kind() {
            let text = serde_json::to_string(&row).unwrap();
            assert_eq!(serde_json::from_str::<Row>(&text).unwrap(), row, "{text}");
            let value = serde_json::to_value(&row).unwrap();
            assert_eq!(serde_json::from_value::<Row>(value).unwrap(), row, "{text}");
        }
    }

    /// A row missing what its kind needs, of an unknown kind, or with a field of the wrong type
    /// is an error that says so, never another row.
    #[test]
    fn a_row_that_does_not_read_is_an_error_naming_why() {
        let err = |text: &str| serde_json::from_str::<Row>(text).unwrap_err().to_string();
        assert!(err(r#"{"kind":"user","seq":1,"ts":1}"#).contains("missing field `text`"));
        assert!(err(r#"{"kind":"assistant","seq":1,"ts":1,"text":"a"}"#).contains("`lastSeq`"));
        assert!(err(r#"{"kind":"tool","seq":1,"ts":1,"name":"n"}"#).contains("`id`"));
        assert!(err(r#"{"kind":"nope","seq":1,"ts":1}"#).contains("unknown row kind `nope`"));
        assert!(err(r#"{"seq":1,"ts":1,"text":"a"}"#).contains("`kind`"));
        assert!(err(r#"{"kind":"user","ts":1,"text":"a"}"#).contains("`seq`"));
        assert!(err(r#"{"kind":"user","seq":"1","ts":1,"text":"a"}"#).contains("invalid type"));
        let command =
            r#"{"kind":"command","seq":1,"ts":1,"id":"c","command":"/x","done":true,"output":3}"#;
        assert!(err(command).contains("a command's `output` must be a string"));
        let usage = r#"{"kind":"usage","seq":1,"ts":1,"context":1,"output":"x"}"#;
        assert!(err(usage).contains("a usage's `output` must be a count of tokens"));
        // Fields another kind has are no part of this one, as before.
        let user = r#"{"kind":"user","seq":1,"ts":1,"text":"a","active":true,"extra":[1]}"#;
        assert_eq!(
            serde_json::from_str::<Row>(user).unwrap(),
            Row::User {
                seq: 1,
                ts: 1.0,
                text: "a".into(),
                queued_id: None
            }
        );
    }
}
