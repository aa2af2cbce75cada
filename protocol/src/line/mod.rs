//! One transcript line: `{"seq":42,"ts":1788546972.6030757,"event":{"type":"assistantText","text":" and"}}`.

mod scan;
mod surrogates;

pub use surrogates::parse_json;

use crate::MAX_SEQ;
use scan::{Head, Str};
use serde_json::{Map, Value};
use std::ops::Range;
use std::sync::OnceLock;

/// Why a line could not be read. Every variant names what was wrong, never panics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// Not a JSON object (the parser's message).
    #[error("not a JSON object: {0}")]
    NotJson(String),
    /// No `seq`, or one that is not a whole number from 1 to [`MAX_SEQ`].
    #[error("line has no numeric `seq` from 1 to 2^53-1")]
    BadSeq,
    /// No `ts`, or one that is not a number.
    #[error("line has no numeric `ts`")]
    BadTs,
    /// No `event`, or one that is not an object.
    #[error("line has no `event` object")]
    NoEvent,
    /// The event has no `type`, or one that is not a string.
    #[error("event has no string `type`")]
    NoType,
    /// A raw CR or LF inside the line (JSON allows both as whitespace between tokens). An SSE
    /// `data:` field ends at either, so such a line could not travel on `/events` as it travels
    /// on `/transcript`: one definition of a line refuses it everywhere.
    #[error("line holds a raw CR or LF (allowed in JSON whitespace, but a line is one line of text on every route): escape it or remove it")]
    Multiline,
    /// A raw line whose `folded` field claims the lines after it ([`crate::check_raw`]).
    #[error(
        "its `folded` field claims the lines after it (only a coalesced page's lines have one)"
    )]
    Folded,
}

impl LineError {
    /// The error for text `serde_json` could not read, its message [`shortened`]: a parser's
    /// message may quote a whole string of the input (`invalid type: string "..."`), and an
    /// answer from a proxy may hold a string of hundreds of megabytes.
    pub fn not_json(e: &serde_json::Error) -> LineError {
        LineError::NotJson(shortened(&e.to_string()))
    }
}

/// 16 hex digits of the 64-bit FNV-1a hash of `bytes`, the same on every platform and build
/// ([`Line::fingerprint`], [`crate::file_id`]).
pub fn fingerprint(bytes: &[u8]) -> String {
    let mut hash = Fingerprint::default();
    hash.update(bytes);
    hash.finish()
}

/// A [`fingerprint`] taken a piece at a time: of a line too long to hold whole.
#[derive(Debug, Clone, Copy)]
pub struct Fingerprint(u64);

impl Default for Fingerprint {
    fn default() -> Self {
        Fingerprint(0xcbf2_9ce4_8422_2325)
    }
}

impl Fingerprint {
    /// Takes in the next bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0 = bytes.iter().fold(self.0, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    }

    /// The fingerprint of every byte taken in, as [`fingerprint`] writes it.
    pub fn finish(&self) -> String {
        format!("{:016x}", self.0)
    }
}

/// The longest message, in characters, that an error built from what came over the network
/// keeps: enough to say what was wrong, never the bulk of an answer.
pub const MESSAGE_CHARS: usize = 200;

/// `text` cut to [`MESSAGE_CHARS`] characters, with `…` where it was cut.
pub fn shortened(text: &str) -> String {
    match text.char_indices().nth(MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// The event types the protocol names. Anything else is [`EventKind::Unknown`]: kept, shown as
/// unknown, and written back byte-for-byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// `userMessage`: a message the user sent.
    UserMessage,
    /// `assistantText`: a delta of the assistant's reply.
    AssistantText,
    /// `usageDelta`: the context's token count.
    UsageDelta,
    /// `status`: the session's status (`working`, `idle`, ...).
    Status,
    /// `settings`: the model or the permission mode changed.
    Settings,
    /// `messageQueued`: a message waiting to be sent.
    MessageQueued,
    /// `toolCall`: a tool called, with its input.
    ToolCall,
    /// `toolResult`: a tool's output, for an earlier call.
    ToolResult,
    /// `command`: a command line, then its output.
    Command,
    /// `compacting`: the context is being compacted, or is done.
    Compacting,
    /// `error`: an error the agent reported.
    Error,
    /// Any other `type`.
    Unknown,
}

impl EventKind {
    /// The kind for an event's `type` string.
    pub fn from_type(ty: &str) -> Self {
        match ty {
            "userMessage" => Self::UserMessage,
            "assistantText" => Self::AssistantText,
            "usageDelta" => Self::UsageDelta,
            "status" => Self::Status,
            "settings" => Self::Settings,
            "messageQueued" => Self::MessageQueued,
            "toolCall" => Self::ToolCall,
            "toolResult" => Self::ToolResult,
            "command" => Self::Command,
            "compacting" => Self::Compacting,
            "error" => Self::Error,
            _ => Self::Unknown,
        }
    }
}

/// A parsed transcript line that keeps the exact text it was parsed from.
///
/// The cache stores [`Line::raw`], never a re-serialization, so what goes to disk is what the
/// server sent. Equality ([`PartialEq`]) is *parsed* equality over `seq`, `ts` and the whole
/// event (the probe's comparison, design.md decision 3); two lines that differ only in key order
/// or whitespace are equal, two that differ in the last bit of `ts` are not.
#[derive(Debug, Clone)]
pub struct Line {
    raw: Box<str>,
    seq: u64,
    ts: f64,
    kind: EventKind,
    /// Where the event object lies in `raw`.
    event_at: Range<usize>,
    /// The event's fields the hot paths read, without building the event.
    head: Head,
    /// The event, built the first time something asks for it: paging and folding streamed
    /// text read only the head, so a line is parsed once, not into a map of every field.
    event: OnceLock<Box<Map<String, Value>>>,
}

/// What [`Line::parse`] reads from a line's text.
struct Parts {
    seq: u64,
    ts: f64,
    kind: EventKind,
    event_at: Range<usize>,
    head: Head,
}

impl Parts {
    fn read(raw: &str) -> Result<Parts, LineError> {
        let top = scan::top(raw).map_err(|e| LineError::not_json(&e))?;
        let seq = top
            .seq
            .as_ref()
            .and_then(Value::as_u64)
            .filter(|s| (1..=MAX_SEQ).contains(s))
            .ok_or(LineError::BadSeq)?;
        let ts = top
            .ts
            .as_ref()
            .and_then(Value::as_f64)
            .ok_or(LineError::BadTs)?;
        let event = top.event.ok_or(LineError::NoEvent)?.get();
        let start = event.as_ptr() as usize - raw.as_ptr() as usize;
        let event_at = start..start + event.len();
        let head = scan::head(raw, event_at.clone()).map_err(|e| match e.is_data() {
            true => LineError::NoEvent,
            false => LineError::not_json(&e),
        })?;
        let kind = match &head.ty {
            Some(ty) => EventKind::from_type(ty.get(raw)),
            None => return Err(LineError::NoType),
        };
        Ok(Parts {
            seq,
            ts,
            kind,
            event_at,
            head,
        })
    }
}

impl Line {
    /// Parses one line of JSON text (without its newline), keeping the text.
    ///
    /// The one definition of a valid line, for every route and both ends: a JSON object with a
    /// `seq` of 1 or more, a numeric `ts` and an `event` object with a string `type`, holding no
    /// raw CR or LF (a trailing `\n`, `\r\n` or `\r` is the line's end and is dropped). A CR or
    /// LF inside JSON strings is escaped by JSON itself; raw ones could only be whitespace, and
    /// an SSE `data:` field would split there, so they are refused rather than carried by one
    /// route and not the other. A key given twice means its last value, as in a parsed map.
    pub fn parse(raw: &str) -> Result<Line, LineError> {
        let raw = raw.trim_end_matches(['\n', '\r']);
        if memchr::memchr2(b'\n', b'\r', raw.as_bytes()).is_some() {
            return Err(LineError::Multiline);
        }
        // A lone surrogate half fails only the decoding of its string: read again as U+FFFD.
        let parts = match Parts::read(raw) {
            Ok(parts) => parts,
            Err(e) => match surrogates::replace_lone(raw) {
                Some(clean) => Parts::read(&clean)?,
                None => return Err(e),
            },
        };
        Ok(Line {
            raw: raw.into(),
            seq: parts.seq,
            ts: parts.ts,
            kind: parts.kind,
            event_at: parts.event_at,
            head: parts.head,
            event: OnceLock::new(),
        })
    }

    /// Builds a line from its parts, serialized compactly (used for coalesced rows).
    pub fn new(seq: u64, ts: f64, event: Map<String, Value>) -> Result<Line, LineError> {
        let ts = serde_json::Number::from_f64(ts).ok_or(LineError::BadTs)?;
        let value = serde_json::json!({ "seq": seq, "ts": ts, "event": event });
        Line::parse(&value.to_string())
    }

    /// A line's seq read from its head alone, without reading or parsing the rest: `Some` when
    /// the line opens with its `seq` as the first key, as every line the server writes does
    /// (`{"seq":42,...`, spaces and tabs allowed between the tokens), and that seq is one
    /// [`Line::parse`] accepts (an integer from 1 to [`MAX_SEQ`]); `None` otherwise
    /// (another key first, or a head too short to tell).
    ///
    /// For a line too long to read whole: the rest of the line is not checked, so the caller
    /// takes the head at its word. For a valid line it agrees with [`Line::parse`].
    pub fn seq_of_head(head: &[u8]) -> Option<u64> {
        fn skip_ws(bytes: &[u8]) -> &[u8] {
            let n = bytes
                .iter()
                .take_while(|b| matches!(b, b' ' | b'\t'))
                .count();
            &bytes[n..]
        }
        let rest = skip_ws(head).strip_prefix(b"{")?;
        let rest = skip_ws(rest).strip_prefix(b"\"seq\"")?;
        let rest = skip_ws(rest).strip_prefix(b":")?;
        let rest = skip_ws(rest);
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        // JSON numbers have no leading zero; a fraction or exponent makes a float, not a seq.
        if digits == 0 || rest[0] == b'0' {
            return None;
        }
        let (number, rest) = rest.split_at(digits);
        skip_ws(rest).strip_prefix(b",")?;
        let seq = std::str::from_utf8(number).ok()?.parse().ok()?;
        (seq <= MAX_SEQ).then_some(seq)
    }

    /// The exact text this line was parsed from (no trailing newline).
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// A fingerprint of the exact text ([`Line::raw`]): 16 hex digits of its 64-bit FNV-1a
    /// hash, the same on every platform and build. A client that keeps only this of a line can
    /// tell whether a line the server sends later is the same one, byte for byte (a page's saved
    /// screen keeps it for its cursor's line).
    pub fn fingerprint(&self) -> String {
        fingerprint(self.raw.as_bytes())
    }

    /// The line's sequence number, 1 or more.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The line's timestamp, in seconds since the epoch.
    pub fn ts(&self) -> f64 {
        self.ts
    }

    /// The event object, including its `type` (built on first use).
    pub fn event(&self) -> &Map<String, Value> {
        // The parse read this text as an object, so it reads as one again.
        self.event
            .get_or_init(|| {
                // Unlike the head, a field the parse skipped may hold a lone surrogate escape.
                surrogates::parse_json(self.event_text()).unwrap_or_default()
            })
            .as_ref()
    }

    /// The event object's exact text.
    pub fn event_text(&self) -> &str {
        &self.raw[self.event_at.clone()]
    }

    /// The event's kind.
    pub fn kind(&self) -> EventKind {
        self.kind
    }

    /// The event's `type` string as sent (for unknown types too).
    pub fn event_type(&self) -> &str {
        self.head.ty.as_ref().map_or("", |t| t.get(&self.raw))
    }

    /// The event's `text` field, if it has a string one.
    pub fn text(&self) -> Option<&str> {
        self.head.text.as_ref().map(|t| t.get(&self.raw))
    }

    /// The event's `messageId` field, if it has a string one.
    pub fn message_id(&self) -> Option<&str> {
        self.head.message_id.as_ref().map(|t| t.get(&self.raw))
    }

    /// Whether the event has a [`crate::rows::FOLDED`] field (of any value).
    pub(crate) fn has_folded(&self) -> bool {
        self.head.folded
    }

    /// The event's text on either side of its `text` string's content, when that string has no
    /// escapes: two events whose sides are byte for byte the same are equal in every field but
    /// `text` (a fast answer for the row rule; any other pair is compared parsed).
    pub(crate) fn around_text(&self) -> Option<(&str, &str)> {
        let Some(Str::At(text)) = &self.head.text else {
            return None;
        };
        Some((
            &self.raw[self.event_at.start..text.start],
            &self.raw[text.end..self.event_at.end],
        ))
    }
}

impl PartialEq for Line {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
            && self.ts == other.ts
            && (self.event_text() == other.event_text() || self.event() == other.event())
    }
}

/// Splits a JSON array of lines (a `/transcript` response) into lines, keeping each element's
/// exact text.
pub fn parse_page(body: &str) -> Result<Vec<Line>, LineError> {
    let elements: Vec<&serde_json::value::RawValue> =
        serde_json::from_str(body).map_err(|e| LineError::not_json(&e))?;
    elements.into_iter().map(|e| Line::parse(e.get())).collect()
}

/// Joins lines into the JSON array a `/transcript` response carries, each element byte-for-byte.
pub fn page_json<'a>(lines: impl IntoIterator<Item = &'a Line>) -> String {
    let mut out = String::from("[");
    for (i, line) in lines.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(line.raw());
    }
    out.push(']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_is_of_the_exact_text_and_never_changes() {
        let raw =
            r#"{"seq":3,"ts":1.5,"event":{"type":"assistantText","text":"b","messageId":"m"}}"#;
        let line = Line::parse(raw).unwrap();
        // Kept in browsers' storage across versions: the value itself must not change.
        assert_eq!(line.fingerprint(), "aee2900e1b1a94e7");
        let respelled = Line::parse(&raw.replace(':', ": ")).unwrap();
        assert_eq!(respelled, line, "parsed equal");
        assert_ne!(respelled.fingerprint(), line.fingerprint(), "other bytes");
    }

    #[test]
    fn an_event_that_would_not_build_is_refused() {
        // A number past an f64's range, or nesting past serde_json's limit, in a field nothing
        // reads: the event built as an empty map (no `type`), which made two messages' deltas
        // one row and the coalescing of two such deltas panic.
        let line = |extra: &str| {
            Line::parse(&format!(
                r#"{{"seq":1,"ts":1,"event":{{"type":"assistantText","text":"a","messageId":"m","n":{extra}}}}}"#
            ))
        };
        let nested = |depth| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        for extra in ["1e400", "-1e400", "[1e400]", "{\"k\":1e400}", &nested(200)] {
            assert!(line(extra).is_err(), "{:.24}", extra);
            let folded = format!(r#"{{"through":1,"n":{extra}}}"#);
            assert!(line(&folded).is_err(), "{:.24}", folded);
        }
        for extra in [
            "1e300",
            "123456789012345678901234567890",
            "[1.5,{}]",
            &nested(100),
        ] {
            let line = line(extra).unwrap();
            assert_eq!(line.event()["type"], "assistantText", "{:.24}", extra);
            assert_eq!(line.event()["messageId"], "m");
        }
    }

    #[test]
    fn the_seq_of_a_head_agrees_with_the_parse() {
        let written = Line::new(
            42,
            1.5,
            serde_json::json!({"type": "status"})
                .as_object()
                .cloned()
                .unwrap(),
        )
        .unwrap();
        let mut lines = vec![written.raw().to_owned()];
        lines.extend(
            [
                r#"{"seq":1,"ts":1,"event":{"type":"status"}}"#,
                r#"{ "seq" : 9007199254740991 , "ts":1,"event":{"type":"status"}}"#,
                "{\t\"seq\":\t7\t,\"ts\":1,\"event\":{\"type\":\"status\"}}",
                r#"{"ts":1,"seq":3,"event":{"type":"status"}}"#,
            ]
            .map(str::to_owned),
        );
        for raw in &lines {
            let parsed = Line::parse(raw).unwrap().seq();
            let head = Line::seq_of_head(raw.as_bytes());
            assert!(head.is_none() || head == Some(parsed), "{raw}: {head:?}");
            // A head long enough to hold the seq tells it; no prefix tells another.
            for cut in 0..raw.len() {
                let short = Line::seq_of_head(&raw.as_bytes()[..cut]);
                assert!(
                    short.is_none() || short == Some(parsed),
                    "{raw} cut at {cut}"
                );
            }
        }
        assert_eq!(Line::seq_of_head(lines[0].as_bytes()), Some(42));
        assert_eq!(Line::seq_of_head(lines[2].as_bytes()), Some(MAX_SEQ));
        assert_eq!(
            Line::seq_of_head(br#"{"seq":5,"ts":1,"event":{"type":"to"#),
            Some(5)
        );
        // Seqs the parse refuses are no seqs here either.
        for bad in [
            r#"{"seq":0,"ts":1"#,
            r#"{"seq":07,"ts":1"#,
            r#"{"seq":-3,"ts":1"#,
            r#"{"seq":3.0,"ts":1"#,
            r#"{"seq":3e2,"ts":1"#,
            r#"{"seq":"3","ts":1"#,
            r#"{"seq":18446744073709551616,"ts":1"#,
            r#"{"seq":18446744073709551615,"ts":1"#,
            r#"{"seq":9007199254740992,"ts":1"#,
            r#"{"seq":3}"#,
            r#"["seq",3,"#,
        ] {
            assert_eq!(Line::seq_of_head(bad.as_bytes()), None, "{bad}");
        }
    }
}
