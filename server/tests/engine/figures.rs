//! Figures, not assertions: what a warm reopen and a catch-up after 300 new events cost on the
//! wire, per route, counted by the server (`/stats`; `bytes` is the body as sent, compressed
//! where the route compresses). Run with `--nocapture` to see them:
//!
//!     cargo test -p scrollback-server --release --test engine figures -- --nocapture
//!
//! The app here lists sessions before it opens one (as the demo does); the list is printed as
//! its own route, so the cost of the reopen itself can be read apart from it. The last figure
//! is the reopen as `openSession` makes it: by id, with no list.

use scrollback::engine::{Config, Engine};
use scrollback::store::FsStore;
use scrollback::transport::HttpTransport;
use serde_json::Value;
use std::sync::Arc;
use tokio::task::LocalSet;

use crate::support::{Running, TestServer};

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
            let env = TestServer::start(|_| {}).await;
            let tmp = &env.tmp;
            let url = env.server.url();
            env.long_session("f", 3000);
            let path = env.path("f");
            let http = reqwest::Client::new();
            let cache_dir = env.cache.clone();

            // Opens "f" as an app would after a restart, until it shows `newest`, then closes.
            let reopen = |newest: u64| {
                let (url, cache_dir) = (url.clone(), cache_dir.clone());
                async move {
                    let transport = HttpTransport::new(&url, None).unwrap();
                    let store = Arc::new(FsStore::new(&cache_dir));
                    let engine = Engine::assemble(store, transport, Config::default()).await;
                    let f = Running::open(&engine, "f").await;
                    f.wait("the newest line", |v| v.live && v.cursor >= newest)
                        .await;
                    f.close().await;
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
                let f = Running::spawn(engine.open_id("f", None).await.unwrap());
                let newest = newest(&path);
                f.wait("the newest line", |v| v.live && v.cursor >= newest)
                    .await;
                f.close().await;
            }
            let s5 = stats(&http, &url).await;
            println!("warm reopen by id (no list): {}", diff(&s4, &s5));
            env.server.shutdown().await.unwrap();
        })
        .await;
}
