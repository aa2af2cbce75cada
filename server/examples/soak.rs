//! The server under load (issue 19's figures): runs the release `scrollback-server` binary as a
//! child process on a free loopback port and prints
//!
//! - its RSS with 20 and with 200 stalled `/events` streams (clients that stop reading) while
//!   50 MB is appended to the session by another writer, 1.5 s after they close and at 12 s
//!   (once the blocking pool's idle threads are gone);
//! - its CPU% and threads with 300 and 3,000 idle streams;
//! - the time of `GET /transcript?limit=1` and `GET /sessions` with a 60 MB line in a session;
//! - the time of a coalesced page over two adjacent 1.6M-char deltas (timed out at 90 s);
//! - the time and the bytes on the wire of a page of a 64 MB line of words, compressed as it
//!   leaves with gzip (what Firefox asks for over plain HTTP) and with brotli.
//!
//! Run it with:
//!
//! ```text
//! cargo build --release -p scrollback-server
//! cargo run --release -p scrollback-server --example soak
//! cargo run --release -p scrollback-server --example soak -- stalled   # or idle, or long
//! ```
//!
//! `SOAK_SERVER=/path/to/scrollback-server` measures another build (e.g. an older one). Raises
//! its own descriptor limit for the idle streams. Loopback only; every loop is bounded.

use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

fn server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SOAK_SERVER") {
        return path.into();
    }
    let exe = std::env::current_exe().unwrap();
    // target/release/examples/soak -> target/release/scrollback-server
    exe.parent()
        .and_then(Path::parent)
        .map(|d| d.join("scrollback-server"))
        .unwrap()
}

struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(data: &Path) -> Server {
        let binary = server_binary();
        assert!(
            binary.exists(),
            "{} is missing: cargo build --release -p scrollback-server",
            binary.display()
        );
        let mut child = Command::new(&binary)
            .args(["--data", data.to_str().unwrap(), "--addr", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let addr = first
            .split("http://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .expect("the server says where it listens")
            .to_owned();
        Server { child, addr }
    }

    fn status(&self, field: &str) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }

    fn rss_mb(&self) -> f64 {
        self.status("VmRSS:") as f64 / 1024.0
    }

    /// CPU seconds used so far (user + system).
    fn cpu(&self) -> f64 {
        let text = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        let after = text.rsplit_once(')').unwrap().1;
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        // SAFETY: sysconf reads a constant.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        ticks as f64 / hz
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn line(seq: u64, event: serde_json::Value) -> String {
    format!(
        "{}\n",
        json!({"seq": seq, "ts": 1788546972.6 + seq as f64, "event": event})
    )
}

fn write_session(data: &Path, id: &str, text: &str) -> PathBuf {
    std::fs::create_dir_all(data.join(id)).unwrap();
    let path = data.join(id).join("transcript.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

/// An `/events` request whose client never reads (a small receive buffer, never drained).
async fn stalled_stream(addr: &str, id: &str, after: u64) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    let _ = socket.set_recv_buffer_size(4096);
    let mut conn = socket.connect(addr.parse().unwrap()).await.unwrap();
    let head = format!("GET /sessions/{id}/events?after={after} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    conn.write_all(head.as_bytes()).await.unwrap();
    conn
}

async fn stalled(data: &Path, streams: usize) {
    let server = Server::start(data);
    let id = format!("stall{streams}");
    let path = write_session(
        data,
        &id,
        &line(1, json!({"type": "status", "status": "idle"})),
    );
    let start = server.rss_mb();
    let mut conns = Vec::new();
    for _ in 0..streams {
        conns.push(stalled_stream(&server.addr, &id, 1).await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // 50 MB in 2 KB lines, 1 MB at a time, with a moment between for the streams to look.
    let pad = "z".repeat(2_000);
    let mut seq = 1;
    let mut peak = server.rss_mb();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    for _ in 0..50 {
        let mut chunk = String::new();
        while chunk.len() < 1 << 20 {
            seq += 1;
            chunk.push_str(&line(seq, json!({"type": "toolResult", "output": pad})));
        }
        file.write_all(chunk.as_bytes()).unwrap();
        tokio::time::sleep(Duration::from_millis(40)).await;
        peak = peak.max(server.rss_mb());
    }
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    peak = peak.max(server.rss_mb());
    let loaded = server.rss_mb();
    drop(conns);
    let closed = Instant::now();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let soon = server.rss_mb();
    // The blocking pool's threads (one per stream looking at the file at once) stay 10 s idle.
    tokio::time::sleep(Duration::from_secs(12).saturating_sub(closed.elapsed())).await;
    println!(
        "{streams:>4} stalled streams, 50 MB appended: RSS {start:.0} MB -> peak {peak:.0} MB ({loaded:.0} MB at the end), {soon:.0} MB 1.5 s after they closed, {:.0} MB at 12 s ({} threads)",
        server.rss_mb(),
        server.status("Threads:"),
    );
}

async fn idle(data: &Path, streams: usize) {
    let server = Server::start(data);
    let id = format!("idle{streams}");
    write_session(
        data,
        &id,
        &line(1, json!({"type": "status", "status": "idle"})),
    );
    let mut conns = Vec::new();
    for _ in 0..streams {
        conns.push(stalled_stream(&server.addr, &id, 1).await);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (cpu, wall) = (server.cpu(), Instant::now());
    tokio::time::sleep(Duration::from_secs(5)).await;
    let used = (server.cpu() - cpu) / wall.elapsed().as_secs_f64() * 100.0;
    println!(
        "{streams:>5} idle streams: {used:.1}% of a core, {} threads, RSS {:.0} MB",
        server.status("Threads:"),
        server.rss_mb()
    );
    drop(conns);
}

async fn timed(http: &reqwest::Client, url: &str) -> String {
    let t = Instant::now();
    match http.get(url).send().await {
        Ok(r) => {
            let status = r.status();
            let body = r.bytes().await.map(|b| b.len()).unwrap_or(0);
            format!(
                "{:.3} s ({status}, {body} bytes)",
                t.elapsed().as_secs_f64()
            )
        }
        Err(e) if e.is_timeout() => format!("> {:.0} s (timed out)", t.elapsed().as_secs_f64()),
        Err(e) => format!("failed: {e}"),
    }
}

/// [`timed`], asking for `encoding` and counting the bytes as sent (not decompressed).
async fn timed_encoded(url: &str, encoding: &str) -> String {
    let raw = reqwest::Client::builder()
        .no_gzip()
        .timeout(Duration::from_secs(90))
        .build()
        .unwrap();
    let t = Instant::now();
    let r = raw
        .get(url)
        .header("accept-encoding", encoding)
        .send()
        .await
        .unwrap();
    let sent = r.headers().get("content-encoding").cloned();
    let body = r.bytes().await.map(|b| b.len()).unwrap_or(0);
    format!(
        "{:.3} s ({body} bytes, {sent:?})",
        t.elapsed().as_secs_f64()
    )
}

/// About `bytes` of words separated by spaces, from a fixed seed (text that compresses as
/// prose does, about 3:1).
fn words(bytes: usize) -> String {
    const WORDS: [&str; 16] = [
        "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "with", "was", "on",
        "file", "error", "build",
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut text = String::with_capacity(bytes + 8);
    while text.len() < bytes {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        text.push_str(WORDS[(state % 16) as usize]);
        text.push(if state % 11 == 0 { '.' } else { ' ' });
    }
    text
}

async fn long_lines(data: &Path) {
    let mut text = String::new();
    for seq in 1..=3 {
        text.push_str(&line(seq, json!({"type": "userMessage", "text": "hi"})));
    }
    text.push_str(&line(
        4,
        json!({"type": "toolResult", "output": "q".repeat(60 << 20)}),
    ));
    write_session(data, "huge", &text);
    let m = 1_600_000;
    let ids = json!({"messageId": "m1", "threadId": "t1"});
    let delta = |seq, tail: &str| {
        let mut event = ids.clone();
        event["type"] = "assistantText".into();
        event["text"] = format!("{}{tail}", "a".repeat(m)).into();
        line(seq, event)
    };
    write_session(
        data,
        "deltas",
        &format!("{}{}", delta(1, "b"), delta(2, "c")),
    );
    write_session(
        data,
        "words",
        &line(1, json!({"type": "toolResult", "output": words(64 << 20)})),
    );
    let server = Server::start(data);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(90))
        .build()
        .unwrap();
    let base = format!("http://{}", server.addr);
    println!(
        "a 60 MB line: GET ?limit=1 {}",
        timed(&http, &format!("{base}/sessions/huge/transcript?limit=1")).await
    );
    println!(
        "a 60 MB line: GET /sessions {}",
        timed(&http, &format!("{base}/sessions")).await
    );
    for encoding in ["gzip", "br"] {
        println!(
            "a 64 MB line of words: GET ?limit=1, {encoding} {}",
            timed_encoded(
                &format!("{base}/sessions/words/transcript?limit=1"),
                encoding
            )
            .await
        );
    }
    println!(
        "two 1.6M-char deltas: coalesced page {}",
        timed(
            &http,
            &format!("{base}/sessions/deltas/transcript?coalesce=1")
        )
        .await
    );
}

fn raise_descriptor_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max.min(1 << 16);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

#[tokio::main]
async fn main() {
    raise_descriptor_limit();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    println!("server: {}", server_binary().display());
    let only = std::env::args().nth(1);
    let run = |part: &str| only.as_deref().is_none_or(|o| o == part);
    if run("stalled") {
        stalled(&data, 20).await;
        stalled(&data, 200).await;
    }
    if run("idle") {
        idle(&data, 300).await;
        idle(&data, 3_000).await;
    }
    if run("long") {
        // A folder of its own: the list's time is the 60 MB line's, not the 50 MB files'
        // above (a cold summary walks back through a file for its newest settings line).
        let data = dir.path().join("long");
        std::fs::create_dir_all(&data).unwrap();
        long_lines(&data).await;
    }
}
