//! The session state beside the rows (status, model, permission mode, compaction, queued
//! messages) is the server's too: a warm reopen draws what a cold open of the same file draws;
//! the session summary wins over a replayed cache only when it measured at least the lines shown
//! (seed 000, decision 7), so an older summary (the list remembered offline, a list answered
//! before the newest lines streamed) never overwrites newer lines; a reset forgets what its gap
//! may have resolved, a running compaction included (decision 6); a replaced file keeps nothing
//! of the old one's state.

use scrollback::engine::{Config, Engine, View};
use scrollback::store::FsStore;
use scrollback::transport::HttpTransport;
use scrollback_server::transcript;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;

use crate::support::{local, Recorded, Running, TestServer};

type Client = Engine<FsStore, Recorded>;

async fn client(base: &TestServer, cache: &Path) -> Client {
    let transport = HttpTransport::new(&base.server.url(), None).unwrap();
    let config = Config {
        reconnect_delay_ms: 50,
        ..Config::default()
    };
    Engine::assemble(
        Arc::new(FsStore::new(cache)),
        Recorded::new(transport),
        config,
    )
    .await
}

/// Appends `events` to session `id`'s file (created if need be), as the agent does.
fn append(base: &TestServer, id: &str, events: &[Value]) {
    std::fs::create_dir_all(base.data.join(id)).unwrap();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(base.path(id));
    drop(file.unwrap());
    for event in events {
        let Value::Object(event) = event.clone() else {
            panic!("not an object: {event}")
        };
        transcript::append(&base.path(id), event).unwrap();
    }
}

/// More than the catch-up carries (`CATCH_UP_BYTES`): a reopen after these resets.
fn past_the_catch_up(base: &TestServer, id: &str) {
    let big = "x".repeat(4000);
    let lines: Vec<Value> = (0..300)
        .map(|i| json!({"type": "userMessage", "text": format!("{i} {big}")}))
        .collect();
    append(base, id, &lines);
}

/// The state fields a screen draws beside the rows.
fn state(v: &View) -> Value {
    serde_json::to_value(&v.state).unwrap()
}

/// Opens `id` with the cache in `cache`, live, and returns its state and resets.
async fn opened(base: &TestServer, cache: &Path, id: &str) -> (Value, u64) {
    let s = Running::open(&client(base, cache).await, id).await;
    s.live().await;
    let seen = s.session.with_view(|v| (state(v), v.counters.resets));
    s.close().await;
    seen
}

#[test]
fn a_warm_reopen_draws_the_state_a_cold_open_draws() {
    local(async {
        let base = TestServer::start(|_| {}).await;
        // A settings line may name one field: the mode comes from the older one.
        append(
            &base,
            "ps",
            &[
                json!({"type": "settings", "model": "m1", "permissionMode": "plan"}),
                json!({"type": "userMessage", "text": "hi"}),
                json!({"type": "settings", "model": "m2"}),
                json!({"type": "status", "status": "idle"}),
            ],
        );
        let (cold, _) = opened(&base, &base.cache, "ps").await;
        assert_eq!(
            (&cold["model"], &cold["permissionMode"]),
            (&json!("m2"), &json!("plan"))
        );
        let (warm, _) = opened(&base, &base.cache, "ps").await;
        assert_eq!(warm, cold, "warm reopen against cold open");

        // A compaction that ended in a reset's gap is not shown running.
        append(
            &base,
            "cp",
            &[
                json!({"type": "status", "status": "working"}),
                json!({"type": "compacting", "active": true}),
            ],
        );
        let (running, _) = opened(&base, &base.cache, "cp").await;
        assert!(running["compactingSince"].is_number());
        append(
            &base,
            "cp",
            &[
                json!({"type": "compacting", "active": false}),
                json!({"type": "status", "status": "idle"}),
            ],
        );
        past_the_catch_up(&base, "cp");
        let (warm, resets) = opened(&base, &base.cache, "cp").await;
        assert_eq!(resets, 1, "the reopen was a reset");
        let (cold, _) = opened(&base, &base.tmp.path().join("fresh"), "cp").await;
        assert_eq!(warm, cold, "after a reset against a cold open");

        // A file replaced by another conversation: nothing of the old one's state stays.
        append(
            &base,
            "rp",
            &[
                json!({"type": "usageDelta", "context": 5000}),
                json!({"type": "compacting", "active": true}),
            ],
        );
        let (old, _) = opened(&base, &base.cache, "rp").await;
        assert_eq!(old["contextTokens"], 5000);
        std::fs::remove_file(base.path("rp")).unwrap();
        append(
            &base,
            "rp",
            &[json!({"type": "userMessage", "text": "another"})],
        );
        let (warm, _) = opened(&base, &base.cache, "rp").await;
        let (cold, _) = opened(&base, &base.tmp.path().join("fresh"), "rp").await;
        assert_eq!(warm, cold, "after a replaced file against a cold open");
        base.server.shutdown().await.unwrap();
    });
}

#[test]
fn an_older_summary_never_overwrites_newer_lines() {
    local(async {
        let base = TestServer::start(|_| {}).await;
        append(
            &base,
            "st",
            &[
                json!({"type": "userMessage", "text": "do it"}),
                json!({"type": "status", "status": "working"}),
            ],
        );
        let c = client(&base, &base.cache).await;
        let s = Running::open(&c, "st").await; // the list it opens from is remembered
        s.live().await;
        // A list answered now, and the reply's end streamed after it.
        let answered = c.sessions().await.unwrap();
        let summary = answered.iter().find(|x| x.id == "st").unwrap();
        append(
            &base,
            "st",
            &[
                json!({"type": "assistantText", "text": "done"}),
                json!({"type": "status", "status": "idle"}),
            ],
        );
        s.wait("the idle status", |v| v.state.status == "idle")
            .await;
        s.session.take_summary(summary);
        let status = s.session.with_view(|v| v.state.status.clone());
        assert_eq!(
            status, "idle",
            "the list's older status ({})",
            summary.status
        );
        s.close().await;

        // Offline: the remembered list says "working", the cache's newest lines "idle".
        let c = client(&base, &base.cache).await;
        base.server.shutdown().await.unwrap();
        assert_eq!(c.cached_sessions().await[0].status, "working");
        let s = Running::spawn(c.open_id("st", None).await.unwrap());
        s.wait("the cached rows, offline", |v| {
            v.ready && v.banner.is_some()
        })
        .await;
        assert_eq!(s.session.with_view(|v| v.state.status.clone()), "idle");
        s.close().await;
    });
}
