//! Shared by the server's HTTP tests: a real server on a free loopback port over a temporary
//! data directory, transcript fixtures, and an SSE client.
#![allow(dead_code)]

use eventsource_stream::{Event, Eventsource};
use futures_util::{Stream, StreamExt};
use scrollback::protocol::Line;
use scrollback_server::{spawn, Config, Server};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

/// A running server and the directory it serves.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub server: Server,
    pub http: reqwest::Client,
}

impl Fixture {
    /// A server over a fresh data directory.
    pub async fn new() -> Fixture {
        Fixture::with(|_| {}).await
    }

    /// A server over a fresh data directory, configured by `f`.
    pub async fn with(f: impl FnOnce(&mut Config)) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::new(dir.path().join("data"));
        f(&mut config);
        let server = spawn(config).await.unwrap();
        let http = reqwest::Client::builder().no_gzip().build().unwrap();
        Fixture { dir, server, http }
    }

    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.url())
    }

    pub fn transcript_path(&self, id: &str) -> PathBuf {
        self.data().join(id).join("transcript.jsonl")
    }

    /// Writes a session's transcript file directly, as another process would.
    pub fn write(&self, id: &str, text: &str) {
        std::fs::create_dir_all(self.data().join(id)).unwrap();
        std::fs::write(self.transcript_path(id), text).unwrap();
    }

    /// Appends raw text to a session's file, as another process would.
    pub fn append(&self, id: &str, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(self.transcript_path(id))
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f.flush().unwrap();
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.http.get(self.url(path)).send().await.unwrap()
    }

    /// A GET with one more request header (an origin, a cookie, an encoding, a token).
    pub async fn get_with(&self, path: &str, header: &str, value: &str) -> reqwest::Response {
        let request = self.http.get(self.url(path)).header(header, value);
        request.send().await.unwrap()
    }

    /// A POST of `body` as JSON.
    pub async fn post_json(&self, path: &str, body: &Value) -> reqwest::Response {
        let request = self.http.post(self.url(path)).json(body);
        request.send().await.unwrap()
    }

    /// A PUT of `body` as it is.
    pub async fn put(&self, path: &str, body: impl Into<reqwest::Body>) -> reqwest::Response {
        let request = self.http.put(self.url(path)).body(body);
        request.send().await.unwrap()
    }

    /// A DELETE.
    pub async fn delete(&self, path: &str) -> reqwest::Response {
        self.http.delete(self.url(path)).send().await.unwrap()
    }

    /// A `/transcript` page, checked to be 200, as lines.
    pub async fn page(&self, id: &str, query: &str) -> Vec<Line> {
        let response = self
            .get(&format!("/sessions/{id}/transcript?{query}"))
            .await;
        assert_eq!(response.status(), 200, "{query}");
        scrollback::protocol::parse_page(&response.text().await.unwrap()).unwrap()
    }

    /// An error response's status and its JSON `error` message.
    pub async fn error(&self, response: reqwest::Response) -> (u16, String) {
        let status = response.status().as_u16();
        let body: Value = response.json().await.expect("errors are JSON");
        (
            status,
            body["error"].as_str().expect("an error message").to_owned(),
        )
    }

    /// Opens `/events` and returns the parsed SSE stream, without its keep-alive frames.
    pub async fn events(&self, id: &str, query: &str) -> Sse {
        let all = self.events_with_keep_alives(id, query).await;
        Sse(Box::pin(all.0.filter(|e| {
            std::future::ready(e.event != scrollback::protocol::KEEP_ALIVE_EVENT)
        })))
    }

    /// Opens `/events` and returns the parsed SSE stream, every frame.
    pub async fn events_with_keep_alives(&self, id: &str, query: &str) -> Sse {
        let response = self.get(&format!("/sessions/{id}/events?{query}")).await;
        assert_eq!(response.status(), 200);
        Sse(Box::pin(
            response.bytes_stream().eventsource().map(|e| e.unwrap()),
        ))
    }
}

/// A server-sent event stream read by a real SSE parser.
pub struct Sse(Pin<Box<dyn Stream<Item = Event> + Send>>);

impl Sse {
    /// The next event (panics after 10 s without one).
    pub async fn next(&mut self) -> Event {
        tokio::time::timeout(Duration::from_secs(10), self.0.next())
            .await
            .expect("an event within 10 s")
            .expect("the stream is open")
    }

    /// The next `n` events.
    pub async fn take(&mut self, n: usize) -> Vec<Event> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(self.next().await);
        }
        out
    }

    /// Whether the stream ends (within 10 s) before another event.
    pub async fn ended(&mut self) -> bool {
        let next = tokio::time::timeout(Duration::from_secs(10), self.0.next()).await;
        matches!(next, Ok(None))
    }

    /// Whether nothing arrives within `ms`.
    pub async fn quiet(&mut self, ms: u64) -> bool {
        tokio::time::timeout(Duration::from_millis(ms), self.0.next())
            .await
            .is_err()
    }
}

/// One line of JSONL text for `event`, with a `ts` of many digits.
pub fn line(seq: u64, event: Value) -> String {
    let ts = 1788546972.6030757 + seq as f64 * 0.0137;
    format!("{}\n", json!({"seq": seq, "ts": ts, "event": event}))
}

/// A transcript of `n` lines with the shapes that matter to paging: user messages, statuses,
/// runs of deltas of several lengths (some split by a repeated delta, which is not a clean
/// append, or by a usage update), tool calls, an unknown type.
pub fn transcript(n: u64) -> String {
    let mut text = String::new();
    let mut seq = 0;
    let mut step = 0u64;
    let push = |text: &mut String, seq: &mut u64, event: Value| {
        *seq += 1;
        if *seq <= n {
            text.push_str(&line(*seq, event));
        }
    };
    while seq < n {
        step += 1;
        push(
            &mut text,
            &mut seq,
            json!({"type": "userMessage", "text": format!("question {step}")}),
        );
        push(
            &mut text,
            &mut seq,
            json!({"type": "status", "status": "working"}),
        );
        let run = 3 + (step * 7) % 11;
        for i in 0..run {
            let word = if step % 4 == 0 && i == run / 2 {
                " again".to_owned()
            } else {
                format!(" w{step}_{i}")
            };
            push(
                &mut text,
                &mut seq,
                json!({"type": "assistantText", "text": word, "messageId": format!("m{step}")}),
            );
            if step % 4 == 0 && i == run / 2 {
                push(
                    &mut text,
                    &mut seq,
                    json!({"type": "assistantText", "text": " again", "messageId": format!("m{step}")}),
                );
            }
            if step % 5 == 0 && i == 1 {
                push(
                    &mut text,
                    &mut seq,
                    json!({"type": "usageDelta", "context": 1000 * step}),
                );
            }
        }
        if step % 3 == 0 {
            push(
                &mut text,
                &mut seq,
                json!({"type": "toolCall", "id": format!("c{step}"), "name": "read", "input": {"path": "a.rs"}}),
            );
            push(
                &mut text,
                &mut seq,
                json!({"type": "toolResult", "id": format!("c{step}"), "output": "fn main() {}"}),
            );
        }
        if step % 7 == 0 {
            push(
                &mut text,
                &mut seq,
                json!({"type": "futureThing", "x": [1, 2.5e-7, {"y": null}]}),
            );
        }
        push(
            &mut text,
            &mut seq,
            json!({"type": "usageDelta", "context": 2000 * step, "output": run}),
        );
        push(
            &mut text,
            &mut seq,
            json!({"type": "status", "status": "idle"}),
        );
    }
    text
}

/// Every line of a transcript's text, parsed.
pub fn lines(text: &str) -> Vec<Line> {
    text.lines().map(|l| Line::parse(l).unwrap()).collect()
}

pub fn seqs(lines: &[Line]) -> Vec<u64> {
    lines.iter().map(Line::seq).collect()
}
