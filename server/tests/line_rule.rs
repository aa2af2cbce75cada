//! One definition of a valid line (issue row 7): a raw CR inside a line (JSON whitespace) is
//! refused by PUT with a clear 400, and a file holding one (written by another process) has that
//! line skipped by both routes alike, so `/events` never splits it into two `data:` fields. So is
//! a line whose `folded` field (what coalesced pages carry) would claim the lines after it.

mod server_support;

use scrollback::protocol::Line;
use serde_json::json;
use server_support::{line, seqs, Fixture};

fn with_raw_cr() -> String {
    format!(
        "{}{}{}",
        line(1, json!({"type": "userMessage", "text": "hi"})),
        "{\"seq\":2,\"ts\":1,\r\"event\":{\"type\":\"status\",\"status\":\"idle\"}}\n",
        line(3, json!({"type": "userMessage", "text": "again"})),
    )
}

#[test]
fn the_parser_refuses_a_raw_cr_inside_a_line_and_accepts_crlf_endings() {
    assert!(Line::parse("{\"seq\":2,\"ts\":1,\r\"event\":{\"type\":\"x\"}}").is_err());
    assert!(Line::parse("{\"seq\":2,\"ts\":1,\"event\":{\"type\":\"x\"}}\r\n").is_ok());
    assert!(
        Line::parse("{\"seq\":2,\"ts\":1,\"event\":{\"type\":\"x\",\"text\":\"a\\rb\"}}").is_ok()
    );
}

/// A line whose seq is not its first key (valid JSON all the same) is refused by PUT: the
/// server's lines open with their seq, which a post after a long line reads from its head alone
/// (with another key first, a post read a line of 200 MB whole, and parsed it).
#[tokio::test]
async fn put_refuses_a_line_that_does_not_open_with_its_seq() {
    let f = Fixture::new().await;
    let body = concat!(
        r#"{"seq":1,"ts":1,"event":{"type":"userMessage","text":"a"}}"#,
        "\n",
        r#"{"ts":1,"seq":2,"event":{"type":"userMessage","text":"b"}}"#,
        "\n",
    );
    let (status, message) = f.error(f.put("/sessions/s/transcript", body).await).await;
    assert_eq!(status, 400);
    assert!(
        message.contains("line 2") && message.contains("open with its seq"),
        "{message}"
    );
    // Spaces where JSON allows them are the server's lines too.
    let spaced = "{ \"seq\" : 1 , \"ts\":1,\"event\":{\"type\":\"userMessage\",\"text\":\"a\"}}\n";
    assert!(f
        .put("/sessions/s/transcript", spaced)
        .await
        .status()
        .is_success());
}

#[tokio::test]
async fn put_refuses_a_raw_cr_naming_the_line() {
    let f = Fixture::new().await;
    let response = f
        .http
        .put(f.url("/sessions/s/transcript"))
        .body(with_raw_cr())
        .send()
        .await
        .unwrap();
    let (status, message) = f.error(response).await;
    assert_eq!(status, 400);
    assert!(
        message.contains("line 2") && message.contains("raw CR"),
        "{message}"
    );
    assert_eq!(
        f.get("/sessions/s/transcript").await.status(),
        404,
        "nothing written"
    );
}

#[tokio::test]
async fn both_routes_skip_a_line_with_a_raw_cr_alike() {
    let f = Fixture::new().await;
    f.write("s", &with_raw_cr());
    assert_eq!(seqs(&f.page("s", "").await), [1, 3]);
    let mut events = f.events("s", "after=0").await;
    let got: Vec<u64> = events
        .take(2)
        .await
        .iter()
        .map(|e| {
            Line::parse(&e.data)
                .expect("every data field is a whole line")
                .seq()
        })
        .collect();
    assert_eq!(got, [1, 3]);
}

/// An agent's `assistantText` that carries a `folded` field of its own, claiming the lines
/// after it (only a coalesced page's lines have one).
fn with_a_folded_field() -> String {
    let folded = json!({"through": 3, "first": "a", "last": "b"});
    format!(
        "{}{}{}",
        line(
            1,
            json!({"type": "assistantText", "text": "ab", "folded": folded})
        ),
        line(2, json!({"type": "userMessage", "text": "hidden?"})),
        line(3, json!({"type": "userMessage", "text": "again"})),
    )
}

#[tokio::test]
async fn a_line_of_a_file_claiming_the_lines_after_it_hides_nothing() {
    let f = Fixture::new().await;
    f.write("s", &with_a_folded_field());
    // Skipped like any line the server cannot serve: the lines after it are served, raw,
    // coalesced and streamed.
    assert_eq!(seqs(&f.page("s", "").await), [2, 3]);
    assert_eq!(seqs(&f.page("s", "coalesce=true&before=4").await), [2, 3]);
    let got: Vec<u64> = (f.events("s", "after=0").await.take(2).await.iter())
        .map(|e| Line::parse(&e.data).unwrap().seq())
        .collect();
    assert_eq!(got, [2, 3]);
    // And refused by PUT, naming the line.
    let put = f.http.put(f.url("/sessions/t/transcript"));
    let (status, message) = f
        .error(put.body(with_a_folded_field()).send().await.unwrap())
        .await;
    assert_eq!(status, 400);
    assert!(
        message.contains("line 1") && message.contains("folded"),
        "{message}"
    );
}

/// What a JavaScript writer leaves where it cut a string between the halves of a surrogate
/// pair: a tool's output truncated by `slice`, a reply streamed as JS strings.
fn with_lone_surrogates() -> String {
    [
        line(1, json!({"type": "userMessage", "text": "smile"})),
        r#"{"seq":2,"ts":1,"event":{"type":"toolResult","callId":"c","output":"truncated \ud83d"}}"#
            .to_owned() + "\n",
        r#"{"seq":3,"ts":1,"event":{"type":"assistantText","messageId":"m","text":"\ud83d"}}"#
            .to_owned()
            + "\n",
        r#"{"seq":4,"ts":1,"event":{"type":"assistantText","messageId":"m","text":"\ude00"}}"#
            .to_owned()
            + "\n",
    ]
    .concat()
}

#[tokio::test]
async fn a_string_cut_between_surrogate_halves_is_served_not_skipped() {
    let f = Fixture::new().await;
    let file = with_lone_surrogates();
    f.write("s", &file);
    let raw = f.page("s", "").await;
    assert_eq!(seqs(&raw), [1, 2, 3, 4], "every line served");
    let sent: Vec<&str> = raw.iter().map(Line::raw).collect();
    assert_eq!(sent, file.lines().collect::<Vec<_>>(), "byte for byte");
    assert_eq!(raw[1].event()["output"], "truncated \u{fffd}");
    // Coalesced too: each half reads as U+FFFD, and two equal texts are no clean append, so
    // both lines travel as they are (the screen joins them into one row).
    let folded = f.page("s", "coalesce=true&before=5").await;
    assert_eq!(folded.iter().map(Line::raw).collect::<Vec<_>>(), sent);
    let got: Vec<u64> = (f.events("s", "after=0").await.take(4).await.iter())
        .map(|e| Line::parse(&e.data).unwrap().seq())
        .collect();
    assert_eq!(got, [1, 2, 3, 4]);
    let put = f.http.put(f.url("/sessions/t/transcript")).body(file);
    assert!(put.send().await.unwrap().status().is_success());
    // A message posted as JavaScript wrote it, cut between the halves: sent, not refused.
    let posted = f
        .http
        .post(f.url("/sessions/t/messages"))
        .header("content-type", "application/json")
        .body(r#"{"text":"cut \ud83d"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 200);
    let line = Line::parse(&posted.text().await.unwrap()).unwrap();
    assert_eq!(line.event()["text"], "cut \u{fffd}");
}
