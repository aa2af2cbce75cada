//! `/events`: the catch-up, then following the file as other processes append to it.
//!
//! A stream does nothing until its file changes: every session folder being followed has one
//! change notification (the `notify` crate; a poll of the file every [`POLL`] where notification
//! cannot be had), shared by all the streams of that session through a [`watch`] counter. On a
//! change each stream reads the complete new lines, at most [`STEP_BYTES`] at a time and only
//! while its client takes what was sent (the stream is polled only while its response is being
//! sent), so what one stream holds is bounded whatever the file does (but for one line, which
//! is sent whole however long). A stream whose client has fallen more than [`CATCH_UP_BYTES`]
//! of lines behind the file is reset (`reason: "behind"`): a reset frame and the newest window,
//! from which the client pages the gap.
//!
//! A file replaced under the same name (another inode), cut shorter, or rewritten in place (the
//! last 256 bytes (`TAIL_CHECK`) before the end read so far changed, or its modification time changed
//! while its length did not; an edit further back that comes with an append is not seen) is the
//! new content: a reset frame (`replaced`) and the new file's newest lines. A
//! deleted file ends the stream. A torn last line waits for its newline, however long it grows.
//!
//! What a stream has queued for its client (the catch-up, a reset's window, the lines a look
//! read) counts against the answer budget ([`crate::answers`]) until the client's connection has
//! taken it all; a catch-up is built in a build turn, as is any look that reads more than
//! [`STEP_BYTES`] or resets. A stream whose new lines the budget cannot hold ends: its client
//! reconnects through its catch-up, which waits (503) until there is room.

use crate::answers::Share;
use crate::transcript::{open_regular, reader, torn, window_in, CatchUp, FileId, Reason, Tail};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream, StreamExt};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use scrollback_protocol::{
    keep_alive_data, Line, TranscriptQuery, CATCH_UP_BYTES, KEEP_ALIVE_EVENT, RESET_EVENT,
};
use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

/// How often a followed file is checked when change notification is not available.
pub const POLL: Duration = Duration::from_millis(50);
/// The most bytes of new lines one stream reads at once (a longer line is read whole).
pub const STEP_BYTES: u64 = 256 << 10;
/// The most lines a reset's window holds (within [`CATCH_UP_BYTES`] of them, but always the
/// newest line, however long).
pub const RESET_LINES: usize = 200;
/// How many bytes before the end read so far are compared to detect a rewrite in place.
const TAIL_CHECK: u64 = 256;

// ---------------------------------------------------------------------------------------------
// Change notification, one per followed session folder.

/// The change notifications of every followed file, and the streams' counters (`/stats`).
pub struct Watchers {
    shared: Arc<Shared>,
}

struct Shared {
    /// Followed session folders; an entry lives while a stream holds its [`Watched`]. The
    /// notifier's thread moves an entry's counter through its own hold on the sender, never by
    /// taking a hold on the [`Watched`]: the last hold let go there would unwatch the folder on
    /// the very thread that has to answer the unwatch, under these locks (a deadlock).
    folders: Mutex<HashMap<PathBuf, Folder>>,
    /// The one notifier (`None` when the platform gave none: every folder is polled). Locked
    /// around every change to what is watched, so a watch and an unwatch never cross.
    notifier: Mutex<Option<RecommendedWatcher>>,
    polled: AtomicBool,
    streams: AtomicU64,
    looks: AtomicU64,
}

/// A followed folder in the registry: its [`Watched`] (while a stream holds it) and its counter.
struct Folder {
    watched: Weak<Watched>,
    tx: Arc<watch::Sender<u64>>,
}

impl Default for Watchers {
    fn default() -> Self {
        Watchers::new()
    }
}

impl Watchers {
    /// A registry with the platform's notifier (polling if there is none).
    pub fn new() -> Watchers {
        let shared = Arc::new_cyclic(|weak: &Weak<Shared>| {
            let weak = weak.clone();
            let notifier =
                notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                    let (Ok(event), Some(shared)) = (event, weak.upgrade()) else {
                        return;
                    };
                    // Opening a file (a stream's own look, a page being read) changes nothing.
                    if let notify::EventKind::Access(access) = event.kind {
                        if !matches!(
                            access,
                            notify::event::AccessKind::Close(notify::event::AccessMode::Write)
                        ) {
                            return;
                        }
                    }
                    shared.changed(&event.paths);
                })
                .ok();
            Shared {
                folders: Mutex::default(),
                polled: AtomicBool::new(notifier.is_none()),
                notifier: Mutex::new(notifier),
                streams: AtomicU64::new(0),
                looks: AtomicU64::new(0),
            }
        });
        Watchers { shared }
    }

    /// The change counter of the session folder holding `path` (a transcript), shared with
    /// every other stream of that session.
    pub fn watch(&self, path: &Path) -> Arc<Watched> {
        let folder = path.parent().unwrap_or(path).to_path_buf();
        let mut notifier = lock(&self.shared.notifier);
        let mut folders = lock(&self.shared.folders);
        if let Some(found) = folders.get(&folder).and_then(|f| f.watched.upgrade()) {
            return found;
        }
        let tx = Arc::new(watch::channel(0u64).0);
        let watched = Arc::new(Watched {
            folder: folder.clone(),
            path: path.to_path_buf(),
            watching: Mutex::new(None),
            tx: tx.clone(),
            shared: Arc::downgrade(&self.shared),
            poller: Mutex::new(None),
        });
        let entry = Folder {
            watched: Arc::downgrade(&watched),
            tx,
        };
        folders.insert(folder.clone(), entry);
        drop(folders);
        let id = std::fs::metadata(&folder).ok().map(|m| FileId::of(&m));
        watched.watch_folder(&mut notifier, id);
        watched
    }

    /// `{"open": streams, "watched": folders, "looks": reads of a file, "mode": "notify"|"poll"}`.
    pub fn json(&self) -> serde_json::Value {
        let watched = lock(&self.shared.folders)
            .values()
            .filter(|f| f.watched.strong_count() > 0)
            .count();
        let mode = if self.shared.polled.load(Ordering::Relaxed) {
            "poll"
        } else {
            "notify"
        };
        serde_json::json!({
            "open": self.shared.streams.load(Ordering::Relaxed),
            "watched": watched,
            "looks": self.shared.looks.load(Ordering::Relaxed),
            "mode": mode,
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// Moves the counters of the folders `paths` are in (the notifier's thread).
    fn changed(&self, paths: &[PathBuf]) {
        let folders = lock(&self.folders);
        for path in paths {
            for folder in [Some(path.as_path()), path.parent()].into_iter().flatten() {
                if let Some(f) = folders.get(folder) {
                    bump(&f.tx);
                }
            }
        }
    }
}

/// One followed session folder: a counter that moves when anything in it changes.
pub struct Watched {
    folder: PathBuf,
    path: PathBuf,
    /// The identity of the folder being watched (`None` if it was gone then): a notification
    /// follows the folder it was given, not its name, so one replaced under the name must be
    /// watched again.
    watching: Mutex<Option<FileId>>,
    tx: Arc<watch::Sender<u64>>,
    shared: Weak<Shared>,
    poller: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Moves a folder's change counter: its streams wake.
fn bump(tx: &watch::Sender<u64>) {
    tx.send_modify(|n| *n = n.wrapping_add(1));
}

impl Watched {
    /// A receiver that wakes on the next change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.tx.subscribe()
    }

    /// Watches the folder now at the path if it is not the one being watched (another folder
    /// was renamed over it, or swapped in with `RENAME_EXCHANGE`), then wakes every stream: a
    /// change may have come before the new watch. Every stream calls it before each look (a new
    /// one looks once at its start), so none, old or new, stays deaf to the new folder.
    fn follow_folder(self: &Arc<Self>) {
        // A folder gone is a session deleted: its streams end when they look.
        let Ok(meta) = std::fs::metadata(&self.folder) else {
            return;
        };
        let id = Some(FileId::of(&meta));
        // The usual case, the same folder, takes no lock shared with other sessions.
        if *lock(&self.watching) == id {
            return;
        }
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let mut notifier = lock(&shared.notifier);
        // Again under the notifier's lock: another stream may have just watched it.
        if *lock(&self.watching) != id {
            self.watch_folder(&mut notifier, id);
            bump(&self.tx);
        }
    }

    /// Watches the folder at the path, `id` (taken before, so a folder swapped in meanwhile is
    /// seen as another): the old watch goes, then change notification, or a poll of the
    /// transcript where notification cannot be had. Called under the notifier's lock.
    fn watch_folder(
        self: &Arc<Self>,
        notifier: &mut Option<RecommendedWatcher>,
        id: Option<FileId>,
    ) {
        *lock(&self.watching) = id;
        let notified = notifier.as_mut().is_some_and(|n| {
            let _ = n.unwatch(&self.folder);
            n.watch(&self.folder, RecursiveMode::NonRecursive).is_ok()
        });
        if !notified {
            if let Some(shared) = self.shared.upgrade() {
                shared.polled.store(true, Ordering::Relaxed);
            }
            let mut poller = lock(&self.poller);
            if poller.is_none() {
                *poller = Some(tokio::spawn(poll(Arc::downgrade(self))));
            }
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(poller) = lock(&self.poller).take() {
            poller.abort();
        }
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let mut notifier = lock(&shared.notifier);
        let mut folders = lock(&shared.folders);
        // Another stream may have started following the folder since this one was let go.
        if folders
            .get(&self.folder)
            .is_some_and(|f| f.watched.strong_count() == 0)
        {
            folders.remove(&self.folder);
            drop(folders);
            if let Some(n) = notifier.as_mut() {
                let _ = n.unwatch(&self.folder);
            }
        }
    }
}

/// The fallback: one poll loop per followed file (not per stream).
async fn poll(watched: Weak<Watched>) {
    let mut last = None;
    loop {
        tokio::time::sleep(POLL).await;
        let Some(w) = watched.upgrade() else { return };
        let now = std::fs::metadata(&w.path)
            .ok()
            .map(|m| (FileId::of(&m), m.len(), m.modified().ok()));
        if now != last {
            last = now;
            bump(&w.tx);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The catch-up.

/// The stream's catch-up for a client holding everything up to `after`: every line above
/// `after` when they are within [`CATCH_UP_BYTES`] of the file's end, otherwise (or when the
/// client is ahead of the newest line) a reset and the newest window. Reads at most
/// [`CATCH_UP_BYTES`] of lines, however long the file or its lines.
pub fn catch_up(path: &Path, after: u64, at: Option<&str>) -> io::Result<Tail> {
    Ok(catch_up_from_end(path, after, at.map(|at| (after, at)))?.0)
}

/// [`catch_up`], with the bytes just before the end it read to (what a stream compares to see a
/// rewrite in place), from the same open file. With `held` (a line the client holds: its seq
/// and fingerprint, the `after` and `at` of its URL, see `scrollback_protocol::events_query`),
/// a file whose line at that seq is another is a reset (`replaced`): it was replaced since the
/// client read that line (before its check of its tail, or before a reconnect that resumes
/// from a later `Last-Event-ID`).
pub fn catch_up_from_end(
    path: &Path,
    after: u64,
    held: Option<(u64, &str)>,
) -> io::Result<(Tail, Vec<u8>)> {
    let mut file = open_regular(path)?;
    let meta = file.metadata()?;
    let end = torn::complete_end_of(&mut file, &meta)?;
    let id = FileId::of(&meta);
    let from = reader::offset_of_seq(path, &mut file, end, after.saturating_add(1))?;
    // Nothing above `after`: up to date, or ahead when no line has `after` either.
    let ahead =
        after > 0 && from == end && reader::offset_of_seq(path, &mut file, end, after)? == end;
    let replaced = match held {
        Some((seq, at)) if seq > 0 && !ahead => !holds(path, &mut file, end, seq, at)?,
        _ => false,
    };
    let catch_up = if ahead {
        CatchUp::Reset(Reason::Ahead, newest_window(path, &mut file, end)?)
    } else if replaced {
        CatchUp::Reset(Reason::Replaced, newest_window(path, &mut file, end)?)
    } else if behind(&mut file, from, end)? {
        CatchUp::Reset(Reason::Behind, newest_window(path, &mut file, end)?)
    } else {
        CatchUp::Lines(lines_between(path, &mut file, from, end)?)
    };
    let tail = Tail {
        catch_up,
        end,
        file: id,
    };
    Ok((tail, tail_bytes(&mut file, end)?))
}

/// Whether the file's line at `seq` is the one whose fingerprint is `at`.
fn holds(path: &Path, file: &mut File, end: u64, seq: u64, at: &str) -> io::Result<bool> {
    let offset = reader::offset_of_seq(path, file, end, seq)?;
    let found = reader::seq_and_fingerprint_at(path, file, offset, end)?;
    Ok(found.is_some_and(|(s, fingerprint)| s == seq && fingerprint == at))
}

/// The newest window as a reset for `reason`.
pub fn newest(path: &Path, reason: Reason) -> io::Result<Tail> {
    Ok(newest_from_end(path, reason)?.0)
}

fn newest_from_end(path: &Path, reason: Reason) -> io::Result<(Tail, Vec<u8>)> {
    let mut file = open_regular(path)?;
    let meta = file.metadata()?;
    let end = torn::complete_end_of(&mut file, &meta)?;
    let tail = Tail {
        catch_up: CatchUp::Reset(reason, newest_window(path, &mut file, end)?),
        end,
        file: FileId::of(&meta),
    };
    Ok((tail, tail_bytes(&mut file, end)?))
}

/// The complete lines in `[from, end)` (`from` a line start), oldest first.
fn lines_between(path: &Path, file: &mut File, from: u64, end: u64) -> io::Result<Vec<Line>> {
    let mut lines = Vec::new();
    let mut at = from;
    while let Some((bytes, next)) = reader::line_at(file, at, end)? {
        lines.extend(reader::parse(path, at, &bytes));
        at = next;
    }
    Ok(lines)
}

/// Whether a client holding the file up to `from` (a line start) is behind its complete lines,
/// which end at `end`: what follows `from` passes [`CATCH_UP_BYTES`] and is more than one line.
/// One line is sent whole however long it is (the newest window holds it too): a reset to it
/// would skip nothing.
fn behind(file: &mut File, from: u64, end: u64) -> io::Result<bool> {
    Ok(end - from > CATCH_UP_BYTES as u64 && line_start_after(file, from + 1, end)? < end)
}

/// The newest window: the newest lines (at most [`RESET_LINES`]) within [`CATCH_UP_BYTES`] of
/// line text, and always the newest line, however long: `/transcript`'s byte budget.
fn newest_window(path: &Path, file: &mut File, end: u64) -> io::Result<Vec<Line>> {
    let query = TranscriptQuery {
        limit: Some(RESET_LINES),
        bytes: Some(CATCH_UP_BYTES),
        ..TranscriptQuery::default()
    };
    window_in(path, file, end, &query)
}

/// The first line start at or after `at` (scanning, not holding, the bytes before it).
fn line_start_after(file: &mut File, at: u64, end: u64) -> io::Result<u64> {
    if at == 0 {
        return Ok(0);
    }
    let mut pos = at - 1;
    let mut buf = vec![0; 64 << 10];
    file.seek(SeekFrom::Start(pos))?;
    while pos < end {
        let n = file.read(&mut buf[..(end - pos).min(64 << 10) as usize])?;
        if n == 0 {
            break;
        }
        if let Some(i) = buf[..n].iter().position(|&b| b == b'\n') {
            return Ok(pos + i as u64 + 1);
        }
        pos += n as u64;
    }
    Ok(end)
}

// ---------------------------------------------------------------------------------------------
// Following.

/// The `data:` of a reset frame: why, and the seq the window that follows starts at.
fn reset_event(reason: Reason, lines: &[Line]) -> Event {
    let first = lines.first().map_or(0, Line::seq);
    let reason = reason.as_str();
    Event::default()
        .event(RESET_EVENT)
        .data(format!(r#"{{"reason":"{reason}","first":{first}}}"#))
}

fn line_event(line: &Line) -> Event {
    Event::default().id(line.seq().to_string()).data(line.raw())
}

/// What was known of the file when it was last read to `end`.
#[derive(Clone, Default)]
struct Seen {
    /// The bytes just before `end` (up to [`TAIL_CHECK`]).
    tail: Option<Vec<u8>>,
    /// The modification time, taken when the file's length was exactly `end`.
    modified: Option<SystemTime>,
    /// How far the file is known to hold no newline past `end` (a torn line being written):
    /// the next look searches for its end only in what came after.
    unended: u64,
}

struct Follow {
    path: PathBuf,
    id: FileId,
    end: u64,
    seen: Seen,
    last_seq: u64,
    /// More new lines may be waiting (the last read stopped at [`STEP_BYTES`]).
    more: bool,
    pending: VecDeque<Event>,
    /// The budget `pending` holds, let go when the client's connection has taken it all.
    share: Share,
    shutdown: watch::Receiver<bool>,
    changes: watch::Receiver<u64>,
    watched_folder: Arc<Watched>,
    _open: OpenStream,
}

/// Counts an open stream while it lives.
struct OpenStream(Weak<Shared>);

impl Drop for OpenStream {
    fn drop(&mut self) {
        if let Some(shared) = self.0.upgrade() {
            shared.streams.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

enum Change {
    Same(Seen),
    /// A look without a build turn that would read much (a reset, a long line, a backlog):
    /// asked again in a turn.
    Heavy,
    Grew(Vec<Line>, u64, Seen, bool),
    Reset(Tail, Vec<u8>),
    Gone,
}

fn tail_bytes(file: &mut File, end: u64) -> io::Result<Vec<u8>> {
    let from = end.saturating_sub(TAIL_CHECK);
    let mut buf = vec![0; (end - from) as usize];
    file.seek(SeekFrom::Start(from))?;
    file.read_exact(&mut buf)?;
    Ok(buf)
}

/// What happened to the file since the last look (blocking: run off the async threads).
/// Without a build turn (`turn` false), a look that would reset or read more than
/// [`STEP_BYTES`] reads nothing and is [`Change::Heavy`].
fn look(path: &Path, id: FileId, end: u64, seen: Seen, turn: bool) -> Change {
    let reset = |reason| {
        if !turn {
            return Change::Heavy;
        }
        match newest_from_end(path, reason) {
            Ok((tail, bytes)) => Change::Reset(tail, bytes),
            Err(_) => Change::Gone,
        }
    };
    let Ok(mut file) = open_regular(path) else {
        return Change::Gone;
    };
    let Ok(meta) = file.metadata() else {
        return Change::Gone;
    };
    let len = meta.len();
    if FileId::of(&meta) != id || len < end {
        return reset(Reason::Replaced);
    }
    // Rewritten in place: what was read is no longer there.
    let Ok(tail) = tail_bytes(&mut file, end) else {
        return reset(Reason::Replaced);
    };
    if seen.tail.as_ref().is_some_and(|t| *t != tail) {
        return reset(Reason::Replaced);
    }
    let seen = Seen {
        tail: Some(tail),
        ..seen
    };
    if len == end {
        let modified = meta.modified().ok();
        return match seen.modified {
            Some(m) if modified != Some(m) => reset(Reason::Replaced),
            _ => Change::Same(Seen { modified, ..seen }),
        };
    }
    // Only complete lines are news: a torn last line (a writer mid-line) is no change yet,
    // however long it grows, and what was searched for its end is not searched again (a file
    // cut shorter than that is).
    let searched = if seen.unended <= len {
        seen.unended.max(end)
    } else {
        end
    };
    let complete = match reader::complete_end_above(&mut file, searched, len) {
        Ok(Some(complete)) => complete,
        Ok(None) => {
            return Change::Same(Seen {
                modified: None,
                unended: len,
                ..seen
            })
        }
        Err(_) => return reset(Reason::Replaced),
    };
    if !turn && complete - end > STEP_BYTES {
        return Change::Heavy;
    }
    match behind(&mut file, end, complete) {
        Ok(false) => {}
        Ok(true) => return reset(Reason::Behind),
        Err(_) => return reset(Reason::Replaced),
    }
    let mut lines = Vec::new();
    let mut at = end;
    while at < end + STEP_BYTES {
        let Ok(Some((bytes, next))) = reader::line_at(&mut file, at, complete) else {
            break;
        };
        lines.extend(reader::parse(path, at, &bytes));
        at = next;
    }
    if at == end {
        // Nothing could be read (the file changed meanwhile): the next change looks again.
        return Change::Same(Seen {
            modified: None,
            ..seen
        });
    }
    let Ok(tail) = tail_bytes(&mut file, at) else {
        return reset(Reason::Replaced);
    };
    let more = at < complete;
    // Read to the length the modification time goes with: a later change of it alone is a
    // rewrite.
    let modified = if at == len {
        meta.modified().ok()
    } else {
        None
    };
    Change::Grew(
        lines,
        at,
        Seen {
            tail: Some(tail),
            modified,
            // Past the last newline, nothing was: what remains is a torn line.
            unended: if more { 0 } else { len },
        },
        more,
    )
}

/// What an event holds beyond its line's text (its `id:`, `data:` and newlines), about.
const EVENT_OVERHEAD: u64 = 32;

impl Follow {
    /// Queues the events of `catch_up`; the bytes they hold (about).
    fn queue(&mut self, catch_up: CatchUp) -> u64 {
        let mut bytes = 0;
        let lines = match catch_up {
            CatchUp::Lines(lines) => lines,
            CatchUp::Reset(reason, lines) => {
                self.pending.push_back(reset_event(reason, &lines));
                bytes += 2 * EVENT_OVERHEAD;
                // After a reset the client holds only the window: seqs start over from it.
                self.last_seq = 0;
                lines
            }
        };
        for line in &lines {
            if line.seq() > self.last_seq {
                self.pending.push_back(line_event(line));
                bytes += line.raw().len() as u64 + EVENT_OVERHEAD;
                self.last_seq = line.seq();
            }
        }
        bytes
    }

    async fn next(mut self) -> Option<(Event, Follow)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some((event, self));
            }
            // Polled again after the last event was taken: the connection has them all.
            self.share.release();
            if !self.more {
                tokio::select! {
                    changed = self.changes.changed() => changed.ok()?,
                    _ = self.shutdown.changed() => return None,
                }
            }
            if let Some(shared) = self.watched_folder.shared.upgrade() {
                shared.looks.fetch_add(1, Ordering::Relaxed);
            }
            let answers = self.share.answers();
            let mut turn = None;
            let change = loop {
                let (path, id, end, seen) =
                    (self.path.clone(), self.id, self.end, self.seen.clone());
                let watched = self.watched_folder.clone();
                let in_turn = turn.is_some();
                let change = tokio::task::spawn_blocking(move || {
                    watched.follow_folder();
                    look(&path, id, end, seen, in_turn)
                })
                .await
                .ok()?;
                match change {
                    Change::Heavy => turn = Some(answers.build().await),
                    change => break change,
                }
            };
            self.more = false;
            let queued = match change {
                Change::Same(seen) => {
                    self.seen = seen;
                    0
                }
                Change::Gone | Change::Heavy => return None,
                Change::Grew(lines, end, seen, more) => {
                    self.end = end;
                    self.seen = seen;
                    self.more = more;
                    self.queue(CatchUp::Lines(lines))
                }
                Change::Reset(tail, bytes) => self.restart(tail, bytes),
            };
            // No room for them: the stream ends rather than hold more than the budget.
            if queued > 0 && !self.share.grow(queued).await {
                return None;
            }
            drop(turn);
        }
    }

    fn restart(&mut self, tail: Tail, bytes: Vec<u8>) -> u64 {
        self.id = tail.file;
        self.end = tail.end;
        self.seen = Seen {
            tail: Some(bytes),
            ..Seen::default()
        };
        self.queue(tail.catch_up)
    }
}

/// The event stream for a client that holds everything up to `after`, starting with `tail` and
/// the bytes before its end (from [`catch_up_from_end`], read after `watched` was taken so no
/// change falls between them). Its queue is held against the answer budget through `share`:
/// `None` when the catch-up cannot be (the answer is a 503 to retry).
pub async fn events(
    path: PathBuf,
    after: u64,
    (tail, end_bytes): (Tail, Vec<u8>),
    watched: Arc<Watched>,
    shutdown: watch::Receiver<bool>,
    share: Share,
) -> Option<impl Stream<Item = Result<Event, Infallible>>> {
    let shared = watched.shared.clone();
    if let Some(s) = shared.upgrade() {
        s.streams.fetch_add(1, Ordering::Relaxed);
    }
    let mut changes = watched.subscribe();
    // Look once after the catch-up: a change may have come between it and the subscription.
    changes.mark_changed();
    let mut follow = Follow {
        path,
        id: tail.file,
        end: tail.end,
        seen: Seen {
            tail: Some(end_bytes),
            ..Seen::default()
        },
        last_seq: after,
        more: false,
        pending: VecDeque::new(),
        share,
        shutdown,
        changes,
        watched_folder: watched,
        _open: OpenStream(shared),
    };
    let queued = follow.queue(tail.catch_up);
    if queued > 0 && !follow.share.grow(queued).await {
        return None;
    }
    Some(stream::unfold(follow, Follow::next).map(Ok))
}

/// The keep-alive frame (`event: keepalive`, `data: {"every":MS}`): what an `/events` response
/// opens with, and what it sends whenever nothing else was sent for `every_ms`. Opening with it
/// makes the stream live at once in Firefox (which fires an `EventSource`'s `open` only at the
/// body's first byte) and tells the client from the start how long a silence means a dead
/// connection ([`scrollback_protocol::silence_limit_ms`]).
pub fn keep_alive(every_ms: u32) -> Event {
    Event::default()
        .event(KEEP_ALIVE_EVENT)
        .data(keep_alive_data(every_ms))
}

/// The `/events` response: the keep-alive frame, the stream, and the keep-alive frame again
/// after every `every_ms` of silence.
pub fn response(
    stream: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
    every_ms: u32,
) -> Sse<impl Stream<Item = Result<Event, Infallible>> + Send + 'static> {
    let opening = stream::once(async move { Ok(keep_alive(every_ms)) });
    Sse::new(opening.chain(stream)).keep_alive(
        KeepAlive::new()
            .interval(Duration::from_millis(every_ms.into()))
            .event(keep_alive(every_ms)),
    )
}
