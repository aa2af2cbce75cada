//! Search over the real server's sessions, cached by the engine over real HTTP into a real
//! filesystem cache, then searched with the server gone: a phrase streamed across delta seams
//! is found at its row's seq, the hit opens the session there (the engine's anchor), a
//! session filter scopes the search, and a purge removes the session's hits.

use scrollback::chunks::Cache;
use scrollback::engine::{Config, Engine, View};
use scrollback::fold::Row;
use scrollback::store::FsStore;
use scrollback::transport::{HttpTransport, Transport};
use scrollback_server::{spawn, transcript};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use tokio::task::LocalSet;

use crate::support::Running;

type Client = Engine<FsStore, HttpTransport>;

async fn client(url: &str, cache: &Path) -> Client {
    let transport = HttpTransport::new(url, None).unwrap();
    let store = Arc::new(FsStore::new(cache));
    let cache = Cache::for_server(store, transport.server()).await;
    Engine::new(
        cache,
        transport,
        Config {
            reconnect_delay_ms: 50,
            ..Config::default()
        },
    )
}

fn append(data: &Path, id: &str, event: Value) -> u64 {
    let Value::Object(event) = event else {
        panic!("an event is an object")
    };
    let path = data.join(id).join("transcript.jsonl");
    if !path.exists() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"").unwrap();
    }
    transcript::append(&path, event).unwrap().seq()
}

/// Opens `id` at `anchor`, runs it until `cond`, then closes it; returns what it showed.
async fn show(
    client: &Client,
    id: &str,
    anchor: Option<u64>,
    cond: impl Fn(&View) -> bool,
) -> View {
    let s = Running::spawn(client.open_id(id, anchor).await.unwrap());
    s.wait(id, cond).await;
    if anchor.is_none() {
        while s.session.with_view(|v| v.more_history) {
            s.session.older().await.unwrap();
        }
    }
    let view = s.session.view();
    s.close().await;
    view
}

#[tokio::test]
async fn cached_sessions_are_searched_with_the_server_gone() {
    LocalSet::new()
        .run_until(async {
            let tmp = tempfile::tempdir().unwrap();
            let (data, cache) = (tmp.path().join("data"), tmp.path().join("cache"));
            // "a": the answer streams "tokio::select! into the worker" cut inside words, then
            // a long tail, so the row is far above the newest window.
            append(
                &data,
                "a",
                json!({"type": "userMessage", "text": "Where did the migration go?"}),
            );
            let mut first = 0;
            for (i, delta) in [
                "The migration moves ",
                "tok",
                "io::sel",
                "ect! into",
                " the worker.",
            ]
            .into_iter()
            .enumerate()
            {
                let seq = append(
                    &data,
                    "a",
                    json!({"type": "assistantText", "text": delta, "messageId": "m1"}),
                );
                if i == 0 {
                    first = seq;
                }
            }
            for n in 0..600 {
                append(
                    &data,
                    "a",
                    json!({"type": "userMessage", "text": format!("filler {n}")}),
                );
            }
            let newest_a = append(&data, "a", json!({"type": "status", "status": "idle"}));
            append(
                &data,
                "b",
                json!({"type": "userMessage", "text": "the worker is idle"}),
            );
            let newest_b = append(&data, "b", json!({"type": "status", "status": "idle"}));

            let mut config = scrollback_server::Config::new(&data);
            config.pace_ms = 15;
            let server = spawn(config).await.unwrap();
            let url = server.url();
            let online = client(&url, &cache).await;
            online.sessions().await.unwrap();
            show(&online, "a", None, |v| v.live && v.cursor == newest_a).await;
            show(&online, "b", None, |v| v.live && v.cursor == newest_b).await;
            // The hit opens the session at its seq (the engine's anchor): the row is shown whole.
            // (Done with the server up: the anchor restore follows the reopen's check.)
            let hit = online.search("tokio::select", 1, None).await;
            assert_eq!((hit[0].session.as_str(), hit[0].seq), ("a", first));
            let view = show(&online, "a", Some(hit[0].seq), |v| {
                v.oldest.is_some_and(|o| o <= first)
            })
            .await;
            let row = view
                .transcript
                .rows()
                .iter()
                .find(|r| r.seq() == first)
                .cloned();
            let Some(Row::Assistant { text, .. }) = row else {
                panic!("the hit's row is not shown: oldest {:?}", view.oldest)
            };
            assert_eq!(text, "The migration moves tokio::select! into the worker.");
            assert!(view.oldest.unwrap() <= first, "opened back to the hit");

            server.shutdown().await.unwrap();

            // The API is unreachable: the search reads only the cache.
            let offline = client(&url, &cache).await;
            assert!(offline.sessions().await.is_err(), "the server is gone");
            let hits = offline
                .search(r#""tokio select into the worker""#, 10, None)
                .await;
            assert_eq!(hits.len(), 1, "{hits:?}");
            assert_eq!((hits[0].session.as_str(), hits[0].seq), ("a", first));
            let marked: Vec<&str> = hits[0]
                .snippet
                .iter()
                .filter(|p| p.hit)
                .map(|p| p.text.as_str())
                .collect();
            // The phrase's words where it stands whole (not the sentence's first "The").
            assert_eq!(marked, ["tokio", "select", "into", "the", "worker"]);
            let both = offline.search("worker", 10, None).await;
            let mut sessions: Vec<&str> = both.iter().map(|h| h.session.as_str()).collect();
            sessions.sort_unstable();
            assert_eq!(sessions, ["a", "b"]);
            let only_b = offline.search("worker", 10, Some(&["b".to_string()])).await;
            assert_eq!(
                only_b
                    .iter()
                    .map(|h| h.session.as_str())
                    .collect::<Vec<_>>(),
                ["b"]
            );

            // Purge removes the session's hits.
            offline.cache().purge("a").await;
            let left = offline.search("worker", 10, None).await;
            assert_eq!(
                left.iter().map(|h| h.session.as_str()).collect::<Vec<_>>(),
                ["b"]
            );
        })
        .await;
}

/// A reply longer than the opening window: the first visit caches its newest part, and the
/// history page below the window brings the rest. Every pair of adjacent words is one phrase
/// of one row, the pair across that seam too: each is found once, at the reply's first seq.
#[tokio::test]
async fn a_reply_cut_by_the_opening_window_is_searched_whole() {
    LocalSet::new()
        .run_until(async {
            let tmp = tempfile::tempdir().unwrap();
            let (data, cache) = (tmp.path().join("data"), tmp.path().join("cache"));
            append(&data, "r", json!({"type": "userMessage", "text": "count"}));
            let words = scrollback_protocol::OPENING_WINDOW + 40;
            let mut first = 0;
            for n in 0..words {
                let text = format!("w{n} ");
                let event = json!({"type": "assistantText", "text": text, "messageId": "m1"});
                let seq = append(&data, "r", event);
                if n == 0 {
                    first = seq;
                }
            }
            append(&data, "r", json!({"type": "userMessage", "text": "thanks"}));
            let newest = append(&data, "r", json!({"type": "status", "status": "idle"}));

            let server = spawn(scrollback_server::Config::new(&data)).await.unwrap();
            let url = server.url();
            let online = client(&url, &cache).await;
            online.sessions().await.unwrap();
            let view = show(&online, "r", None, |v| v.live && v.cursor == newest).await;
            assert!(!view.more_history, "every page loaded");
            server.shutdown().await.unwrap();

            let offline = client(&url, &cache).await; // the same server's cache, offline
            for n in 0..words - 1 {
                let phrase = format!(r#""w{n} w{}""#, n + 1);
                let hits = offline.search(&phrase, 10, None).await;
                let found: Vec<(&str, u64)> =
                    hits.iter().map(|h| (h.session.as_str(), h.seq)).collect();
                assert_eq!(found, [("r", first)], "{phrase}");
            }
        })
        .await;
}
