//! `scrollback-server`: the reference transcript server for Scrollback.
//!
//! It serves `DATA/<id>/transcript.jsonl` files, written by any process, over the protocol in
//! the `scrollback` crate's `protocol` module: the session list, transcript windows read
//! backwards in blocks, server-sent events that follow the file, and the writes that drive the
//! demo and the tests. [`spawn`] starts it in-process (tests bind port 0); [`transcript`] holds
//! the pure reading functions for callers that want the server's answers without HTTP.

#![warn(missing_docs)]

pub mod answers;
pub mod auth;
pub mod config;
pub mod error;
pub mod follow;
pub mod listen;
pub mod memory;
pub mod pkg;
pub mod routes;
pub mod sandbox;
pub mod session;
pub mod stats;
pub mod transcript;

pub use config::Config;

use scrollback_protocol::Line;
use serde_json::Value;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;

/// What every handler shares.
pub struct App {
    /// The configuration the server was started with.
    pub config: Config,
    /// Per-route counters.
    pub stats: Arc<stats::Stats>,
    /// The session list's cache.
    pub summaries: session::Summaries,
    /// The sandbox agent's state.
    pub agent: sandbox::agent::Agent,
    /// Changes to `true` when the server shuts down (streams and replies end).
    pub shutdown: watch::Receiver<bool>,
    /// The change notifications the streams share.
    pub watchers: follow::Watchers,
    /// The open connections and their cap.
    pub connections: Arc<listen::Connections>,
    /// The `Host` and `Origin` rules.
    pub site: Arc<auth::Site>,
    /// Slots for transcript `PUT`s being received.
    pub puts: Arc<Semaphore>,
    /// The build turns and the memory budget of the pages and catch-ups being sent.
    pub answers: answers::Answers,
    writers: Writers,
}

/// The locks that serialize this server's writes to each session, made as sessions are written.
#[derive(Debug, Default)]
struct Writers(Mutex<HashMap<String, Arc<Mutex<()>>>>);

/// Session locks kept before the idle ones are let go.
const WRITERS_KEPT: usize = 1024;

impl Writers {
    /// Session `id`'s lock. Past [`WRITERS_KEPT`], making one lets go of the idle ones (held
    /// by no request: only the map has them, so no holder or waiter can be left without its
    /// lock): every id a client ever wrote to stayed in memory (20,000 PUTs and DELETEs of new
    /// ids kept 3.6 MB).
    fn get(&self, id: &str) -> Arc<Mutex<()>> {
        let mut writers = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if writers.len() >= WRITERS_KEPT && !writers.contains_key(id) {
            writers.retain(|_, lock| Arc::strong_count(lock) > 1);
        }
        writers.entry(id.to_owned()).or_default().clone()
    }
}

/// How long a `POST` waits for a torn last line (another writer mid-line) to be completed
/// before it is refused with 503.
pub const TORN_WAIT: Duration = Duration::from_secs(2);

/// Whether the file's last byte is a newline (or the file is empty): an append may go there.
fn ends_complete(path: &std::path::Path) -> io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = transcript::open_regular(path)?;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(true);
    }
    let mut last = [0u8];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

impl App {
    /// The lock that serializes this server's writes to one session.
    pub fn writer(&self, id: &str) -> Arc<Mutex<()>> {
        self.writers.get(id)
    }

    /// Appends an event (a JSON object with `type`) to session `id` as its next line. When the
    /// file ends in a torn line (another writer mid-line) nothing is written and the error is
    /// `WouldBlock`: the caller may wait and try again ([`App::append_waiting`]).
    pub fn append(&self, id: &str, event: Value) -> io::Result<Line> {
        let Value::Object(event) = event else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an event is an object",
            ));
        };
        let writer = self.writer(id);
        let _guard = writer.lock().unwrap_or_else(|e| e.into_inner());
        let path = session::transcript_path(&self.config.data, id);
        if !ends_complete(&path)? {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the transcript's last line is still being written; try again",
            ));
        }
        transcript::append(&path, event)
    }

    /// Runs `attempt` (an append) again while it finds a torn last line, for at most
    /// [`TORN_WAIT`]; then its `WouldBlock` stands. Each attempt runs on the blocking pool: an
    /// append reads the file's last line and waits for the session's writer lock, which must
    /// never hold up the runtime's threads (a long last line, concurrent posts, a slow disk).
    pub async fn append_waiting<T: Send + 'static>(
        &self,
        attempt: impl Fn() -> io::Result<T> + Send + Sync + 'static,
    ) -> io::Result<T> {
        let attempt = Arc::new(attempt);
        let deadline = tokio::time::Instant::now() + TORN_WAIT;
        loop {
            let run = attempt.clone();
            let done = tokio::task::spawn_blocking(move || run())
                .await
                .unwrap_or_else(|e| Err(io::Error::other(e)));
            match done {
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                other => return other,
            }
        }
    }
}

/// A running server.
pub struct Server {
    addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<io::Result<()>>,
}

impl Server {
    /// The address it is listening on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://HOST:PORT` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, ends every stream and sandbox reply, and waits for the server to stop.
    pub async fn shutdown(self) -> io::Result<()> {
        let _ = self.shutdown.send(true);
        self.wait().await
    }

    /// Waits until the server stops (it runs until [`Server::shutdown`] or an error).
    pub async fn wait(self) -> io::Result<()> {
        self.task.await.map_err(io::Error::other)?
    }
}

/// Starts a server: creates the data directory, seeds the sandbox when asked, binds
/// `config.addr` (port 0 picks one) and serves until shut down.
pub async fn spawn(config: Config) -> io::Result<Server> {
    std::fs::create_dir_all(&config.data)?;
    if config.sandbox {
        let data = config.data.clone();
        tokio::task::spawn_blocking(move || sandbox::seed(&data))
            .await
            .map_err(io::Error::other)??;
    }
    let listener = tokio::net::TcpListener::bind(config.addr.as_str()).await?;
    let addr = listener.local_addr()?;
    let (shutdown, on_shutdown) = watch::channel(false);
    let cap = listen::descriptor_cap();
    let max = config.max_connections.map_or(cap, |m| m.min(cap));
    let connections = Arc::new(listen::Connections::new(max));
    let site = Arc::new(auth::Site::new(
        addr,
        &config.allow_host,
        &config.allow_origin,
    ));
    let timeouts = listen::Timeouts {
        header: Duration::from_millis(config.header_timeout_ms.max(1)),
        body: Duration::from_millis(config.body_timeout_ms.max(1)),
        stall: Duration::from_millis(config.stall_timeout_ms.max(1)),
    };
    tokio::spawn(memory::release().run(on_shutdown.clone()));
    let app = Arc::new(App {
        puts: Arc::new(Semaphore::new(config.max_puts.max(1))),
        answers: answers::Answers::with_grace(
            config.answer_budget_mb.saturating_mul(1 << 20),
            Duration::from_millis(config.answer_grace_ms),
        ),
        config,
        stats: Arc::default(),
        summaries: Default::default(),
        agent: Default::default(),
        shutdown: on_shutdown.clone(),
        watchers: follow::Watchers::new(),
        connections: connections.clone(),
        site,
        writers: Writers::default(),
    });
    let router = routes::router(app);
    let task = tokio::spawn(listen::serve(
        listener,
        router,
        connections,
        timeouts,
        on_shutdown,
    ));
    Ok(Server {
        addr,
        shutdown,
        task,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_session_locks_are_let_go_and_held_ones_kept() {
        let writers = Writers::default();
        let held = writers.get("held");
        let _guard = held.lock().unwrap();
        for i in 0..20_000 {
            drop(writers.get(&format!("s{i}")));
        }
        let kept = writers.0.lock().unwrap().len();
        assert!(kept <= WRITERS_KEPT, "{kept} locks kept");
        // The held one is still the lock a writer of that session waits on.
        assert!(Arc::ptr_eq(&held, &writers.get("held")));
    }
}
