//! The browser transport against the real `scrollback-server`, in headless Chromium.
//!
//! `scripts/wasm.sh test` starts the server (`--sandbox --token`, CORS for the test page's
//! origin) and passes its address and token at compile time in `SCROLLBACK_TEST_SERVER` and
//! `SCROLLBACK_TEST_TOKEN`.
#![cfg(target_arch = "wasm32")]

use scrollback::protocol::{Line, TranscriptQuery, CATCH_UP_BYTES, CATCH_UP_LIMIT};
use scrollback::transport::{
    BrowserStream, BrowserTransport, EventStream, ResetReason, Retry, StreamItem, Transport,
    TransportError, TransportResult,
};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn server() -> &'static str {
    option_env!("SCROLLBACK_TEST_SERVER")
        .expect("SCROLLBACK_TEST_SERVER is unset: run these tests through scripts/wasm.sh test")
}

fn token() -> Option<String> {
    option_env!("SCROLLBACK_TEST_TOKEN").map(String::from)
}

fn transport() -> BrowserTransport {
    BrowserTransport::new(server(), token()).unwrap()
}

/// Creates (or replaces) a session through `PUT /sessions/{id}/transcript`, which the
/// transport has no method for: the tests write the server's files the way the agent would.
async fn put_session(id: &str, lines: &[String]) {
    let url = format!(
        "{server}/sessions/{}/transcript",
        String::from(js_sys::encode_uri_component(id)),
        server = server().trim_end_matches('/')
    );
    let mut request = gloo_net::http::Request::put(&url);
    if let Some(t) = token() {
        request = request.header("Authorization", &format!("Bearer {t}"));
    }
    let body = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
    let response = request.body(body).unwrap().send().await.unwrap();
    assert!(response.ok(), "PUT {url}: {}", response.status());
}

fn user_line(seq: u64, text: &str) -> String {
    serde_json::json!({"seq": seq, "ts": 1788546972.6030757 + seq as f64, "event": {"type": "userMessage", "text": text}})
        .to_string()
}

fn numbered(n: u64) -> Vec<String> {
    (1..=n)
        .map(|s| user_line(s, &format!("message {s}")))
        .collect()
}

/// The stream's next item that is not a keep-alive.
async fn next_item(stream: &mut BrowserStream) -> Option<TransportResult<StreamItem>> {
    loop {
        match stream.next().await {
            Some(Ok(StreamItem::KeepAlive { .. })) => continue,
            other => return other,
        }
    }
}

async fn next_line(stream: &mut BrowserStream) -> Line {
    match next_item(stream).await {
        Some(Ok(StreamItem::Line(line))) => line,
        other => panic!("expected a line, got {other:?}"),
    }
}

#[wasm_bindgen_test]
async fn lists_sessions_with_the_token() {
    let list = transport().sessions().await.unwrap();
    assert!(
        list.iter()
            .any(|s| s.id == "long" && s.seq > CATCH_UP_LIMIT as u64),
        "the sandbox's long session is listed: {list:?}"
    );
}

#[wasm_bindgen_test]
async fn a_wrong_token_is_refused_with_the_servers_message() {
    let wrong = BrowserTransport::new(server(), Some("not-the-token".into())).unwrap();
    match wrong.sessions().await {
        Err(TransportError::Http {
            status: 401,
            message,
            from_server: true,
            ..
        }) => {
            assert!(!message.is_empty() && !message.contains('{'), "{message}")
        }
        other => panic!("expected 401, got {other:?}"),
    }
    // The stream carries the token in its query: a wrong one cannot open it either.
    // `EventSource` hides the status; the transport learns it, so the stream's refusal is
    // classified as the native transport's is (an authentication error, not a retry).
    let err = wrong.events("long", 0, None).await.unwrap_err();
    assert_eq!(
        err.status(),
        Some(401),
        "the stream's refusal keeps its status: {err}"
    );
    assert_eq!(Retry::classify(&err), Retry::Unauthorized);
}

#[wasm_bindgen_test]
async fn pages_are_the_servers_lines_and_count_their_bytes() {
    let t = transport();
    let id = "transport-pages";
    put_session(id, &numbered(30)).await;
    let newest = t.transcript(id, &TranscriptQuery::default()).await.unwrap();
    assert_eq!(newest.lines.len(), 30);
    assert_eq!(newest.lines.last().unwrap().seq(), 30);
    // Byte-for-byte what was written, and the body's length is what was counted.
    assert_eq!(newest.lines[4].raw(), numbered(30)[4]);
    let body_len: usize = newest.lines.iter().map(|l| l.raw().len()).sum::<usize>() + 30 + 1;
    assert_eq!(
        newest.bytes as usize, body_len,
        "[a,b,...] is the lines, commas and brackets"
    );

    let query = TranscriptQuery {
        before: Some(21),
        after: Some(10),
        limit: Some(5),
        ..Default::default()
    };
    let page = t.transcript(id, &query).await.unwrap();
    let seqs: Vec<u64> = page.lines.iter().map(|l| l.seq()).collect();
    assert_eq!(seqs, vec![16, 17, 18, 19, 20]);
    assert_eq!(page.lines, newest.lines[15..20]);

    let counters = t.counters();
    assert_eq!(counters.requests, 2);
    assert_eq!(counters.bytes, newest.bytes + page.bytes);
}

#[wasm_bindgen_test]
async fn an_unknown_session_is_a_404_and_dot_segments_are_refused() {
    let t = transport();
    match t
        .transcript("no-such-session", &TranscriptQuery::default())
        .await
    {
        Err(TransportError::Http { status: 404, .. }) => {}
        other => panic!("expected 404, got {other:?}"),
    }
    for id in ["..", ".", ""] {
        let before = t.counters().requests;
        let err = t.delete(id).await.unwrap_err();
        assert_eq!(err, TransportError::BadId(id.into()));
        assert!(err.is_client_error());
        assert_eq!(t.counters().requests, before, "nothing is sent for {id:?}");
    }
}

#[wasm_bindgen_test]
async fn a_hostile_id_stays_one_path_segment() {
    let t = transport();
    // Split on its slashes, "x/../long" would name the sandbox's `long` session and answer
    // with its lines; encoded it reaches the server whole, which refuses the id.
    for id in [
        "x/../long",
        "long?after=1",
        "long#x",
        "%2e%2e",
        "<img src=x>",
    ] {
        match t.transcript(id, &TranscriptQuery::default()).await {
            Err(TransportError::Http {
                status: 400,
                message,
                ..
            }) => {
                assert!(message.contains("session id"), "{id:?}: {message}")
            }
            other => panic!("{id:?} must be refused by the server as an id, got {other:?}"),
        }
        let err = t.events(id, 0, None).await.unwrap_err();
        assert_eq!(err.status(), Some(400), "{id:?}: {err}");
        assert_eq!(Retry::classify(&err), Retry::Refused, "{id:?}");
    }
    // Every character the server allows in an id goes through unchanged.
    let id = "Mixed.Case_id-1";
    put_session(id, &numbered(3)).await;
    let page = t.transcript(id, &TranscriptQuery::default()).await.unwrap();
    assert_eq!(page.lines.len(), 3);
    let mut stream = t.events(id, 2, None).await.unwrap();
    assert_eq!(next_line(&mut stream).await.seq(), 3);
    drop(stream);
    t.delete(id).await.unwrap();
    assert!(!t.sessions().await.unwrap().iter().any(|s| s.id == id));
}

#[wasm_bindgen_test]
async fn the_stream_catches_up_then_carries_posted_messages_live() {
    let t = transport();
    let id = "transport-stream";
    put_session(id, &numbered(10)).await;
    let mut stream = t.events(id, 7, None).await.unwrap();
    // The server's keep-alive comes first, through the browser's EventSource: how long a
    // silence means a dead connection (three of the reference server's 15 s intervals).
    assert!(matches!(
        stream.next().await,
        Some(Ok(StreamItem::KeepAlive {
            silence_limit_ms: 45_000
        }))
    ));
    let caught_up: Vec<u64> = [
        next_line(&mut stream).await,
        next_line(&mut stream).await,
        next_line(&mut stream).await,
    ]
    .iter()
    .map(Line::seq)
    .collect();
    assert_eq!(caught_up, vec![8, 9, 10]);

    let before = t.counters();
    t.post_message(id, "hello from the browser \u{1F600}")
        .await
        .unwrap();
    let user = next_line(&mut stream).await;
    assert_eq!(user.seq(), 11);
    let event: serde_json::Value = serde_json::from_str(user.raw()).unwrap();
    assert_eq!(event["event"]["type"], "userMessage");
    assert_eq!(event["event"]["text"], "hello from the browser \u{1F600}");
    // The sandbox answers with streamed deltas, each the next seq.
    let reply = next_line(&mut stream).await;
    assert_eq!(reply.seq(), 12);
    // What the stream delivered is what a page returns for the same seqs.
    let page = t
        .transcript(
            id,
            &TranscriptQuery {
                before: Some(13),
                after: Some(10),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(page.lines, vec![user.clone(), reply.clone()]);
    let after = t.counters();
    assert_eq!(after.requests, before.requests + 2, "the post and the page");
    assert!(
        after.bytes >= before.bytes + (user.raw().len() + reply.raw().len()) as u64 + page.bytes
    );
}

#[wasm_bindgen_test]
async fn far_behind_the_stream_sends_reset_then_the_newest_window() {
    let t = transport();
    let id = "transport-reset";
    // Lines of about 8 KB: what follows seq 3 passes CATCH_UP_BYTES, so the stream resets.
    let pad = "x".repeat(8 << 10);
    let n = (CATCH_UP_BYTES / pad.len()) as u64 + 50;
    let lines: Vec<String> = (1..=n)
        .map(|s| user_line(s, &format!("message {s} {pad}")))
        .collect();
    put_session(id, &lines).await;
    let mut stream = t.events(id, 3, None).await.unwrap();
    assert!(matches!(
        next_item(&mut stream).await,
        Some(Ok(StreamItem::Reset(ResetReason::Behind)))
    ));
    let first = next_line(&mut stream).await;
    assert!(
        first.seq() > 4,
        "the window starts past the gap: {}",
        first.seq()
    );
    let mut last = first;
    while last.seq() < n {
        let line = next_line(&mut stream).await;
        assert_eq!(line.seq(), last.seq() + 1, "no hole in the window");
        last = line;
    }
    assert_eq!(last.seq(), n);
}

#[wasm_bindgen_test]
async fn a_stream_for_an_unknown_session_fails_instead_of_retrying() {
    let err = transport()
        .events("no-such-session", 0, None)
        .await
        .unwrap_err();
    // The refused EventSource is asked once more with fetch, so the status is the server's.
    assert!(
        matches!(err, TransportError::Http { status: 404, .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        !text.contains("token="),
        "the error does not leak the token: {text}"
    );
}

#[wasm_bindgen_test]
async fn a_deleted_session_ends_its_stream_with_an_error() {
    let t = transport();
    let id = "transport-ends";
    put_session(id, &numbered(2)).await;
    let mut stream = t.events(id, 2, None).await.unwrap();
    t.delete(id).await.unwrap();
    // The server ends the stream of a deleted session; the EventSource reports it as an error
    // and is closed, so the engine (not the browser) decides when and where to reconnect.
    match next_item(&mut stream).await {
        Some(Err(TransportError::Network(m))) => assert!(m.contains("interrupted"), "{m}"),
        other => panic!("expected the connection to end with an error, got {other:?}"),
    }
    assert!(stream.next().await.is_none(), "an ended stream stays ended");
}

#[wasm_bindgen_test]
async fn an_unreachable_server_is_a_network_error_on_every_route() {
    // A loopback port nothing listens on (scripts/wasm.sh picks it).
    let dead = option_env!("SCROLLBACK_TEST_DEAD").unwrap_or("http://127.0.0.1:9");
    let t = BrowserTransport::new(dead, None).unwrap();
    assert!(matches!(
        t.sessions().await,
        Err(TransportError::Network(_))
    ));
    let err = t.events("long", 0, None).await.unwrap_err();
    assert!(err.to_string().contains("cannot reach"), "{err}");
}

#[wasm_bindgen_test]
async fn server_urls_are_checked_and_keyed_by_host_port_and_prefix() {
    let t = BrowserTransport::new("http://127.0.0.1:8080/", None).unwrap();
    assert_eq!(
        (t.server(), t.base()),
        (("127.0.0.1", 8080, ""), "http://127.0.0.1:8080")
    );
    let t = BrowserTransport::new("https://chat.example/api/?x=1#y", None).unwrap();
    assert_eq!(
        (t.server(), t.base()),
        (("chat.example", 443, "/api"), "https://chat.example/api")
    );
    // Two servers behind one origin are two servers; a trailing slash is the same one.
    let sandbox = BrowserTransport::new("https://gw.example.com/sandbox//", None).unwrap();
    let prod = BrowserTransport::new("https://gw.example.com/prod", None).unwrap();
    assert_eq!(sandbox.server(), ("gw.example.com", 443, "/sandbox"));
    assert_eq!(prod.server(), ("gw.example.com", 443, "/prod"));
    assert!(BrowserTransport::new("not a url", None).is_err());
    assert!(BrowserTransport::new("ftp://example.com", None).is_err());
}

#[wasm_bindgen_test]
async fn sleep_waits_on_the_timer() {
    let t = transport();
    let start = js_sys::Date::now();
    t.sleep(60).await;
    assert!(js_sys::Date::now() - start >= 59.0);
}
