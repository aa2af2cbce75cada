//! One session's sync: open, probe, stream, reset, older pages, anchor restore, reload.

use super::view::{Change, Counters, SessionError, View};
use super::Config;
use crate::chunks::{Cache, SessionCache};
use crate::fold::{SessionState, Transcript};
use crate::protocol::{last_seq, CatchUpQuery, Line, SessionSummary, TranscriptQuery, MAX_LIMIT};
use crate::store::{Store, StoreError, WriterRole};
use crate::transport::{
    Backoff, CatchUp, EventStream, Page, ResetReason, Retry, StreamItem, Transport, TransportError,
    TransportResult,
};
use async_lock::{Mutex, MutexGuard};
use futures::channel::{mpsc, oneshot};
use futures::future::{join, join3, select, Either, LocalBoxFuture};
use futures::{FutureExt, StreamExt};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::pin;
use std::rc::Rc;

/// What the UI asks of a running [`Session::run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    Reload(Option<u64>),
    Close,
    /// The server's file is not the one cached (replaced, or shorter than the cache): the
    /// cache is already purged and the screen cleared; open again, cold.
    Reopen,
    /// Stopped for the token ([`Session::resume`]): the app has a new one; open again from the
    /// cache, nothing purged.
    Resume,
    /// Not from the UI: a retry cannot help ([`Retry`]); wait for a reload or the close.
    Stopped,
    /// Not from the UI: this reader was handed the writer role (the writer's tab went away).
    Promoted,
}

/// Where the stream starts: the cursor, and the line there when it is known (what a
/// reconnect checks before it appends anything).
type Start = (u64, Option<Line>);

fn start_at(line: Option<Line>) -> Start {
    (line.as_ref().map_or(0, Line::seq), line)
}

type Listener = Box<dyn FnMut(&View, Change<'_>)>;

/// The bytes of lines the older pages read from the cache ahead of the reader
/// ([`Session::read_ahead`]) may hold at most, their rows folded beside them (a page of huge
/// rows counts for what it holds): enough for the whole cached history of most sessions (a
/// long session's history paged from the server is rows, folded, about 1.5 MB for 24,000
/// events), so scrolling back through it waits for no store read; a few pages of a session
/// cached delta by delta.
const AHEAD_BYTES: usize = 4 << 20;

/// An older page read from the cache ahead of the reader ([`Session::read_ahead`]): served by
/// the [`Session::older`] that asks for it when nothing changed meanwhile (the same epoch,
/// purges and oldest row shown), dropped otherwise. Folded as it is read, so that showing it
/// parses nothing.
struct Ahead {
    epoch: u64,
    purges: u64,
    before: u64,
    limit: usize,
    /// The lines' bytes, for [`AHEAD_BYTES`].
    bytes: usize,
    lines: Vec<Line>,
    rows: Transcript,
}

/// What the last older page fetched from the server showed about the cache below it: nothing
/// cached in `[after + 1, before)` (`after` the bound that page was asked with, `None` for
/// none), so the page before `before` is not the cache's either and is asked with the same
/// bound. Lets the next [`Session::older`] ask the server at once, while the page before it is
/// still being stored, rather than wait for the cache's lock to look. Valid in the epoch and
/// purges it was found in. (A writer in another tab never writes this session while this one
/// does; while this one only reads, the most it costs is a page the cache could have served.)
#[derive(Clone, Copy)]
struct Uncached {
    epoch: u64,
    purges: u64,
    before: u64,
    after: Option<u64>,
}

/// One open session: the cache's rows drawn at once, checked with one probe, kept live by the
/// stream, paged back through the cache first and the server only for the gap.
///
/// Single-threaded and runtime-agnostic. Drive it by polling [`Session::run`] (the open, then
/// the stream, for as long as the session is on screen) and, concurrently on the same thread,
/// [`Session::older`] when the reader scrolls up; [`Session::reload`] and [`Session::close`]
/// signal the running `run`. State changes reach the listener set with
/// [`Session::on_change`], and [`Session::view`] reads the current state at any time.
///
/// The cache sits behind an async mutex, held only for cache work (never across a request),
/// so a stream append and a page load cannot interleave inside either; a page that returns
/// after a reset or reload changed what is shown is stored but not shown.
pub struct Session<S: Store, T: Transport> {
    id: String,
    /// The newest summary known: the list's or the remembered one, then each check's.
    summary: RefCell<Option<SessionSummary>>,
    anchor: Option<u64>,
    server: Rc<Cache<S>>,
    cache: Mutex<SessionCache<S>>,
    transport: Rc<T>,
    config: Config,
    view: RefCell<View>,
    listener: RefCell<Option<Listener>>,
    /// Who waits for the view's next change ([`Session::next_change`]).
    watchers: RefCell<Vec<oneshot::Sender<()>>>,
    /// Bumped by every reload and every clear, so a page in flight knows it is stale.
    epoch: Cell<u64>,
    /// Bumped by every purge, so a page fetched before it (perhaps of another file) is not
    /// stored after it.
    purges: Cell<u64>,
    /// The id of the file the rows were checked against (the check's, or the opening window's
    /// `FILE_HEADER`), while the server names one: an older page of another file is refused.
    file: RefCell<Option<String>>,
    loading_older: Cell<bool>,
    /// See [`Uncached`]: set by an older page from the server, taken by the next one.
    uncached: Cell<Option<Uncached>>,
    /// Older pages read from the cache before they are asked for, the next one first: each
    /// one's `before` is the oldest seq of the one before it.
    ahead: RefCell<VecDeque<Ahead>>,
    /// Held while pages are read ahead: one reader at a time.
    reading_ahead: Mutex<()>,
    commands: mpsc::UnboundedSender<Command>,
    inbox: RefCell<Option<mpsc::UnboundedReceiver<Command>>>,
    /// Told each time a write of this session's cache is refused for the storage's quota (its
    /// [`View::storage_error`] becomes [`StoreError::QuotaExceeded`]): [`Session::upkeep`]
    /// relieves the quota ([`Cache::relieve_quota`]).
    refusals: mpsc::UnboundedSender<()>,
    /// What [`Session::run`] takes to hear `refusals`, as it takes `inbox`.
    refused: RefCell<Option<mpsc::UnboundedReceiver<()>>>,
    /// The retry schedule of the check, the opening window, the stream and a reopen. It starts
    /// again from its base only once a stream follows the file (a line, or a keep-alive after
    /// its opening one), not when a request before it succeeds: a stream that keeps failing
    /// right after a good catch-up is retried less and less often, as any other failure in a
    /// row.
    backoff: RefCell<Backoff>,
    /// Reopened (the file found replaced) and no stream has followed the file since: the next
    /// reopen waits its backoff step, so answers that disagree do not reopen the session in a
    /// tight loop.
    reopened_unheard: Cell<bool>,
    /// The writer role, while this open writes the cache.
    role: RefCell<Option<WriterRole>>,
    /// A reader's wait for the writer role, polled beside every network wait.
    waiting: RefCell<Option<LocalBoxFuture<'static, WriterRole>>>,
}

impl<S: Store, T: Transport> Session<S, T> {
    pub(super) fn new(
        server: Rc<Cache<S>>,
        cache: SessionCache<S>,
        transport: Rc<T>,
        id: String,
        summary: Option<SessionSummary>,
        anchor: Option<u64>,
        config: Config,
    ) -> Self {
        let (commands, inbox) = mpsc::unbounded();
        let (refusals, refused) = mpsc::unbounded();
        let seed = {
            use std::hash::BuildHasher;
            std::collections::hash_map::RandomState::new().hash_one(&id)
        };
        let backoff = Backoff::new(config.reconnect_delay_ms, config.reconnect_max_ms, seed);
        Session {
            view: RefCell::new(View::new(&id)),
            id,
            summary: RefCell::new(summary),
            anchor,
            server,
            cache: Mutex::new(cache),
            transport,
            config,
            listener: RefCell::new(None),
            watchers: RefCell::default(),
            epoch: Cell::new(0),
            purges: Cell::new(0),
            file: RefCell::new(None),
            loading_older: Cell::new(false),
            uncached: Cell::new(None),
            ahead: RefCell::default(),
            reading_ahead: Mutex::new(()),
            commands,
            inbox: RefCell::new(Some(inbox)),
            refusals,
            refused: RefCell::new(Some(refused)),
            backoff: RefCell::new(backoff),
            reopened_unheard: Cell::new(false),
            role: RefCell::new(None),
            waiting: RefCell::new(None),
        }
    }
}

impl<S: Store + 'static, T: Transport> Session<S, T> {
    /// The session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// A copy of the current state.
    pub fn view(&self) -> View {
        self.view.borrow().clone()
    }

    /// Reads the current state without copying it.
    pub fn with_view<R>(&self, f: impl FnOnce(&View) -> R) -> R {
        f(&self.view.borrow())
    }

    /// The counters so far.
    pub fn counters(&self) -> Counters {
        self.view.borrow().counters
    }

    /// Sets the function told about every change, with the new state. It must not call back
    /// into the session synchronously (starting an async call is fine).
    pub fn on_change(&self, listener: impl FnMut(&View, Change<'_>) + 'static) {
        *self.listener.borrow_mut() = Some(Box::new(listener));
    }

    /// Asks the running [`Session::run`] to throw the session's cache away and reopen cold,
    /// then restore the reader to `anchor` (the seq of the row at the reader's position; `None`
    /// for the opening window).
    pub fn reload(&self, anchor: Option<u64>) {
        let _ = self.commands.unbounded_send(Command::Reload(anchor));
    }

    /// Opens again a session stopped because the server refused the token (its
    /// [`View::error`] is `unauthorized`): called once the transport has a new one. The rows
    /// are drawn from the cache again and checked, the older ones restored down to the oldest
    /// shown; nothing is purged. Does nothing to a session not stopped so.
    pub fn resume(&self) {
        let unauthorized = Some(Retry::Unauthorized.kind());
        if self.view.borrow().error.as_ref().map(|e| e.kind) == unauthorized {
            // Cleared at once: the app sees it trying again, and a second call does nothing.
            self.update(Change::State, |v| v.error = None);
            let _ = self.commands.unbounded_send(Command::Resume);
        }
    }

    /// Asks the running [`Session::run`] to close the stream and return. Dropping the `run`
    /// future also closes, at any await, which the cache survives as it survives a crash.
    pub fn close(&self) {
        let _ = self.commands.unbounded_send(Command::Close);
    }

    /// Resolves once no write to this session's cache is under way. An older page from the
    /// server is stored after it is shown ([`Session::older_then`]): what reads the store
    /// without this session (a search) waits here first to find it.
    pub async fn stored(&self) {
        drop(self.cache().await);
    }

    /// The cache's size for this session, in bytes (what a reload would discard).
    pub async fn cached_size(&self) -> u64 {
        self.cache().await.size().await
    }

    // ---- reporting -------------------------------------------------------------------------

    fn update(&self, change: Change<'_>, f: impl FnOnce(&mut View)) {
        f(&mut self.view.borrow_mut());
        if let Some(listener) = self.listener.borrow_mut().as_mut() {
            listener(&self.view.borrow(), change);
        }
        for watcher in self.watchers.take() {
            let _ = watcher.send(());
        }
    }

    /// Resolves at the view's next change (or at once when the session is dropped).
    fn next_change(&self) -> impl Future<Output = ()> {
        let (tx, rx) = oneshot::channel();
        self.watchers.borrow_mut().push(tx);
        async move {
            let _ = rx.await;
        }
    }

    /// The session's cache, locked until the guard is dropped.
    async fn cache(&self) -> Cached<'_, S, T> {
        Cached {
            cache: self.cache.lock().await,
            session: self,
        }
    }

    fn set_banner(&self, banner: Option<String>) {
        if self.view.borrow().banner != banner {
            self.update(Change::State, |v| v.banner = banner);
        }
    }

    fn count_request(&self, bytes: u64) {
        let mut view = self.view.borrow_mut();
        view.counters.requests += 1;
        view.counters.bytes += bytes;
    }

    /// Shows lines at the newest end.
    fn show_newer(&self, lines: &[Line]) {
        if !lines.is_empty() {
            self.update(Change::Newer(lines), |v| v.push_newer(lines));
        }
    }

    /// Shows an older page at the oldest end (`folded`: its rows, when it was folded already);
    /// answers whether it was drawn.
    fn show_older(&self, lines: &[Line], folded: Option<Transcript>) -> bool {
        let Some(first) = lines.first() else {
            self.update(Change::State, |v| v.more_history = false);
            return false;
        };
        let shown = {
            let mut v = self.view.borrow_mut();
            match folded {
                Some(rows) => v.transcript.push_older_folded(rows),
                None => v.transcript.push_older(lines),
            }
        };
        match shown {
            Ok(()) => self.update(Change::Older(lines), |v| {
                v.oldest = Some(first.seq());
                v.more_history = first.seq() > 1;
            }),
            // A page reaching into what is shown cannot be drawn: the cache and the server no
            // longer agree about this stretch. Stop paging; a reload starts over.
            Err(_) => self.update(Change::State, |v| v.more_history = false),
        }
        shown.is_ok()
    }

    /// Drops everything shown. `ready`: a reset, the newest window follows, and the state
    /// forgets what the gap may have resolved ([`SessionState::clear_pending`]); otherwise the
    /// session opens again from nothing (a replaced file, a reload) and so does its state.
    fn clear(&self, ready: bool) {
        self.epoch.set(self.epoch.get() + 1);
        self.ahead.borrow_mut().clear();
        self.update(Change::Cleared, |v| {
            v.transcript.clear();
            match ready {
                true => v.state.clear_pending(),
                false => v.state = SessionState::new(),
            }
            v.verified &= ready;
            v.oldest = None;
            v.cursor = 0;
            v.cursor_fingerprint = None;
            v.more_history = true;
            v.ready = ready;
        });
    }

    /// Status, model and permission mode from the summary, unless the lines shown are newer
    /// ([`View::apply_summary`]).
    fn apply_summary(&self) {
        let Some(summary) = self.summary.borrow().clone() else {
            return; // nothing newer than the lines themselves is known yet
        };
        let taken = self.view.borrow_mut().apply_summary(&summary);
        if taken {
            self.update(Change::State, |_| {});
        }
    }

    /// Takes the session's summary from a list fetched while it is open (an app that opened it
    /// before listing, as a first visit on a session's address does: a cold open's window
    /// carries none): its status, model and permission mode win over what the lines replayed,
    /// as a check's summary does. Another session's summary is ignored.
    pub fn take_summary(&self, summary: &SessionSummary) {
        if summary.id != self.id {
            return;
        }
        *self.summary.borrow_mut() = Some(summary.clone());
        self.apply_summary();
    }

    /// With no summary known (opened by id alone), the one the last list remembered, if it had
    /// this session; the reopen's check brings the fresh one. Read beside that check: a fresh
    /// summary that arrives during the read is kept, never replaced by the remembered one.
    async fn recall_summary(&self) {
        if self.summary.borrow().is_some() {
            return;
        }
        let Some(summary) = self.server.remembered(&self.id).await else {
            return;
        };
        if self.summary.borrow().is_none() {
            *self.summary.borrow_mut() = Some(summary);
            self.apply_summary();
        }
    }

    /// Throws the session's cache away; a page in flight is then not stored.
    async fn purge(&self) {
        self.purges.set(self.purges.get() + 1);
        self.file.replace(None);
        self.ahead.borrow_mut().clear();
        self.cache().await.purge().await;
    }

    // ---- the running session ---------------------------------------------------------------

    /// Opens the session and keeps it live until [`Session::close`] (or until dropped).
    ///
    /// Draws the cached rows before any request returns; checks the cached tail and catches up
    /// in one request (`/catchup`), and only then opens the stream from the newest line held,
    /// reading the older pages ahead from the cache meanwhile; a failed check purges the
    /// session's cache and opens cold; a check or stream that cannot reach the server sets the
    /// banner and retries on the reconnect schedule. Reloads requested meanwhile are carried
    /// out here. Calling `run` again while it runs returns at once.
    pub async fn run(&self) {
        let Some(mut inbox) = self.inbox.borrow_mut().take() else {
            return;
        };
        let Some(mut refused) = self.refused.borrow_mut().take() else {
            *self.inbox.borrow_mut() = Some(inbox);
            return;
        };
        self.claim().await;
        let mut anchor = self.anchor;
        let mut resume = false;
        loop {
            let opened = match std::mem::take(&mut resume) {
                true => self.resume_as_writer(&mut inbox, anchor).await,
                false => self.open(&mut inbox, anchor).await,
            };
            let mut command = match opened {
                // The older pages are read from the cache while the stream connects, so a
                // scroll back starts from memory; the cache's upkeep (its budget) runs beside
                // them too, until the stream ends.
                Ok(start) => {
                    let (ended, ending) = oneshot::channel();
                    let follow = async {
                        let command = self.follow(&mut inbox, start).await;
                        let _ = ended.send(());
                        command
                    };
                    let upkeep = self.upkeep(&mut refused, ending);
                    join3(follow, self.read_ahead(), upkeep).await.0
                }
                Err(command) => command,
            };
            self.update(Change::State, |v| v.live = false);
            if command == Command::Stopped {
                // A retry cannot help: nothing is asked until the app reloads or closes. The
                // writer role is given up meanwhile, and a reader stops asking for it: a
                // stopped view writes nothing, and holding the role (or being handed it while
                // nothing awaits it) would leave every other tab a reader for as long as it
                // stays open. A reload asks for it again.
                self.give_up_role().await;
                self.update(Change::State, |v| v.writer = false);
                command = inbox.next().await.unwrap_or(Command::Close);
                if matches!(command, Command::Reload(_) | Command::Resume) {
                    self.claim().await;
                }
            }
            match command {
                Command::Close | Command::Stopped => break,
                Command::Promoted => resume = true,
                Command::Reload(at) => {
                    anchor = at;
                    self.purge().await;
                    self.clear(false);
                    self.backoff.borrow_mut().reset();
                    self.reopened_unheard.set(false);
                    self.update(Change::State, |v| {
                        v.banner = None;
                        v.error = None;
                    });
                }
                // The old file's seqs mean nothing in the new one: open at the newest.
                Command::Reopen => anchor = None,
                // Drawn again from the cache, back to the oldest row it showed.
                Command::Resume => {
                    anchor = self.view.borrow().oldest;
                    self.clear(false);
                    self.backoff.borrow_mut().reset();
                }
            }
        }
        self.give_up_role().await;
        *self.inbox.borrow_mut() = Some(inbox);
        *self.refused.borrow_mut() = Some(refused);
    }

    /// The cache's upkeep, beside the stream of each open (so that the first rows, the
    /// anchor's restore and the stream never wait for a scan of every cached session): the
    /// budget, when this open writes ([`Cache::enforce_budget`]: the least recently opened
    /// sessions go, never this one); then, until `ended`, each refusal of this session's write
    /// for the quota relieves it ([`Cache::relieve_quota`]). Eviction only: this open's cache
    /// stays stopped (what it missed meanwhile would leave a hole); the next open or reload
    /// writes again. An eviction under way is finished before this returns.
    async fn upkeep(
        &self,
        refused: &mut mpsc::UnboundedReceiver<()>,
        mut ended: oneshot::Receiver<()>,
    ) {
        if self.writes() {
            let budget = self.config.budget_bytes;
            self.server.enforce_budget(budget, &self.id).await;
        }
        while let Either::Left((Some(()), _)) = select(refused.next(), &mut ended).await {
            let evicted = self.server.relieve_quota(&self.id).await;
            log::info!(
                "scrollback: the storage refused a write of session {:?} for its quota: evicted {evicted:?}",
                self.id
            );
        }
    }

    // ---- the writer role (one writer per session across tabs) ------------------------------

    /// Takes the writer role if nobody holds it; else opens as a reader (shows the same rows,
    /// never writes) and waits for the role beside every network wait.
    async fn claim(&self) {
        let mut cache = self.cache().await;
        match cache.try_writer().await {
            Some(role) => {
                cache.set_reader(false);
                *self.role.borrow_mut() = Some(role);
            }
            None => {
                cache.set_reader(true);
                let role = cache.wait_for_writer();
                // A lock request that fails writes without the lock rather than never.
                let role = async move { role.await.unwrap_or_else(WriterRole::unshared) };
                *self.waiting.borrow_mut() = Some(Box::pin(role));
            }
        }
        drop(cache);
        let writer = self.role.borrow().is_some();
        self.update(Change::State, |v| v.writer = writer);
    }

    /// Whether this open holds the writer role.
    fn writes(&self) -> bool {
        self.role.borrow().is_some()
    }

    /// Flushes and gives the writer role up (the next tab waiting takes over). The cache is a
    /// reader's from then on: a page of history still on its way, or asked for after the close,
    /// is shown but not stored (the next writer may have purged the folder for a replaced file).
    async fn give_up_role(&self) {
        self.waiting.borrow_mut().take();
        if self.writes() {
            let mut cache = self.cache().await;
            cache.hand_over().await;
            cache.set_reader(true);
        }
        self.role.borrow_mut().take();
    }

    /// A reader that was handed the writer role: brings the cache up to what is shown, without
    /// a duplicate and without redrawing. The cache is reopened (its torn tail repaired); its
    /// tail is checked as a probe does; the stream then resumes from the cache's newest seq
    /// (at or below the newest shown), so every line above the cache's end is appended once and
    /// only lines above what is shown are drawn. A failed check, or no cache to check, is an
    /// ordinary open, cold (the screen may not be the server's file any more, and a stream
    /// resumed with no line to name could splice another file's lines onto it); so is nothing
    /// checked shown yet, or a cache ahead of the screen.
    async fn resume_as_writer(
        &self,
        inbox: &mut mpsc::UnboundedReceiver<Command>,
        anchor: Option<u64>,
    ) -> Result<Start, Command> {
        let tail = {
            let mut cache = self.cache().await;
            cache.set_reader(false);
            cache.open().await;
            cache.cursor().await
        };
        self.update(Change::State, |v| v.writer = true);
        let shown = self
            .with_view(|v| (v.ready && v.verified).then_some(v.cursor))
            .filter(|s| *s > 0);
        if let (Some(shown), Some(tail)) = (shown, tail) {
            if tail.seq() <= shown {
                if self.tail_matches(inbox, &tail).await? {
                    return Ok(start_at(Some(tail)));
                }
                self.purge().await;
            }
        }
        self.clear(false);
        self.open(inbox, anchor).await
    }

    /// The probe's request and comparison (`before=seq+1&limit=1`, parsed equality), counted,
    /// without touching what is shown.
    async fn tail_matches(
        &self,
        inbox: &mut mpsc::UnboundedReceiver<Command>,
        tail: &Line,
    ) -> Result<bool, Command> {
        let query = TranscriptQuery {
            before: Some(tail.seq() + 1),
            limit: Some(1),
            ..TranscriptQuery::default()
        };
        let page = self.fetch_retrying(inbox, &query).await?;
        let passed = matches!(page.lines.as_slice(), [line] if line == tail);
        if passed {
            self.file.replace(page.file);
        }
        self.update(Change::State, |v| match passed {
            true => v.counters.probes_passed += 1,
            false => v.counters.probes_failed += 1,
        });
        Ok(passed)
    }

    /// Awaits `work` unless a command arrives first. Only network waits go through here: cache
    /// work is never interrupted half-way.
    async fn unless_asked<F: Future>(
        &self,
        inbox: &mut mpsc::UnboundedReceiver<Command>,
        work: F,
    ) -> Result<F::Output, Command> {
        // A reader also waits for the writer role meanwhile.
        let mut waiting = self.waiting.borrow_mut().take();
        let promoted = async {
            match waiting.as_mut() {
                Some(role) => role.await,
                None => std::future::pending().await,
            }
        };
        // Commands first: a stream with a burst ready must not keep a close waiting.
        let outcome = match select(inbox.next(), select(pin!(promoted), pin!(work))).await {
            Either::Left((command, _)) => Err(command.unwrap_or(Command::Close)),
            Either::Right((Either::Left((role, _)), _)) => {
                *self.role.borrow_mut() = Some(role);
                Err(Command::Promoted)
            }
            Either::Right((Either::Right((out, _)), _)) => Ok(out),
        };
        if !matches!(outcome, Err(Command::Promoted)) {
            *self.waiting.borrow_mut() = waiting;
        }
        outcome
    }

    /// `request` (the check or the opening window), the banner saying so while it has gone
    /// unanswered for [`Config::slow_answer_ms`] or more: waited as a silence
    /// (`Transport::silence`), never shortened by a retry clock.
    async fn noting_slow<F: Future>(&self, request: F) -> F::Output {
        let slow = self.transport.silence(self.config.slow_answer_ms);
        match select(pin!(request), pin!(slow)).await {
            Either::Left((answer, _)) => answer,
            Either::Right((_, request)) => {
                let secs = self.config.slow_answer_ms.div_ceil(1000);
                let said = match self.view.borrow().ready {
                    true => format!("The server has not answered for {secs} s: showing what is cached, still waiting"),
                    false => format!("The server has not answered for {secs} s: still waiting"),
                };
                self.set_banner(Some(said.clone()));
                let answer = request.await;
                if self.view.borrow().banner.as_ref() == Some(&said) {
                    self.set_banner(None);
                }
                answer
            }
        }
    }

    /// The banner for a check or opening fetch that failed: when the server cannot be reached,
    /// it says so, and whether what is shown is the cache's or nothing can be (a session never
    /// cached here needs the network).
    fn unreachable(&self, e: &TransportError, secs: u32) -> String {
        if !matches!(e, TransportError::Network(_)) {
            return format!("{e} (retrying in {secs} s)");
        }
        match self.view.borrow().ready {
            true => format!(
                "Cannot reach the server: showing what is cached, retrying in {secs} s ({e})"
            ),
            false => format!(
                "Cannot reach the server: this session is not cached here and needs the network, retrying in {secs} s ({e})"
            ),
        }
    }

    /// After a failed request, the one retry rule ([`Backoff::decide`]): waits out the next
    /// delay with the banner saying why and when, or stops ([`Session::stop`]) when a retry
    /// cannot help, answering [`Command::Stopped`].
    async fn retry(
        &self,
        inbox: &mut mpsc::UnboundedReceiver<Command>,
        error: &TransportError,
    ) -> Result<(), Command> {
        let decision = self.backoff.borrow_mut().decide(error);
        match decision {
            Retry::After(ms) => {
                self.set_banner(Some(self.unreachable(error, ms.div_ceil(1000))));
                self.unless_asked(inbox, self.transport.sleep(ms)).await
            }
            why => {
                self.stop(why, error).await;
                Err(Command::Stopped)
            }
        }
    }

    /// Stops the session for an error a retry cannot fix, saying why in [`View::error`]. A
    /// session the server says it does not have is gone: its cache is purged (by the writer)
    /// and nothing of it stays shown.
    async fn stop(&self, why: Retry, error: &TransportError) {
        if why == Retry::Gone {
            self.purge().await;
            self.clear(true);
            self.update(Change::State, |v| v.more_history = false);
        }
        let message = match error {
            TransportError::Http { message, .. } => message.clone(),
            other => other.to_string(),
        };
        let error = SessionError {
            kind: why.kind(),
            status: error.status(),
            message,
        };
        self.update(Change::State, |v| {
            v.banner = None;
            v.live = false;
            v.error = Some(error);
        });
    }

    /// Shows the first rows (cached and probed, or the cold opening window), restores the
    /// anchor, and answers the stream's starting cursor.
    ///
    /// The check of the cached tail leaves as soon as the tail is known, and travels while the
    /// cached rows are read and drawn; they never wait for it, nor for the remembered summary,
    /// which is read after them.
    async fn open(
        &self,
        inbox: &mut mpsc::UnboundedReceiver<Command>,
        anchor: Option<u64>,
    ) -> Result<Start, Command> {
        let mut cache = self.cache().await;
        cache.open_untouched().await;
        let query = (cache.cursor().await)
            .map(|tail| CatchUpQuery::new(tail.seq(), self.config.opening_window));
        let mut check = query
            .as_ref()
            .map(|q| self.transport.catch_up(&self.id, q).boxed_local());
        let read = cache.newest(self.config.opening_window);
        let cached = match check.as_mut() {
            None => read.await,
            // The request is polled first, so it is on its way even when the read needs no
            // wait at all (OPFS sync handles answer at once).
            Some(request) => match select(request, pin!(read)).await {
                Either::Left((answer, read)) => {
                    check = Some(futures::future::ready(answer).boxed_local());
                    read.await
                }
                Either::Right((cached, _)) => cached,
            },
        }
        .unwrap_or_default();
        drop(cache);
        if !cached.is_empty() {
            self.show_newer(&cached);
            self.apply_summary();
            self.update(Change::State, |v| v.ready = true);
        }
        // The remembered summary is read beside the check (or the cold window), not before it:
        // whichever comes second does not undo the fresh one (see `recall_summary`).
        let (_, newest) = join(self.recall_summary(), async {
            let caught_up = match cached.last().cloned() {
                Some(tail) => {
                    // Sent for another tail (the cache moved meanwhile): asked again.
                    let sent = query.filter(|q| q.cursor == tail.seq()).and(check);
                    self.catch_up(inbox, tail, sent).await?
                }
                None => None,
            };
            match caught_up {
                Some(line) => Ok(Some(line)),
                None => self.cold(inbox).await,
            }
        })
        .await;
        let newest = newest?;
        // Recorded for the budget (and the search index checked) once the screen is up to date.
        // The budget itself runs beside the stream ([`Session::upkeep`]).
        self.cache().await.touch().await;
        self.restore(inbox, anchor).await?;
        Ok(start_at(newest))
    }

    /// The check and the catch-up, in one request: is the server's line at the cached tail's
    /// seq still the cached tail (parsed equality: `Line`'s `PartialEq`, seq, ts to the last bit,
    /// the whole event), and what follows it. Retries on the reconnect schedule while it cannot
    /// be made; the rows shown stay meanwhile. The answer's summary becomes the session's.
    ///
    /// Caught up: the lines after the tail are cached and shown. Behind (the gap passes the
    /// catch-up bound): the screen resets to the newest window and the cache keeps what it has,
    /// with a gap that older pages fill with `after`. Replaced or ahead (the tail is not the
    /// server's, or the server has no line there): the cache is purged, the screen cleared, and
    /// `None` answered (the caller opens cold). Otherwise the newest line now held.
    async fn catch_up(
        &self,
        inbox: &mut mpsc::UnboundedReceiver<Command>,
        tail: Line,
        mut sent: Option<LocalBoxFuture<'_, TransportResult<CatchUp>>>,
    ) -> Result<Option<Line>, Command> {
        let query = CatchUpQuery::new(tail.seq(), self.config.opening_window);
        let CatchUp {
            answer,
            bytes,
            file,
        } = loop {
            let request = match sent.take() {
                Some(request) => request,
                None => self.transport.catch_up(&self.id, &query).boxed_local(),
            };
            let answer = self.unless_asked(inbox, self.noting_slow(request)).await?;
            match answer {
                Ok(answer) => break answer,
                Err(e) => {
                    self.count_request(0);
                    self.retry(inbox, &e).await?
                }
            }
        };
        self.count_request(bytes);
        if answer.summary.id == self.id {
            *self.summary.borrow_mut() = Some(answer.summary.clone());
        }
        let taken = answer.take_after(&tail);
        let passed = taken.is_some();
        self.update(Change::State, |v| {
            v.banner = None;
            v.verified = passed;
            match passed {
                true => v.counters.probes_passed += 1,
                false => v.counters.probes_failed += 1,
            }
        });
        let Some((after, gap)) = taken else {
            self.purge().await;
            self.clear(false);
            return Ok(None);
        };
        self.file.replace(file);
        if gap {
            // A gap: the screen shows the newest window, the cache keeps what it holds.
            self.view.borrow_mut().counters.resets += 1;
            self.clear(true);
        }
        // Shown first: the screen does not wait for the cache's write.
        self.view.borrow_mut().counters.caught_up += after.len() as u64;
        self.show_newer(&after);
        self.apply_summary();
        // Caught up, the lines follow the tail; behind, the newest window does not.
        let follows = (!gap).then_some(tail.seq());
        self.cache().await.append_served(follows, &after).await;
        Ok(Some(after.last().cloned().unwrap_or(tail)))
    }

    /// Fetches a page and counts it, retrying on the reconnect schedule (the banner saying
    /// why) while it cannot be made.
    async fn fetch_retrying(
        &self,
        inbox: &mut mpsc::UnboundedReceiver<Command>,
        query: &TranscriptQuery,
    ) -> Result<Page, Command> {
        loop {
            let request = self.transport.transcript(&self.id, query);
            let answer = self.unless_asked(inbox, self.noting_slow(request)).await?;
            match answer {
                Ok(page) => {
                    self.count_request(page.bytes);
                    return Ok(page);
                }
                Err(e) => {
                    self.count_request(0);
                    self.retry(inbox, &e).await?
                }
            }
        }
    }

    /// A cold open: the newest window, raw, appended to the (empty) cache line by line, so the
    /// open chunk is the one thing that grows (seed 000, "what building it changed").
    async fn cold(
        &self,
        inbox: &mut mpsc::UnboundedReceiver<Command>,
    ) -> Result<Option<Line>, Command> {
        let query = TranscriptQuery {
            limit: Some(self.config.opening_window),
            ..TranscriptQuery::default()
        };
        let page = self.fetch_retrying(inbox, &query).await?;
        self.file.replace(page.file.clone());
        // Shown first: the screen does not wait for the cache's write.
        self.apply_summary();
        self.show_newer(&page.lines);
        self.update(Change::State, |v| {
            v.banner = None;
            v.ready = true;
            v.verified = true;
            if page.lines.is_empty() {
                v.more_history = false;
            }
        });
        self.cache().await.append_served(None, &page.lines).await;
        Ok(page.lines.last().cloned())
    }

    /// Reaches back to `anchor`: from the cache where the suffix covers it, otherwise raw from
    /// the server, bounded below by the cache's nearest chunk, so at most the span it needs.
    async fn restore(
        &self,
        inbox: &mut mpsc::UnboundedReceiver<Command>,
        anchor: Option<u64>,
    ) -> Result<(), Command> {
        let Some(anchor) = anchor.filter(|a| *a >= 1) else {
            return Ok(());
        };
        let epoch = self.epoch.get();
        loop {
            let Some(oldest) = self.view.borrow().oldest.filter(|o| *o > anchor) else {
                return Ok(());
            };
            let want = ((oldest - anchor) as usize).min(MAX_LIMIT);
            match self
                .older_page(Some(inbox), oldest, want, false, || {})
                .await?
            {
                Ok(true) => {}
                // The app's own older page was shown meanwhile (its scroll handler as the view
                // first draws): go on from where it reached. A reload or a reset ends it.
                Ok(false)
                    if self.epoch.get() == epoch && self.view.borrow().oldest != Some(oldest) => {}
                Ok(false) => return Ok(()),
                Err(e) => {
                    // The restore is a convenience; the stream is not. Show and go on.
                    self.set_banner(Some(e.to_string()));
                    return Ok(());
                }
            }
        }
    }

    /// Shows the page before `before`: from the cache when the suffix covers it, else from the
    /// server with `after` = the end of the nearest chunk below, stored with `before` as its
    /// coverage end. Answers whether anything was shown. `shown` is called once the page is
    /// shown, before a page from the server is stored.
    async fn older_page(
        &self,
        inbox: Option<&mut mpsc::UnboundedReceiver<Command>>,
        before: u64,
        limit: usize,
        rows: bool,
        shown: impl FnOnce(),
    ) -> Result<TransportResult<bool>, Command> {
        let (epoch, purges) = (self.epoch.get(), self.purges.get());
        // A page read ahead: its lines, folded already.
        let ahead = || {
            self.take_ahead(before, limit, rows)
                .map(|a| (a.lines, Some(a.rows)))
        };
        let uncached = self
            .uncached
            .take()
            .filter(|u| (u.epoch, u.purges, u.before) == (epoch, purges, before));
        let (local, gap_after) = if let Some(page) = ahead() {
            // Read ahead already: no wait for the lock a read-ahead of later pages holds.
            (Some(page), None)
        } else if let Some(uncached) = uncached {
            // Not the cache's (the page after it came from the server): no wait for the lock
            // that page's write holds.
            (None, uncached.after)
        } else {
            let mut cache = self.cache().await;
            // Asked again under the lock: a read-ahead in flight holds it until its page is kept.
            if let Some(page) = ahead() {
                (Some(page), None)
            } else {
                match cache.page(before, limit, rows).await {
                    Some(page) => (Some((page.lines, None)), None),
                    None => (None, cache.gap_after(before).await),
                }
            }
        };
        // A cached page reaching past `before` does not tile with what is shown: a coalesced
        // line read whole while the rows shown start inside its run (another tab stored it,
        // and this one restored its anchor with raw lines from the server). The server folds
        // what lies below `before` instead.
        let (local, gap_after) = match local {
            Some((lines, _)) if lines.last().is_some_and(|l| last_seq(l) >= before) => {
                self.ahead.borrow_mut().clear();
                (None, self.cache().await.gap_after(before).await)
            }
            local => (local, gap_after),
        };
        if let Some((lines, folded)) = local {
            if self.epoch.get() == epoch && self.view.borrow().oldest == Some(before) {
                self.view.borrow_mut().counters.local_pages += 1;
                let drawn = self.show_older(&lines, folded);
                shown();
                return Ok(Ok(drawn));
            }
            return Ok(Ok(false));
        }
        // Unchecked cached rows are shown; a page from the server could be of another file (the
        // one the probe is about to catch), so the network waits for the probe. The app's call
        // waits for it (a moment after an open or a reconnect); while the server cannot be
        // reached (or is slow to answer: the banner says so), it is told there is no page to
        // show, rather than answered at once with nothing added, again and again.
        loop {
            let (verified, banner) = self.with_view(|v| (v.verified, v.banner.is_some()));
            if verified {
                break;
            }
            if inbox.is_some()
                || self.epoch.get() != epoch
                || self.view.borrow().oldest != Some(before)
            {
                return Ok(Ok(false));
            }
            if banner {
                return Ok(Err(TransportError::Network(
                    "older history is not cached here, and the server has not answered yet"
                        .to_string(),
                )));
            }
            self.next_change().await;
        }
        let mut query = TranscriptQuery {
            before: Some(before),
            after: gap_after,
            limit: Some(limit),
            coalesce: rows,
            bytes: if rows { self.config.page_bytes } else { None },
        };
        let mut inbox = inbox;
        let page = loop {
            let fetch = self.transport.transcript(&self.id, &query);
            let answer = match inbox.as_deref_mut() {
                Some(inbox) => self.unless_asked(inbox, fetch).await?,
                None => fetch.await,
            };
            let page = match answer {
                Ok(page) => page,
                Err(e) => return Ok(Err(e)),
            };
            self.count_request(page.bytes);
            if let Err(e) = self.of_the_checked_file(page.file.as_deref()) {
                return Ok(Err(e));
            }
            if let (true, Some(after)) = (page.lines.is_empty(), query.after) {
                // Nothing between the cache's chunk below and `before`: the server holds no line
                // there (a line it skips leaves such a hole). The chunks are joined across it and
                // the page read from the cache; failing that (its writes failed, it was wiped),
                // asked again without the bound.
                if self.purges.get() == purges {
                    let mut cache = self.cache().await;
                    if cache.none_between(after + 1, before).await {
                        if let Some(page) = cache.page(before, limit, rows).await {
                            break (page.lines, false);
                        }
                    }
                }
                query.after = None;
                continue;
            }
            break (page.lines, true);
        };
        let (lines, fetched) = page;
        let current = self.epoch.get() == epoch && self.view.borrow().oldest == Some(before);
        let drawn = current && self.show_older(&lines, None);
        if current {
            shown();
        }
        if fetched {
            // Stopping above the chunk below (a page asked again without the bound reaches
            // below it): the page before this one is not the cache's either.
            let first = lines.first().map(Line::seq);
            if let Some(first) = first.filter(|f| gap_after.is_none_or(|a| a + 1 < *f)) {
                self.uncached.set(Some(Uncached {
                    epoch,
                    purges,
                    before: first,
                    after: gap_after,
                }));
            }
            if self.purges.get() == purges {
                self.cache().await.store_page(&lines, before, rows).await;
            }
        }
        Ok(Ok(drawn))
    }

    /// Whether an older page read from file `file` may join the rows: not when the server
    /// named another file than the one the rows were checked against. Such a page is an old
    /// answer kept by a cache in between (the file was replaced since; a replacement the
    /// server sees resets the stream instead): refused, to be asked again, never shown.
    fn of_the_checked_file(&self, file: Option<&str>) -> TransportResult<()> {
        match (self.file.borrow().as_deref(), file) {
            (Some(checked), Some(page)) if checked != page => {
                Err(TransportError::BadResponse(format!(
                    "an older page of file {page}, not of the file {checked} this session was checked against: an old answer kept by a cache between here and the server?"
                )))
            }
            _ => Ok(()),
        }
    }

    /// The next page read ahead, when it is the one asked for and nothing changed since it was
    /// read; any other answer drops every page read ahead (they follow from this one).
    fn take_ahead(&self, before: u64, limit: usize, rows: bool) -> Option<Ahead> {
        let mut queue = self.ahead.borrow_mut();
        let ahead = queue.pop_front()?;
        let fresh = ahead.epoch == self.epoch.get() && ahead.purges == self.purges.get();
        if fresh && rows && ahead.before == before && ahead.limit == limit {
            return Some(ahead);
        }
        queue.clear();
        None
    }

    /// Reads the pages [`Session::older`] would show next from the cache and keeps them (up to
    /// `AHEAD_BYTES` of lines), so those calls answer from memory, without waiting for the
    /// store. Never asks the server: a page the cache does not hold is left for
    /// `older`. [`Session::run`] starts it once the session is open; drive it after each
    /// `older` (the package's worker does, between the page's calls) to top the pages up. One
    /// runs at a time (a call while one runs waits for it, then tops up what is missing); the
    /// cache's lock is taken page by page, and any clear, reload or purge drops the pages.
    pub async fn read_ahead(&self) {
        let _reading = self.reading_ahead.lock().await;
        let limit = self.config.page_rows;
        loop {
            let next = {
                let view = self.view.borrow();
                let queue = self.ahead.borrow();
                let bytes: usize = queue.iter().map(|a| a.bytes).sum();
                match (view.ready, view.more_history, view.oldest, queue.back()) {
                    _ if bytes >= AHEAD_BYTES => None,
                    // The page below the last one read (its oldest line's seq).
                    (true, true, Some(_), Some(last)) => last.lines.first().map(Line::seq),
                    // The first page below what is shown, unless `older` is loading it.
                    (true, true, Some(oldest), None) if !self.loading_older.get() => Some(oldest),
                    _ => None,
                }
            };
            let Some(before) = next.filter(|b| *b > 1) else {
                return;
            };
            let (epoch, purges) = (self.epoch.get(), self.purges.get());
            let mut cache = self.cache().await;
            let Some(page) = cache.page(before, limit, true).await else {
                return;
            };
            drop(cache);
            if page.lines.is_empty() {
                return;
            }
            let unchanged = self.epoch.get() == epoch && self.purges.get() == purges;
            let mut queue = self.ahead.borrow_mut();
            // Still what `older` asks next: the first page below what is shown, or the page
            // below the last one kept.
            let follows = match queue.back() {
                Some(last) => last.lines.first().map(Line::seq) == Some(before),
                None => self.view.borrow().oldest == Some(before),
            };
            if !(unchanged && follows) {
                return;
            }
            // A page that does not fold is left for `older`, which stops paging on it.
            let Ok(rows) = Transcript::from_lines(&page.lines) else {
                return;
            };
            let bytes = page.lines.iter().map(|l| l.raw().len()).sum();
            queue.push_back(Ahead {
                epoch,
                purges,
                before,
                limit,
                bytes,
                lines: page.lines,
                rows,
            });
        }
    }

    /// Shows the next older page of `page_rows` rows (the seed's scroll-back pager): from the
    /// cache when it holds it, else from the server for the gap only. Answers whether rows were
    /// added; `Ok(false)` when there is no more history, the session is not ready, a page is
    /// already loading, or what is shown changed meanwhile. Answers once a page from the server
    /// is stored too; see [`Session::older_then`] for an answer as soon as it is shown.
    pub async fn older(&self) -> TransportResult<bool> {
        self.older_then(|| {}).await
    }

    /// [`Session::older`], calling `shown` as soon as the page is shown: a page from the server
    /// is stored after that, and the next call may begin meanwhile (its request leaves at once
    /// when the page it asks for is not the cache's either; anything that reads the cache waits
    /// for the write). `shown` is not called when nothing was shown.
    pub async fn older_then(&self, shown: impl FnOnce()) -> TransportResult<bool> {
        let before = {
            let view = self.view.borrow();
            match (view.ready, view.more_history, view.oldest) {
                (true, true, Some(oldest)) if !self.loading_older.get() => oldest,
                _ => return Ok(false),
            }
        };
        // Cleared once the page is shown, or however this ends: a caller that drops the future
        // half-way (a timeout, a select) must not leave the session refusing every older page
        // after it. Cleared once only: a next call may be loading by the time this one ends.
        struct Loading<'a>(Option<&'a Cell<bool>>);
        impl Loading<'_> {
            fn end(&mut self) {
                if let Some(loading) = self.0.take() {
                    loading.set(false);
                }
            }
        }
        impl Drop for Loading<'_> {
            fn drop(&mut self) {
                self.end();
            }
        }
        self.loading_older.set(true);
        let mut loading = Loading(Some(&self.loading_older));
        let shown = self
            .older_page(None, before, self.config.page_rows, true, || {
                loading.end();
                shown();
            })
            .await;
        match shown {
            Ok(result) => result,
            Err(_) => unreachable!("no inbox, so no command interrupts it"),
        }
    }

    /// The file was found replaced: [`Command::Reopen`]. Found so again before any stream has
    /// followed the file since the last reopen, the server's answers disagree (a proxy answering with
    /// an old window, a file replaced again and again): the reopen waits its backoff step, the
    /// banner saying so, rather than asking again at once, in a loop.
    async fn reopen(&self, inbox: &mut mpsc::UnboundedReceiver<Command>) -> Command {
        if self.reopened_unheard.replace(true) {
            self.update(Change::State, |v| v.live = false);
            let ms = self.backoff.borrow_mut().step();
            self.set_banner(Some(format!(
                "The server's answers about this session disagree: its file looked replaced again right after it was reopened (reopening in {} s)",
                ms.div_ceil(1000)
            )));
            if let Err(command) = self.unless_asked(inbox, self.transport.sleep(ms)).await {
                return command;
            }
        }
        Command::Reopen
    }

    /// The stream's next item, or an error once it has sent nothing for `silence_limit_ms`:
    /// a connection that died without closing (a network change, a NAT or a proxy that forgot
    /// it) never errors by itself, and the session would look live while it missed everything.
    async fn heard_within(
        &self,
        stream: &mut T::Stream,
        silence_limit_ms: Option<u32>,
    ) -> Option<TransportResult<StreamItem>> {
        let Some(ms) = silence_limit_ms else {
            return stream.next().await;
        };
        // The stream first: an item that is ready wins over a timer that fired meanwhile.
        match select(pin!(stream.next()), pin!(self.transport.silence(ms))).await {
            Either::Left((item, _)) => item,
            Either::Right(_) => Some(Err(TransportError::Network(format!(
                "the event stream sent nothing for {} s (not even its keep-alive)",
                ms.div_ceil(1000)
            )))),
        }
    }

    /// Follows the stream from the newest line held until a command arrives: every event
    /// appended to the cache and shown once. After an error it reconnects on the schedule, and
    /// checks and catches up first (one request), so a file replaced while the stream was down
    /// is caught before anything of it is appended. A reset frame that says the file is not the
    /// one cached (`replaced`, `ahead`) purges the cache and reopens cold; `behind` keeps the
    /// cache (a gap).
    async fn follow(
        &self,
        inbox: &mut mpsc::UnboundedReceiver<Command>,
        (mut cursor, mut newest): Start,
    ) -> Command {
        let mut reconnect = false;
        loop {
            if reconnect {
                if let Some(tail) = newest.clone() {
                    newest = match self.catch_up(inbox, tail, None).await {
                        Ok(Some(line)) => Some(line),
                        Ok(None) => return self.reopen(inbox).await,
                        Err(command) => return command,
                    };
                    cursor = newest.as_ref().map_or(0, Line::seq);
                }
            }
            reconnect = true;
            // The line held at the cursor, named, so that a file replaced since its check is
            // caught by the stream's first frame, not spliced on.
            let at = newest
                .as_ref()
                .filter(|line| line.seq() == cursor)
                .map(Line::fingerprint);
            let connected = match self
                .unless_asked(
                    inbox,
                    self.transport.events(&self.id, cursor, at.as_deref()),
                )
                .await
            {
                Ok(connected) => connected,
                Err(command) => return command,
            };
            self.count_request(0);
            let error = match connected {
                Ok(mut stream) => {
                    self.update(Change::State, |v| {
                        v.live = true;
                        v.banner = None;
                        // Holding nothing, whatever the stream sends is the server's.
                        v.verified |= cursor == 0;
                    });
                    // Until the server's keep-alive names its interval, the limit the
                    // protocol's default interval sets: the stream opens with a keep-alive, so
                    // one silent that long from its start is held by something in between.
                    let mut silence_limit_ms = self.config.first_frame_ms;
                    let (mut heard, mut keep_alives) = (false, 0);
                    // The newest seq held when a `behind` reset came, until its window's first
                    // line.
                    let mut held_at_reset = 0;
                    let error = loop {
                        let next = self.heard_within(&mut stream, silence_limit_ms);
                        let item = match self.unless_asked(inbox, next).await {
                            Ok(item) => item,
                            Err(command) => return command,
                        };
                        // The stream follows the file once it sends a line, or a keep-alive
                        // after its opening one (an interval with no reset): only then do the
                        // retry schedule and the count of reopens start again. The opening
                        // keep-alive comes before any reset frame, so it proves nothing.
                        let follows = match &item {
                            Some(Ok(StreamItem::Line(_))) => true,
                            Some(Ok(StreamItem::KeepAlive { .. })) => {
                                keep_alives += 1;
                                keep_alives > 1
                            }
                            _ => false,
                        };
                        if follows && !std::mem::replace(&mut heard, true) {
                            self.backoff.borrow_mut().reset();
                            self.reopened_unheard.set(false);
                        }
                        match item {
                            Some(Ok(StreamItem::KeepAlive {
                                silence_limit_ms: ms,
                            })) => {
                                silence_limit_ms = Some(ms);
                            }
                            None => {
                                break TransportError::Network(
                                    "the server closed the stream".into(),
                                )
                            }
                            Some(Err(e)) => break e,
                            Some(Ok(StreamItem::Reset(reason))) => {
                                self.view.borrow_mut().counters.resets += 1;
                                if reason != ResetReason::Behind {
                                    self.purge().await;
                                    self.clear(false);
                                    return self.reopen(inbox).await;
                                }
                                self.clear(true);
                                held_at_reset = held_at_reset.max(cursor);
                                cursor = 0;
                            }
                            Some(Ok(StreamItem::Line(line))) => {
                                if line.seq() <= cursor {
                                    continue; // the stream's contract is seq > after
                                }
                                // Behind means a gap too large to send: a newest window that
                                // starts at or below what was held is another file's (one
                                // shorter, or replaced), whatever the reset said. Its lines
                                // are never laid over the cached ones: purged, opened again.
                                if std::mem::take(&mut held_at_reset) >= line.seq() {
                                    self.purge().await;
                                    self.clear(false);
                                    return self.reopen(inbox).await;
                                }
                                // A reader's cache appends nothing; a line the cache already
                                // covers is not appended again. The stream sends every line
                                // after `cursor` (0 after a reset: what came before is not
                                // known), so a jump from it is a line the server skips.
                                let after = Some(cursor).filter(|c| *c > 0);
                                let lines = std::slice::from_ref(&line);
                                self.cache().await.append_served(after, lines).await;
                                cursor = line.seq();
                                if line.seq() <= self.view.borrow().cursor {
                                    newest = Some(line);
                                    continue; // shown already (a takeover resumes below it)
                                }
                                {
                                    let mut view = self.view.borrow_mut();
                                    view.counters.events += 1;
                                    view.counters.bytes += line.raw().len() as u64;
                                }
                                self.show_newer(std::slice::from_ref(&line));
                                newest = Some(line);
                            }
                        }
                    };
                    error
                }
                Err(e) => e,
            };
            // Not following the file, what is shown is unchecked again: the file may be
            // replaced meanwhile, so older pages come from the cache only until the reconnect's
            // check passes.
            self.update(Change::State, |v| {
                v.live = false;
                v.verified = false;
            });
            if let Err(command) = self.retry(inbox, &error).await {
                return command;
            }
        }
    }
}

/// The session's cache, locked ([`Session::cache`]). Let go, it tells the view whether the
/// cache still keeps what is shown ([`View::storage_error`]): every write and read goes
/// through it, so a failure is reported wherever it happens.
struct Cached<'a, S: Store + 'static, T: Transport> {
    cache: MutexGuard<'a, SessionCache<S>>,
    session: &'a Session<S, T>,
}

impl<S: Store + 'static, T: Transport> Deref for Cached<'_, S, T> {
    type Target = SessionCache<S>;
    fn deref(&self) -> &SessionCache<S> {
        &self.cache
    }
}

impl<S: Store + 'static, T: Transport> DerefMut for Cached<'_, S, T> {
    fn deref_mut(&mut self) -> &mut SessionCache<S> {
        &mut self.cache
    }
}

impl<S: Store + 'static, T: Transport> Drop for Cached<'_, S, T> {
    fn drop(&mut self) {
        let session = self.session;
        // Another tab wrote the session meanwhile: a browser without Web Locks (a page served
        // over plain http from another host) let both take the role. That tab keeps it; this
        // one reads from now on, as a tab that found the role taken does, with nothing to
        // report: what it shows is still the server's, and the other tab keeps it.
        let mut stepped_down = false;
        if matches!(self.cache.write_error(), Some(StoreError::Contended(_))) {
            if let Ok(mut role) = session.role.try_borrow_mut() {
                log::info!(
                    "scrollback: another tab writes session {:?}: reading",
                    session.id
                );
                self.cache.set_reader(true);
                role.take();
                stepped_down = true;
            }
        }
        let error = self.cache.write_error().map(ToString::to_string);
        // Unchanged, or the view is borrowed meanwhile (told at the next release).
        let changed = (session.view.try_borrow_mut())
            .is_ok_and(|v| v.storage_error != error || (stepped_down && v.writer));
        if changed {
            session.update(Change::State, |v| {
                v.storage_error = error;
                v.writer &= !stepped_down;
            });
            // Once per refusal: the error stays until an open or a purge clears it.
            if self.cache.write_error() == Some(&StoreError::QuotaExceeded) {
                let _ = session.refusals.unbounded_send(());
            }
        }
    }
}
