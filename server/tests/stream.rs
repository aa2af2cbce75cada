//! `/events` over real HTTP, read by a real SSE parser: catch-up, reset, live appends by another
//! process, a replaced file, and the byte-for-byte round trip of a line.

mod server_support;

use scrollback::protocol::{silence_limit_ms, Line, CATCH_UP_BYTES, KEEP_ALIVE_EVENT, RESET_EVENT};
use serde_json::{json, Value};
use server_support::{line, lines, transcript, Fixture};

fn ids(events: &[eventsource_stream::Event]) -> Vec<u64> {
    events.iter().map(|e| e.id.parse().unwrap()).collect()
}

#[tokio::test]
async fn catch_up_sends_every_line_above_after_then_what_others_append() {
    let f = Fixture::new().await;
    let text = transcript(300);
    f.write("s", &text);
    let all = lines(&text);
    let mut sse = f.events("s", "after=250").await;
    let events = sse.take(50).await;
    assert_eq!(ids(&events), (251..=300).collect::<Vec<_>>());
    for e in &events {
        assert_eq!(e.event, "message");
        assert_eq!(
            e.data,
            all[e.id.parse::<usize>().unwrap() - 1].raw(),
            "byte for byte"
        );
    }
    assert!(
        sse.quiet(200).await,
        "nothing more until something is appended"
    );

    // Another process appends: two lines at once, then one written in two parts.
    f.append(
        "s",
        &(line(301, json!({"type": "status", "status": "working"}))
            + &line(302, json!({"type": "assistantText", "text": " hi"}))),
    );
    assert_eq!(ids(&sse.take(2).await), vec![301, 302]);
    let torn = line(303, json!({"type": "assistantText", "text": " there"}));
    let (head, rest) = torn.split_at(20);
    f.append("s", head);
    assert!(sse.quiet(300).await, "a torn line is not sent");
    f.append("s", rest);
    let e = sse.next().await;
    assert_eq!((e.id.as_str(), e.data.as_str()), ("303", torn.trim_end()));

    // Damage appended between good lines is skipped, the good lines are not.
    f.append(
        "s",
        &("\n{oops\n".to_owned() + &line(304, json!({"type": "status", "status": "idle"}))),
    );
    assert_eq!(sse.next().await.id, "304");
}

#[tokio::test]
async fn a_stream_opens_with_a_keep_alive_naming_its_interval_and_repeats_it_when_idle() {
    // Firefox fires an EventSource's `open` at the body's first byte, not at the headers: with
    // nothing to send, the first byte would otherwise come an interval later. And a client
    // learns at once how long a silence means that its connection is dead.
    let f = Fixture::with(|c| c.keep_alive_ms = 300).await;
    f.write("s", &transcript(3));
    let mut response = f.get("/sessions/s/events?after=3").await;
    assert_eq!(response.status(), 200);
    let first = tokio::time::timeout(std::time::Duration::from_secs(60), response.chunk())
        .await
        .expect("a first chunk")
        .unwrap()
        .expect("the stream is open");
    assert_eq!(
        String::from_utf8_lossy(&first),
        "event: keepalive\ndata: {\"every\":300}\n\n",
        "the body opens with the keep-alive"
    );
    drop(response);

    let mut sse = f.events_with_keep_alives("s", "after=2").await;
    let frames = sse.take(4).await;
    let kinds: Vec<&str> = frames.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        kinds,
        [
            KEEP_ALIVE_EVENT,
            "message",
            KEEP_ALIVE_EVENT,
            KEEP_ALIVE_EVENT
        ],
        "the opening frame, the catch-up, then a keep-alive per idle interval"
    );
    assert_eq!(silence_limit_ms(&frames[3].data), Some(900));
}

#[tokio::test]
async fn further_behind_than_the_catch_up_bytes_gets_a_reset_then_the_newest_window() {
    let f = Fixture::new().await;
    // 300 lines of about 7 KB: the newest MiB is about 147 of them.
    let pad = "x".repeat(7_000);
    let text: String = (1..=300)
        .map(|seq| {
            line(
                seq,
                json!({"type": "userMessage", "text": format!("{seq} {pad}")}),
            )
        })
        .collect();
    f.write("s", &text);
    // The window: the newest lines whose text fits in CATCH_UP_BYTES.
    let (mut first, mut bytes) = (301, 0);
    for l in text.lines().rev() {
        if bytes + l.len() > CATCH_UP_BYTES {
            break;
        }
        bytes += l.len();
        first -= 1;
    }
    assert!(first > 100 && first < 200, "{first}");
    for (after, reset) in [(50, true), (first - 2, true), (first - 1, false), (0, true)] {
        let query = format!("after={after}");
        let mut sse = f.events("s", &query).await;
        let mut head = sse.next().await;
        if reset {
            assert_eq!(head.event, RESET_EVENT, "{query}");
            let data: Value = serde_json::from_str(&head.data).unwrap();
            assert_eq!(data["first"], first);
            assert_eq!(data["reason"], "behind");
            head = sse.next().await;
        }
        assert_eq!(head.event, "message", "{query}");
        let mut events = vec![head];
        events.extend(sse.take((300 - first) as usize).await);
        assert_eq!(ids(&events), (first..=300).collect::<Vec<_>>(), "{query}");
        assert!(sse.quiet(150).await);
    }
}

#[tokio::test]
async fn a_client_ahead_of_the_file_gets_a_reset_with_the_newest_lines() {
    let f = Fixture::new().await;
    f.write("s", &transcript(30));
    // The client held 500 lines of a file since replaced by a shorter one.
    let mut sse = f.events("s", "after=500").await;
    let reset = sse.next().await;
    assert_eq!(reset.event, RESET_EVENT);
    let data: Value = serde_json::from_str(&reset.data).unwrap();
    assert_eq!(
        (data["reason"].as_str(), data["first"].as_u64()),
        (Some("ahead"), Some(1))
    );
    assert_eq!(ids(&sse.take(30).await), (1..=30).collect::<Vec<_>>());
    // An emptied file: a reset with nothing after it.
    f.write("e", "");
    let mut empty = f.events("e", "after=3").await;
    assert_eq!(empty.next().await.event, RESET_EVENT);
    assert!(empty.quiet(150).await);
    // At the newest line exactly, nothing is sent until something is appended.
    let mut sse = f.events("s", "after=30").await;
    assert!(sse.quiet(200).await);
    f.append("s", &line(31, json!({"type": "status", "status": "idle"})));
    assert_eq!(sse.next().await.id, "31");
}

/// `n` lines of a conversation other than [`transcript`]'s: user messages "other 1".. "other n".
fn another_conversation(n: u64) -> String {
    (1..=n)
        .map(|seq| {
            line(
                seq,
                json!({"type": "userMessage", "text": format!("other {seq}")}),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_stream_that_names_the_line_it_holds_is_reset_when_the_file_has_another() {
    let f = Fixture::new().await;
    let text = transcript(30);
    f.write("s", &text);
    let held = lines(&text)[19].fingerprint();
    // The line at `after` is the one the client holds: the lines after it.
    let mut sse = f.events("s", &format!("after=20&at={held}")).await;
    assert_eq!(ids(&sse.take(10).await), (21..=30).collect::<Vec<_>>());
    // Replaced (since the client's check) by a longer file whose line 20 is another.
    let other = another_conversation(40);
    f.write("s", &other);
    let mut sse = f.events("s", &format!("after=20&at={held}")).await;
    let reset = sse.next().await;
    assert_eq!(reset.event, RESET_EVENT);
    let data: Value = serde_json::from_str(&reset.data).unwrap();
    assert_eq!(
        (data["reason"].as_str(), data["first"].as_u64()),
        (Some("replaced"), Some(1))
    );
    assert_eq!(ids(&sse.take(40).await), (1..=40).collect::<Vec<_>>());
    // Without `at`, the server cannot tell (the client checks first).
    let mut sse = f.events("s", "after=20").await;
    assert_eq!(sse.next().await.id, "21");
    // Not a fingerprint: refused.
    let bad = f.get("/sessions/s/events?after=20&at=zz").await;
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("bad `at`"));
}

#[tokio::test]
async fn a_reconnecting_event_source_resumes_from_last_event_id() {
    let f = Fixture::new().await;
    f.write("s", &transcript(300));
    let response = f
        .http
        .get(f.url("/sessions/s/events?after=10"))
        .header("Last-Event-ID", "297")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    use eventsource_stream::Eventsource;
    use futures_util::StreamExt;
    let mut stream = response
        .bytes_stream()
        .eventsource()
        .filter(|e| std::future::ready(e.as_ref().unwrap().event != KEEP_ALIVE_EVENT));
    for want in ["298", "299", "300"] {
        assert_eq!(stream.next().await.unwrap().unwrap().id, want);
    }
    let response = f
        .http
        .get(f.url("/sessions/s/events"))
        .header("Last-Event-ID", "x1")
        .send()
        .await
        .unwrap();
    let (status, message) = f.error(response).await;
    assert_eq!(status, 400);
    assert!(message.contains("Last-Event-ID"));
}

/// A reconnect resumes from `Last-Event-ID`, and the line its URL names (`after` and `at`, the
/// client's when it first connected) is still checked: a file replaced while the client was
/// away is a `replaced` reset with the new file's lines, not those lines resumed after the old
/// file's (an `EventSource` reconnecting on its own got lines 31 and 32 of another
/// conversation after line 30 of its own).
#[tokio::test]
async fn a_reconnect_after_the_file_was_replaced_is_a_reset() {
    use eventsource_stream::Eventsource;
    use futures_util::StreamExt;
    let f = Fixture::new().await;
    let text = transcript(30);
    f.write("s", &text);
    let held = lines(&text)[19].fingerprint();
    let reconnect = |last: &'static str| {
        let request = f
            .http
            .get(f.url(&format!("/sessions/s/events?after=20&at={held}")))
            .header("Last-Event-ID", last);
        async move {
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 200);
            response
                .bytes_stream()
                .eventsource()
                .map(|e| e.unwrap())
                .filter(|e| std::future::ready(e.event != KEEP_ALIVE_EVENT))
        }
    };
    // The same file, grown: the lines after the last one the client had.
    f.append("s", &line(31, json!({"type": "status", "status": "idle"})));
    let mut events = Box::pin(reconnect("30").await);
    assert_eq!(events.next().await.unwrap().id, "31");
    // Replaced while it was away, by a longer file whose line 20 is another.
    let other = another_conversation(32);
    f.write("s", &other);
    let mut events = Box::pin(reconnect("31").await);
    let reset = events.next().await.unwrap();
    assert_eq!(reset.event, RESET_EVENT);
    let data: Value = serde_json::from_str(&reset.data).unwrap();
    assert_eq!(data["reason"].as_str(), Some("replaced"));
    let first = events.next().await.unwrap();
    assert!(first.data.contains("other"), "{}", first.data);
}

#[tokio::test]
async fn a_file_replaced_under_the_same_name_is_served_as_the_new_content() {
    let f = Fixture::new().await;
    f.write("s", &transcript(300));
    let mut sse = f.events("s", "after=300").await;

    // Replaced through the API: the stream says reset, then sends the new content.
    let new = transcript(30).replace("question", "другой вопрос");
    let response = f
        .http
        .put(f.url("/sessions/s/transcript"))
        .body(new.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let reset = sse.next().await;
    assert_eq!(reset.event, RESET_EVENT);
    assert_eq!(
        serde_json::from_str::<Value>(&reset.data).unwrap()["reason"],
        "replaced"
    );
    let events = sse.take(30).await;
    let all = lines(&new);
    assert_eq!(
        events.iter().map(|e| e.data.as_str()).collect::<Vec<_>>(),
        all.iter().map(Line::raw).collect::<Vec<_>>()
    );
    let page = f.page("s", "limit=100").await;
    assert_eq!(
        page.iter().map(Line::raw).collect::<Vec<_>>(),
        all.iter().map(Line::raw).collect::<Vec<_>>()
    );
    assert_eq!(f.page("s", "before=3").await.len(), 2);

    // Replaced by another process (a new file renamed over it).
    let other = transcript(12);
    let tmp = f.data().join("s").join("next.tmp");
    std::fs::write(&tmp, &other).unwrap();
    std::fs::rename(&tmp, f.transcript_path("s")).unwrap();
    assert_eq!(sse.next().await.event, RESET_EVENT);
    assert_eq!(
        sse.take(12).await.last().unwrap().data,
        lines(&other)[11].raw()
    );
    assert_eq!(f.page("s", "").await.len(), 12);

    // Rewritten in place, shorter.
    std::fs::write(f.transcript_path("s"), transcript(5)).unwrap();
    assert_eq!(sse.next().await.event, RESET_EVENT);
    assert_eq!(sse.take(5).await.last().unwrap().id, "5");

    // Deleted: the stream ends, and the session is gone.
    let response = f.http.delete(f.url("/sessions/s")).send().await.unwrap();
    assert_eq!(response.status(), 204);
    assert!(sse.ended().await);
    assert_eq!(f.get("/sessions/s/transcript").await.status(), 404);
}

#[tokio::test]
async fn a_line_read_back_is_the_line_that_was_written() {
    let f = Fixture::new().await;
    // Written by another process with floats that a lossy parser would change.
    let written = [
        r#"{"seq":1,"ts":1788546972.6030757,"event":{"type":"userMessage","text":"ts with all its digits"}}"#,
        r#"{"seq":2,"ts":1788546972.603076,"event":{"type":"usageDelta","context":123456,"output":7,"cost":0.30000000000000004}}"#,
        r#"{"seq":3,"ts":1.7885469726030757e9,"event":{"type":"futureEvent","z":1,"a":[2.5e-7,1e300],"nested":{"b":null,"a":"é"}}}"#,
    ];
    f.write("s", &(written.join("\n") + "\n"));
    let mut sse = f.events("s", "after=0").await;
    let streamed: Vec<String> = sse.take(3).await.into_iter().map(|e| e.data).collect();
    let page = f.page("s", "").await;
    for i in 0..3 {
        assert_eq!(
            streamed[i], written[i],
            "the stream sends the line as written"
        );
        assert_eq!(
            page[i].raw(),
            written[i],
            "/transcript sends the line as written"
        );
    }
    assert_eq!(page[0].ts(), 1788546972.6030757);
    assert_ne!(
        page[0].ts(),
        page[1].ts(),
        "ts one bit apart stays one bit apart"
    );

    // Written by the server: what the stream sent is what /transcript reads back.
    let response = f
        .http
        .post(f.url("/sessions/s/messages"))
        .json(&json!({"text": "round trip ✓"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let posted = response.text().await.unwrap();
    let sent = sse.next().await;
    assert_eq!(sent.id, "4");
    assert_eq!(sent.data, posted);
    let back = f.page("s", "before=5&after=3").await;
    assert_eq!(back[0].raw(), sent.data, "byte for byte");
    assert_eq!(
        back[0],
        Line::parse(&sent.data).unwrap(),
        "and equal parsed, ts to the last bit"
    );
    let ts = Line::parse(&sent.data).unwrap().ts();
    assert_eq!(
        serde_json::from_str::<Value>(&sent.data).unwrap()["ts"].as_f64(),
        Some(ts)
    );
    assert!(ts.fract() != 0.0, "a real clock's ts, with its fraction");
}
