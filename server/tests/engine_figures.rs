//! Figures, not assertions: what a warm reopen and a catch-up after 300 new events cost on the
//! wire, per route, counted by the server (`/stats`; `bytes` is the body as sent, compressed
//! where the route compresses). Run with `--nocapture` to see them:
//!
//!     cargo test -p scrollback-server --release --test engine_figures -- --nocapture
//!
//! The app here lists sessions before it opens one (as the demo does); the list is printed as
//! its own route, so the cost of the reopen itself can be read apart from it. The last figure
//! is the reopen as `openSession` makes it: by id, with no list.

use scrollback::engine::{Config, Engine};
use scrollback::store::FsStore;
use scrollback::transport::HttpTransport;
use scrollback_server::spawn;
use serde_json::Value;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::LocalSet;

type Stats = Vec<(String, u64, u64)>;

async fn stats(http: &reqwest::Client, url: &str) -> Stats {
    let v: Value = http
        .get(format!("{url}/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    ["sessions", "transcript", "events"]
        .iter()
        .map(|r| {
            (
                r.to_string(),
                v[r]["requests"].as_u64().unwrap_or(0),
                v[r]["bytes"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

fn diff(a: &Stats, b: &Stats) -> String {
    let mut total = (0, 0);
    let mut parts = Vec::new();
    for ((route, r0, b0), (_, r1, b1)) in a.iter().zip(b) {
        total.0 += r1 - r0;
        total.1 += b1 - b0;
        parts.push(format!("{route} {} req {} B", r1 - r0, b1 - b0));
    }
    format!(
        "{} requests, {} bytes ({})",
        total.0,
        total.1,
        parts.join(", ")
    )
}

#[tokio::test]
async fn figures_warm_reopen_and_catch_up_after_300_events() {
    LocalSet::new()
        .run_until(async {
            let tmp = tempfile::tempdir().unwrap();
            let data = tmp.path().join("data");
            let server = spawn(scrollback_server::Config::new(&data)).await.unwrap();
            let url = server.url();
            std::fs::create_dir_all(data.join("f")).unwrap();
            let path = data.join("f").join("transcript.jsonl");
            let file = std::fs::File::create(&path).unwrap();
            scrollback_server::sandbox::write_long(std::io::BufWriter::new(file), "f", 3000)
                .unwrap();
            let http = reqwest::Client::new();
            let cache_dir = tmp.path().join("cache");

            // Opens "f" as an app would after a restart, until it shows `newest`, then closes.
            let reopen = |newest: u64| {
                let (url, cache_dir) = (url.clone(), cache_dir.clone());
                async move {
                    let transport = HttpTransport::new(&url, None).unwrap();
                    let store = Arc::new(FsStore::new(&cache_dir));
                    let engine = Engine::assemble(store, transport, Config::default()).await;
                    let summary = engine
                        .sessions()
                        .await
                        .unwrap()
                        .into_iter()
                        .find(|s| s.id == "f")
                        .unwrap();
                    let session = Rc::new(engine.open(summary, None).unwrap());
                    let s = session.clone();
                    let run = tokio::task::spawn_local(async move { s.run().await });
                    for _ in 0..4000 {
                        if session.with_view(|v| v.live && v.cursor >= newest) {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    assert!(session.with_view(|v| v.live && v.cursor >= newest));
                    session.close();
                    run.await.unwrap();
                }
            };
            let newest =
                |p: &std::path::Path| std::fs::read_to_string(p).unwrap().lines().count() as u64;
            reopen(newest(&path)).await; // the first visit fills the cache

            let s0 = stats(&http, &url).await;
            reopen(newest(&path)).await;
            let s1 = stats(&http, &url).await;
            println!("warm reopen (list + open): {}", diff(&s0, &s1));

            // 300 new events, as a reply streams them (the sandbox's long writer's shape).
            let mut text = String::new();
            let tmp_long = tmp.path().join("more.jsonl");
            scrollback_server::sandbox::write_long(
                std::io::BufWriter::new(std::fs::File::create(&tmp_long).unwrap()),
                "f",
                300,
            )
            .unwrap();
            let base = newest(&path);
            for line in std::fs::read_to_string(&tmp_long).unwrap().lines() {
                let mut v: Value = serde_json::from_str(line).unwrap();
                let seq = v["seq"].as_u64().unwrap() + base;
                v["seq"] = seq.into();
                text.push_str(&v.to_string());
                text.push('\n');
            }
            use std::io::Write;
            std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            let s2 = stats(&http, &url).await;
            reopen(newest(&path)).await;
            let s3 = stats(&http, &url).await;
            println!(
                "catch-up after 300 events ({} raw bytes) (list + open): {}",
                text.len(),
                diff(&s2, &s3)
            );

            // The reopen as `openSession` makes it now: by id, no list first.
            let s4 = stats(&http, &url).await;
            {
                let transport = HttpTransport::new(&url, None).unwrap();
                let store = Arc::new(FsStore::new(&cache_dir));
                let engine = Engine::assemble(store, transport, Config::default()).await;
                let session = Rc::new(engine.open_id("f", None).await.unwrap());
                let s = session.clone();
                let run = tokio::task::spawn_local(async move { s.run().await });
                let newest = newest(&path);
                for _ in 0..4000 {
                    if session.with_view(|v| v.live && v.cursor >= newest) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                session.close();
                run.await.unwrap();
            }
            let s5 = stats(&http, &url).await;
            println!("warm reopen by id (no list): {}", diff(&s4, &s5));
            server.shutdown().await.unwrap();
        })
        .await;
}
