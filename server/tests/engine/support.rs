//! Shared by the engine tests (this folder's modules): a real server over a temporary data folder with
//! a cache folder beside it, the native transport with what the engine asks of it recorded,
//! sessions run on the test's `LocalSet`, and waiting (with a generous deadline, never a fixed
//! sleep) for what a session shows.
#![allow(dead_code)]

use scrollback::engine::{Engine, Session, View};
use scrollback::protocol::{last_seq, CatchUpQuery, Line, SessionSummary, TranscriptQuery};
use scrollback::store::{FsStore, Store, StoreResult};
use scrollback::testing::{Hook, Op};
use scrollback::transport::{CatchUp, HttpTransport, Page, Transport, TransportResult};
use scrollback_server::{spawn, Config, Server};
use std::cell::RefCell;
use std::future::Future;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::{JoinHandle, LocalSet};

/// How many times a wait polls, 5 ms apart, before it fails the test: 30 s, generous for a
/// loaded machine; a wait that is met returns at once.
const WAIT_POLLS: u32 = 6000;

/// Runs `f` to completion on a current-thread runtime, inside a `LocalSet` (a session's run
/// task is not `Send`).
pub fn local<F: Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(LocalSet::new().run_until(f))
}

/// A real server over a fresh temporary folder: its data in `data`, and `cache` beside it for
/// the client's cache.
pub struct TestServer {
    pub tmp: tempfile::TempDir,
    pub data: PathBuf,
    pub cache: PathBuf,
    pub server: Server,
}

impl TestServer {
    /// Spawns the server on a free loopback port, configured by `f`.
    pub async fn start(f: impl FnOnce(&mut Config)) -> TestServer {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let mut config = Config::new(&data);
        f(&mut config);
        let server = spawn(config).await.unwrap();
        TestServer {
            cache: tmp.path().join("cache"),
            data,
            tmp,
            server,
        }
    }

    /// The server's transcript file of session `id`.
    pub fn path(&self, id: &str) -> PathBuf {
        self.data.join(id).join("transcript.jsonl")
    }

    /// The lines of session `id`'s transcript file, as the server holds them.
    pub fn lines(&self, id: &str) -> Vec<Line> {
        std::fs::read_to_string(self.path(id))
            .unwrap()
            .lines()
            .map(|l| Line::parse(l).unwrap())
            .collect()
    }

    /// Writes session `id` as a long sandbox conversation of `events` events.
    pub fn long_session(&self, id: &str, events: usize) {
        std::fs::create_dir_all(self.data.join(id)).unwrap();
        let file = std::fs::File::create(self.path(id)).unwrap();
        scrollback_server::sandbox::write_long(std::io::BufWriter::new(file), id, events).unwrap();
    }
}

/// The native transport with what the engine asked of it recorded: every `/transcript` and
/// catch-up query it sent, and every delay it slept for (each slept as 1 ms when `fast_clock`,
/// so retry delays are checked exactly without waiting them out).
pub struct Recorded {
    pub inner: HttpTransport,
    pub queries: RefCell<Vec<String>>,
    pub sleeps: Rc<RefCell<Vec<u32>>>,
    pub fast_clock: bool,
    /// Run once, just before the next `/events` request is sent (what changes on the server
    /// between the check and the stream).
    pub before_events: RefCell<Option<Box<dyn FnOnce()>>>,
    /// `/transcript` requests this matches are sent only once the gate is opened
    /// (`Notify::notify_one`, which may come first): a slow answer, made to order.
    pub held: RefCell<Option<Held>>,
}

/// A test's hold on some `/transcript` requests: which, and the gate that lets them go.
pub type Held = (Box<dyn Fn(&TranscriptQuery) -> bool>, Rc<Notify>);

impl Recorded {
    /// Records the queries of `inner`; sleeps as asked.
    pub fn new(inner: HttpTransport) -> Self {
        Recorded {
            inner,
            queries: RefCell::default(),
            sleeps: Rc::default(),
            fast_clock: false,
            before_events: RefCell::default(),
            held: RefCell::default(),
        }
    }

    /// Records the queries of `inner` and its sleeps into `sleeps`, each slept as 1 ms.
    pub fn fast_clock(inner: HttpTransport, sleeps: Rc<RefCell<Vec<u32>>>) -> Self {
        Recorded {
            sleeps,
            fast_clock: true,
            ..Recorded::new(inner)
        }
    }
}

impl Transport for Recorded {
    type Stream = <HttpTransport as Transport>::Stream;

    fn server(&self) -> (&str, u16, &str) {
        self.inner.server()
    }
    async fn sessions(&self) -> TransportResult<Vec<SessionSummary>> {
        self.inner.sessions().await
    }
    async fn transcript(&self, id: &str, query: &TranscriptQuery) -> TransportResult<Page> {
        self.queries.borrow_mut().push(query.to_query_string());
        let gate = match &*self.held.borrow() {
            Some((holds, gate)) if holds(query) => Some(gate.clone()),
            _ => None,
        };
        if let Some(gate) = gate {
            gate.notified().await;
        }
        self.inner.transcript(id, query).await
    }
    async fn catch_up(&self, id: &str, query: &CatchUpQuery) -> TransportResult<CatchUp> {
        self.queries
            .borrow_mut()
            .push(format!("catchup:{}", query.to_query_string()));
        self.inner.catch_up(id, query).await
    }
    async fn delete(&self, id: &str) -> TransportResult<()> {
        self.inner.delete(id).await
    }
    async fn post_message(&self, id: &str, text: &str) -> TransportResult<()> {
        self.inner.post_message(id, text).await
    }
    async fn events(
        &self,
        id: &str,
        after: u64,
        at: Option<&str>,
    ) -> TransportResult<Self::Stream> {
        let hook = self.before_events.borrow_mut().take();
        if let Some(hook) = hook {
            hook();
        }
        self.inner.events(id, after, at).await
    }
    async fn sleep(&self, ms: u32) {
        self.sleeps.borrow_mut().push(ms);
        if self.fast_clock {
            tokio::time::sleep(Duration::from_millis(1)).await;
        } else {
            self.inner.sleep(ms).await;
        }
    }
    async fn silence(&self, ms: u32) {
        // A stream's silence is waited out in full, whatever the retry clock.
        self.inner.silence(ms).await;
    }
}

/// Waits until what `session` shows meets `cond`; fails the test, naming `what` and the view's
/// state, when it never does.
pub async fn wait<S: Store + 'static, T: Transport>(
    session: &Session<S, T>,
    what: &str,
    cond: impl Fn(&View) -> bool,
) {
    for _ in 0..WAIT_POLLS {
        if session.with_view(&cond) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!(
        "timed out waiting for {what}: {:?}",
        session.with_view(|v| (
            (v.ready, v.verified, v.live, v.writer),
            (v.cursor, v.oldest),
            v.banner.clone(),
            v.error.clone()
        ))
    );
}

/// A session running on the current `LocalSet`, with its run task.
pub struct Running<S: Store, T: Transport> {
    pub session: Rc<Session<S, T>>,
    pub run: JoinHandle<()>,
}

impl<S: Store + 'static, T: Transport + 'static> Running<S, T> {
    /// Runs `session` (its [`Session::run`]) on the current `LocalSet`.
    pub fn spawn(session: Session<S, T>) -> Self {
        let session = Rc::new(session);
        let s = session.clone();
        let run = tokio::task::spawn_local(async move { s.run().await });
        Running { session, run }
    }

    /// Opens session `id` from the engine's list, as an app does, and runs it.
    pub async fn open(engine: &Engine<S, T>, id: &str) -> Self {
        let summary = engine
            .sessions()
            .await
            .unwrap()
            .into_iter()
            .find(|s| s.id == id)
            .unwrap();
        Running::spawn(engine.open(summary, None).unwrap())
    }

    /// See [`wait`].
    pub async fn wait(&self, what: &str, cond: impl Fn(&View) -> bool) {
        wait(&self.session, what, cond).await;
    }

    /// Waits for the live stream.
    pub async fn live(&self) {
        self.wait("the stream", |v| v.live).await;
    }

    /// Pages back until the start of the conversation.
    pub async fn scroll_to_start(&self) {
        for _ in 0..10_000 {
            if !self.session.with_view(|v| v.more_history) {
                return;
            }
            self.session.older().await.unwrap();
        }
        panic!("never reached the start");
    }

    /// Closes the session and waits for its run task to end.
    pub async fn close(self) -> Rc<Session<S, T>> {
        self.session.close();
        self.run.await.unwrap();
        self.session
    }
}

/// Lets the other tasks run before each store operation, as a browser's store does (every
/// IndexedDB or OPFS call is answered in a later turn): what another task does in the middle of
/// a store operation is tried natively. Tokio's yield, so that a test's own
/// `tokio::task::yield_now` loop and the store's calls take turns.
#[derive(Debug, Default)]
pub struct Yielding;

impl Hook for Yielding {
    async fn before(&self, _: Op<'_>) -> StoreResult<()> {
        tokio::task::yield_now().await;
        Ok(())
    }
}

/// Every chunk the client's cache holds for `id` is exactly what the server answers for that
/// chunk's coverage (raw chunks line for line, row chunks coalesced).
pub async fn assert_chunks_are_servers<T: Transport>(
    base: &TestServer,
    client: &Engine<FsStore, T>,
    id: &str,
) -> usize {
    use scrollback::chunks::coverage::Kind;
    use scrollback::chunks::names::parse_chunk_name;
    let store = FsStore::new(&base.cache);
    let dir = format!("{}/{id}", client.cache().dir());
    let mut n = 0;
    for entry in store.list(&dir).await.unwrap_or_default() {
        let Some((first, end, kind)) = parse_chunk_name(&entry.name) else {
            continue;
        };
        let bytes = store
            .read(&format!("{dir}/{}", entry.name), 0, usize::MAX)
            .await
            .unwrap();
        let lines: Vec<Line> = String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| Line::parse(l).unwrap())
            .collect();
        let Some(last) = lines.last() else { continue };
        let end = end.unwrap_or(last_seq(last) + 1);
        let q = TranscriptQuery {
            before: Some(end),
            after: Some(first - 1),
            limit: Some(10_000),
            coalesce: kind == Kind::Rows,
            bytes: None,
        };
        let served = scrollback_server::transcript::window(&base.path(id), &q).unwrap();
        assert_eq!(
            lines.iter().map(Line::raw).collect::<Vec<_>>(),
            served.iter().map(Line::raw).collect::<Vec<_>>(),
            "chunk {} is not the server's [{first}, {end})",
            entry.name
        );
        n += 1;
    }
    n
}

/// What is shown is the server's transcript from the oldest row shown to the newest.
pub fn assert_shows_server<T: Transport>(session: &Session<FsStore, T>, server: &[Line]) {
    session.with_view(|v| {
        let from = v.oldest.expect("something shown") as usize;
        let expected =
            scrollback::fold::Transcript::from_lines(&server[from - 1..v.cursor as usize]).unwrap();
        assert_eq!(
            v.transcript.rows(),
            expected.rows(),
            "rows differ from the server's"
        );
    });
}
