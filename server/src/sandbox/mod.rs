//! `--sandbox`: realistic sessions seeded into the data directory, and an agent that answers.
//!
//! Generation is deterministic (a fixed seed per session) and never overwrites: a session whose
//! transcript exists is left as it is. The long session (`long`) is about 24,000 events and
//! 21 MB, shaped like the seeds' measurements: replies of hundreds of `assistantText` deltas
//! that each carry a few bytes of text under an identifier stack of several hundred bytes
//! (design.md, fold rules F1-F3), with tool calls and results, usage updates, queued messages, a command that
//! waits and then finishes, compaction, an error and an event of a type from the future.

pub mod agent;
mod words;

use crate::session::{self, TRANSCRIPT};
use serde_json::{json, Map, Value};
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::Path;
pub use words::Rng;

/// The long session's id.
pub const LONG: &str = "long";
/// Events in the long session.
pub const LONG_EVENTS: usize = 24_000;
/// The first line's `ts`, with all the digits a real clock gives (design.md, Part A).
const BASE_TS: f64 = 1788546972.6030757;

fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The identifier stack one reply's deltas all carry (constant within a reply, so its deltas
/// are one message by the row rule).
#[derive(Debug, Clone)]
pub struct Reply {
    fields: Map<String, Value>,
}

impl Reply {
    /// A new reply's ids for turn `turn` of `session`.
    pub fn new(rng: &mut Rng, session: &str, turn: u64) -> Reply {
        let thread = rng.uuid();
        let message_id = format!(
            "msg_{session}:{thread}:turn_{turn:04}:item_{:03}:assistant:stream:{}",
            rng.below(40),
            rng.hex(32)
        );
        // The session's id is the same for every reply of a session.
        let mut per_session = Rng::new(session.bytes().fold(7, |h, b| h * 31 + b as u64));
        let fields = obj(json!({
            "messageId": message_id,
            "provenance": {
                "messageId": format!("{message_id}:{}", rng.uuid()),
                "requestId": format!("req_{}", rng.hex(26)),
                "traceId": rng.hex(32),
                "spanId": rng.hex(16),
                "source": "agent-host",
                "channel": "stream",
                "model": "claude-sonnet-4-5-20250929",
            },
            "threadId": format!("thr_{thread}"),
            "turnId": format!("turn_{}", rng.uuid()),
            "itemId": format!("item_{}", rng.uuid()),
            "sessionId": format!("ses_{}", per_session.uuid()),
            "role": "assistant",
            "contentIndex": 0,
            "createdAt": format!("2026-09-04T{:02}:{:02}:{:02}.{:03}Z",
                rng.below(24), rng.below(60), rng.below(60), rng.below(1000)),
        }));
        Reply { fields }
    }

    /// One delta of this reply.
    pub fn delta(&self, text: &str) -> Map<String, Value> {
        let mut event = Map::with_capacity(self.fields.len() + 2);
        event.insert("type".into(), "assistantText".into());
        event.insert("text".into(), text.into());
        event.extend(self.fields.clone());
        event
    }
}

/// Writes a generated transcript line by line with consecutive seqs and growing `ts`.
pub struct Script<W: Write> {
    out: W,
    /// The generator's randomness (deterministic).
    pub rng: Rng,
    id: String,
    seq: u64,
    ts: f64,
    turn: u64,
    context: u64,
    queued: u64,
}

impl<W: Write> Script<W> {
    /// A script for session `id` writing to `out`, seeded by `seed`.
    pub fn new(out: W, id: &str, seed: u64) -> Script<W> {
        Script {
            out,
            rng: Rng::new(seed),
            id: id.into(),
            seq: 0,
            ts: BASE_TS,
            turn: 0,
            context: 8_000,
            queued: 0,
        }
    }

    /// Lines written so far.
    pub fn events(&self) -> u64 {
        self.seq
    }

    fn emit(&mut self, event: Value, gap: f64) -> io::Result<()> {
        self.seq += 1;
        self.ts += gap * (0.5 + self.rng.unit());
        let line = json!({ "seq": self.seq, "ts": self.ts, "event": event });
        serde_json::to_writer(&mut self.out, &line)?;
        self.out.write_all(b"\n")
    }

    /// Any event (a map with `type`), after a short pause.
    pub fn event(&mut self, event: Value) -> io::Result<()> {
        self.emit(event, 0.4)
    }

    /// The session's settings.
    pub fn settings(&mut self, model: &str, mode: &str) -> io::Result<()> {
        self.event(json!({"type": "settings", "model": model, "permissionMode": mode}))
    }

    /// The agent's status.
    pub fn status(&mut self, status: &str) -> io::Result<()> {
        self.event(json!({"type": "status", "status": status}))
    }

    /// A user message, after the user has read and typed for a while.
    pub fn user(&mut self, text: &str) -> io::Result<()> {
        self.turn += 1;
        self.emit(json!({"type": "userMessage", "text": text}), 40.0)
    }

    /// A message typed while the agent works; returns its id for [`Script::dequeue`].
    pub fn queue(&mut self, text: &str) -> io::Result<String> {
        self.queued += 1;
        let id = format!("q_{}_{}", self.id, self.queued);
        self.emit(
            json!({"type": "messageQueued", "id": id, "text": text}),
            3.0,
        )?;
        Ok(id)
    }

    /// The agent reads a queued message: the `userMessage` that resolves it.
    pub fn dequeue(&mut self, id: &str, text: &str) -> io::Result<()> {
        self.turn += 1;
        self.event(json!({"type": "userMessage", "text": text, "queuedId": id}))
    }

    /// A tool call and its result.
    pub fn tool(&mut self, name: &str, input: Value, output: &str, error: bool) -> io::Result<()> {
        let id = format!("call_{}", self.rng.hex(20));
        self.event(json!({"type": "toolCall", "id": id, "name": name, "input": input}))?;
        let mut result = json!({"type": "toolResult", "id": id, "output": output});
        if error {
            result["isError"] = true.into();
        }
        self.emit(result, 2.0)
    }

    /// A streamed reply of `deltas` deltas (with the identifier stack when `ids`), then usage.
    pub fn reply(&mut self, deltas: usize, ids: bool) -> io::Result<()> {
        let reply = Reply::new(&mut self.rng, &self.id, self.turn);
        let mut prev = String::new();
        for _ in 0..deltas {
            let text = words::delta(&mut self.rng, &prev);
            let event = if ids {
                Value::Object(reply.delta(&text))
            } else {
                json!({"type": "assistantText", "text": text})
            };
            self.emit(event, 0.045)?;
            prev = text;
        }
        self.context += deltas as u64 * 3 + self.rng.below(2_000);
        let usage = json!({"type": "usageDelta", "context": self.context, "output": deltas * 3});
        self.event(usage)
    }

    /// A whole exchange: the user asks, the agent works (tools, then a reply), goes idle.
    pub fn exchange(
        &mut self,
        ask: &str,
        tools: usize,
        deltas: usize,
        ids: bool,
    ) -> io::Result<()> {
        self.user(ask)?;
        self.status("working")?;
        for _ in 0..tools {
            let (name, input, output) = words::tool_use(&mut self.rng);
            self.tool(name, input, &output, false)?;
        }
        self.reply(deltas, ids)?;
        self.status("idle")
    }

    /// Flushes and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Writes the long session's transcript (about `events` lines) to `out`.
pub fn write_long<W: Write>(out: W, id: &str, events: usize) -> io::Result<W> {
    let mut s = Script::new(out, id, 0x5eed_1006);
    s.settings("claude-sonnet-4-5", "default")?;
    let target = events as u64;
    let mut milestones = 0;
    while s.events() + 40 < target {
        let progress = s.events() * 10 / target;
        let deltas = 150 + s.rng.below(300) as usize;
        let ask = words::ask(&mut s.rng);
        match (progress, milestones) {
            (2, 0) => {
                // A message typed while the agent works, read when the reply ends.
                s.user(&ask)?;
                s.status("working")?;
                s.reply(deltas / 2, true)?;
                let later = words::ask(&mut s.rng);
                let id = s.queue(&later)?;
                s.reply(deltas / 2, true)?;
                s.status("idle")?;
                s.dequeue(&id, &later)?;
                s.status("working")?;
                s.reply(deltas, true)?;
                s.status("idle")?;
            }
            (4, 1) => {
                s.settings("claude-opus-4-1", "acceptEdits")?;
                s.event(json!({"type": "command", "id": "cmd_review", "command": "/review", "done": false}))?;
                s.status("waiting")?;
                s.event(json!({"type": "command", "id": "cmd_review", "command": "/review", "done": true,
                    "output": "Review finished: 3 suggestions."}))?;
                s.exchange(&ask, 1, deltas, true)?;
            }
            (5, 2) => {
                s.event(json!({"type": "reasoningSummary", "text": "A type this client does not know yet.",
                    "detail": {"tokens": 1234, "effort": "high"}}))?;
                s.exchange(&ask, 0, deltas, true)?;
            }
            (6, 3) => {
                s.event(json!({"type": "compacting", "active": true}))?;
                s.event(json!({"type": "compacting", "active": false}))?;
                s.exchange(&ask, 2, deltas, true)?;
            }
            (7, 4) => {
                s.user(&ask)?;
                s.status("working")?;
                s.reply(deltas / 3, true)?;
                s.event(json!({"type": "error", "message": "stream interrupted: upstream 529 overloaded, retrying"}))?;
                s.reply(deltas, true)?;
                s.status("idle")?;
            }
            _ => {
                let tools = s.rng.below(4) as usize;
                s.exchange(&ask, tools, deltas, true)?;
                continue;
            }
        }
        milestones += 1;
    }
    while s.events() < target {
        s.user("thanks, that's all for today")?;
        s.status("working")?;
        let left = (target - s.events()).saturating_sub(2) as usize;
        s.reply(left.max(1), true)?;
        s.status("idle")?;
    }
    s.finish()
}

type Short = fn(&mut Script<BufWriter<File>>) -> io::Result<()>;

/// The short sessions: id, optional title from `meta.json`, script.
fn shorts() -> Vec<(&'static str, Option<&'static str>, Short)> {
    vec![
        ("welcome", None, |s| {
            s.settings("claude-sonnet-4-5", "default")?;
            s.exchange(
                "Hi! What can you help me with in this repository?",
                0,
                60,
                false,
            )
        }),
        ("fix-build", None, |s| {
            s.settings("claude-sonnet-4-5", "acceptEdits")?;
            s.user("The build fails on main since yesterday, can you fix it?")?;
            s.status("working")?;
            s.tool("bash", json!({"command": "cargo build"}),
                "error[E0308]: mismatched types\n  --> src/page.rs:42:17\n   |\n42 |     let limit: u32 = query.limit;\n   |                ---   ^^^^^^^^^^^ expected `u32`, found `usize`", true)?;
            s.tool(
                "edit",
                json!({"path": "src/page.rs", "old": "let limit: u32", "new": "let limit: usize"}),
                "ok",
                false,
            )?;
            s.tool(
                "bash",
                json!({"command": "cargo build"}),
                "Finished `dev` profile in 4.21s",
                false,
            )?;
            s.reply(120, true)?;
            s.status("idle")?;
            s.exchange("Great. Can you add a test for it?", 2, 90, true)
        }),
        ("queued", None, |s| {
            s.settings("claude-haiku-4-5", "default")?;
            s.user("Summarise the design doc in five bullets.")?;
            s.status("working")?;
            s.reply(40, false)?;
            let id = s.queue("Also list the open questions.")?;
            s.reply(40, false)?;
            s.status("idle")?;
            s.dequeue(&id, "Also list the open questions.")?;
            s.status("working")?;
            s.reply(70, false)?;
            s.status("idle")?;
            s.queue("And who owns each one?").map(|_| ())
        }),
        ("waiting", None, |s| {
            s.settings("claude-sonnet-4-5", "plan")?;
            s.exchange("Plan the migration to the new storage API.", 1, 80, true)?;
            s.event(json!({"type": "command", "id": "cmd_deploy", "command": "/deploy staging", "done": false}))?;
            s.status("waiting")
        }),
        ("unicode", Some("Ünïcödé, emoji and \"quotes\""), |s| {
            s.user("Translate „good morning“ into 日本語 and add an emoji 🌅")?;
            s.status("working")?;
            for text in [
                "おはよう",
                "ございます",
                " 🌅",
                "\n\n",
                "(\"good",
                " morning\")",
                " — done ✓",
            ] {
                s.event(json!({"type": "assistantText", "text": text}))?;
            }
            s.status("idle")
        }),
    ]
}

fn write_file(
    dir: &Path,
    f: impl FnOnce(BufWriter<File>) -> io::Result<BufWriter<File>>,
) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{TRANSCRIPT}.sandbox"));
    let out = f(BufWriter::new(File::create(&tmp)?))?;
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    fs::rename(&tmp, dir.join(TRANSCRIPT))
}

/// Seeds every sandbox session missing from `data`; existing ones are left as they are.
pub fn seed(data: &Path) -> io::Result<()> {
    for (i, (id, title, script)) in shorts().into_iter().enumerate() {
        let dir = session::dir(data, id);
        if dir.join(TRANSCRIPT).exists() {
            continue;
        }
        write_file(&dir, |out| {
            let mut s = Script::new(out, id, 0x5eed_0000 + i as u64);
            script(&mut s)?;
            s.finish()
        })?;
        if let Some(title) = title {
            fs::write(
                dir.join(session::META),
                json!({ "title": title }).to_string(),
            )?;
        }
    }
    let dir = session::dir(data, LONG);
    if !dir.join(TRANSCRIPT).exists() {
        write_file(&dir, |out| write_long(out, LONG, LONG_EVENTS))?;
    }
    Ok(())
}
