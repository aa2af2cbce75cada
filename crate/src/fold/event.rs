//! A line's event, read into the shape the README's table gives it.

use crate::protocol::{shortened, EventKind, Line};
use serde::Deserialize;
use serde_json::Value;

/// A transcript event with its fields read. Fields the table marks optional are `Option`s;
/// extra fields are ignored (they stay in the line's raw text).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `userMessage`: the user's message; `queued_id` resolves a `messageQueued`.
    UserMessage {
        /// The message.
        text: String,
        /// The `messageQueued` id this message was delivered from.
        queued_id: Option<String>,
    },
    /// `assistantText`: one streamed delta (or a coalesced run of them).
    AssistantText {
        /// The delta's text.
        text: String,
        /// The message the delta belongs to.
        message_id: Option<String>,
    },
    /// `usageDelta`: context usage.
    UsageDelta {
        /// Tokens in the context, absolute (not a delta).
        context: u64,
        /// Output tokens, when given.
        output: Option<u64>,
    },
    /// `status`: the agent's state.
    Status {
        /// `idle`, `working`, `waiting`, or whatever the agent says.
        status: String,
    },
    /// `settings`: the session's settings changed.
    Settings {
        /// The model, when it changed.
        model: Option<String>,
        /// The permission mode, when it changed.
        permission_mode: Option<String>,
    },
    /// `messageQueued`: a message waiting until the agent reads it.
    MessageQueued {
        /// The id a later `userMessage`'s `queuedId` names.
        id: String,
        /// The message.
        text: String,
    },
    /// `toolCall`: the agent called a tool.
    ToolCall {
        /// The call's id, which its result names.
        id: String,
        /// The tool's name.
        name: String,
        /// The call's input (an object; `null` when absent).
        input: Value,
    },
    /// `toolResult`: a tool's answer.
    ToolResult {
        /// The call's id.
        id: String,
        /// The answer (usually a string; `null` when absent).
        output: Value,
        /// Whether the tool failed.
        is_error: bool,
    },
    /// `command`: a slash command, waiting until one with the same id is `done`.
    Command {
        /// The command's id.
        id: String,
        /// The command line, when given.
        command: Option<String>,
        /// Whether it finished.
        done: bool,
        /// Its output, when given.
        output: Option<String>,
    },
    /// `compacting`: context compaction started (`true`) or ended.
    Compacting {
        /// Whether compaction is running.
        active: bool,
    },
    /// `error`: an error the agent reported.
    Error {
        /// What went wrong.
        message: String,
    },
    /// A type this build does not know.
    Unknown,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UserMessage {
    text: String,
    queued_id: Option<String>,
}

#[derive(Deserialize)]
struct UsageDelta {
    context: u64,
    output: Option<u64>,
}

#[derive(Deserialize)]
struct Status {
    status: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Settings {
    model: Option<String>,
    permission_mode: Option<String>,
}

#[derive(Deserialize)]
struct MessageQueued {
    id: String,
    text: String,
}

#[derive(Deserialize)]
struct ToolCall {
    id: String,
    name: String,
    #[serde(default)]
    input: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolResult {
    id: String,
    #[serde(default)]
    output: Value,
    #[serde(default)]
    is_error: bool,
}

#[derive(Deserialize)]
struct Command {
    id: String,
    command: Option<String>,
    done: bool,
    output: Option<String>,
}

#[derive(Deserialize)]
struct Compacting {
    active: bool,
}

#[derive(Deserialize)]
struct ErrorEvent {
    message: String,
}

/// Reads the fields a shape names from the line's event text, without building the event's map
/// (the map parses and copies every field, and a fold reads most lines once). A text that does
/// not read so is read again from the map's own text: the map keeps a field named twice at its
/// last value, and reads a lone surrogate escape as U+FFFD, where the text's read refuses both;
/// one of the wrong shape fails again, with the same error. (From the map's text, not from the
/// map itself: a shape read from a `Value` as well as from a text is a second deserializer for
/// every shape, about 12 kB of the page's small module.) An error names what is wrong, without
/// a position in a text that is not the line's.
fn read<T: serde::de::DeserializeOwned>(line: &Line) -> Result<T, String> {
    serde_json::from_str(line.event_text()).or_else(|_| {
        let text = serde_json::to_string(line.event()).unwrap_or_default();
        serde_json::from_str(&text).map_err(without_position)
    })
}

/// A read's error without its position, and cut short: it may quote the offending value
/// (a string of a megabyte where a number belongs), and it is a row's text. (Not inlined:
/// `read` has a copy for every shape.)
#[inline(never)]
fn without_position(e: serde_json::Error) -> String {
    // (serde_json's message is "{what} at line {l} column {c}" when it has a position.)
    let mut message = e.to_string();
    if e.line() != 0 {
        message.truncate(message.rfind(" at line ").unwrap_or(message.len()));
    }
    shortened(&message)
}

impl Event {
    /// Reads a line's event. A known type whose fields do not have the table's shape is an
    /// error naming what is wrong; an unknown type is [`Event::Unknown`].
    pub fn read(line: &Line) -> Result<Event, String> {
        // Streamed text reads only the line's head; other kinds read the event's text.
        Ok(match line.kind() {
            EventKind::UserMessage => {
                let e: UserMessage = read(line)?;
                Event::UserMessage {
                    text: e.text,
                    queued_id: e.queued_id,
                }
            }
            // Read leniently: any `assistantText` with a string `text` is text, because that is
            // what a message's deltas are joined by (a `messageId` of another type is just not
            // shown).
            EventKind::AssistantText => Event::AssistantText {
                text: line.text().ok_or("`text` is not a string")?.to_owned(),
                message_id: line.message_id().map(str::to_owned),
            },
            EventKind::UsageDelta => {
                let e: UsageDelta = read(line)?;
                Event::UsageDelta {
                    context: e.context,
                    output: e.output,
                }
            }
            EventKind::Status => Event::Status {
                status: read::<Status>(line)?.status,
            },
            EventKind::Settings => {
                let e: Settings = read(line)?;
                Event::Settings {
                    model: e.model,
                    permission_mode: e.permission_mode,
                }
            }
            EventKind::MessageQueued => {
                let e: MessageQueued = read(line)?;
                Event::MessageQueued {
                    id: e.id,
                    text: e.text,
                }
            }
            EventKind::ToolCall => {
                let e: ToolCall = read(line)?;
                Event::ToolCall {
                    id: e.id,
                    name: e.name,
                    input: e.input,
                }
            }
            EventKind::ToolResult => {
                let e: ToolResult = read(line)?;
                Event::ToolResult {
                    id: e.id,
                    output: e.output,
                    is_error: e.is_error,
                }
            }
            EventKind::Command => {
                let e: Command = read(line)?;
                Event::Command {
                    id: e.id,
                    command: e.command,
                    done: e.done,
                    output: e.output,
                }
            }
            EventKind::Compacting => Event::Compacting {
                active: read::<Compacting>(line)?.active,
            },
            EventKind::Error => Event::Error {
                message: read::<ErrorEvent>(line)?.message,
            },
            EventKind::Unknown => Event::Unknown,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(json: &str) -> Result<Event, String> {
        Event::read(&Line::parse(&format!(r#"{{"seq":1,"ts":1,"event":{json}}}"#)).unwrap())
    }

    #[test]
    fn a_text_the_shape_refuses_is_read_as_its_map_reads_it() {
        // A field named twice: its last value, as the map keeps it.
        let call = r#"{"type":"toolCall","id":"a","name":"n","input":{},"id":"b"}"#;
        assert_eq!(
            event(call).unwrap(),
            Event::ToolCall {
                id: "b".into(),
                name: "n".into(),
                input: serde_json::json!({}),
            }
        );
        // A lone surrogate escape: U+FFFD, as the map reads it.
        let message = r#"{"type":"userMessage","text":"a\ud800b"}"#;
        assert_eq!(
            event(message).unwrap(),
            Event::UserMessage {
                text: "a\u{fffd}b".into(),
                queued_id: None,
            }
        );
    }

    #[test]
    fn a_shape_that_does_not_read_is_an_error_naming_what_is_wrong() {
        let no_id = event(r#"{"type":"toolCall","name":"n","input":{}}"#).unwrap_err();
        assert_eq!(no_id, "missing field `id`");
        let wrong = event(r#"{"type":"usageDelta","context":"many"}"#).unwrap_err();
        assert_eq!(wrong, r#"invalid type: string "many", expected u64"#);
        // The value it quotes is cut short: the error is a row's text.
        let big = "x".repeat(100_000);
        let wrong = event(&format!(r#"{{"type":"usageDelta","context":"{big}"}}"#)).unwrap_err();
        assert!(
            wrong.starts_with(r#"invalid type: string "xxx"#),
            "{wrong:.40}"
        );
        assert!(wrong.chars().count() <= 201, "{} bytes", wrong.len());
    }
}
