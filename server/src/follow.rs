//! `/events`: the catch-up, then following the file as other processes append to it.
//!
//! The file is polled every [`POLL`]: complete new lines are sent as they appear (a torn last
//! line waits for its newline). A file replaced under the same name (another file, or one
//! shorter than what was read) is the new content: the stream sends a reset frame and the new
//! file's newest lines, then follows it. A deleted file ends the stream. Nothing runs for a
//! client that has gone: the stream is polled only while its response is being sent.

use crate::transcript::{self, CatchUp, FileId, Tail};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream, StreamExt};
use scrollback_protocol::{Line, RESET_EVENT};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::fs::File;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::watch;

/// How often a followed file is checked for new lines.
pub const POLL: Duration = Duration::from_millis(50);

/// The `data:` of a reset frame: why, and the seq the window that follows starts at.
fn reset_event(reason: &str, lines: &[Line]) -> Event {
    let first = lines.first().map_or(0, Line::seq);
    Event::default()
        .event(RESET_EVENT)
        .data(format!(r#"{{"reason":"{reason}","first":{first}}}"#))
}

fn line_event(line: &Line) -> Event {
    Event::default().id(line.seq().to_string()).data(line.raw())
}

struct Follow {
    path: PathBuf,
    file: Option<File>,
    id: FileId,
    end: u64,
    last_seq: u64,
    pending: VecDeque<Event>,
    shutdown: watch::Receiver<bool>,
}

enum Change {
    Same,
    Grew(Vec<Line>, u64),
    Replaced(Tail),
    Gone,
}

impl Follow {
    fn queue(&mut self, catch_up: CatchUp, reason: &str) {
        let lines = match catch_up {
            CatchUp::Lines(lines) => lines,
            CatchUp::Reset(lines) => {
                self.pending.push_back(reset_event(reason, &lines));
                // After a reset the client holds only the window: seqs start over from it.
                self.last_seq = 0;
                lines
            }
        };
        for line in &lines {
            if line.seq() > self.last_seq {
                self.pending.push_back(line_event(line));
                self.last_seq = line.seq();
            }
        }
    }

    /// What happened to the file since the last look (blocking: run off the async threads).
    fn look(path: PathBuf, mut file: Option<File>, id: FileId, end: u64) -> (Option<File>, Change) {
        let meta = match std::fs::metadata(&path) {
            Ok(meta) => meta,
            Err(_) => return (file, Change::Gone),
        };
        if FileId::of(&meta) != id || meta.len() < end {
            return match transcript::newest(&path) {
                Ok(tail) => (None, Change::Replaced(tail)),
                Err(_) => (file, Change::Gone),
            };
        }
        if meta.len() == end {
            return (file, Change::Same);
        }
        let opened = match file.take() {
            Some(f) => Ok(f),
            None => File::open(&path),
        };
        let Ok(mut f) = opened else {
            return (None, Change::Same);
        };
        // The handle read must be the file we follow (it could have been replaced just now).
        if f.metadata().map(|m| FileId::of(&m)).ok() != Some(id) {
            return (None, Change::Same);
        }
        match transcript::read_from(&path, &mut f, end) {
            Ok((lines, new_end)) => (Some(f), Change::Grew(lines, new_end)),
            Err(_) => (None, Change::Same),
        }
    }

    async fn next(mut self) -> Option<(Event, Follow)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some((event, self));
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = self.shutdown.changed() => return None,
            }
            let (path, file) = (self.path.clone(), self.file.take());
            let (id, end) = (self.id, self.end);
            let (file, change) =
                tokio::task::spawn_blocking(move || Follow::look(path, file, id, end))
                    .await
                    .ok()?;
            self.file = file;
            match change {
                Change::Same => {}
                Change::Gone => return None,
                Change::Grew(lines, end) => {
                    self.end = end;
                    self.queue(CatchUp::Lines(lines), "");
                }
                Change::Replaced(tail) => {
                    self.id = tail.file;
                    self.end = tail.end;
                    self.queue(tail.catch_up, "replaced");
                }
            }
        }
    }
}

/// The event stream for a client that holds everything up to `after`, starting with `tail`
/// (from [`transcript::events_after`]).
pub fn events(
    path: PathBuf,
    after: u64,
    tail: Tail,
    shutdown: watch::Receiver<bool>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let mut follow = Follow {
        path,
        file: None,
        id: tail.file,
        end: tail.end,
        last_seq: after,
        pending: VecDeque::new(),
        shutdown,
    };
    let reason = match &tail.catch_up {
        CatchUp::Reset(lines) if lines.last().is_none_or(|l| l.seq() < after) => "ahead",
        _ => "behind",
    };
    follow.queue(tail.catch_up, reason);
    stream::unfold(follow, Follow::next).map(Ok)
}

/// The `/events` response: the stream with keep-alive comments.
pub fn response(
    stream: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
) -> Sse<impl Stream<Item = Result<Event, Infallible>> + Send + 'static> {
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
