//! Session state folded from events: what a chat screen shows beside the rows.

use super::event::Event;
use crate::protocol::{Line, SessionSummary};
use serde::{Deserialize, Serialize};

/// The session's state as its events leave it: status, settings, context, the messages still
/// queued, the commands still running, and whether compaction is under way.
///
/// Fed the newest lines in order ([`SessionState::apply`]). Two things the events alone cannot
/// get right, and the engine must do (design.md, Part A): after a reset, [`SessionState::clear_pending`]
/// (a `messageQueued` whose resolving `userMessage` fell in the gap would otherwise wait
/// forever); and after replaying a cache, [`SessionState::apply_summary`] (the session list is
/// newer than the cache). Lines of a type it does not know, or of a shape it cannot read, change
/// nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionState {
    /// The latest `status` (`"idle"` until one is seen).
    pub status: String,
    /// The latest model a `settings` event named (`""` until one is seen).
    pub model: String,
    /// The latest permission mode a `settings` event named (`""` until one is seen).
    pub permission_mode: String,
    /// Tokens in the context, from the latest `usageDelta` (absolute, so one corrects all).
    pub context_tokens: Option<u64>,
    /// Messages queued and not yet delivered (no `userMessage` with their `queuedId` yet),
    /// oldest first.
    pub queued: Vec<Queued>,
    /// Commands started and not yet `done`, oldest first.
    pub waiting_commands: Vec<Waiting>,
    /// When the running compaction started (its event's `ts`), if one is running.
    pub compacting_since: Option<f64>,
}

/// A queued message, waiting for the agent to read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Queued {
    /// The `messageQueued` id.
    pub id: String,
    /// The message.
    pub text: String,
    /// The seq of its `messageQueued` line.
    pub seq: u64,
}

/// A command that has not finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    /// The command's id.
    pub id: String,
    /// The command line (the latest non-empty one given).
    pub command: String,
    /// The seq of its first `command` line.
    pub seq: u64,
}

impl Default for SessionState {
    fn default() -> Self {
        SessionState {
            status: "idle".into(),
            model: String::new(),
            permission_mode: String::new(),
            context_tokens: None,
            queued: Vec::new(),
            waiting_commands: Vec::new(),
            compacting_since: None,
        }
    }
}

impl SessionState {
    /// The state before any event.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies the next line's event.
    pub fn apply(&mut self, line: &Line) {
        let Ok(event) = Event::read(line) else {
            return;
        };
        match event {
            Event::Status { status } => self.status = status,
            Event::Settings {
                model,
                permission_mode,
            } => {
                if let Some(m) = model {
                    self.model = m;
                }
                if let Some(p) = permission_mode {
                    self.permission_mode = p;
                }
            }
            Event::UsageDelta { context, .. } => self.context_tokens = Some(context),
            Event::MessageQueued { id, text } => {
                match self.queued.iter_mut().find(|q| q.id == id) {
                    Some(q) => q.text = text,
                    None => self.queued.push(Queued {
                        id,
                        text,
                        seq: line.seq(),
                    }),
                }
            }
            Event::UserMessage {
                queued_id: Some(id),
                ..
            } => self.queued.retain(|q| q.id != id),
            Event::Command {
                id, command, done, ..
            } => {
                let at = self.waiting_commands.iter().position(|w| w.id == id);
                match (at, done) {
                    (Some(i), true) => {
                        self.waiting_commands.remove(i);
                    }
                    (Some(i), false) => {
                        if let Some(c) = command.filter(|c| !c.is_empty()) {
                            self.waiting_commands[i].command = c;
                        }
                    }
                    (None, false) => self.waiting_commands.push(Waiting {
                        id,
                        command: command.unwrap_or_default(),
                        seq: line.seq(),
                    }),
                    (None, true) => {}
                }
            }
            Event::Compacting { active } => {
                if !active {
                    self.compacting_since = None;
                } else if self.compacting_since.is_none() {
                    self.compacting_since = Some(line.ts());
                }
            }
            _ => {}
        }
    }

    /// Forgets queued messages, waiting commands and a running compaction: what a reset must
    /// do, because the events that resolved them may be in the gap it skipped.
    pub fn clear_pending(&mut self) {
        self.queued.clear();
        self.waiting_commands.clear();
        self.compacting_since = None;
    }

    /// Takes status, model and permission mode from the session list's entry, the newer
    /// measurement than a replayed cache (design.md decision 7).
    pub fn apply_summary(&mut self, summary: &SessionSummary) {
        self.status = summary.status.clone();
        self.model = summary.model.clone();
        self.permission_mode = summary.permission_mode.clone();
    }
}
