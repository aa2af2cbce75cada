//! Memory returns when clients leave (issue 19, row 1): what a stream holds is freed when it
//! ends, and the end of a request is followed by a trim of the allocator (glibc keeps freed
//! memory in its arenas otherwise), so it goes back to the system. The figures (RSS before,
//! during and after stalled streams) are `examples/soak.rs`'s. One test in its own binary: the
//! counts are the process's, and no other request runs beside it.

mod server_support;

use scrollback_server::memory::{self, Release};
use server_support::{transcript, Fixture};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Waits (up to 10 s) until `ok` holds.
async fn until(what: &str, ok: impl Fn() -> bool) {
    let end = tokio::time::Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(tokio::time::Instant::now() < end, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_stream_that_ends_is_followed_by_a_trim_of_the_allocator() {
    let f = Fixture::new().await;
    f.write("s", &transcript(10));
    let addr = f.server.addr();
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let head = format!("GET /sessions/s/events?after=10 HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut status = [0; 12];
    conn.read_exact(&mut status).await.unwrap();
    assert_eq!(&status, b"HTTP/1.1 200", "the stream is open");

    // No request has ended in this process yet: the stream's is the first.
    let release = memory::release();
    let (ended, trims) = (release.requests_ended(), release.trims());
    drop(conn);
    until("the stream's end is noted", || {
        release.requests_ended() > ended
    })
    .await;
    if Release::mode() == "malloc_trim" {
        until("a trim after the stream ended", || release.trims() > trims).await;
    }
}
