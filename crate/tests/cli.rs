//! The `scrollback` CLI as a user runs it: the real binary (built by cargo for this test) against
//! the real `scrollback-server --sandbox` binary on a free loopback port, with a filesystem cache
//! in a temporary folder. Requests are counted by the server (`GET /stats`).
//!
//! The server binary is the one next to this test's own executable (`target/release/` under
//! `cargo test --workspace --release`, which builds it; `target/ci/` under `npm test`); a narrow
//! run needs it built first:
//! `cargo build --release -p scrollback-server`.
#![cfg(not(target_arch = "wasm32"))]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long anything may take before the test gives up (a slow shared machine).
const DEADLINE: Duration = Duration::from_secs(120);

/// The real server binary, running over a data directory; killed when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    /// Starts `scrollback-server --sandbox` over `data` on a free port; returns once it listens.
    fn start(data: &Path) -> Server {
        let bin = server_binary();
        let mut child = Command::new(&bin)
            .args(["--sandbox", "--addr", "127.0.0.1:0", "--data"])
            .arg(data)
            .env_remove("SCROLLBACK_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        // Its first line, once it listens: "scrollback-server: listening on http://127.0.0.1:P/".
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let url = first
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {first:?}"))
            .trim_end_matches('/')
            .to_owned();
        Server { child, url }
    }

    /// `GET /stats`: the per-route request counters.
    fn stats(&self) -> Value {
        let text = block_on(async {
            reqwest::get(format!("{}/stats", self.url))
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        });
        serde_json::from_str(&text).unwrap()
    }

    /// The requests `route` has had so far.
    fn requests(&self, route: &str) -> u64 {
        self.stats()[route]["requests"].as_u64().unwrap()
    }

    /// Posts a user message to a session, as another client would.
    fn post(&self, id: &str, text: &str) {
        let status = block_on(async {
            reqwest::Client::new()
                .post(format!("{}/sessions/{id}/messages", self.url))
                .header("content-type", "application/json")
                .body(serde_json::json!({ "text": text }).to_string())
                .send()
                .await
                .unwrap()
                .status()
        });
        assert!(status.is_success(), "{status}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `target/<profile>/scrollback-server`: this test runs from `target/<profile>/deps/`.
fn server_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .join(format!("scrollback-server{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is not built: run `cargo build --release -p scrollback-server` (or `cargo test --workspace --release`)",
        bin.display()
    );
    bin
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// The CLI pointed at `url` with its cache in `cache` (no token, nothing from the environment).
fn cli(url: &str, cache: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_scrollback"));
    command
        .args(args)
        .env("SCROLLBACK_SERVER", url)
        .env("SCROLLBACK_CACHE", cache)
        .env_remove("SCROLLBACK_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Everything a child writes to a pipe, collected by a thread as it comes.
fn collect(pipe: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        let mut pipe = pipe;
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    text
}

/// Runs the CLI to its end (killed and failed past the deadline).
fn run(url: &str, cache: &Path, args: &[&str]) -> Output {
    let mut child = cli(url, cache, args).spawn().unwrap();
    let stdout = collect(child.stdout.take().unwrap());
    let stderr = collect(child.stderr.take().unwrap());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "scrollback {args:?} did not end in {DEADLINE:?}; stderr: {}",
                stderr.lock().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The pipes close with the process; let the threads take the last bytes.
    let drained = Instant::now();
    let mut previous = None;
    loop {
        let now = (stdout.lock().unwrap().len(), stderr.lock().unwrap().len());
        if previous == Some(now) && drained.elapsed() > Duration::from_millis(100) {
            break;
        }
        previous = Some(now);
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = stdout.lock().unwrap().clone().into_bytes();
    let err = stderr.lock().unwrap().clone().into_bytes();
    Output {
        status,
        stdout: out,
        stderr: err,
    }
}

/// Runs the CLI and requires it to succeed; returns stdout and stderr.
fn ok(url: &str, cache: &Path, args: &[&str]) -> (String, String) {
    let output = run(url, cache, args);
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        output.status.success(),
        "scrollback {args:?}: {}\n{stderr}",
        output.status
    );
    (stdout, stderr)
}

/// The lines of a session's file on the server, parsed.
fn server_lines(data: &Path, id: &str) -> Vec<Value> {
    std::fs::read_to_string(data.join(id).join("transcript.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Waits until `text` holds `needle` (the deadline fails the test with what it holds).
fn wait_for(text: &Mutex<String>, needle: &str) {
    let started = Instant::now();
    while !text.lock().unwrap().contains(needle) {
        assert!(
            started.elapsed() < DEADLINE,
            "{needle:?} did not appear in {DEADLINE:?}; got:\n{}",
            text.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn follow_prints_the_rows_then_a_message_posted_while_it_follows() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let cache = tmp.path().join("cache");
    let server = Server::start(&data);
    let lines = server_lines(&data, "welcome");
    let first = lines
        .iter()
        .find(|l| l["event"]["type"] == "userMessage")
        .unwrap();
    let (first_seq, first) = (
        first["seq"].as_u64().unwrap(),
        first["event"]["text"].as_str().unwrap().to_owned(),
    );
    let last = lines.last().unwrap()["seq"].as_u64().unwrap();

    let mut child = cli(&server.url, &cache, &["follow", "welcome"])
        .spawn()
        .unwrap();
    let stdout = collect(child.stdout.take().unwrap());
    let _stderr = collect(child.stderr.take().unwrap());
    // The session's rows: its first message and its last event.
    wait_for(&stdout, &format!("{first_seq:>6} you: {first}"));
    wait_for(&stdout, &format!("\n{last:>6} "));

    let marker = "posted while the CLI follows, 7f3a";
    assert!(!stdout.lock().unwrap().contains(marker));
    server.post("welcome", marker);
    // Streamed to the follower: the message as its row, with the next seq.
    wait_for(&stdout, &format!("{:>6} you: {marker}", last + 1));
    // And the sandbox's reply starts streaming after it.
    wait_for(&stdout, "assistant: ");

    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_warm_show_is_two_requests_and_reads_older_pages_from_the_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let cache = tmp.path().join("cache");
    let server = Server::start(&data);

    // Cold, then three pages back from the network: now cached.
    let (cold, _) = ok(&server.url, &cache, &["show", "long"]);
    let (cached, _) = ok(&server.url, &cache, &["show", "long", "--pages", "3"]);

    let before = server.stats();
    let (warm, stderr) = ok(&server.url, &cache, &["show", "long", "--pages", "3"]);
    let after = server.stats();
    let delta = |route: &str| {
        after[route]["requests"].as_u64().unwrap() - before[route]["requests"].as_u64().unwrap()
    };
    // What the README states: the check and the stream, no list, no page.
    assert_eq!(delta("transcript"), 1, "one check, no page: {stderr}");
    assert_eq!(delta("events"), 1, "the stream");
    assert_eq!(delta("sessions"), 0, "no list");
    assert!(stderr.contains("scrollback: 2 requests,"), "{stderr}");
    assert!(stderr.contains("3 pages from the cache"), "{stderr}");
    assert!(stderr.contains("probes 1 passed, 0 failed"), "{stderr}");
    // The same rows as the pages read from the network, older than the cold window's, in
    // order, down to the newest event.
    assert_eq!(warm, cached);
    let (cold, warm) = (row_seqs(&cold), row_seqs(&warm));
    let last = server_lines(&data, "long").last().unwrap()["seq"]
        .as_u64()
        .unwrap();
    assert_eq!(warm.last(), Some(&last));
    assert_eq!(cold.last(), Some(&last));
    assert!(
        warm[0] < cold[0],
        "pages back: from {} (cold {})",
        warm[0],
        cold[0]
    );
    assert!(warm.windows(2).all(|w| w[0] < w[1]));
}

/// The seqs of the rows printed (a row starts with its seq right-aligned in six columns; a
/// multi-line text's other lines do not).
fn row_seqs(out: &str) -> Vec<u64> {
    out.lines()
        .filter(|l| l.len() > 7 && l.as_bytes()[6] == b' ')
        .filter_map(|l| l[..6].trim_start().parse().ok())
        .collect()
}

#[test]
fn offline_list_and_show_print_what_is_cached_and_an_uncached_session_needs_the_network() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let cache = tmp.path().join("cache");
    let server = Server::start(&data);
    let url = server.url.clone();

    let (listed, _) = ok(&url, &cache, &["list"]);
    assert!(listed.lines().count() >= 3, "{listed}");
    let (welcome, _) = ok(&url, &cache, &["show", "welcome"]);
    let (long, _) = ok(&url, &cache, &["show", "long", "--pages", "2"]);
    assert_eq!(
        server.requests("transcript"),
        2 + 2,
        "two cold opens, two pages"
    );
    drop(server);

    // Stopped: the list is what the cache holds, said to be not live.
    let (listed, stderr) = ok(&url, &cache, &["list"]);
    let ids: Vec<&str> = listed
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["long", "welcome"], "{listed}");
    assert!(stderr.contains("cached sessions (not live)"), "{stderr}");
    assert!(
        listed.lines().any(|l| l.starts_with("long\t")
            && l.contains("Explain the row rule with an example.")),
        "the cached summary: {listed}"
    );

    // A cached session prints what the cache holds, older pages included.
    let (offline, stderr) = ok(&url, &cache, &["show", "welcome"]);
    assert_eq!(offline, welcome);
    assert!(stderr.contains("Cannot reach the server"), "{stderr}");
    let (offline, stderr) = ok(&url, &cache, &["show", "long", "--pages", "2"]);
    assert_eq!(offline, long);
    assert!(stderr.contains("2 pages from the cache"), "{stderr}");

    // Search finds what was read, offline, with the row to open.
    let (found, _) = ok(&url, &cache, &["search", "row rule", "--limit", "5"]);
    let first: Vec<&str> = found
        .lines()
        .next()
        .unwrap_or_default()
        .split('\t')
        .collect();
    assert!(matches!(first[..], ["long", _, _, _]), "{found}");
    assert!(
        first[1].parse::<u64>().is_ok() && first[3].contains("[row]"),
        "{found}"
    );
    assert!(found.lines().count() <= 5, "{found}");

    // Never cached: an error that says it needs the network, once, and a failing exit.
    let output = run(&url, &cache, &["show", "queued"]);
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(!output.status.success(), "{stderr}");
    assert!(output.stdout.is_empty());
    assert_eq!(stderr.matches("needs the network").count(), 1, "{stderr}");
}

#[test]
fn a_session_the_server_lacks_an_id_no_url_holds_a_closed_pipe_and_a_bad_command_line_each_end() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let cache = tmp.path().join("cache");
    let server = Server::start(&data);
    let url = server.url.clone();
    let failing = |args: &[&str], code: i32, needle: &str| {
        let output = run(&url, &cache, args);
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
    };
    // No such session: the server's 404, said, and a failing exit (it waited forever before).
    failing(&["show", "nope"], 1, "unknown session");
    failing(&["follow", "nope"], 1, "unknown session");
    // An id a URL would resolve away: refused at once.
    failing(&["show", ".."], 1, "cannot be used in a URL");
    // A command line that does not say what to do: 2, as a bad option is.
    failing(&[], 2, "usage:");
    failing(&["bogus"], 2, "unknown command");
    failing(&["search"], 2, "usage:");
    failing(&["send", "welcome"], 2, "no text given");
    failing(&["--pages", "abc", "show", "welcome"], 2, "usage:");
    failing(&["search", ""], 2, "give words to find");
    failing(
        &["search", "--limit", "0", "hello"],
        2,
        "--limit of 1 or more",
    );
    failing(&["--cache", "", "size"], 2, "--cache needs a folder");
    failing(&["size", ".."], 1, "cannot be used in a URL");
    failing(&["purge", ""], 1, "session id");
    // An address this build cannot speak to: said at once, not shown from the cache.
    failing(
        &["--server", "https://127.0.0.1:1", "list"],
        1,
        "plain http",
    );
    let (version, _) = ok(&url, &cache, &["--version"]);
    assert!(version.starts_with("scrollback "), "{version}");

    // A reader that goes away (`| head -1`): the CLI ends, quietly, without a panic.
    for args in [&["show", "long", "--pages", "3"][..], &["size"][..]] {
        let mut child = cli(&url, &cache, args).spawn().unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap(); // ...and the pipe is closed here
        let stderr = collect(child.stderr.take().unwrap());
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(started.elapsed() < DEADLINE, "{args:?} did not end");
            std::thread::sleep(Duration::from_millis(20));
        };
        std::thread::sleep(Duration::from_millis(100));
        let stderr = stderr.lock().unwrap().clone();
        assert!(status.success(), "{args:?}: {status}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_message_is_sent_as_typed_and_show_starts_with_its_first_row() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let cache = tmp.path().join("cache");
    let server = Server::start(&data);
    // Words that look like options are the message's, not the CLI's.
    let typed = [
        "how", "do", "I", "use", "--pages", "2", "and", "--cache", "here?",
    ];
    let args: Vec<&str> = ["send", "welcome"].iter().chain(&typed).copied().collect();
    ok(&server.url, &cache, &args);
    let sent = server_lines(&data, "welcome")
        .into_iter()
        .rev()
        .find(|l| l["event"]["type"] == "userMessage")
        .unwrap();
    assert_eq!(sent["event"]["text"], typed.join(" "));
    assert!(
        !Path::new("here?").exists(),
        "no cache folder named by the message"
    );
    let (out, _) = ok(&server.url, &cache, &["show", "welcome"]);
    let first = out.lines().next().unwrap();
    assert!(first.trim_start().starts_with(char::is_numeric), "{out:?}");
}

/// A server whose every answer is a 500 with `error` as its message.
fn lying_server(error: &'static str) -> String {
    let body = serde_json::json!({ "error": error });
    canned_server("500 Internal Server Error", body)
}

/// A server whose every answer is `status` with `body`.
fn canned_server(status: &'static str, body: Value) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let body = body.to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let answer = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = std::io::Write::write_all(&mut stream, answer.as_bytes());
        }
    });
    url
}

#[test]
fn a_servers_words_never_reach_the_terminal_as_control_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let url = lying_server("\u{1b}]0;PWNED\u{7}\u{1b}[2J\u{202e}evil");
    for args in [&["show", "x"][..], &["list"][..]] {
        let output = run(&url, &tmp.path().join("cache"), args);
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(
            stderr.contains("PWNED"),
            "{args:?}: the message is said: {stderr:?}"
        );
        assert!(
            !stderr.contains(['\u{1b}', '\u{7}', '\u{202e}']),
            "{args:?}: {stderr:?}"
        );
    }
}

#[test]
fn a_servers_words_never_add_a_line_or_a_column_to_a_listing() {
    let tmp = tempfile::tempdir().unwrap();
    let session = serde_json::json!({
        "id": "a\tb", "title": "one\nfake\tidle\tm\t9 events\tforged",
        "status": "idle\r", "model": "m", "permissionMode": "", "seq": 3,
    });
    let url = canned_server("200 OK", serde_json::json!([session]));
    let (out, _) = ok(&url, &tmp.path().join("cache"), &["list"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out:?}");
    assert_eq!(lines[0].split('\t').count(), 5, "{out:?}");
    assert!(
        lines[0].starts_with("a b\tidle \tm\t3 events\tone fake"),
        "{out:?}"
    );
}
