//! The server's configuration: the command line, and what tests build in-process.

use clap::Parser;
use std::path::PathBuf;

/// `scrollback-server`: the reference transcript server for Scrollback.
///
/// Serves `DATA/<id>/transcript.jsonl` files (written by any process) over the Scrollback
/// protocol: the session list, transcript windows, server-sent events, and writes.
#[derive(Debug, Clone, Parser)]
#[command(name = "scrollback-server", version, about, long_about = None)]
pub struct Config {
    /// The data directory: one folder per session holding `transcript.jsonl`.
    #[arg(long, value_name = "DIR", default_value = "./data")]
    pub data: PathBuf,
    /// The address to listen on (loopback by default; port 0 picks a free port).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Seed missing sandbox sessions into the data directory (one long one, id `long`) and
    /// answer posted messages by streaming a reply.
    #[arg(long)]
    pub sandbox: bool,
    /// Serve this directory at `/` (the demo page, `index.html`).
    #[arg(long, value_name = "DIR")]
    pub www: Option<PathBuf>,
    /// Serve this directory at `/pkg/` (the built npm package).
    #[arg(long, value_name = "DIR")]
    pub pkg: Option<PathBuf>,
    /// Require this token on every route (`Authorization: Bearer T`, `?token=T` or the cookie
    /// `scrollback_token=T`). Also read from the environment, which keeps it out of `ps`.
    #[arg(
        long,
        value_name = "T",
        env = "SCROLLBACK_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Allow cross-origin requests from this origin (repeatable), e.g. `http://localhost:5173`.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// Also answer requests whose `Host` is this (repeatable; `name` or `name:port`). By default
    /// only the listening address is answered (and `localhost` when it is a loopback address):
    /// a forged `Host` (DNS rebinding) gets 421.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// The most open connections (default: derived from the descriptor limit). When full, the
    /// oldest connection with no request in progress is closed to make room.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Milliseconds a client has to send a request's head before the connection is closed.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub header_timeout_ms: u64,
    /// Milliseconds a request body may pause between two pieces before the request fails; past
    /// this long, a body must also have averaged `listen::MIN_BODY_BYTES_PER_SEC` (8 KiB/s)
    /// since, or it fails.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub body_timeout_ms: u64,
    /// Milliseconds a client may leave unread what it was sent (its receive window full)
    /// before its connection is closed, with what was queued for it: a stalled reader holds
    /// no memory for long. (An idle stream sends a keep-alive every `--keep-alive-ms`; a client
    /// that reads it is never stalled.)
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    pub stall_timeout_ms: u64,
    /// Milliseconds an event stream stays silent at most: after this long with nothing to send
    /// it sends a keep-alive frame, which names the interval, so that a client can tell a dead
    /// connection from a quiet session (it reconnects after three intervals of silence).
    #[arg(long, value_name = "MS", default_value_t = scrollback_protocol::KEEP_ALIVE_MS,
          value_parser = keep_alive_ms)]
    pub keep_alive_ms: u32,
    /// The most transcript `PUT`s received at once; one more gets 503 with `Retry-After`.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub max_puts: usize,
    /// Megabytes (MiB) the pages, catch-ups and event streams' queues being sent may hold at
    /// once; one more answer gets 503 with `Retry-After`, a stream whose new lines do not fit
    /// ends (one larger than the whole budget is sent when nothing else is).
    #[arg(long, value_name = "MB", default_value_t = 256)]
    pub answer_budget_mb: u64,
    /// Milliseconds an answer may hold its share of `--answer-budget-mb` before its connection
    /// may be closed to make room for another that cannot have its own (the oldest first): a
    /// client that reads slowly cannot keep every other answer refused.
    #[arg(long, value_name = "MS", default_value_t = crate::answers::GRACE_MS)]
    pub answer_grace_ms: u64,
    /// Milliseconds between the deltas of a sandbox reply.
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub pace_ms: u64,
}

/// A `--keep-alive-ms` value: within [`scrollback_protocol::KEEP_ALIVE_BOUNDS_MS`], the
/// intervals a client believes.
fn keep_alive_ms(value: &str) -> Result<u32, String> {
    let bounds = scrollback_protocol::KEEP_ALIVE_BOUNDS_MS;
    match value.parse::<u32>() {
        Ok(ms) if bounds.contains(&ms) => Ok(ms),
        _ => Err(format!(
            "a whole number of milliseconds from {} to {}",
            bounds.start(),
            bounds.end()
        )),
    }
}

impl Config {
    /// A configuration for `data` on a free loopback port, everything else off (for tests).
    pub fn new(data: impl Into<PathBuf>) -> Config {
        Config {
            data: data.into(),
            addr: "127.0.0.1:0".into(),
            sandbox: false,
            www: None,
            pkg: None,
            token: None,
            allow_origin: Vec::new(),
            allow_host: Vec::new(),
            max_connections: None,
            header_timeout_ms: 10_000,
            body_timeout_ms: 30_000,
            stall_timeout_ms: 60_000,
            keep_alive_ms: scrollback_protocol::KEEP_ALIVE_MS,
            max_puts: 4,
            answer_budget_mb: 256,
            answer_grace_ms: crate::answers::GRACE_MS,
            pace_ms: 30,
        }
    }
}
