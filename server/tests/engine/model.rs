//! The engine's randomized model test (the cache's invariants I1-I4 of docs/design.md, checked after every step).
//!
//! Each run is a server transcript on a real file, read through the server library's own
//! transcript functions (`window`, `follow::catch_up`: the code behind `/transcript` and `/events`),
//! and one client: the real engine over a real `MemoryStore`. Steps interleave server appends
//! and long replies, opens (some at a saved anchor), closes, page-backs, absences long enough for
//! a reset, network loss, file replacement, crashes mid-append (a torn tail written into the
//! open chunk), write failures (the store's quota) and wiped storage. A second tab (a second
//! session of the same engine on the same store and id, whose in-process writer lock stands
//! for Web Locks, as in `tabs.rs`) opens, pages back, closes and drops, and the writer goes away
//! while a reader is open (sometimes half-way through a reply), so the reader takes over. After
//! every step, for every open tab:
//!
//! - what is shown is the server's transcript for every seq it claims: the shown lines tile a
//!   contiguous range, each one equal (byte for byte) to the server's line, or for a coalesced
//!   row to the server's coalescing of exactly the seqs it covers; unverified (cached, not yet
//!   probed) rows are the transcript the cache was written from;
//! - the rows are the fold of the shown lines; a live, verified session shows every event;
//! - every chunk in the store is exactly what the server returns for that chunk's own coverage,
//!   and no seq is in two chunks;
//! - at most one open tab writes.
//!
//! `MODEL_RUNS` (default 2000) and `MODEL_SEED` (default: from the clock) override; the count
//! and seed are printed, and a failure names the seed and the steps that led to it.
//!
//! The transport here is in-process (no HTTP) for speed; `http.rs` runs the engine over
//! real HTTP against the real server.

use futures::executor::LocalPool;
use futures::future::{abortable, AbortHandle};
use futures::task::LocalSpawnExt;
use futures::FutureExt;
use scrollback::chunks::coverage::Kind;
use scrollback::chunks::names::parse_chunk_name;
use scrollback::chunks::Cache;
use scrollback::engine::{Change, Config, Engine, Session};
use scrollback::fold::Transcript;
use scrollback::protocol::{catch_up_json, parse_catch_up, CatchUpQuery};
use scrollback::protocol::{
    coalesce, last_seq, page_json, Line, SessionSummary, TranscriptQuery, FOLDED, MAX_LIMIT,
};
use scrollback::store::{MemoryStore, Store};
use scrollback::transport::{
    CatchUp, EventStream, Page, ResetReason, StreamItem, Transport, TransportError, TransportResult,
};
use scrollback_server::transcript::{self, CatchUp as Backlog, FileId, Reason};
use serde_json::{json, Map, Value};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};

const ID: &str = "s";

// ---- a small deterministic random source ----------------------------------------------------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

// ---- the server side: a transcript file and its versions ------------------------------------

/// The server's file for session `s`, and every version it has had (a replaced file is a new
/// version; a copy of each is kept so a stale cache can be checked against what it came from).
struct ServerFile {
    dir: PathBuf,
    lines: Vec<Line>,
    version: usize,
    /// How each event's ts is made: a replaced file has other timestamps, like a re-seeded one.
    ts_base: f64,
    /// Lines not yet written.
    pending: String,
    /// The lines of every earlier version.
    old: Vec<Vec<Line>>,
}

impl ServerFile {
    fn path(&self) -> PathBuf {
        self.dir.join("data").join(ID).join("transcript.jsonl")
    }
    fn version_path(&self, version: usize) -> PathBuf {
        self.dir.join(format!("v{version}.jsonl"))
    }

    fn create(dir: &Path, rng: &mut Rng) -> ServerFile {
        std::fs::create_dir_all(dir.join("data").join(ID)).unwrap();
        let mut file = ServerFile {
            dir: dir.to_path_buf(),
            lines: Vec::new(),
            version: 0,
            ts_base: 1_788_546_972.0,
            pending: String::new(),
            old: Vec::new(),
        };
        std::fs::write(file.path(), b"").unwrap();
        let n = rng.below(120);
        file.append_mixed(rng, n as usize);
        file.flush();
        file
    }

    fn event(&mut self, rng: &mut Rng, seq_hint: u64) -> Map<String, Value> {
        let v = match rng.below(9) {
            0 => json!({"type": "userMessage", "text": format!("question {seq_hint}")}),
            1 => {
                let status = ["idle", "working", "waiting"][rng.below(3) as usize];
                json!({"type": "status", "status": status})
            }
            2 => json!({"type": "usageDelta", "context": rng.below(100_000)}),
            3 => {
                json!({"type": "toolCall", "id": format!("t{}", rng.below(5)), "name": "read", "input": {"path": "a"}})
            }
            4 => json!({"type": "toolResult", "id": format!("t{}", rng.below(5)), "output": "ok"}),
            5 => {
                json!({"type": "messageQueued", "id": format!("q{}", rng.below(3)), "text": "later"})
            }
            6 => json!({"type": "somethingNew", "x": [1, 2, 3]}),
            _ => json!({"type": "assistantText", "text": word(rng)}),
        };
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn push(&mut self, event: Map<String, Value>, rng: &mut Rng) {
        let seq = self.lines.len() as u64 + 1;
        // Timestamps with every bit of precision used (the probe compares them to the last bit).
        let ts = self.ts_base + seq as f64 * 0.37 + (rng.below(1 << 20) as f64) / 3_000_001.0;
        // One serialization (what a writer does), then the line parsed from its own text.
        let raw = format!(
            r#"{{"seq":{seq},"ts":{},"event":{}}}"#,
            serde_json::Number::from_f64(ts).unwrap(),
            Value::Object(event)
        );
        let line = Line::parse(&raw).unwrap();
        self.pending.push_str(line.raw());
        self.pending.push('\n');
        self.lines.push(line);
    }

    /// Writes the lines pushed since the last flush, in one append (a writer's burst).
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(self.path())
            .unwrap();
        f.write_all(self.pending.as_bytes()).unwrap();
        self.pending.clear();
    }

    /// Writes the first `n` of the lines pushed since the last flush, the rest left for the
    /// next flush: a reply the writer has streamed half of when something happens.
    fn flush_part(&mut self, n: usize) {
        let cut = match n {
            0 => 0,
            _ => (self.pending.match_indices('\n').nth(n - 1))
                .map_or(self.pending.len(), |(i, _)| i + 1),
        };
        let rest = self.pending.split_off(cut);
        self.flush();
        self.pending = rest;
    }

    fn append_mixed(&mut self, rng: &mut Rng, n: usize) {
        for _ in 0..n {
            let seq = self.lines.len() as u64 + 1;
            let e = self.event(rng, seq);
            self.push(e, rng);
        }
    }

    /// A streamed reply: many deltas, sometimes of one message id, sometimes with a delta that
    /// is not a clean append (a repeat), which must not fold.
    fn reply(&mut self, rng: &mut Rng, deltas: usize) {
        let message = rng.chance(50).then(|| format!("m{}", rng.below(1000)));
        let mut prev = String::new();
        for _ in 0..deltas {
            let text = if rng.chance(3) && !prev.is_empty() {
                prev.clone()
            } else {
                word(rng)
            };
            let mut e = Map::new();
            e.insert("type".into(), "assistantText".into());
            e.insert("text".into(), Value::String(text.clone()));
            if let Some(m) = &message {
                e.insert("messageId".into(), Value::String(m.clone()));
            }
            self.push(e, rng);
            prev = text;
        }
    }

    /// Replaces the file with another transcript under the same id (different timestamps, so
    /// the check can tell): shorter (numbered from 1 again), as long with other content, or
    /// longer than the file it replaces.
    fn replace(&mut self, rng: &mut Rng, size: Size) {
        let len = self.lines.len() as u64;
        std::fs::copy(self.path(), self.version_path(self.version)).unwrap();
        self.version += 1;
        self.ts_base += 1000.0 + rng.below(1000) as f64;
        self.old.push(std::mem::take(&mut self.lines));
        let tmp = self.dir.join("replacement.jsonl");
        std::fs::write(&tmp, b"").unwrap();
        std::fs::rename(&tmp, self.path()).unwrap();
        let n = match size {
            Size::Any => rng.below(250),
            Size::Shorter => rng.below(len),
            Size::Same => len,
            Size::Longer => len + rng.range(1, 250),
        } as usize;
        if rng.chance(50) {
            self.append_mixed(rng, n);
        } else {
            self.reply(rng, n);
        }
        self.flush();
    }

    /// The lines of `version`.
    fn lines_of(&self, version: usize) -> &[Line] {
        match version == self.version {
            true => &self.lines,
            false => &self.old[version],
        }
    }

    /// The path of `version`'s file: the live one or a saved copy.
    fn file_of(&self, version: usize) -> PathBuf {
        if version == self.version {
            self.path()
        } else {
            self.version_path(version)
        }
    }
}

/// The length of a replacement file, against the file it replaces.
#[derive(Debug, Clone, Copy)]
enum Size {
    Any,
    Shorter,
    Same,
    Longer,
}

fn word(rng: &mut Rng) -> String {
    const WORDS: [&str; 12] = [
        " the", " cache", " keeps", " lines", " and", " a", " probe", " checks", " it", ".",
        " Then", "\n",
    ];
    WORDS[rng.below(WORDS.len() as u64) as usize].to_string()
}

// ---- the in-process transport ---------------------------------------------------------------

/// The network between the client and the server library: up or down, and a clock that only
/// moves when the model says time passes.
#[derive(Default)]
struct World {
    data: PathBuf,
    up: Cell<bool>,
    now: Cell<u64>,
    streams: RefCell<Vec<Waker>>,
    sleepers: RefCell<Vec<Waker>>,
}

impl World {
    fn wake(list: &RefCell<Vec<Waker>>) {
        for w in list.borrow_mut().drain(..) {
            w.wake();
        }
    }
    fn path(&self, id: &str) -> PathBuf {
        self.data.join(id).join("transcript.jsonl")
    }
}

#[derive(Clone)]
struct InProcess(Rc<World>);

fn io_error(e: std::io::Error) -> TransportError {
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            TransportError::from_answer(404, r#"{"error":"no such session"}"#, None)
        }
        _ => TransportError::Network(e.to_string()),
    }
}

impl InProcess {
    fn check_up(&self) -> TransportResult<()> {
        match self.0.up.get() {
            true => Ok(()),
            false => Err(TransportError::Network("connection refused".into())),
        }
    }
}

impl Transport for InProcess {
    type Stream = InProcessStream;

    fn server(&self) -> (&str, u16, &str) {
        ("model", 1, "")
    }

    async fn sessions(&self) -> TransportResult<Vec<SessionSummary>> {
        self.check_up()?;
        Ok(Vec::new())
    }

    async fn transcript(&self, id: &str, query: &TranscriptQuery) -> TransportResult<Page> {
        self.check_up()?;
        query.validate().map_err(|e| {
            let body = serde_json::json!({ "error": e.to_string() }).to_string();
            TransportError::from_answer(400, &body, None)
        })?;
        let (lines, file) =
            transcript::window_and_file(&self.0.path(id), query).map_err(io_error)?;
        let bytes = page_json(&lines).len() as u64;
        Ok(Page { lines, bytes, file })
    }

    async fn catch_up(&self, id: &str, query: &CatchUpQuery) -> TransportResult<CatchUp> {
        self.check_up()?;
        let (state, lines, file) =
            transcript::catch_up::catch_up_and_file(&self.0.path(id), query).map_err(io_error)?;
        let summary = SessionSummary {
            id: id.into(),
            title: String::new(),
            status: "idle".into(),
            model: "m".into(),
            permission_mode: "p".into(),
            seq: lines.last().map_or(0, Line::seq),
        };
        // Through the wire format, as the HTTP transports read it.
        let body = catch_up_json(state, &summary, &lines);
        Ok(CatchUp {
            answer: parse_catch_up(&body).map_err(TransportError::from)?,
            bytes: body.len() as u64,
            file,
        })
    }

    async fn delete(&self, _: &str) -> TransportResult<()> {
        Err(TransportError::from_answer(
            405,
            r#"{"error":"not in the model"}"#,
            None,
        ))
    }

    async fn post_message(&self, _: &str, _: &str) -> TransportResult<()> {
        Err(TransportError::from_answer(
            405,
            r#"{"error":"not in the model"}"#,
            None,
        ))
    }

    async fn events(
        &self,
        id: &str,
        after: u64,
        at: Option<&str>,
    ) -> TransportResult<InProcessStream> {
        self.check_up()?;
        let path = self.0.path(id);
        let tail = scrollback_server::follow::catch_up(&path, after, at).map_err(io_error)?;
        let mut stream = InProcessStream {
            world: self.0.clone(),
            path,
            file: tail.file,
            end: tail.end,
            last: after,
            queue: VecDeque::new(),
        };
        stream.queue_backlog(tail.catch_up);
        Ok(stream)
    }

    async fn sleep(&self, _ms: u32) {
        let until = self.0.now.get() + 1;
        let world = self.0.clone();
        futures::future::poll_fn(move |cx| {
            if world.now.get() >= until {
                Poll::Ready(())
            } else {
                world.sleepers.borrow_mut().push(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }
}

/// A live connection: the catch-up, then the file followed as it grows (like the server's
/// follower), until the network drops.
struct InProcessStream {
    world: Rc<World>,
    path: PathBuf,
    /// The file followed and the end of what was read of it (as the server's follower keeps).
    file: FileId,
    end: u64,
    last: u64,
    queue: VecDeque<StreamItem>,
}

impl InProcessStream {
    fn queue_backlog(&mut self, backlog: Backlog) {
        let lines = match backlog {
            Backlog::Lines(lines) => lines,
            Backlog::Reset(reason, lines) => {
                let reason = match reason {
                    Reason::Behind => ResetReason::Behind,
                    Reason::Replaced => ResetReason::Replaced,
                    Reason::Ahead => ResetReason::Ahead,
                };
                self.queue.push_back(StreamItem::Reset(reason));
                self.last = 0;
                lines
            }
        };
        for line in lines {
            if line.seq() > self.last {
                self.last = line.seq();
                self.queue.push_back(StreamItem::Line(line));
            }
        }
    }

    /// The server follower's look at the file: replaced (another file, or shorter than what
    /// was read) means a `replaced` reset and the new file's newest lines.
    fn look(&mut self) -> std::io::Result<()> {
        let meta = std::fs::metadata(&self.path)?;
        if FileId::of(&meta) != self.file || meta.len() < self.end {
            let tail = scrollback_server::follow::newest(&self.path, Reason::Replaced)?;
            self.file = tail.file;
            self.end = tail.end;
            self.queue_backlog(tail.catch_up);
            return Ok(());
        }
        let query = TranscriptQuery {
            after: Some(self.last),
            limit: Some(MAX_LIMIT),
            ..TranscriptQuery::default()
        };
        let lines = transcript::window(&self.path, &query)?;
        self.end = meta.len();
        self.queue_backlog(Backlog::Lines(lines));
        Ok(())
    }
}

impl EventStream for InProcessStream {
    async fn next(&mut self) -> Option<TransportResult<StreamItem>> {
        futures::future::poll_fn(|cx| {
            if let Some(item) = self.queue.pop_front() {
                return Poll::Ready(Some(Ok(item)));
            }
            if !self.world.up.get() {
                return Poll::Ready(Some(Err(TransportError::Network("connection lost".into()))));
            }
            if let Err(e) = self.look() {
                return Poll::Ready(Some(Err(io_error(e))));
            }
            if let Some(item) = self.queue.pop_front() {
                return Poll::Ready(Some(Ok(item)));
            }
            self.world.streams.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

// ---- the client side ------------------------------------------------------------------------

type ModelEngine = Engine<MemoryStore, InProcess>;

/// An open session: the engine's, its run task, and the lines shown as the listener reported
/// them (independent of the engine's own view).
struct Open {
    session: Rc<Session<MemoryStore, InProcess>>,
    run: AbortHandle,
    shown: Rc<RefCell<Vec<Line>>>,
    reset_seen: Cell<bool>,
    /// The server's version what it shows is of: the cache's when it opens, the server's
    /// current one once verified (each tab verifies on its own, so this is per tab).
    version: Cell<usize>,
    /// Cleared since the last check: what it shows now was drawn again, from the cache.
    cleared: Rc<Cell<bool>>,
    /// The listener's calls: every change of the view or of what is shown is one.
    changes: Rc<Cell<u64>>,
    /// What the last check that passed saw (the listener's calls, the version checked
    /// against, the server's version and length): a tab with nothing changed since, on either
    /// side, passes again without the check's cost (two tabs check twice the lines).
    passed: Cell<Option<(u64, usize, usize, usize)>>,
    /// Seen as a reader at a check: a later check that sees it write saw it take over.
    was_reader: Cell<bool>,
}

/// Opens a tab on session `s`, its cache written from the server's `version`.
fn open(
    engine: &ModelEngine,
    pool: &LocalPool,
    file: &ServerFile,
    anchor: Option<u64>,
    version: usize,
) -> Open {
    let summary = SessionSummary {
        id: ID.into(),
        title: String::new(),
        status: "idle".into(),
        model: "m".into(),
        permission_mode: "p".into(),
        seq: file.lines.len() as u64,
    };
    let session = Rc::new(engine.open(summary, anchor).unwrap());
    let shown: Rc<RefCell<Vec<Line>>> = Rc::default();
    let record = shown.clone();
    let cleared: Rc<Cell<bool>> = Rc::default();
    let clear = cleared.clone();
    let changes: Rc<Cell<u64>> = Rc::default();
    let count = changes.clone();
    session.on_change(move |_, change| {
        count.set(count.get() + 1);
        clear.set(clear.get() || matches!(change, Change::Cleared));
        let mut shown = record.borrow_mut();
        match change {
            Change::Newer(lines) => shown.extend_from_slice(lines),
            Change::Older(lines) => {
                let mut all = lines.to_vec();
                all.append(&mut shown);
                *shown = all;
            }
            Change::Cleared => shown.clear(),
            Change::State => {}
        }
    });
    let s = session.clone();
    let (run, handle) = abortable(async move { s.run().await });
    pool.spawner().spawn_local(run.map(drop)).unwrap();
    Open {
        session,
        run: handle,
        shown,
        reset_seen: Cell::new(false),
        version: Cell::new(version),
        cleared,
        changes,
        passed: Cell::new(None),
        was_reader: Cell::new(false),
    }
}

/// How a tab goes away.
#[derive(Debug, Clone, Copy)]
enum Away {
    /// Closed by the app: it flushes and hands the writer role over.
    Close,
    /// Its run dropped where it is (the tab closed by the browser): the role goes with it.
    Drop,
    /// Dropped mid-append: part of its next line left torn in the open chunk.
    Crash,
}

/// Takes `tab` away; answers what happened, and whether a line was torn. Only a writer tears:
/// a reader never writes, and a torn tail under a live writer is no crash's.
fn go_away(
    tab: Open,
    how: Away,
    pool: &mut LocalPool,
    store: &MemoryStore,
    dir: &str,
    file: &ServerFile,
    rng: &mut Rng,
) -> (String, bool) {
    match how {
        Away::Close => {
            tab.session.close();
            ("close".into(), false)
        }
        Away::Drop => {
            tab.run.abort();
            ("drop the running session".into(), false)
        }
        Away::Crash => {
            let wrote = tab.session.with_view(|v| v.writer);
            tab.run.abort();
            drop(tab);
            // The tear is polled first, before the dropped run lets another tab take the role.
            let tear = wrote
                .then(|| pool.run_until(tear_tail(store, dir, file, rng)))
                .flatten();
            let what = tear.as_deref().unwrap_or(match wrote {
                true => "no open chunk",
                false => "a reader: nothing torn",
            });
            (format!("crash mid-append ({what})"), tear.is_some())
        }
    }
}

fn older(pool: &LocalPool, open: &Open) {
    let s = open.session.clone();
    pool.spawner()
        .spawn_local(async move {
            let _ = s.older().await;
        })
        .unwrap();
}

// ---- the checks -----------------------------------------------------------------------------

/// What is shown is the server's transcript (of `version`) for every seq it claims.
fn check_shown(open: &Open, truth: &[Line], current: bool) -> Result<(), String> {
    let shown = open.shown.borrow();
    for w in shown.windows(2) {
        if last_seq(&w[0]) + 1 != w[1].seq() {
            return Err(format!(
                "shown lines do not tile: {} (through {}) then {}",
                w[0].seq(),
                last_seq(&w[0]),
                w[1].seq()
            ));
        }
    }
    for line in shown.iter() {
        let (seq, through) = (line.seq() as usize, last_seq(line) as usize);
        if through > truth.len() {
            return Err(format!(
                "line {seq} (through {through}) shown, the server has {}",
                truth.len()
            ));
        }
        if !line.event().contains_key(FOLDED) && truth[seq - 1].raw() == line.raw() {
            continue;
        }
        let expected = if line.event().contains_key(FOLDED) {
            coalesce(&truth[seq - 1..through])
        } else {
            vec![truth[seq - 1].clone()]
        };
        if expected.len() != 1 || expected[0] != *line || expected[0].raw() != line.raw() {
            return Err(format!(
                "shown line {seq} is not the server's:\n  shown  {}\n  server {}",
                line.raw(),
                expected
                    .iter()
                    .map(Line::raw)
                    .collect::<Vec<_>>()
                    .join("\n         ")
            ));
        }
    }
    open.session.with_view(|view| {
        let folded = Transcript::from_lines(shown.iter()).map_err(|e| e.to_string())?;
        if folded.rows() != view.transcript.rows() {
            return Err("the view's rows are not the fold of the lines shown".into());
        }
        if view.oldest != shown.first().map(Line::seq) && !shown.is_empty() {
            return Err(format!(
                "view.oldest {:?}, shown from {:?}",
                view.oldest,
                shown.first().map(Line::seq)
            ));
        }
        if view.ready && !view.more_history && shown.first().is_some_and(|l| l.seq() != 1) {
            return Err("moreHistory is false with history above".into());
        }
        if current && view.live && view.verified {
            let newest = shown.last().map_or(0, last_seq);
            if newest != truth.len() as u64 {
                return Err(format!(
                    "live and verified but showing up to {newest} of {}",
                    truth.len()
                ));
            }
        }
        Ok(())
    })
}

/// A tab's state for the failure's list of steps: a failure with two tabs is read by which
/// one wrote and which was verified.
fn tab_state(tab: &Option<Open>, current: usize) -> String {
    let Some(tab) = tab else {
        return "closed".into();
    };
    let state = tab.session.with_view(|v| {
        let flag = |on: bool, name: &str| {
            if on {
                name.to_string()
            } else {
                "-".repeat(name.len())
            }
        };
        [
            flag(v.writer, "writer"),
            flag(v.verified, "verified"),
            flag(v.live, "live"),
        ]
        .join(" ")
    });
    let verified = tab.session.with_view(|v| v.verified);
    let version = if verified { current } else { tab.version.get() };
    format!("{state} v{version}")
}

/// What a tab shows is the server's (see [`check_shown`]): of the current version once the tab
/// is verified, else of the version it last verified or drew from the cache. `cache` is the
/// cache's version before the step and after it (the writer may have verified meanwhile).
fn check_tab(
    tab: &Open,
    file: &ServerFile,
    cache: [usize; 2],
    stats: &mut Stats,
) -> Result<(), String> {
    // Verified: checked, and following the file since (the stream's follower catches a
    // replacement; a lost stream makes the session unverified until the reconnect's check).
    let (verified, writer) = tab.session.with_view(|v| (v.verified, v.writer));
    let cleared = tab.cleared.replace(false);
    let seen = |version: usize| (tab.changes.get(), version, file.version, file.lines.len());
    let check = |version: usize| {
        if tab.passed.get() == Some(seen(version)) {
            return Ok(version);
        }
        check_shown(tab, file.lines_of(version), version == file.version).map(|()| version)
    };
    let version = match (verified, cleared) {
        (true, _) => check(file.version)?,
        // Unverified and drawn again (a reader that took over with nothing checked shown
        // opens as any tab does): the cache's rows, read before or after the writer's check.
        (false, true) => check(cache[0]).or_else(|_| check(cache[1]))?,
        (false, false) => check(tab.version.get())?,
    };
    tab.version.set(version);
    tab.passed.set(Some(seen(version)));
    stats.max_shown = stats.max_shown.max(tab.shown.borrow().len());
    let resets = tab.session.counters().resets;
    if resets > 0 && !tab.reset_seen.replace(true) {
        stats.sessions_reset += 1;
    }
    if writer && tab.was_reader.get() {
        stats.takeovers += 1;
    }
    tab.was_reader.set(!writer);
    Ok(())
}

/// Every chunk in the store is exactly what the server returns for that chunk's own coverage,
/// and no seq is in two chunks (a tab that takes over must not store again what the writer
/// before it stored).
///
/// `seen` remembers chunks already checked (name, size, stamp, server version) and the end of
/// their coverage, so a step costs the chunks that changed.
async fn check_chunks(
    store: &MemoryStore,
    dir: &str,
    server_file: &Path,
    truth: &[Line],
    version: usize,
    torn: bool,
    seen: &mut HashMap<(String, u64, u64, usize), u64>,
) -> Result<usize, String> {
    let entries = store.list(dir).await.map_err(|e| e.to_string())?;
    let mut covered = Vec::new();
    let mut n = 0;
    for entry in entries {
        let Some((first, end, kind)) = parse_chunk_name(&entry.name) else {
            continue;
        };
        n += 1;
        let key = (entry.name.clone(), entry.size, entry.modified, version);
        if let Some(&end) = seen.get(&key) {
            covered.push((first, end, entry.name));
            continue;
        }
        let path = format!("{dir}/{}", entry.name);
        let mut bytes = store.read(&path, 0, usize::MAX).await.unwrap();
        if bytes.last().is_some_and(|b| *b != b'\n') {
            if !torn {
                return Err(format!(
                    "{path} ends in a partial line with no crash to explain it"
                ));
            }
            bytes.truncate(bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1));
        }
        if kind == Kind::Open {
            // The open chunk changes every step; its lines are the file's lines (what the
            // server sends raw), compared byte for byte without a server read per step, and
            // without parsing them (the open chunk is most of what a step re-reads).
            let Some(end) = raw_lines_end(&bytes, truth, first) else {
                return Err(format!(
                    "open chunk {} is not the server's lines from {first}",
                    entry.name
                ));
            };
            if end > first {
                seen.insert(key, end);
                covered.push((first, end, entry.name));
            }
            continue;
        }
        let text = String::from_utf8(bytes).map_err(|e| format!("{path}: {e}"))?;
        let lines: Vec<Line> = text
            .lines()
            .map(Line::parse)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{path}: {e}"))?;
        let Some(last) = lines.last() else {
            continue; // an empty chunk claims nothing (and is not remembered: it costs nothing)
        };
        let end = end.unwrap_or(last_seq(last) + 1);
        let query = TranscriptQuery {
            before: Some(end),
            after: Some(first - 1),
            limit: Some(MAX_LIMIT),
            coalesce: kind == Kind::Rows,
            bytes: None,
        };
        let expected = transcript::window(server_file, &query).map_err(|e| e.to_string())?;
        let same = expected.len() == lines.len()
            && expected
                .iter()
                .zip(&lines)
                .all(|(a, b)| a == b && a.raw() == b.raw());
        if !same {
            return Err(format!(
                "chunk {} is not the server's [{first}, {end}): {} lines stored, {} served; first stored {:?}, first served {:?}",
                entry.name,
                lines.len(),
                expected.len(),
                lines.first().map(|l| l.raw().to_string()),
                expected.first().map(|l| l.raw().to_string()),
            ));
        }
        seen.insert(key, end);
        covered.push((first, end, entry.name));
    }
    covered.sort();
    for pair in covered.windows(2) {
        if pair[0].1 > pair[1].0 {
            return Err(format!(
                "seqs cached twice: {} and {} overlap",
                pair[0].2, pair[1].2
            ));
        }
    }
    Ok(n)
}

/// The end of the coverage of `bytes` when they are exactly the server's lines from `first`
/// on, each ended by a newline; `None` when they are not.
fn raw_lines_end(bytes: &[u8], truth: &[Line], first: u64) -> Option<u64> {
    let mut rest = bytes;
    let mut end = first;
    while !rest.is_empty() {
        let raw = truth.get(end as usize - 1)?.raw().as_bytes();
        rest = rest.strip_prefix(raw)?.strip_prefix(b"\n")?;
        end += 1;
    }
    Some(end)
}

// ---- one run --------------------------------------------------------------------------------

fn run_once(seed: u64, steps: usize, stats: &mut Stats) -> Result<(), String> {
    let mut rng = Rng(seed);
    let tmp = tempfile::tempdir().unwrap();
    let mut file = ServerFile::create(tmp.path(), &mut rng);
    let world = Rc::new(World {
        data: tmp.path().join("data"),
        ..World::default()
    });
    world.up.set(true);
    let store = Arc::new(MemoryStore::new());
    let mut pool = LocalPool::new();
    let cache = pool.run_until(Cache::new(store.clone(), "model", 1));
    let dir = format!("{}/{ID}", cache.dir());
    let config = Config {
        opening_window: rng.range(3, 80) as usize,
        page_rows: rng.range(1, 40) as usize,
        page_bytes: rng.chance(50).then(|| rng.range(200, 4000) as usize),
        ..Config::default()
    };
    let engine = ModelEngine::new(cache, InProcess(world.clone()), config);
    // The first tab, which the single-tab steps act on, and the second.
    let mut session: Option<Open> = None;
    let mut second: Option<Open> = None;
    // The server's version the cache was written from: the one the writer last verified.
    let mut cache_version = 0;
    let mut torn = false;
    let mut log = String::new();
    let mut seen = HashMap::new();

    for step in 0..steps {
        let action = rng.below(100);
        let is_open = session.is_some();
        let both_open = is_open && second.is_some();
        let what: String = match action {
            0..=17 => {
                let n = rng.range(1, 30) as usize;
                file.append_mixed(&mut rng, n);
                World::wake(&world.streams);
                format!("server appends {n}")
            }
            18..=25 => {
                let n = rng.range(10, 250) as usize;
                file.reply(&mut rng, n);
                World::wake(&world.streams);
                format!("server replies with {n} deltas")
            }
            26..=40 if !is_open => {
                let anchor = (rng.chance(25) && !file.lines.is_empty())
                    .then(|| rng.range(1, file.lines.len() as u64));
                session = Some(open(&engine, &pool, &file, anchor, cache_version));
                stats.opens += 1;
                format!("open (anchor {anchor:?})")
            }
            26..=36 => {
                let how = match action {
                    26..=30 => Away::Close,
                    31..=33 => Away::Drop,
                    _ => Away::Crash,
                };
                let tab = session.take().unwrap();
                let (what, tore) = go_away(tab, how, &mut pool, &store, &dir, &file, &mut rng);
                torn |= tore;
                what
            }
            37..=40 => {
                let anchor = session.as_ref().unwrap().session.with_view(|v| v.oldest);
                session.as_ref().unwrap().session.reload(anchor);
                stats.reloads += 1;
                format!("reload at {anchor:?}")
            }
            41..=62 if is_open => {
                older(&pool, session.as_ref().unwrap());
                stats.olders += 1;
                "page back".into()
            }
            41..=62 => {
                // Past CATCH_UP_LIMIT more often than not: the next open streams a reset.
                let n = rng.range(150, 300) as usize;
                file.append_mixed(&mut rng, n);
                // The second tab may be open.
                World::wake(&world.streams);
                "a long absence (server appends while closed)".into()
            }
            63..=67 => {
                world.up.set(!world.up.get());
                World::wake(&world.streams);
                format!("network {}", if world.up.get() { "up" } else { "down" })
            }
            68..=78 => {
                world.now.set(world.now.get() + 1);
                World::wake(&world.sleepers);
                "time passes".into()
            }
            79..=82 if !is_open => {
                file.replace(&mut rng, Size::Any);
                World::wake(&world.streams);
                stats.replaces += 1;
                format!("file replaced ({} lines)", file.lines.len())
            }
            79..=82 => {
                // Replaced while the session is open: sometimes while a reply streams to it.
                let mut what = String::new();
                if rng.chance(50) {
                    let n = rng.range(5, 120) as usize;
                    file.reply(&mut rng, n);
                    file.flush();
                    World::wake(&world.streams);
                    pool.run_until_stalled();
                    what = format!("a reply of {n} deltas streams, then ");
                    stats.replaces_streaming += 1;
                }
                let size = [Size::Shorter, Size::Same, Size::Longer][rng.below(3) as usize];
                let was = file.lines.len();
                file.replace(&mut rng, size);
                World::wake(&world.streams);
                stats.replaces_open += 1;
                format!(
                    "{what}file replaced while open ({size:?}: {was} -> {} lines)",
                    file.lines.len()
                )
            }
            83..=86 => {
                if rng.chance(50) {
                    let budget = rng.below(3000);
                    store.limit_writes(Some(budget));
                    format!("writes limited to {budget} more bytes")
                } else {
                    store.limit_writes(None);
                    "quota lifted".into()
                }
            }
            87..=89 => {
                store.wipe();
                torn = false;
                stats.wipes += 1;
                "storage wiped".into()
            }
            90..=95 => {
                let n = rng.range(1, 5) as usize;
                file.append_mixed(&mut rng, n);
                World::wake(&world.streams);
                format!("server appends {n}")
            }
            // The second tab: the same store and id, as another browser tab of the page.
            _ if second.is_none() => {
                let anchor = (rng.chance(25) && !file.lines.is_empty())
                    .then(|| rng.range(1, file.lines.len() as u64));
                second = Some(open(&engine, &pool, &file, anchor, cache_version));
                stats.seconds += 1;
                format!("second tab opens (anchor {anchor:?})")
            }
            96 => {
                let how = [Away::Close, Away::Drop][rng.below(2) as usize];
                let tab = second.take().unwrap();
                let (what, _) = go_away(tab, how, &mut pool, &store, &dir, &file, &mut rng);
                format!("second tab: {what}")
            }
            98..=99 if both_open => {
                let mut what = String::new();
                if rng.chance(50) {
                    what = half_a_reply(&mut pool, &mut file, &world, &mut rng);
                    stats.writers_gone_mid_reply += 1;
                }
                let how = [Away::Close, Away::Drop, Away::Crash][rng.below(3) as usize];
                let first_writes = session.as_ref().unwrap().session.with_view(|v| v.writer);
                let (which, slot) = match first_writes {
                    true => ("first", &mut session),
                    false => ("second", &mut second),
                };
                let tab = slot.take().unwrap();
                let (gone, tore) = go_away(tab, how, &mut pool, &store, &dir, &file, &mut rng);
                torn |= tore;
                World::wake(&world.streams);
                format!("{what}the writer goes away ({which} tab): {gone}")
            }
            _ => {
                older(&pool, second.as_ref().unwrap());
                stats.olders += 1;
                "second tab: page back".into()
            }
        };
        file.flush();
        let t = std::time::Instant::now();
        pool.run_until_stalled();
        stats.engine_time += t.elapsed();
        let t = std::time::Instant::now();
        let tabs = [&session, &second].map(|tab| tab_state(tab, file.version));
        let tabs = tabs.join(" | ");
        let _ = writeln!(log, "  {step:>3}: {what:<70} [{tabs}]");

        // The checks.
        let fail = |e: String| format!("seed {seed}, after step {step}: {e}\nsteps:\n{log}");
        let tabs = [&session, &second];
        let before = cache_version;
        let mut writers = 0;
        for tab in tabs.into_iter().flatten() {
            let (writer, verified) = tab.session.with_view(|v| (v.writer, v.verified));
            if writer {
                writers += 1;
                // A writer's open repaired the torn tail (a reader that took over reopened).
                torn = false;
                if verified {
                    cache_version = file.version;
                }
            }
        }
        if writers > 1 {
            return Err(fail("two open tabs write".into()));
        }
        for tab in tabs.into_iter().flatten() {
            check_tab(tab, &file, [before, cache_version], stats).map_err(fail)?;
        }
        let version = cache_version;
        let chunks = pool
            .run_until(check_chunks(
                &store,
                &dir,
                &file.file_of(version),
                file.lines_of(version),
                version,
                torn,
                &mut seen,
            ))
            .map_err(fail)?;
        stats.max_chunks = stats.max_chunks.max(chunks);
        stats.check_time += t.elapsed();
    }
    for open in [session, second].into_iter().flatten() {
        open.session.close();
    }
    pool.run_until_stalled();
    Ok(())
}

/// Half a reply: the writer has streamed part of it (all, some, or none of the part, as far as
/// the tabs got) when what comes next happens; the rest is written at the step's end.
fn half_a_reply(
    pool: &mut LocalPool,
    file: &mut ServerFile,
    world: &World,
    rng: &mut Rng,
) -> String {
    let n = rng.range(10, 120) as usize;
    file.reply(rng, n);
    let part = rng.range(1, n as u64 - 1) as usize;
    file.flush_part(part);
    World::wake(&world.streams);
    // Sometimes the tabs are stopped a few polls in, mid-burst.
    let how_far = match rng.below(4) {
        0 => {
            pool.run_until_stalled();
            "all".to_string()
        }
        polls => {
            for _ in 0..polls {
                pool.try_run_one();
            }
            format!("{polls} polls")
        }
    };
    format!("a reply of {n} deltas streams {part} ({how_far}), then ")
}

/// A crash mid-append: part of the next line written to the open chunk, no newline.
async fn tear_tail(
    store: &MemoryStore,
    dir: &str,
    file: &ServerFile,
    rng: &mut Rng,
) -> Option<String> {
    let entries = store.list(dir).await.ok()?;
    let open = entries
        .iter()
        .find(|e| e.name.ends_with("-open.raw.jsonl"))?;
    let path = format!("{dir}/{}", open.name);
    let next = file.lines.last().map_or(
        r#"{"seq":1,"ts":1.5,"event":{"type":"status"}}"#.to_string(),
        |l| l.raw().to_string(),
    );
    // Any byte: a crash can tear a line inside a multi-byte character too.
    let cut = rng.range(1, next.len() as u64 - 1) as usize;
    store.append(&path, &next.as_bytes()[..cut]).await.ok()?;
    Some(format!("{cut} bytes torn into {}", open.name))
}

#[derive(Default, Debug)]
struct Stats {
    opens: u64,
    olders: u64,
    reloads: u64,
    replaces: u64,
    replaces_open: u64,
    replaces_streaming: u64,
    wipes: u64,
    sessions_reset: u64,
    /// Second tabs opened.
    seconds: u64,
    /// Readers seen writing at a later check: the writer went away and they took over.
    takeovers: u64,
    /// Writers that went away half-way through a reply, a reader open.
    writers_gone_mid_reply: u64,
    max_shown: usize,
    max_chunks: usize,
    engine_time: std::time::Duration,
    check_time: std::time::Duration,
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Runs `runs` model runs from `seed` (each run's seed is `seed + i`).
fn model(half: u64) {
    let runs = env_u64("MODEL_RUNS").unwrap_or(2000);
    // One seed for both halves.
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let seed = *SEED.get_or_init(|| {
        env_u64("MODEL_SEED").unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
    });
    // Two tests share the runs (even and odd), so the two cores both work.
    println!(
        "engine model: {} of {runs} runs from seed {seed} (MODEL_RUNS / MODEL_SEED to override)",
        runs / 2 + (runs % 2) * (1 - half)
    );
    let mut stats = Stats::default();
    for run in (half..runs).step_by(2) {
        let run_seed = seed.wrapping_add(run);
        let steps = 10 + (run_seed % 24) as usize;
        if let Err(e) = run_once(run_seed, steps, &mut stats) {
            panic!("run {run} failed (rerun with MODEL_SEED={run_seed} MODEL_RUNS=1):\n{e}");
        }
    }
    println!("engine model: runs passed: {stats:?}");
}

#[test]
fn what_is_shown_and_stored_is_always_the_servers_even_runs() {
    model(0);
}

#[test]
fn what_is_shown_and_stored_is_always_the_servers_odd_runs() {
    model(1);
}

/// Runs the model once failed, run every time (add a seed when a run fails).
const SEEDS_THAT_FAILED: &[u64] = &[
    // Stop 60: a second tab restored its anchor with raw lines from inside a reply's run of
    // deltas, took the writer role over when the first tab crashed, and paged back into the
    // first tab's coalesced line of that run, served whole from the cache: deltas shown twice.
    1796562241074118965,
];

#[test]
fn seeds_that_once_failed() {
    for &seed in SEEDS_THAT_FAILED {
        let steps = 10 + (seed % 24) as usize;
        if let Err(e) = run_once(seed, steps, &mut Stats::default()) {
            panic!("{e}");
        }
    }
}
