//! `scrollback-server`: the reference transcript server for Scrollback.
//!
//! It serves `DATA/<id>/transcript.jsonl` files, written by any process, over the protocol in
//! the `scrollback` crate's `protocol` module: the session list, transcript windows read
//! backwards in blocks, server-sent events that follow the file, and the writes that drive the
//! demo and the tests. [`spawn`] starts it in-process (tests bind port 0); [`transcript`] holds
//! the pure reading functions for callers that want the server's answers without HTTP.

#![warn(missing_docs)]

pub mod auth;
pub mod config;
pub mod follow;
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
use tokio::sync::watch;
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
    writers: Mutex<HashMap<String, Arc<Mutex<()>>>>,
}

impl App {
    /// The lock that serializes this server's writes to one session.
    pub fn writer(&self, id: &str) -> Arc<Mutex<()>> {
        let mut writers = self.writers.lock().unwrap_or_else(|e| e.into_inner());
        writers.entry(id.to_owned()).or_default().clone()
    }

    /// Appends an event (a JSON object with `type`) to session `id` as its next line.
    pub fn append(&self, id: &str, event: Value) -> io::Result<Line> {
        let Value::Object(event) = event else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an event is an object",
            ));
        };
        let writer = self.writer(id);
        let _guard = writer.lock().unwrap_or_else(|e| e.into_inner());
        transcript::append(&session::transcript_path(&self.config.data, id), event)
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
    let app = Arc::new(App {
        config,
        stats: Arc::default(),
        summaries: Default::default(),
        agent: Default::default(),
        shutdown: on_shutdown.clone(),
        writers: Mutex::default(),
    });
    let router = routes::router(app);
    let mut stop = on_shutdown;
    let task = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            })
            .await
    });
    Ok(Server {
        addr,
        shutdown,
        task,
    })
}
