//! The sandbox's agent: a posted message is answered by a reply streamed into the transcript,
//! one delta every `--pace-ms`. A message posted while a reply streams is queued
//! (`messageQueued`) and read when the reply ends (a `userMessage` with its `queuedId`).

use super::{words, Reply, Rng};
use crate::App;
use scrollback_protocol::Line;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The most messages queued behind one session's reply.
pub const MAX_QUEUED: usize = 8;
/// The most messages queued behind all the sessions' replies together.
pub const MAX_QUEUED_TOTAL: usize = 64;

/// Sessions with a reply streaming, and the messages queued behind it (at most [`MAX_QUEUED`]
/// per session and [`MAX_QUEUED_TOTAL`] in all: a message past that is refused, not held).
#[derive(Default)]
pub struct Agent {
    busy: Mutex<HashMap<String, VecDeque<(String, String)>>>,
    queued: AtomicU64,
}

impl Agent {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, VecDeque<(String, String)>>> {
        self.busy.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Deltas in a reply to `text`: between 120 and 240, the same for the same text.
fn reply_len(text: &str) -> usize {
    let seed = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    120 + Rng::new(seed).below(121) as usize
}

/// Posts a user message to session `id`: appended at once (or queued while a reply streams),
/// then answered. Returns the line appended. A full queue is `QuotaExceeded` (nothing written).
pub fn post(app: &Arc<App>, id: &str, text: String) -> io::Result<Line> {
    let mut busy = app.agent.lock();
    let total: usize = busy.values().map(VecDeque::len).sum();
    if let Some(queue) = busy.get_mut(id) {
        if queue.len() >= MAX_QUEUED || total >= MAX_QUEUED_TOTAL {
            return Err(io::Error::new(
                io::ErrorKind::QuotaExceeded,
                "the sandbox's queue of messages is full",
            ));
        }
        let n = app.agent.queued.fetch_add(1, Ordering::Relaxed) + 1;
        let queued_id = format!("q_{}_{n}", (crate::transcript::now_ts() * 1000.0) as u64);
        let line = app.append(
            id,
            json!({"type": "messageQueued", "id": queued_id, "text": text}),
        )?;
        queue.push_back((queued_id, text));
        return Ok(line);
    }
    let line = app.append(id, json!({"type": "userMessage", "text": text}))?;
    busy.insert(id.to_owned(), VecDeque::new());
    drop(busy);
    tokio::spawn(run(app.clone(), id.to_owned(), text));
    Ok(line)
}

async fn run(app: Arc<App>, id: String, mut text: String) {
    loop {
        if let Err(e) = reply(&app, &id, &text).await {
            eprintln!("scrollback-server: sandbox reply in {id:?} stopped: {e}");
            app.agent.lock().remove(&id);
            return;
        }
        let mut busy = app.agent.lock();
        let Some((queued_id, next)) = busy.get_mut(&id).and_then(VecDeque::pop_front) else {
            busy.remove(&id);
            return;
        };
        let read = json!({"type": "userMessage", "text": next, "queuedId": queued_id});
        if app.append(&id, read).is_err() {
            busy.remove(&id);
            return;
        }
        text = next;
    }
}

async fn reply(app: &Arc<App>, id: &str, text: &str) -> io::Result<()> {
    let deltas = reply_len(text);
    let mut rng = Rng::new(deltas as u64 ^ text.len() as u64);
    let turn = rng.below(10_000);
    let ids = Reply::new(&mut rng, id, turn);
    let pace = Duration::from_millis(app.config.pace_ms);
    let mut shutdown = app.shutdown.clone();
    app.append(id, json!({"type": "status", "status": "working"}))?;
    let mut prev = String::new();
    for _ in 0..deltas {
        tokio::select! {
            _ = tokio::time::sleep(pace) => {}
            _ = shutdown.changed() => return Err(io::Error::other("server shutting down")),
        }
        let delta = words::delta(&mut rng, &prev);
        app.append(id, Value::Object(ids.delta(&delta)))?;
        prev = delta;
    }
    let context = 12_000 + deltas as u64 * 3;
    app.append(
        id,
        json!({"type": "usageDelta", "context": context, "output": deltas * 3}),
    )?;
    app.append(id, json!({"type": "status", "status": "idle"}))?;
    Ok(())
}
