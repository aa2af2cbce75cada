//! What surrounds the protocol, over real HTTP: session ids and paths as attacks, unknown
//! sessions, writes, the token, CORS, compression, static files, the list and the counters.

mod server_support;

use serde_json::{json, Value};
use server_support::{line, lines, transcript, Fixture};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

/// Sends a request with exactly this path (an HTTP client would normalize `..` away) and
/// returns the status and body.
fn raw(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test]
async fn hostile_session_ids_are_400_and_nothing_outside_the_data_directory_is_touched() {
    let f = Fixture::new().await;
    // A transcript outside the data directory, where `..` would lead.
    let outside = f.dir.path().join("victim");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("transcript.jsonl"), transcript(5)).unwrap();
    let mut ids: Vec<String> = [
        "..",
        ".",
        "..%2Fvictim",
        "%2E%2E",
        "a%2Fb",
        "a%5Cb",
        "a%00b",
        "%3Cscript%3E",
        "a%20b",
        "%C3%A9",
    ]
    .map(String::from)
    .to_vec();
    ids.push("x".repeat(129));
    let addr = f.server.addr();
    let put = transcript(3);
    let checks = tokio::task::spawn_blocking(move || {
        let mut answers = Vec::new();
        for id in &ids {
            for (method, path, body) in [
                ("GET", format!("/sessions/{id}/transcript"), ""),
                ("GET", format!("/sessions/{id}/events"), ""),
                (
                    "POST",
                    format!("/sessions/{id}/messages"),
                    r#"{"text":"hi"}"#,
                ),
                ("PUT", format!("/sessions/{id}/transcript"), put.as_str()),
                ("DELETE", format!("/sessions/{id}"), ""),
            ] {
                let (status, body) = raw(addr, method, &path, body);
                answers.push((format!("{method} {path}"), status, body));
            }
        }
        // A slash in the id, unencoded, and `..` as a whole segment.
        for path in [
            "/sessions/a/b/transcript",
            "/sessions/../victim/transcript",
            "/sessions/./events",
        ] {
            let (status, body) = raw(addr, "GET", path, "");
            answers.push((path.to_owned(), status, body));
        }
        answers
    })
    .await
    .unwrap();
    for (request, status, body) in checks {
        assert_eq!(status, 400, "{request}: {body}");
        let message = serde_json::from_str::<Value>(&body).unwrap()["error"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.contains("session id"), "{request}: {message}");
        assert!(!message.contains('<'), "no markup echoed back");
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("transcript.jsonl")).unwrap(),
        transcript(5)
    );
    assert_eq!(
        std::fs::read_dir(f.data()).unwrap().count(),
        0,
        "nothing created"
    );
}

#[tokio::test]
async fn unknown_sessions_are_404_and_writes_check_what_they_write() {
    let f = Fixture::new().await;
    for (method, path) in [
        ("GET", "/sessions/nope/transcript"),
        ("GET", "/sessions/nope/events"),
        ("POST", "/sessions/nope/messages"),
        ("DELETE", "/sessions/nope"),
    ] {
        let request = f
            .http
            .request(method.parse().unwrap(), f.url(path))
            .json(&json!({"text": "hi"}));
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        assert_eq!(
            (status, &body),
            (
                404,
                &json!({"error": "unknown session", "code": "unknownSession"})
            ),
            "{method} {path}: the code a client takes as the session gone"
        );
    }
    // A route that does not exist is a 404 too, without that code: nothing is gone.
    let response = f.get("/sessions/nope/whatever").await;
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body.get("code"), None, "{body}");
    // A method a route does not take, and a message past its size: the JSON error every
    // other refusal is, saying which.
    for (method, path) in [
        ("POST", "/sessions"),
        ("GET", "/sessions/long"),
        ("PUT", "/stats"),
        ("DELETE", "/sessions/long/transcript"),
    ] {
        let request = f.http.request(method.parse().unwrap(), f.url(path));
        let (status, message) = f.error(request.send().await.unwrap()).await;
        assert_eq!(status, 405, "{method} {path}");
        assert_eq!(message, format!("{method} is not a method of {path}"));
    }
    let big = "x".repeat(scrollback_server::routes::MAX_POST_BYTES);
    let request = f
        .http
        .post(f.url("/sessions/long/messages"))
        .json(&json!({ "text": big }));
    let (status, message) = f.error(request.send().await.unwrap()).await;
    assert_eq!(status, 413);
    assert!(message.contains("at most 2097152 bytes"), "{message}");

    // PUT creates, then replaces; a bad body is refused and changes nothing.
    let url = "/sessions/new/transcript";
    let response = f.put(url, transcript(20)).await;
    assert_eq!(response.status(), 201);
    assert_eq!(response.json::<Value>().await.unwrap()["seq"], 20);
    for (body, says) in [
        (transcript(3) + "{broken\n", "line 4"),
        (
            transcript(3) + &line(5, json!({"type": "status", "status": "idle"})),
            "seq 5, expected 4",
        ),
        (
            line(2, json!({"type": "status", "status": "idle"})),
            "expected 1",
        ),
        (
            String::from_utf8_lossy(b"\xff").into_owned() + "\n",
            "line 1",
        ),
    ] {
        let (status, message) = f.error(f.put(url, body).await).await;
        assert_eq!(status, 400);
        assert!(message.contains(says), "{message}");
    }
    assert_eq!(
        std::fs::read_to_string(f.transcript_path("new")).unwrap(),
        transcript(20)
    );
    let response = f.put(url, transcript(7).trim_end().to_owned()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        f.page("new", "").await.len(),
        7,
        "the last line without a newline is kept"
    );

    // Messages: JSON with non-empty text.
    let posted = f.url("/sessions/new/messages");
    for body in ["not json", "{}", r#"{"text": 5}"#, r#"{"text": "  "}"#] {
        let response = f
            .http
            .post(&posted)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let (status, _) = f.error(response).await;
        assert_eq!(status, 400, "{body}");
    }
    let response = f
        .post_json(
            "/sessions/new/messages",
            &json!({"text": "<b>hello</b>\n\"there\""}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let page = f.page("new", "limit=1").await;
    assert_eq!(page[0].seq(), 8);
    assert_eq!(page[0].text(), Some("<b>hello</b>\n\"there\""));

    // Delete: gone from the disk, the list and every route.
    assert_eq!(f.delete("/sessions/new").await.status(), 204);
    assert!(!f.data().join("new").exists());
    assert_eq!(f.get("/sessions/new/transcript").await.status(), 404);
    assert_eq!(
        f.get("/sessions").await.json::<Value>().await.unwrap(),
        json!([])
    );
}

#[tokio::test]
async fn the_list_summarises_each_session_and_follows_appends() {
    let f = Fixture::new().await;
    let mut text = line(
        1,
        json!({"type": "settings", "model": "m1", "permissionMode": "default"}),
    );
    text += &line(
        2,
        json!({"type": "userMessage", "text": "  Fix   the\nbuild please, it has been failing since the refactor of the paging module"}),
    );
    text += &line(3, json!({"type": "status", "status": "working"}));
    f.write("a", &text);
    f.write("b", &transcript(40));
    std::fs::write(
        f.data().join("b").join("meta.json"),
        r#"{"title": "Named <b>"}"#,
    )
    .unwrap();
    std::fs::create_dir_all(f.data().join("empty-folder")).unwrap();
    std::fs::create_dir_all(f.data().join("bad id")).unwrap();
    std::fs::write(
        f.data().join("bad id").join("transcript.jsonl"),
        transcript(3),
    )
    .unwrap();

    let list: Value = f.get("/sessions").await.json().await.unwrap();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2, "{list:?}");
    let a = list.iter().find(|s| s["id"] == "a").unwrap();
    assert_eq!(
        a["title"],
        "Fix the build please, it has been failing since the…"
    );
    assert_eq!(
        (
            a["status"].as_str(),
            a["model"].as_str(),
            a["permissionMode"].as_str(),
            a["seq"].as_u64()
        ),
        (Some("working"), Some("m1"), Some("default"), Some(3))
    );
    let b = list.iter().find(|s| s["id"] == "b").unwrap();
    let newest_status = lines(&transcript(40))
        .into_iter()
        .rev()
        .find(|l| l.event_type() == "status")
        .unwrap();
    assert_eq!(b["status"], newest_status.event()["status"]);
    assert_eq!(
        (b["title"].as_str(), b["seq"].as_u64()),
        (Some("Named <b>"), Some(40))
    );

    // Appended to by another process: the list follows.
    f.append(
        "a",
        &(line(
            4,
            json!({"type": "settings", "model": "m2", "permissionMode": "plan"}),
        ) + &line(5, json!({"type": "status", "status": "idle"}))),
    );
    let list: Value = f.get("/sessions").await.json().await.unwrap();
    let a = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "a")
        .unwrap()
        .clone();
    assert_eq!(
        (
            a["status"].as_str(),
            a["model"].as_str(),
            a["permissionMode"].as_str(),
            a["seq"].as_u64()
        ),
        (Some("idle"), Some("m2"), Some("plan"), Some(5))
    );
    assert_eq!(list[0]["id"], "a", "most recently changed first");
}

#[tokio::test]
async fn with_a_token_every_route_answers_401_without_it() {
    let f = Fixture::with(|c| {
        c.token = Some("s3cret+token".into());
        c.www = Some(std::env::temp_dir());
    })
    .await;
    f.write("s", &transcript(10));
    for path in [
        "/sessions",
        "/sessions/s/transcript",
        "/sessions/s/events",
        "/stats",
        "/",
        "/index.html",
    ] {
        let (status, _) = f.error(f.get(path).await).await;
        assert_eq!(status, 401, "{path}");
        let response = f
            .get_with(path, "authorization", &format!("Bearer {}", "wrong"))
            .await;
        assert_eq!(response.status(), 401, "{path}");
    }
    let post = f
        .post_json("/sessions/s/messages", &json!({"text": "x"}))
        .await;
    assert_eq!(post.status(), 401);
    assert_eq!(
        std::fs::read_to_string(f.transcript_path("s")).unwrap(),
        transcript(10),
        "nothing written without the token"
    );

    let ok = f
        .get_with(
            "/sessions/s/transcript",
            "authorization",
            &format!("Bearer {}", "s3cret+token"),
        )
        .await;
    assert_eq!(ok.status(), 200);
    let ok = f
        .get("/sessions/s/transcript?limit=1&token=s3cret%2Btoken")
        .await;
    assert_eq!(ok.status(), 200);
    let cookie = ok.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.starts_with("scrollback_token=s3cret+token;") && cookie.contains("HttpOnly"));
    let ok = f
        .get_with("/sessions", "cookie", "a=b; scrollback_token=s3cret+token")
        .await;
    assert_eq!(ok.status(), 200);
    let ok = f
        .get("/sessions/s/events?after=9&token=s3cret%2Btoken")
        .await;
    assert_eq!(ok.status(), 200, "EventSource sends it in the query");
}

#[tokio::test]
async fn cors_answers_only_the_allowed_origins() {
    let f = Fixture::with(|c| c.allow_origin = vec!["http://app.example:5173".into()]).await;
    f.write("s", &transcript(10));
    let response = f
        .get_with("/sessions", "origin", "http://app.example:5173")
        .await;
    assert_eq!(
        response.headers()["access-control-allow-origin"],
        "http://app.example:5173"
    );
    let response = f
        .get_with("/sessions", "origin", "http://evil.example")
        .await;
    assert!(response
        .headers()
        .get("access-control-allow-origin")
        .is_none());
    let preflight = f
        .http
        .request(reqwest::Method::OPTIONS, f.url("/sessions/s/transcript"))
        .header("origin", "http://app.example:5173")
        .header("access-control-request-method", "PUT")
        .header("access-control-request-headers", "authorization")
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success());
    assert!(preflight.headers()["access-control-allow-methods"]
        .to_str()
        .unwrap()
        .contains("PUT"));

    // Without --allow-origin there are no CORS headers at all.
    let plain = Fixture::new().await;
    let response = plain
        .get_with("/sessions", "origin", "http://app.example:5173")
        .await;
    assert!(response
        .headers()
        .get("access-control-allow-origin")
        .is_none());
}

/// A page asked for with `accept-encoding: gzip` and without.
struct Gzipped {
    /// The gzipped answer's `content-encoding`, and its `vary` headers.
    encoding: String,
    vary: Vec<String>,
    /// Its bytes on the wire, and the plain answer's.
    wire: usize,
    full: usize,
    /// The plain answer's `content-encoding`, if any.
    plain_encoding: Option<String>,
    /// What a client that decompresses reads.
    read: String,
}

async fn gzipped(f: &Fixture, path: &str) -> Gzipped {
    let header = |r: &reqwest::Response, name: &str| {
        (r.headers().get_all(name).iter())
            .map(|v| v.to_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let response = f.get_with(path, "accept-encoding", "gzip").await;
    let (encoding, vary) = (
        header(&response, "content-encoding"),
        header(&response, "vary"),
    );
    let wire = response.bytes().await.unwrap().len();
    let plain = f.get(path).await;
    let plain_encoding = header(&plain, "content-encoding").pop();
    let full = plain.bytes().await.unwrap().len();
    let decompressing = reqwest::Client::new();
    let read = decompressing.get(f.url(path)).send().await.unwrap();
    Gzipped {
        encoding: encoding.join(", "),
        vary,
        wire,
        full,
        plain_encoding,
        read: read.text().await.unwrap(),
    }
}

#[tokio::test]
async fn responses_are_compressed_when_asked_and_streams_never_are() {
    let f = Fixture::new().await;
    let text = transcript(2_000);
    f.write("s", &text);
    let page = gzipped(&f, "/sessions/s/transcript?limit=500").await;
    assert_eq!(page.encoding, "gzip");
    assert_eq!(page.plain_encoding, None);
    assert!(
        page.wire * 3 < page.full,
        "gzip {} vs {}",
        page.wire,
        page.full
    );
    // A client that decompresses reads the same lines.
    assert_eq!(
        scrollback::protocol::parse_page(&page.read).unwrap(),
        lines(&text)[1_500..]
    );

    // A page of 1 MiB or more is compressed too (at the fastest level), once, and reads the same.
    let big = format!(
        "{}{}",
        transcript(3),
        line(
            4,
            json!({"type": "toolResult", "output": "compressible words ".repeat(100_000)})
        )
    );
    f.write("big", &big);
    let page = gzipped(&f, "/sessions/big/transcript?limit=1").await;
    assert_eq!(page.encoding, "gzip");
    assert_eq!(page.vary, ["accept-encoding"]);
    assert!(page.full >= scrollback_server::routes::FAST_COMPRESSION_BYTES as usize);
    assert!(
        page.wire * 4 < page.full,
        "gzip {} vs {}",
        page.wire,
        page.full
    );
    assert_eq!(
        scrollback::protocol::parse_page(&page.read).unwrap(),
        lines(&big)[3..]
    );

    let sse = f
        .get_with(
            "/sessions/s/events?after=1990",
            "accept-encoding",
            "gzip, br",
        )
        .await;
    assert_eq!(sse.headers()["content-type"], "text/event-stream");
    assert!(sse.headers().get("content-encoding").is_none());
}

#[tokio::test]
async fn static_files_are_served_with_their_types() {
    let www = tempfile::tempdir().unwrap();
    let pkg = tempfile::tempdir().unwrap();
    std::fs::write(
        www.path().join("index.html"),
        "<!doctype html><title>demo</title>",
    )
    .unwrap();
    std::fs::write(www.path().join("app.js"), "export {}").unwrap();
    std::fs::write(pkg.path().join("scrollback_bg.wasm"), b"\0asm\x01\0\0\0").unwrap();
    std::fs::write(pkg.path().join("scrollback.js"), "export default 1").unwrap();
    let (w, p) = (www.path().to_owned(), pkg.path().to_owned());
    let f = Fixture::with(|c| {
        c.www = Some(w);
        c.pkg = Some(p);
    })
    .await;
    let index = f.get("/").await;
    assert_eq!(index.status(), 200);
    assert!(index.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    assert!(index.text().await.unwrap().contains("<title>demo</title>"));
    for (path, mime) in [
        ("/app.js", "text/javascript"),
        ("/pkg/scrollback.js", "text/javascript"),
        ("/pkg/scrollback_bg.wasm", "application/wasm"),
    ] {
        let response = f.get(path).await;
        assert_eq!(response.status(), 200, "{path}");
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with(mime),
            "{path}: {:?}",
            response.headers()["content-type"]
        );
    }
    let missing = f.get("/missing.html").await;
    assert_eq!(missing.status(), 404);
    // Said in the server's one error shape, not an empty page.
    assert_eq!(
        missing.json::<serde_json::Value>().await.unwrap()["error"],
        "no such file"
    );
    let addr = f.server.addr();
    for path in [
        "/../Cargo.toml",
        "/pkg/../index.html",
        "/pkg/%2E%2E/%2E%2E/etc/passwd",
        "/..%2F..%2Fetc/passwd",
    ] {
        let (status, _) = tokio::task::spawn_blocking(move || raw(addr, "GET", path, ""))
            .await
            .unwrap();
        assert!(status == 404 || status == 400, "{path}: {status}");
    }
}

#[tokio::test]
async fn stats_count_requests_and_bytes_per_route() {
    let f = Fixture::new().await;
    f.write("s", &transcript(300));
    let mut bytes = 0;
    for query in ["", "limit=1", "before=100&coalesce=true", "limit=0"] {
        bytes += f
            .get(&format!("/sessions/s/transcript?{query}"))
            .await
            .bytes()
            .await
            .unwrap()
            .len();
    }
    let list = f.get("/sessions").await.bytes().await.unwrap().len();
    let put = f.put("/sessions/t/transcript", transcript(3)).await;
    let put = put.bytes().await.unwrap().len();
    f.delete("/sessions/t").await;
    f.post_json("/sessions/s/messages", &json!({"text": "hi"}))
        .await;
    let mut sse = f.events("s", "after=295").await;
    sse.take(6).await;
    drop(sse);
    let stats: Value = f.get("/stats").await.json().await.unwrap();
    assert_eq!(stats["transcript"], json!({"requests": 4, "bytes": bytes}));
    assert_eq!(stats["sessions"], json!({"requests": 1, "bytes": list}));
    assert_eq!(stats["replace"], json!({"requests": 1, "bytes": put}));
    assert_eq!(stats["delete"]["requests"], 1);
    assert_eq!(stats["messages"]["requests"], 1);
    assert_eq!(stats["events"]["requests"], 1);
    assert!(
        stats["events"]["bytes"].as_u64().unwrap() > 6 * 80,
        "stream bytes are counted as sent"
    );
    assert_eq!(stats["static"]["requests"], 0);
    assert_eq!(stats["stats"]["requests"], 1);
}

#[test]
fn the_binary_prints_its_url_and_never_logs_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_scrollback-server"))
        .args([
            "--addr",
            "127.0.0.1:0",
            "--token",
            "hunter2-token",
            "--data",
        ])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("a URL")
        .trim_end_matches('/')
        .to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{first}");
    assert!(!first.contains("hunter2"));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let http = reqwest::Client::new();
        for path in [
            "/sessions?token=hunter2-token",
            "/sessions?token=wrong",
            "/stats",
        ] {
            http.get(format!("{url}{path}"))
                .bearer_auth("hunter2-token")
                .send()
                .await
                .unwrap();
        }
    });
    child.kill().unwrap();
    let mut log = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut log).unwrap();
    child.wait().unwrap();
    assert!(log.contains("GET /sessions?token=REDACTED 200"), "{log}");
    assert!(log.contains("GET /stats 200"), "{log}");
    assert!(!log.contains("hunter2"), "{log}");
}

#[tokio::test]
async fn no_answer_of_the_api_may_be_kept_by_a_cache_on_the_way() {
    let f = Fixture::new().await;
    f.write("s", &transcript(3));
    for path in [
        "/sessions",
        "/sessions/s/transcript?limit=2",
        "/sessions/s/catchup?cursor=2",
        "/sessions/nope/transcript",
        "/stats",
    ] {
        let response = f.get(path).await;
        assert_eq!(
            response
                .headers()
                .get("cache-control")
                .map(|v| v.to_str().unwrap()),
            Some("no-store"),
            "{path}: a kept answer would outlive a file replaced since"
        );
    }
}
