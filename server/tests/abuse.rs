//! The server under load and malice (issue 19), over real HTTP: streams that stall or idle,
//! files rewritten in place, half-sent requests and the connection cap, oversized and
//! concurrent `PUT`s, `PUT` racing `DELETE`, forged `Host`s and cross-site writes, appends on a
//! torn line, and the sandbox's queue. Memory and CPU are checked by their mechanism (a bound, a
//! cap, a reset, one watcher); the figures are `examples/soak.rs`'s.

mod server_support;

use serde_json::{json, Value};
use server_support::{line, transcript, Fixture};
use std::io::Write;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const DEADLINE: Duration = Duration::from_secs(10);

/// Waits (up to 10 s) until `/stats` satisfies `ok`; returns it.
async fn stats_until(f: &Fixture, ok: impl Fn(&Value) -> bool) -> Value {
    let end = tokio::time::Instant::now() + DEADLINE;
    loop {
        let stats: Value = f.get("/stats").await.json().await.unwrap();
        if ok(&stats) {
            return stats;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "stats never got there: {stats}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads what the server sends on `conn` until it closes it (`None` if it stays open 10 s).
async fn read_until_closed(conn: &mut TcpStream) -> Option<String> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(DEADLINE, conn.read_to_end(&mut got)).await;
    match read {
        Ok(_) => Some(String::from_utf8_lossy(&got).into_owned()),
        Err(_) => None,
    }
}

/// One raw request (head and body as given) and the status of its answer.
async fn raw_status(f: &Fixture, request: &str) -> u16 {
    let mut conn = TcpStream::connect(f.server.addr()).await.unwrap();
    conn.write_all(request.as_bytes()).await.unwrap();
    let answer = read_until_closed(&mut conn).await.expect("an answer");
    answer.split(' ').nth(1).unwrap().parse().unwrap()
}

/// A client that sends `GET path` and reads nothing of the answer (its receive window small,
/// soon full).
async fn ask_and_never_read(f: &Fixture, path: &str) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut conn = socket.connect(f.server.addr()).await.unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", f.server.addr());
    conn.write_all(head.as_bytes()).await.unwrap();
    conn
}

fn big_lines(from: u64, to: u64, pad: usize) -> String {
    let pad = "y".repeat(pad);
    (from..=to)
        .map(|seq| {
            line(
                seq,
                json!({"type": "toolResult", "output": format!("{seq} {pad}")}),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_stream_that_falls_behind_by_more_than_the_bound_is_reset_not_buffered() {
    let f = Fixture::new().await;
    f.write("s", &transcript(10));
    let mut sse = f.events("s", "after=10").await;
    f.append(
        "s",
        &line(11, json!({"type": "status", "status": "working"})),
    );
    assert_eq!(sse.next().await.id, "11");
    // 3 MiB lands at once while the client holds what it had: it is not fed line by line.
    f.append("s", &big_lines(12, 1_011, 3_000));
    let mut seen = 0;
    let reset = loop {
        let event = sse.next().await;
        if event.event == "reset" {
            break event;
        }
        seen += 1;
        assert!(seen < 200, "no reset after {seen} lines of a 3 MiB burst");
    };
    let data: Value = serde_json::from_str(&reset.data).unwrap();
    assert_eq!(data["reason"], "behind");
    let first = data["first"].as_u64().unwrap();
    assert!(first > 700, "the window is the newest lines: {data}");
    let rest = sse.take((1_011 - first + 1) as usize).await;
    assert_eq!(rest.first().unwrap().id, first.to_string());
    assert_eq!(rest.last().unwrap().id, "1011");
}

#[tokio::test]
async fn the_streams_of_a_session_share_one_watcher_that_goes_when_they_do() {
    let f = Fixture::new().await;
    f.write("s", &transcript(10));
    let mut streams = Vec::new();
    for _ in 0..3 {
        streams.push(f.events("s", "after=10").await);
    }
    let stats = stats_until(&f, |s| s["streams"]["open"] == 3).await;
    assert_eq!(
        stats["streams"]["watched"], 1,
        "one watcher per file: {stats}"
    );
    assert_eq!(
        stats["streams"]["mode"], "notify",
        "change notification: {stats}"
    );
    f.append(
        "s",
        &line(11, json!({"type": "status", "status": "working"})),
    );
    for sse in &mut streams {
        assert_eq!(sse.next().await.id, "11");
    }
    // A stream reads the file when it changes, not on a clock: a few looks each, however long
    // they have been open.
    let looks = f.get("/stats").await.json::<Value>().await.unwrap()["streams"]["looks"]
        .as_u64()
        .unwrap();
    assert!(
        looks <= 3 * 4,
        "{looks} looks for one append to three streams"
    );
    drop(streams);
    let stats = stats_until(&f, |s| s["streams"]["open"] == 0).await;
    assert_eq!(stats["streams"]["watched"], 0, "{stats}");
}

#[tokio::test]
async fn a_file_rewritten_in_place_resets_with_replaced() {
    let f = Fixture::new().await;
    f.write("s", &transcript(3));
    let mut sse = f.events("s", "").await;
    assert_eq!(sse.take(3).await.last().unwrap().id, "3");
    // The same inode, written over from the start with other, longer content.
    let new: String = (1..=5)
        .map(|seq| {
            line(
                seq,
                json!({"type": "userMessage", "text": format!("rewritten {seq}")}),
            )
        })
        .collect();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(f.transcript_path("s"))
        .unwrap();
    file.write_all(new.as_bytes()).unwrap();
    drop(file);
    let reset = sse.next().await;
    assert_eq!(reset.event, "reset");
    let data: Value = serde_json::from_str(&reset.data).unwrap();
    assert_eq!(data["reason"], "replaced");
    let lines = sse.take(5).await;
    assert!(lines[0].data.contains("rewritten 1"), "{}", lines[0].data);
    assert_eq!(lines[4].id, "5");
}

#[tokio::test]
async fn half_sent_request_heads_are_closed_after_the_head_timeout() {
    let f = Fixture::with(|c| c.header_timeout_ms = 300).await;
    let mut conn = TcpStream::connect(f.server.addr()).await.unwrap();
    let head = format!("GET /sessions HTTP/1.1\r\nHost: {}\r\n", f.server.addr());
    conn.write_all(head.as_bytes()).await.unwrap();
    assert!(
        read_until_closed(&mut conn).await.is_some(),
        "a half-sent head is closed"
    );
}

#[tokio::test]
async fn a_client_that_stops_reading_is_closed_after_the_stall_timeout() {
    let f = Fixture::with(|c| c.stall_timeout_ms = 500).await;
    f.write("s", &big_lines(1, 300, 3_000));
    f.write("t", &transcript(10));
    // A stream that is caught up and idle owes its client nothing: never stalled.
    let mut idle = f.events("t", "after=10").await;
    // One that reads nothing (a small receive window, soon full).
    let mut stalled = ask_and_never_read(&f, "/sessions/s/events?after=300").await;
    // Lines keep coming until the server's socket buffer is full too (on loopback it holds
    // a megabyte or more) and its writes wait: then, past the stall timeout, it is closed.
    let end = tokio::time::Instant::now() + DEADLINE;
    let mut seq = 300;
    loop {
        let stats: Value = f.get("/stats").await.json().await.unwrap();
        if stats["connections"]["stalled"] == 1 {
            break;
        }
        assert!(tokio::time::Instant::now() < end, "never closed: {stats}");
        f.append("s", &big_lines(seq + 1, seq + 100, 3_000));
        seq += 100;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        read_until_closed(&mut stalled).await.is_some(),
        "the stalled connection is closed"
    );
    // The idle stream is still open, and live.
    f.append(
        "t",
        &line(11, json!({"type": "status", "status": "working"})),
    );
    assert_eq!(idle.next().await.id, "11");
    let stats = f.get("/stats").await.json::<Value>().await.unwrap();
    assert_eq!(stats["connections"]["stalled"], 1, "{stats}");
}

#[tokio::test]
async fn at_the_connection_cap_an_idle_connection_makes_room_for_a_new_client() {
    let f = Fixture::with(|c| c.max_connections = Some(4)).await;
    let stats: Value = f.get("/stats").await.json().await.unwrap();
    assert_eq!(stats["connections"]["max"], 4);
    // Four half-sent requests (the head timeout is long) fill the cap.
    let mut held = Vec::new();
    let fresh = reqwest::Client::builder().no_gzip().build().unwrap();
    for _ in 0..4 {
        let mut conn = TcpStream::connect(f.server.addr()).await.unwrap();
        conn.write_all(b"GET /sessions HTTP/1.1\r\n").await.unwrap();
        held.push(conn);
    }
    let response = tokio::time::timeout(DEADLINE, fresh.get(f.url("/sessions")).send())
        .await
        .expect("a valid client finds room")
        .unwrap();
    assert_eq!(response.status(), 200);
    // The room was made by closing the oldest idle connection: one of the held ones.
    let mut closed = 0;
    for conn in &mut held {
        let mut byte = [0u8; 1];
        if let Ok(Ok(0)) =
            tokio::time::timeout(Duration::from_millis(200), conn.read(&mut byte)).await
        {
            closed += 1;
        }
    }
    assert!(closed >= 1, "no held connection was closed to make room");
}

#[tokio::test]
async fn a_put_declaring_too_much_is_refused_before_its_body_is_read() {
    let f = Fixture::new().await;
    let head = format!(
        "PUT /sessions/big/transcript HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n\r\n",
        f.server.addr(),
        600u64 << 20
    );
    let mut conn = TcpStream::connect(f.server.addr()).await.unwrap();
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 12];
    tokio::time::timeout(DEADLINE, conn.read_exact(&mut answer))
        .await
        .expect("answered without sending the body")
        .unwrap();
    assert_eq!(&answer, b"HTTP/1.1 413");
    assert!(!f.transcript_path("big").exists());
}

#[tokio::test]
async fn puts_are_received_into_files_and_past_the_cap_get_503() {
    let f = Fixture::with(|c| c.max_puts = 2).await;
    f.write("s", &transcript(3));
    let body = transcript(50);
    let mut slow = Vec::new();
    for id in ["a", "b"] {
        let mut conn = TcpStream::connect(f.server.addr()).await.unwrap();
        let head = format!(
            "PUT /sessions/{id}/transcript HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n\r\n",
            f.server.addr(),
            body.len()
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        conn.write_all(&body.as_bytes()[..100]).await.unwrap();
        slow.push(conn);
    }
    // Both are being received into files beside the sessions, not into memory.
    let end = tokio::time::Instant::now() + DEADLINE;
    loop {
        let receiving = std::fs::read_dir(f.data())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("#put-"))
            .count();
        if receiving == 2 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "{receiving} PUTs receiving"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let third = f
        .http
        .put(f.url("/sessions/c/transcript"))
        .body(transcript(3))
        .send()
        .await
        .unwrap();
    assert_eq!(third.status(), 503);
    assert_eq!(third.headers()["retry-after"], "1");
    // The slow ones finish and land whole.
    for conn in &mut slow {
        conn.write_all(&body.as_bytes()[100..]).await.unwrap();
        let mut answer = vec![0u8; 12];
        conn.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"HTTP/1.1 201");
    }
    assert_eq!(
        std::fs::read_to_string(f.transcript_path("a")).unwrap(),
        body
    );
}

#[tokio::test]
async fn put_and_delete_of_one_session_never_race_to_a_404() {
    // Room for every PUT at once: this is about the race, not the cap.
    let f = Fixture::with(|c| c.max_puts = 100).await;
    let body = transcript(20);
    for round in 0..6 {
        let mut tasks = Vec::new();
        for i in 0..50 {
            let id = format!("r{}", i % 5);
            let http = f.http.clone();
            let put = f.url(&format!("/sessions/{id}/transcript"));
            let delete = f.url(&format!("/sessions/{id}"));
            let body = body.clone();
            tasks.push(tokio::spawn(async move {
                let (put, _) =
                    tokio::join!(http.put(put).body(body).send(), http.delete(delete).send());
                put.unwrap().status().as_u16()
            }));
        }
        for task in tasks {
            let status = task.await.unwrap();
            assert!(
                status == 200 || status == 201,
                "round {round}: PUT {status}"
            );
        }
    }
}

#[tokio::test]
async fn a_forged_host_and_cross_site_writes_are_refused() {
    let f = Fixture::with(|c| c.allow_host = vec!["box.lan".into()]).await;
    f.write("s", &transcript(3));
    let addr = f.server.addr();
    let port = addr.port();
    let request = |method: &str, path: &str, host: &str, extra: &str, body: &str| {
        format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{extra}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    // DNS rebinding: the page's origin is the attacker's name, resolved to this address.
    let rebind = "rebind.attacker.example";
    assert_eq!(
        raw_status(&f, &request("GET", "/sessions", rebind, "", "")).await,
        421
    );
    assert_eq!(
        raw_status(&f, &request("DELETE", "/sessions/s", rebind, "", "")).await,
        421
    );
    assert!(f.transcript_path("s").exists());
    for host in [
        addr.to_string(),
        format!("localhost:{port}"),
        "box.lan".into(),
    ] {
        assert_eq!(
            raw_status(&f, &request("GET", "/sessions", &host, "", "")).await,
            200,
            "{host}"
        );
    }
    // A cross-site form posts text/plain; a cross-site script with JSON names its origin.
    let host = addr.to_string();
    let body = r#"{"text":"from evil"}"#;
    let form = "Content-Type: text/plain\r\n";
    assert_eq!(
        raw_status(
            &f,
            &request("POST", "/sessions/s/messages", &host, form, body)
        )
        .await,
        415
    );
    let evil = "Content-Type: application/json\r\nOrigin: http://evil.example\r\n";
    assert_eq!(
        raw_status(
            &f,
            &request("POST", "/sessions/s/messages", &host, evil, body)
        )
        .await,
        403
    );
    let other_port = format!(
        "Content-Type: application/json\r\nOrigin: http://localhost:{}\r\n",
        port ^ 1
    );
    assert_eq!(
        raw_status(
            &f,
            &request("POST", "/sessions/s/messages", &host, &other_port, body)
        )
        .await,
        403
    );
    let evil_delete = "Origin: http://evil.example\r\n";
    assert_eq!(
        raw_status(
            &f,
            &request("DELETE", "/sessions/s", &host, evil_delete, "")
        )
        .await,
        403
    );
    assert_eq!(
        std::fs::read_to_string(f.transcript_path("s")).unwrap(),
        transcript(3)
    );
    // The page's own origin may post.
    let own = format!("Content-Type: application/json\r\nOrigin: http://{host}\r\n");
    assert_eq!(
        raw_status(
            &f,
            &request("POST", "/sessions/s/messages", &host, &own, body)
        )
        .await,
        200
    );
}

#[tokio::test]
async fn the_token_cookie_is_refused_from_another_port_of_the_same_host() {
    let f = Fixture::with(|c| c.token = Some("s3cret".into())).await;
    f.write("s", &transcript(3));
    let host = f.server.addr().to_string();
    let get = |extra: &str| {
        format!("GET /sessions HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nCookie: scrollback_token=s3cret\r\n{extra}\r\n")
    };
    let other = format!("http://127.0.0.1:{}", f.server.addr().port() ^ 1);
    assert_eq!(
        raw_status(&f, &get(&format!("Origin: {other}\r\n"))).await,
        403
    );
    assert_eq!(
        raw_status(&f, &get("Sec-Fetch-Site: same-site\r\n")).await,
        403
    );
    assert_eq!(
        raw_status(&f, &get("Sec-Fetch-Site: same-origin\r\n")).await,
        200
    );
    assert_eq!(
        raw_status(&f, &get(&format!("Origin: http://{host}\r\n"))).await,
        200
    );
    // The bearer header is not sent by a browser on its own: it stands wherever it comes from.
    let bearer = format!("GET /sessions HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nAuthorization: Bearer s3cret\r\nSec-Fetch-Site: cross-site\r\n\r\n");
    assert_eq!(raw_status(&f, &bearer).await, 200);
}

#[tokio::test]
async fn a_post_on_a_torn_last_line_waits_then_refuses_and_never_writes_after_it() {
    let f = Fixture::new().await;
    let torn = format!("{}{{\"seq\":4,\"ts\":178854", transcript(3));
    f.write("s", &torn);
    let post = || {
        f.http
            .post(f.url("/sessions/s/messages"))
            .json(&json!({"text": "hello"}))
            .send()
    };
    // Nobody completes it: refused, nothing written.
    let refused = post().await.unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(
        std::fs::read_to_string(f.transcript_path("s")).unwrap(),
        torn
    );
    // The other writer completes its line while the POST waits: the POST comes after it.
    let waiting = tokio::spawn(post());
    f.append("s", r#"0.5,"event":{"type":"status","status":"idle"}}"#);
    f.append("s", "\n");
    let answered = waiting.await.unwrap().unwrap();
    assert_eq!(answered.status(), 200);
    let line: Value = answered.json().await.unwrap();
    assert_eq!(line["seq"], 5);
    let text = std::fs::read_to_string(f.transcript_path("s")).unwrap();
    let seqs: Vec<u64> = text
        .lines()
        .map(|l| scrollback::protocol::Line::parse(l).unwrap().seq())
        .collect();
    assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
}

#[tokio::test]
async fn the_sandbox_queue_of_messages_is_bounded() {
    let f = Fixture::with(|c| {
        c.sandbox = true;
        c.pace_ms = 600_000;
    })
    .await;
    let post = |text: String| {
        f.http
            .post(f.url("/sessions/welcome/messages"))
            .json(&json!({ "text": text }))
            .send()
    };
    assert_eq!(post("start".into()).await.unwrap().status(), 200);
    let mut queued = 0;
    let refused = loop {
        let response = post(format!("more {queued}")).await.unwrap();
        if response.status() != 200 {
            break response;
        }
        queued += 1;
        assert!(queued <= 64, "{queued} messages queued behind one reply");
    };
    assert_eq!(refused.status(), 503);
    assert_eq!(queued, scrollback_server::sandbox::agent::MAX_QUEUED);
}

/// A page with one long line (a 12 MB tool output) asked by clients that never read: each
/// answer's body counts against the answer budget until it is sent, so past it the next one
/// is a 503 to retry, not more memory; a small page still fits, and a client that goes lets
/// go of what it held.
#[tokio::test]
async fn answers_held_by_clients_that_do_not_read_stay_within_the_budget() {
    let f = Fixture::with(|c| c.answer_budget_mb = 16).await;
    let output = "y".repeat(12 << 20);
    f.write(
        "big",
        &line(1, json!({"type": "toolResult", "output": output})),
    );
    f.write("small", &transcript(10));
    let held = || async {
        let stats: Value = f.get("/stats").await.json().await.unwrap();
        stats["answers"].clone()
    };
    // A client that asks and reads nothing: its answer waits.
    let stalled = ask_and_never_read(&f, "/sessions/big/transcript").await;
    let answers = stats_until(&f, |s| s["answers"]["held"].as_u64() > Some(12 << 20)).await;
    assert_eq!(answers["answers"]["budget"], 16 << 20, "{answers}");

    // The same page again: it would pass the budget, so it is refused, to retry.
    let busy = f.get("/sessions/big/transcript").await;
    assert_eq!(busy.status(), 503);
    assert_eq!(busy.headers()["retry-after"], "1");
    let (_, message) = f.error(busy).await;
    assert!(message.contains("try again"), "{message}");
    assert_eq!(held().await["refused"], 1);
    // A small page fits beside it.
    let small = f.get("/sessions/small/transcript").await;
    assert_eq!(small.status(), 200);
    assert_eq!(small.json::<Vec<Value>>().await.unwrap().len(), 10);

    // The client goes: what it held is let go, and the page is sent whole.
    drop(stalled);
    stats_until(&f, |s| s["answers"]["held"] == 0).await;
    let whole = f.get("/sessions/big/transcript").await;
    assert_eq!(whole.status(), 200);
    let lines: Vec<Value> = whole.json().await.unwrap();
    assert_eq!(
        lines[0]["event"]["output"].as_str().map(str::len),
        Some(12 << 20)
    );
    assert_eq!(held().await["held"], 0, "sent and let go");
}

/// A FIFO where a transcript or its `meta.json` belongs (written by some other process's
/// mistake) is no session and no title: opening one would block a thread until something
/// writes to it, and the list, the catch-up and the pages of every session with it.
#[cfg(unix)]
#[tokio::test]
async fn a_fifo_in_place_of_a_transcript_or_its_meta_never_holds_a_request() {
    let f = Fixture::new().await;
    f.write("ok", &transcript(3));
    f.write("titled", &transcript(2));
    let fifo = |path: std::path::PathBuf| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
    };
    fifo(f.transcript_path("pipe"));
    fifo(f.data().join("titled").join("meta.json"));
    async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(DEADLINE, fut)
            .await
            .unwrap_or_else(|_| panic!("{what} hung on the FIFO"))
    }
    for _ in 0..3 {
        let list = within("GET /sessions", f.get("/sessions")).await;
        assert_eq!(list.status(), 200);
        let list: Vec<Value> = list.json().await.unwrap();
        let mut ids: Vec<&str> = list.iter().map(|s| s["id"].as_str().unwrap()).collect();
        ids.sort();
        assert_eq!(ids, ["ok", "titled"]);
        let titled = list.iter().find(|s| s["id"] == "titled").unwrap();
        assert_eq!(titled["seq"], 2, "the transcript is read without its meta");
    }
    let catch_up = within("/catchup", f.get("/sessions/titled/catchup?cursor=1")).await;
    assert_eq!(catch_up.status(), 200);
    for route in ["transcript", "catchup?cursor=1", "events"] {
        let path = format!("/sessions/pipe/{route}");
        let answer = within("a route", f.get(&path)).await;
        assert_eq!(answer.status(), 404, "{route}");
    }
    assert_eq!(f.page("ok", "").await.len(), 3);
}

/// A session whose one line is 12 MB, followed from its start by clients that never read: the
/// catch-up each stream queues counts against the answer budget like a page, so past it the
/// next stream is a 503 to retry, not 12 MB more; a small catch-up still fits, and what a
/// client held is let go when it goes.
#[tokio::test]
async fn event_streams_hold_their_catch_up_against_the_budget() {
    let f = Fixture::with(|c| c.answer_budget_mb = 16).await;
    let big = line(
        1,
        json!({"type": "toolResult", "output": "y".repeat(12 << 20)}),
    );
    f.write("big", &big);
    f.write("small", &transcript(10));
    let stalled = ask_and_never_read(&f, "/sessions/big/events?after=0").await;
    stats_until(&f, |s| s["answers"]["held"].as_u64() > Some(12 << 20)).await;

    let busy = f.get("/sessions/big/events?after=0").await;
    assert_eq!(busy.status(), 503);
    assert_eq!(busy.headers()["retry-after"], "1");
    let mut small = f.events("small", "after=0").await;
    assert_eq!(small.take(10).await.last().unwrap().id, "10");

    drop(stalled);
    stats_until(&f, |s| s["answers"]["held"] == 0).await;
    let mut whole = f.events("big", "after=0").await;
    assert_eq!(whole.next().await.data, big.trim_end());
}

/// A stream caught up and live, while another client holds most of the budget: a long line
/// appended that the budget cannot hold ends the stream (its client reconnects through its
/// catch-up) rather than queue it beyond the budget.
#[tokio::test]
async fn a_stream_whose_new_lines_the_budget_cannot_hold_ends() {
    let f = Fixture::with(|c| c.answer_budget_mb = 16).await;
    f.write(
        "big",
        &line(
            1,
            json!({"type": "toolResult", "output": "y".repeat(12 << 20)}),
        ),
    );
    f.write("s", &transcript(10));
    let mut sse = f.events("s", "after=10").await;
    let stalled = ask_and_never_read(&f, "/sessions/big/transcript").await;
    stats_until(&f, |s| s["answers"]["held"].as_u64() > Some(12 << 20)).await;
    let long = json!({"type": "toolResult", "output": "z".repeat(6 << 20)});
    f.append("s", &line(11, long));
    assert!(
        sse.ended().await,
        "the stream queued a line past the budget"
    );
    let answers = f.get("/stats").await.json::<Value>().await.unwrap()["answers"].clone();
    assert_eq!(answers["refused"], 1, "{answers}");
    assert!(answers["held"].as_u64() < Some(16 << 20), "{answers}");
    drop(stalled);
}

/// A client that reads, but slowly (a kilobyte every 20 ms), is never stalled; once it has
/// held its share past the grace, an answer the budget cannot otherwise hold closes its
/// connection to make room, and is sent.
#[tokio::test]
async fn a_slow_reader_past_the_grace_is_closed_to_make_room() {
    let f = Fixture::with(|c| {
        c.answer_budget_mb = 16;
        c.answer_grace_ms = 300;
    })
    .await;
    f.write(
        "big",
        &line(
            1,
            json!({"type": "toolResult", "output": "y".repeat(12 << 20)}),
        ),
    );
    let mut slow = ask_and_never_read(&f, "/sessions/big/transcript").await;
    let (done, mut told) = tokio::sync::watch::channel(false);
    let reader = tokio::spawn(async move {
        let mut buf = [0u8; 1024];
        let mut got = 0;
        while !*told.borrow_and_update() {
            match slow.read(&mut buf).await {
                Ok(0) | Err(_) => return got,
                Ok(n) => got += n,
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                _ = told.changed() => {}
            }
        }
        // Then what the server had sent before it closed, at once: the end comes (no 12 MB).
        let mut rest = Vec::new();
        let _ = slow.read_to_end(&mut rest).await;
        got + rest.len()
    });
    stats_until(&f, |s| s["answers"]["held"].as_u64() > Some(12 << 20)).await;
    // Refused while the slow reader is within its grace; then it makes room.
    let end = tokio::time::Instant::now() + DEADLINE;
    let page = loop {
        let page = f.get("/sessions/big/transcript").await;
        if page.status() == 200 {
            break page;
        }
        assert_eq!(page.status(), 503);
        assert!(tokio::time::Instant::now() < end, "never made room");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let lines: Vec<Value> = page.json().await.unwrap();
    assert_eq!(
        lines[0]["event"]["output"].as_str().map(str::len),
        Some(12 << 20)
    );
    done.send(true).unwrap();
    let got = tokio::time::timeout(DEADLINE, reader)
        .await
        .expect("the slow reader's connection is closed")
        .unwrap();
    assert!(got < 12 << 20, "it had read {got} bytes");
    let stats: Value = f.get("/stats").await.json().await.unwrap();
    assert_eq!(stats["answers"]["evicted"], 1, "{stats}");
}

/// A `PUT` whose body trickles in (a byte every 50 ms: never a pause as long as the body
/// timeout) fails once it averages less than the minimum rate past its first timeout, and
/// lets go of its slot: the next `PUT` is received.
#[tokio::test]
async fn a_trickling_put_body_fails_and_frees_its_slot() {
    let f = Fixture::with(|c| {
        c.max_puts = 1;
        c.body_timeout_ms = 300;
    })
    .await;
    let body = transcript(50);
    let slow = TcpStream::connect(f.server.addr()).await.unwrap();
    let (mut answer, mut slow) = slow.into_split();
    let head = format!(
        "PUT /sessions/slow/transcript HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n\r\n",
        f.server.addr(),
        body.len()
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    let trickle = body.clone();
    let trickler = tokio::spawn(async move {
        for byte in trickle.as_bytes() {
            if slow.write_all(&[*byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        let _ = answer.read_to_end(&mut got).await;
        String::from_utf8_lossy(&got).into_owned()
    });
    let end = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let put = f.put("/sessions/fast/transcript", transcript(3)).await;
        if put.status() == 201 {
            break;
        }
        assert_eq!(put.status(), 503);
        assert!(
            tokio::time::Instant::now() < end,
            "the trickling PUT kept its slot"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let answer = tokio::time::timeout(DEADLINE, reader)
        .await
        .unwrap()
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("slower than"), "{answer}");
    assert!(!f.transcript_path("slow").exists());
    trickler.abort();
}

/// At the connection cap with every connection busy with a request (two live streams), a new
/// client is answered 503 with `Retry-After` at once, and so is the next: none waits in line
/// behind another (the wait for room was the accept loop's, five seconds each).
#[tokio::test]
async fn at_a_cap_full_of_busy_connections_newcomers_get_503_at_once() {
    let f = Fixture::with(|c| c.max_connections = Some(2)).await;
    f.write("s", &transcript(10));
    let _streams = [
        f.events("s", "after=10").await,
        f.events("s", "after=10").await,
    ];
    let started = tokio::time::Instant::now();
    let asks = (0..3).map(|_| async {
        let fresh = reqwest::Client::builder().no_gzip().build().unwrap();
        let answer = tokio::time::timeout(DEADLINE, fresh.get(f.url("/sessions")).send())
            .await
            .expect("an answer")
            .expect("an answer, not a dropped connection");
        (
            answer.status(),
            answer.headers().get("retry-after").cloned(),
        )
    });
    for (status, retry) in futures_util::future::join_all(asks).await {
        assert_eq!(status, 503);
        assert_eq!(retry.unwrap(), "1");
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "newcomers waited {:?}",
        started.elapsed()
    );
}

/// A message past the limit, sent whole as a browser sends it, gets its 413 to read: the body
/// is read to its end (up to a bound) before the answer, not cut off with a reset that a
/// browser reports as a network error (WebKitGTK did, for 2.5 MB).
#[tokio::test]
async fn a_message_past_the_limit_is_read_to_its_end_and_answered_413() {
    let f = Fixture::new().await;
    f.write("s", &transcript(3));
    let text = "x".repeat(scrollback_server::routes::MAX_POST_BYTES + (12 << 20));
    let body = json!({ "text": text }).to_string();
    let head = format!(
        "POST /sessions/s/messages HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        f.server.addr(),
        body.len()
    );
    let mut conn = TcpStream::connect(f.server.addr()).await.unwrap();
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(body.as_bytes())
        .await
        .expect("the whole body is taken");
    let answer = read_until_closed(&mut conn).await.expect("an answer");
    assert!(
        answer.starts_with("HTTP/1.1 413"),
        "{}",
        &answer[..answer.len().min(200)]
    );
    assert!(answer.contains("at most 2097152 bytes"), "{answer}");
    assert_eq!(f.page("s", "").await.len(), 3, "nothing was written");
}

/// A posted message is held whole to be parsed: it counts against the answer budget, so posts
/// trickling in (300 connections of 2 MB each held 938 MB before) cannot hold more than the
/// budget between them; the second is a 503 to retry, and goes through once the first is done.
#[tokio::test]
async fn a_message_being_received_counts_against_the_budget() {
    let f = Fixture::with(|c| c.answer_budget_mb = 4).await;
    f.write("s", &transcript(3));
    let message = |n: usize| json!({ "text": "x".repeat(n) }).to_string();
    // A 1.9 MB message, 1.4 MB of it sent: held with its parse, 2.8 MB.
    let first = message(1_900 << 10);
    let (head_part, rest) = first.split_at(1400 << 10);
    let mut conn = TcpStream::connect(f.server.addr()).await.unwrap();
    let head = format!(
        "POST /sessions/s/messages HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        f.server.addr(),
        first.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(head_part.as_bytes()).await.unwrap();
    stats_until(&f, |s| s["answers"]["held"].as_u64() >= Some(2 << 20)).await;

    // Another of 1.5 MB would pass the 4 MB budget beside it: refused, to retry.
    let second = json!({ "text": "y".repeat(1_500 << 10) });
    let busy = f.post_json("/sessions/s/messages", &second).await;
    assert_eq!(busy.status(), 503);
    let (_, text) = f.error(busy).await;
    assert!(text.contains("try again"), "{text}");
    assert_eq!(f.page("s", "").await.len(), 3, "nothing was written");

    // The first one done, the budget is let go, and the second goes through.
    conn.write_all(rest.as_bytes()).await.unwrap();
    let answer = read_until_closed(&mut conn).await.expect("an answer");
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "{}",
        &answer[..answer.len().min(200)]
    );
    stats_until(&f, |s| s["answers"]["held"] == 0).await;
    let done = f.post_json("/sessions/s/messages", &second).await;
    assert_eq!(done.status(), 200);
    assert_eq!(f.page("s", "").await.len(), 5);
}

/// The line a `PUT` is receiving is held whole to be checked: it counts against the answer
/// budget, so two PUTs of huge lines cannot hold more than the budget between them; the second
/// is a 503 to retry, and goes through once the first is done.
#[tokio::test]
async fn a_put_holding_a_long_line_counts_against_the_budget() {
    let f = Fixture::with(|c| c.answer_budget_mb = 4).await;
    let long_line = |seq: u64, bytes: usize| {
        line(
            seq,
            json!({"type": "toolResult", "output": "y".repeat(bytes)}),
        )
    };
    // A PUT whose 1.5 MB first line is mostly sent: it holds it (and its parse), 2.8 MB.
    let first = long_line(1, 3 << 19) + &line(2, json!({"type": "status", "status": "idle"}));
    let (head_part, rest) = first.split_at(1400 << 10);
    let mut conn = TcpStream::connect(f.server.addr()).await.unwrap();
    let head = format!(
        "PUT /sessions/a/transcript HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        f.server.addr(),
        first.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(head_part.as_bytes()).await.unwrap();
    stats_until(&f, |s| s["answers"]["held"].as_u64() >= Some(2 << 20)).await;

    // Another line of 1.5 MB would pass the 4 MB budget beside it: refused, to retry.
    let second = long_line(1, 3 << 19);
    let busy = f.put("/sessions/b/transcript", second.clone()).await;
    assert_eq!(busy.status(), 503);
    let (_, message) = f.error(busy).await;
    assert!(message.contains("try again"), "{message}");

    // The first one done, the budget is let go, and the second goes through.
    conn.write_all(rest.as_bytes()).await.unwrap();
    let answer = read_until_closed(&mut conn).await.expect("an answer");
    assert!(
        answer.starts_with("HTTP/1.1 201"),
        "{}",
        &answer[..answer.len().min(200)]
    );
    stats_until(&f, |s| s["answers"]["held"] == 0).await;
    let done = f.put("/sessions/b/transcript", second).await;
    assert_eq!(done.status(), 201);
    assert_eq!(f.page("a", "").await.len(), 2);
}

/// A PUT whose long line has held its share past the grace is closed to make room for a page,
/// as a slow reader's answer is: a line trickling in cannot keep pages refused.
#[tokio::test]
async fn a_put_holding_its_line_past_the_grace_makes_room_for_a_page() {
    let f = Fixture::with(|c| {
        c.answer_budget_mb = 4;
        c.answer_grace_ms = 300;
    })
    .await;
    let output = "y".repeat(3 << 19);
    f.write(
        "big",
        &line(1, json!({"type": "toolResult", "output": output})),
    );
    let first = line(1, json!({"type": "toolResult", "output": output}));
    let mut conn = TcpStream::connect(f.server.addr()).await.unwrap();
    let head = format!(
        "PUT /sessions/a/transcript HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n\r\n",
        f.server.addr(),
        first.len() + 1
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(&first.as_bytes()[..1400 << 10])
        .await
        .unwrap();
    stats_until(&f, |s| s["answers"]["held"].as_u64() >= Some(2 << 20)).await;
    tokio::time::sleep(Duration::from_millis(400)).await; // past the grace
    let page = f.get("/sessions/big/transcript").await;
    assert_eq!(page.status(), 200, "the page made room");
    assert_eq!(page.json::<Vec<Value>>().await.unwrap().len(), 1);
    let closed = read_until_closed(&mut conn).await;
    assert!(closed.is_some(), "the PUT's connection was closed");
    assert!(
        !f.transcript_path("a").exists(),
        "nothing of it was written"
    );
}
