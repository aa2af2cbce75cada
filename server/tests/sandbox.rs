//! `--sandbox` over real HTTP: the seeded sessions, and the agent answering a posted message
//! with a streamed reply (and queueing a message posted while it streams).

mod server_support;

use scrollback::protocol::{EventKind, Line};
use serde_json::{json, Value};
use server_support::Fixture;
use std::collections::HashSet;

#[tokio::test]
async fn the_sandbox_seeds_realistic_sessions_and_answers_a_posted_message() {
    let f = Fixture::with(|c| {
        c.sandbox = true;
        // Slow enough that the second message surely arrives while the first reply streams.
        c.pace_ms = 5;
    })
    .await;

    // The long session: about 24,000 events and 21 MB, every kind of event.
    let size = std::fs::metadata(f.transcript_path("long")).unwrap().len();
    assert!((19_000_000..24_000_000).contains(&size), "{size} bytes");
    let text = std::fs::read_to_string(f.transcript_path("long")).unwrap();
    let lines: Vec<Line> = text.lines().map(|l| Line::parse(l).unwrap()).collect();
    assert!(
        (23_500..25_000).contains(&lines.len()),
        "{} events",
        lines.len()
    );
    assert!(
        lines
            .iter()
            .enumerate()
            .all(|(i, l)| l.seq() == i as u64 + 1),
        "seq from 1, no holes"
    );
    let types: HashSet<&str> = lines.iter().map(Line::event_type).collect();
    for ty in [
        "userMessage",
        "assistantText",
        "usageDelta",
        "status",
        "settings",
        "messageQueued",
        "toolCall",
        "toolResult",
        "command",
        "compacting",
        "error",
    ] {
        assert!(types.contains(ty), "{ty}");
    }
    assert!(lines.iter().any(|l| l.kind() == EventKind::Unknown));
    let queued: Vec<&Line> = lines
        .iter()
        .filter(|l| l.event_type() == "messageQueued")
        .collect();
    for q in queued {
        let id = &q.event()["id"];
        assert!(
            lines
                .iter()
                .any(|l| l.seq() > q.seq() && l.event().get("queuedId") == Some(id)),
            "queued {id} is read"
        );
    }
    let deltas = lines
        .iter()
        .filter(|l| l.kind() == EventKind::AssistantText)
        .count();
    assert!(deltas * 10 > lines.len() * 8, "mostly deltas");
    assert!(lines
        .iter()
        .any(|l| l.event().contains_key("turnId") && l.event().contains_key("messageId")));
    // Replies of hundreds of deltas that fold: a 40-row page reaches far back.
    let page = f
        .page("long", &format!("before={}&coalesce=true", lines.len()))
        .await;
    assert_eq!(page.len(), 40);
    assert!(
        lines.len() as u64 - page[0].seq() > 400,
        "40 rows span {} events",
        lines.len() as u64 - page[0].seq()
    );

    // Seeding is deterministic and never overwrites.
    let again = tempfile::tempdir().unwrap();
    scrollback_server::sandbox::seed(again.path()).unwrap();
    assert_eq!(
        std::fs::read(again.path().join("long/transcript.jsonl")).unwrap(),
        text.as_bytes()
    );
    std::fs::write(again.path().join("welcome/transcript.jsonl"), "mine\n").unwrap();
    scrollback_server::sandbox::seed(again.path()).unwrap();
    assert_eq!(
        std::fs::read_to_string(again.path().join("welcome/transcript.jsonl")).unwrap(),
        "mine\n"
    );

    let list: Value = f.get("/sessions").await.json().await.unwrap();
    let ids: HashSet<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.len() >= 5 && ids.contains("long") && ids.contains("welcome"),
        "{ids:?}"
    );
    let waiting = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "waiting")
        .unwrap();
    assert_eq!(waiting["status"], "waiting");

    // A posted message: appended, then a reply streams; a second one while it streams queues.
    let start = f.page("welcome", "limit=1").await[0].seq();
    let mut sse = f.events("welcome", &format!("after={start}")).await;
    let post = |text: &'static str| {
        f.http
            .post(f.url("/sessions/welcome/messages"))
            .json(&json!({ "text": text }))
            .send()
    };
    let first: Value = post("Tell me about the cache")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(first["event"]["type"], "userMessage");
    let mut events: Vec<Line> = Vec::new();
    let mut queued_id = None;
    while events
        .iter()
        .filter(|l| l.event_type() == "status" && l.event()["status"] == "idle")
        .count()
        < 2
    {
        let e = sse.next().await;
        let line = Line::parse(&e.data).unwrap();
        assert_eq!(e.id, line.seq().to_string());
        if line.kind() == EventKind::AssistantText && queued_id.is_none() {
            let queued: Value = post("And the server?").await.unwrap().json().await.unwrap();
            assert_eq!(queued["event"]["type"], "messageQueued");
            queued_id = Some(queued["event"]["id"].clone());
        }
        events.push(line);
    }
    let kinds: Vec<&str> = events.iter().map(Line::event_type).collect();
    assert_eq!(kinds[0], "userMessage");
    assert_eq!(kinds[1], "status");
    let read = events
        .iter()
        .position(|l| l.event().get("queuedId") == queued_id.as_ref())
        .expect("the queued message is read");
    assert_eq!(events[read].text(), Some("And the server?"));
    let first_reply = events[..read]
        .iter()
        .filter(|l| l.kind() == EventKind::AssistantText)
        .count();
    assert!((120..=240).contains(&first_reply), "{first_reply} deltas");
    assert!(kinds[..read].contains(&"usageDelta"));
    assert!(
        events.windows(2).all(|w| w[1].seq() == w[0].seq() + 1),
        "no holes"
    );
    // Each reply folds into one row by the row rule, except where the queued message sits
    // between two deltas of the first: any other event ends a run.
    let newest = events.last().unwrap().seq();
    let rows = f
        .page(
            "welcome",
            &format!("before={}&after={}&coalesce=true", newest + 1, start),
        )
        .await;
    let kinds: Vec<&str> = rows.iter().map(Line::event_type).collect();
    assert_eq!(
        kinds,
        [
            "userMessage",
            "status",
            "assistantText",
            "messageQueued",
            "assistantText",
            "usageDelta",
            "status",
            "userMessage",
            "status",
            "assistantText",
            "usageDelta",
            "status"
        ]
    );
    f.server.shutdown().await.unwrap();
}
