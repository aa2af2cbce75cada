//! A stream that dies without closing: the native engine over real HTTP, through a TCP relay
//! that can go silent on the event stream's connection while keeping it open, as a phone
//! changing networks, a NAT that forgot the connection or a proxy that holds it does. No error
//! ever comes on such a connection; the server's keep-alive (every `keep_alive_ms`, its
//! interval named in the frame) is what lets the engine tell it from a quiet session.

use scrollback::engine::{Config, Engine};
use scrollback::fold::Transcript;
use scrollback::store::FsStore;
use scrollback::transport::HttpTransport;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::LocalSet;

use crate::support::{Recorded, Running, TestServer};

/// A TCP relay in front of the server. [`Relay::go_silent`] stops relaying, both ways, every
/// open connection that carries an `/events` request, and keeps it open: the client hears
/// nothing more on it and gets no error. Connections opened later are relayed as before.
struct Relay {
    url: String,
    streams: Arc<Mutex<Vec<Arc<AtomicBool>>>>,
}

impl Relay {
    /// Relays `listener`'s connections to `upstream` (`host:port`).
    fn start(listener: TcpListener, upstream: String) -> Relay {
        let url = format!("http://{}", listener.local_addr().unwrap());
        let streams: Arc<Mutex<Vec<Arc<AtomicBool>>>> = Arc::default();
        let s = streams.clone();
        tokio::spawn(async move {
            loop {
                let (client, _) = listener.accept().await.unwrap();
                let server = TcpStream::connect(&upstream).await.unwrap();
                let silent = Arc::new(AtomicBool::new(false));
                tokio::spawn(relay(client, server, silent, s.clone()));
            }
        });
        Relay { url, streams }
    }

    /// Silences every open event stream's connection; how many it silenced.
    fn go_silent(&self) -> usize {
        let streams = self.streams.lock().unwrap();
        for s in streams.iter() {
            s.store(true, Ordering::SeqCst);
        }
        streams.len()
    }

    /// Event stream connections opened so far.
    fn streams_opened(&self) -> usize {
        self.streams.lock().unwrap().len()
    }
}

/// Relays one connection until either side closes, or for ever once `silent` (holding both
/// sockets open and passing nothing on).
async fn relay(
    client: TcpStream,
    server: TcpStream,
    silent: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<Arc<AtomicBool>>>>,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up_silent = silent.clone();
    let up = async move {
        let mut buf = vec![0u8; 64 << 10];
        let mut marked = false;
        loop {
            let n = client_read.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            if !marked && String::from_utf8_lossy(&buf[..n]).contains("/events?") {
                marked = true;
                streams.lock().unwrap().push(up_silent.clone());
            }
            if up_silent.load(Ordering::SeqCst) {
                return std::future::pending().await;
            }
            if server_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let down = async move {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = server_read.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            if silent.load(Ordering::SeqCst) {
                return std::future::pending().await;
            }
            if client_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

#[tokio::test]
async fn a_stream_gone_silent_without_closing_is_reconnected_and_misses_nothing() {
    LocalSet::new()
        .run_until(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let front = listener.local_addr().unwrap().to_string();
            let base = TestServer::start(|config| {
                config.keep_alive_ms = 200;
                // The relay passes the client's `Host` (its own address) on.
                config.allow_host.push(front);
            })
            .await;
            base.long_session("s", 120);
            let upstream = base.server.url().trim_start_matches("http://").to_string();
            let relay = Relay::start(listener, upstream);
            let transport = HttpTransport::new(&relay.url, None).unwrap();
            let client = Engine::assemble(
                Arc::new(FsStore::new(&base.cache)),
                Recorded::new(transport),
                Config {
                    reconnect_delay_ms: 50,
                    ..Config::default()
                },
            )
            .await;
            let s = Running::open(&client, "s").await;
            s.live().await;
            assert_eq!(relay.streams_opened(), 1);

            // The connection goes silent; the server appends meanwhile. Nothing errors: only
            // three intervals of silence tell the engine that the stream is dead.
            assert_eq!(relay.go_silent(), 1);
            let line = scrollback_server::transcript::append(
                &base.path("s"),
                json!({"type": "status", "status": "working"})
                    .as_object()
                    .unwrap()
                    .clone(),
            )
            .unwrap();
            s.wait("the line appended while the stream was silent", |v| {
                v.live && v.cursor == line.seq() && v.banner.is_none()
            })
            .await;
            assert!(
                relay.streams_opened() >= 2,
                "a new stream replaced the silent one"
            );
            // What is shown is the server's transcript, the new line once, nothing skipped.
            let server = base.lines("s");
            s.session.with_view(|v| {
                let from = v.oldest.expect("something shown") as usize;
                let expected = Transcript::from_lines(&server[from - 1..]).unwrap();
                assert_eq!(v.transcript.rows(), expected.rows());
                assert_eq!(v.state.status, "working");
            });
            s.close().await;
        })
        .await;
}
