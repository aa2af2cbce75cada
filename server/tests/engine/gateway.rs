//! Two servers behind one gateway, under two path prefixes of one origin
//! (`http://127.0.0.1:G/sandbox`, `http://127.0.0.1:G/prod`), cached in one store: each keeps its
//! own cache folder, session list and pruning (the cache is keyed by host, port and path prefix,
//! `chunks::names::server_key`). Keyed by host and port alone they shared one folder: listing
//! one server pruned the other's sessions, and a session id both hold purged the other's copy.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use scrollback::engine::{Config, Engine};
use scrollback::store::FsStore;
use scrollback::transport::HttpTransport;
use std::path::Path;
use std::sync::Arc;
use tokio::task::{JoinHandle, LocalSet};

use crate::support::{Recorded, Running, TestServer};

/// A reverse proxy on a loopback port: a request under one of its prefixes goes to that
/// prefix's server with the prefix taken off, its answer (a stream too) streamed back.
struct Gateway {
    url: String,
    task: JoinHandle<()>,
}

impl Gateway {
    async fn start(routes: Vec<(&'static str, String)>) -> Gateway {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        // No decompression: bodies pass as the servers wrote them.
        let client = reqwest::Client::builder().no_gzip().build().unwrap();
        let routes = Arc::new(routes);
        let app = axum::Router::new().fallback(move |request: Request| {
            let (client, routes) = (client.clone(), routes.clone());
            async move { forward(&client, &routes, request).await }
        });
        let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Gateway { url, task }
    }
}

async fn forward(
    client: &reqwest::Client,
    routes: &[(&'static str, String)],
    request: Request,
) -> Response {
    let target = request.uri().path_and_query().map_or("/", |p| p.as_str());
    let Some(url) = routes.iter().find_map(|(prefix, server)| {
        let rest = target.strip_prefix(prefix)?;
        rest.starts_with('/').then(|| format!("{server}{rest}"))
    }) else {
        return (StatusCode::NOT_FOUND, "no such prefix").into_response();
    };
    let mut out = client.request(request.method().clone(), url);
    for (name, value) in request.headers() {
        if ![header::HOST, header::CONNECTION, header::ACCEPT_ENCODING].contains(name) {
            out = out.header(name, value);
        }
    }
    let body = axum::body::to_bytes(request.into_body(), usize::MAX)
        .await
        .unwrap();
    let answer = match out.body(body).send().await {
        Ok(answer) => answer,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        let hop = [
            header::CONNECTION,
            header::TRANSFER_ENCODING,
            header::CONTENT_LENGTH,
        ];
        if !hop.contains(name) {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from_stream(answer.bytes_stream()))
        .unwrap()
}

type Client = Engine<FsStore, Recorded>;

/// A client of the server at `url`, as an app starting up makes one, over the cache in `cache`.
async fn client(url: &str, cache: &Path) -> Client {
    let transport = HttpTransport::new(url, None).unwrap();
    let store = Arc::new(FsStore::new(cache));
    Engine::assemble(store, Recorded::new(transport), Config::default()).await
}

async fn open_and_close(client: &Client, id: &str) {
    let s = Running::open(client, id).await;
    s.live().await;
    s.close().await;
}

fn ids(list: &[scrollback::protocol::SessionSummary]) -> Vec<&str> {
    list.iter().map(|s| s.id.as_str()).collect()
}

#[tokio::test]
async fn two_servers_behind_one_gateway_keep_two_caches() {
    LocalSet::new()
        .run_until(async {
            let sandbox = TestServer::start(|_| {}).await;
            let prod = TestServer::start(|_| {}).await;
            // One id on both servers (two conversations), and one only on the sandbox.
            sandbox.long_session("shared", 120);
            sandbox.long_session("only-sandbox", 120);
            prod.long_session("shared", 200);
            let gateway = Gateway::start(vec![
                ("/sandbox", sandbox.server.url()),
                ("/prod", prod.server.url()),
            ])
            .await;
            let cache = &sandbox.cache;
            let a = client(&format!("{}/sandbox", gateway.url), cache).await;
            let b = client(&format!("{}/prod/", gateway.url), cache).await;

            for id in ["only-sandbox", "shared"] {
                open_and_close(&a, id).await;
            }
            let kept = a.cache().session_size("only-sandbox").await;
            let shared = a.cache().session_size("shared").await;
            assert!(kept > 0 && shared > 0);

            // The other server's list (which has no `only-sandbox`) and its own `shared`.
            open_and_close(&b, "shared").await;
            assert_eq!(ids(&b.sessions().await.unwrap()), ["shared"]);
            assert!(b.cache().session_size("shared").await > 0);

            assert_eq!(
                a.cache().session_size("only-sandbox").await,
                kept,
                "listing the other server prunes nothing of this one's"
            );
            assert_eq!(
                a.cache().session_size("shared").await,
                shared,
                "the other server's session of the same id leaves this one's alone"
            );
            let remembered = a.cache().remembered_list().await;
            assert!(ids(&remembered).contains(&"only-sandbox"), "{remembered:?}");
            let offline = a.cached_sessions().await;
            assert!(ids(&offline).contains(&"only-sandbox"), "{offline:?}");

            assert_ne!(a.cache().dir(), b.cache().dir(), "two servers, two folders");
            let b_again = client(&format!("{}/prod", gateway.url), cache).await;
            assert_eq!(
                b.cache().dir(),
                b_again.cache().dir(),
                "a trailing slash is the same server"
            );

            gateway.task.abort();
            sandbox.server.shutdown().await.unwrap();
            prod.server.shutdown().await.unwrap();
        })
        .await;
}
