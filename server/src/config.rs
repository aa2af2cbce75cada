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
    /// Milliseconds between the deltas of a sandbox reply.
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub pace_ms: u64,
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
            pace_ms: 30,
        }
    }
}
