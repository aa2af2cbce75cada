//! Accepting connections: a cap on open connections derived from the process's descriptor
//! limit, timeouts on reading request heads and on pauses within bodies (and a minimum average
//! rate for bodies, [`MIN_BODY_BYTES_PER_SEC`]), and room for a new client when the cap is
//! reached (the oldest connection with no request in progress, such as a half-sent head or an
//! idle keep-alive, is closed for it). A connection whose client has read nothing of what it was
//! sent for the stall timeout is closed, with what was queued for it (a stream's catch-up, a
//! file). Each request carries its connection's [`Closer`], with which the answer budget closes
//! a connection that held its share past the grace to make room (see [`crate::answers`]). When
//! a request ends, [`crate::memory::Release`] is told, to hand what it freed back to the system.

use crate::answers::Closer;
use crate::memory;
use axum::body::{Body, Bytes};
use axum::Router;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;
use tower_http::timeout::TimeoutBody;

/// Descriptors kept back from connections: files being read or written (the blocking pool's
/// threads), the change notifier, logs.
const RESERVED_FDS: u64 = 600;

/// The most connections this process can hold and still open the files it serves: raises the
/// soft descriptor limit to the hard one, then keeps `RESERVED_FDS` (or half) for files.
pub fn descriptor_cap() -> usize {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit only read and write the struct passed.
        let soft = unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                return 256;
            }
            let want = limit.rlim_max.min(1 << 20);
            if limit.rlim_cur < want {
                let raised = libc::rlimit {
                    rlim_cur: want,
                    rlim_max: limit.rlim_max,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    limit.rlim_cur = want;
                }
            }
            limit.rlim_cur
        };
        #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 everywhere
        let soft = soft as u64;
        soft.saturating_sub(RESERVED_FDS).max(soft / 2).max(8) as usize
    }
    #[cfg(not(unix))]
    {
        8_192
    }
}

/// The open connections (for `/stats` and for making room).
pub struct Connections {
    open: Mutex<BTreeMap<u64, Conn>>,
    next: AtomicU64,
    max: usize,
    /// Connections closed because their client stopped reading.
    stalled: AtomicU64,
    /// Connections answered 503 at once (the cap was full of requests in progress), or closed
    /// unanswered past [`NEWCOMERS`] such at once.
    refused: AtomicU64,
}

struct Conn {
    busy: Arc<AtomicUsize>,
    close: Arc<Notify>,
    /// Since when (see [`now_ms`]) a write has waited for the client to read; 0 when none.
    blocked: Arc<AtomicU64>,
}

/// Milliseconds on a clock the connections share, from 1 (0 means "not blocked").
fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

impl Connections {
    /// A registry allowing `max` connections.
    pub fn new(max: usize) -> Connections {
        Connections {
            open: Mutex::default(),
            next: AtomicU64::new(0),
            max: max.max(1),
            stalled: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Conn>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `{"open": n, "max": n, "stalled": n, "refused": n}` (`stalled`: closed so far because
    /// their client stopped reading; `refused`: answered 503 at once, every connection busy, or
    /// closed unanswered in a flood of them).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "open": self.lock().len(),
            "max": self.max,
            "stalled": self.stalled.load(Ordering::Relaxed),
            "refused": self.refused.load(Ordering::Relaxed),
        })
    }

    fn add(&self) -> (u64, Arc<AtomicUsize>, Arc<Notify>, Arc<AtomicU64>) {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Conn {
            busy: Arc::default(),
            close: Arc::default(),
            blocked: Arc::default(),
        };
        let out = (
            key,
            conn.busy.clone(),
            conn.close.clone(),
            conn.blocked.clone(),
        );
        self.lock().insert(key, conn);
        out
    }

    /// Closes every connection whose writes have waited for its client longer than `stall`.
    fn close_stalled(&self, stall: Duration) {
        let now = now_ms();
        let limit = stall.as_millis() as u64;
        let mut open = self.lock();
        let stalled: Vec<u64> = open
            .iter()
            .filter(|(_, c)| {
                let since = c.blocked.load(Ordering::Acquire);
                since != 0 && now.saturating_sub(since) > limit
            })
            .map(|(k, _)| *k)
            .collect();
        for key in stalled {
            if let Some(conn) = open.remove(&key) {
                conn.close.notify_one();
                self.stalled.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Closes the oldest connection with no request in progress; `false` when there is none.
    fn evict_idle(&self) -> bool {
        let mut open = self.lock();
        let Some(key) = open
            .iter()
            .find(|(_, c)| c.busy.load(Ordering::Acquire) == 0)
            .map(|(k, _)| *k)
        else {
            return false;
        };
        if let Some(conn) = open.remove(&key) {
            conn.close.notify_one();
        }
        true
    }
}

/// The next connection, set to send each write at once (`TCP_NODELAY`). With Nagle's algorithm
/// a response written in two parts (its head, then a body chunk) waits for the client's delayed
/// acknowledgement, 40 ms on Linux: every static file, and the events of a stream written while
/// one is still unacknowledged.
async fn accept(listener: &TcpListener) -> io::Result<TcpStream> {
    let (stream, _) = listener.accept().await?;
    if let Err(e) = stream.set_nodelay(true) {
        eprintln!("scrollback-server: TCP_NODELAY: {e}");
    }
    Ok(stream)
}

/// How long each side of a connection may keep the other waiting.
#[derive(Clone, Copy)]
pub struct Timeouts {
    /// For a request's head to arrive.
    pub header: Duration,
    /// For the next piece of a request's body.
    pub body: Duration,
    /// For the client to read some of what it was sent: past it, the connection is closed.
    pub stall: Duration,
}

/// Serves `router` on `listener` until `stop` turns `true`, telling [`memory::release`] when
/// each request ends (its response sent or dropped).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    conns: Arc<Connections>,
    timeouts: Timeouts,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(conns.max));
    let newcomers = Arc::new(Semaphore::new(NEWCOMERS));
    let sweeper = {
        let conns = conns.clone();
        tokio::spawn(async move {
            let every = (timeouts.stall / 4).max(Duration::from_millis(50));
            loop {
                tokio::time::sleep(every).await;
                conns.close_stalled(timeouts.stall);
            }
        })
    };
    loop {
        let stream = tokio::select! {
            accepted = accept(&listener) => match accepted {
                Ok(stream) => stream,
                Err(e) => {
                    // Out of descriptors or a connection reset before accept: wait a little.
                    eprintln!("scrollback-server: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = async { let _ = stop.wait_for(|s| *s).await; } => break,
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            // Full. The newcomer waits for room in its own task, never in the accept loop's
            // (every later client would wait behind it): for the slot of the idle connection
            // closed for it, or, when every connection is busy with a request, not at all.
            // Past `NEWCOMERS` of them at once (a flood), one more is closed unanswered: each
            // holds a descriptor, which the files being served need.
            let Ok(turn) = newcomers.clone().try_acquire_owned() else {
                conns.refused.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let evicted = conns.evict_idle();
            let (slots, conns, router) = (slots.clone(), conns.clone(), router.clone());
            let watcher = graceful.watcher();
            tokio::spawn(async move {
                let _turn = turn;
                let room = tokio::time::timeout(ROOM_WAIT, slots.acquire_owned());
                match evicted {
                    true => match room.await {
                        Ok(Ok(permit)) => {
                            connection(stream, permit, &conns, &router, timeouts, watcher)
                        }
                        _ => refuse(stream, &conns).await,
                    },
                    false => refuse(stream, &conns).await,
                }
            });
            continue;
        };
        connection(
            stream,
            permit,
            &conns,
            &router,
            timeouts,
            graceful.watcher(),
        );
    }
    drop(listener);
    sweeper.abort();
    let _ = tokio::time::timeout(Duration::from_secs(5), graceful.shutdown()).await;
    Ok(())
}

/// The most newcomers past the cap waiting for room or being refused at once.
const NEWCOMERS: usize = 64;

/// How long a newcomer waits for the slot of the idle connection closed for it.
const ROOM_WAIT: Duration = Duration::from_secs(1);

/// Serves one connection, holding its slot (`permit`) until it closes.
fn connection(
    stream: TcpStream,
    permit: OwnedSemaphorePermit,
    conns: &Arc<Connections>,
    router: &Router,
    timeouts: Timeouts,
    watcher: Watcher,
) {
    let (key, busy, close, blocked) = conns.add();
    let router = router.clone();
    let closer = Closer(close.clone());
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let guard = Busy::new(busy.clone());
        let router = router.clone();
        let closer = closer.clone();
        async move {
            let mut req = req.map(|body| {
                Body::new(Paced::new(
                    TimeoutBody::new(timeouts.body, body),
                    timeouts.body,
                ))
            });
            // The answer budget closes the connection to make room (see `answers`).
            req.extensions_mut().insert(closer);
            let response = router.oneshot(req).await?;
            Ok::<_, Infallible>(response.map(|body| {
                Body::new(Guarded {
                    inner: body,
                    _busy: guard,
                })
            }))
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.header);
    let stream = Watched { stream, blocked };
    let conn = watcher.watch(builder.serve_connection(TokioIo::new(stream), service));
    let conns = conns.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = conn => {}
            _ = close.notified() => {}
        }
        conns.lock().remove(&key);
        drop(permit);
    });
}

/// Answers 503 with `Retry-After` on a connection there is no room for, and closes it, all
/// within a second: the answer follows the request's head (a client takes no answer before its
/// request), and what the client sends after it is read and dropped (a close with unread bytes
/// would reset the answer away).
async fn refuse(mut stream: TcpStream, conns: &Connections) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    conns.refused.fetch_add(1, Ordering::Relaxed);
    const BODY: &str = r#"{"error":"the server holds as many connections as it can; try again"}"#;
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let mut head = Vec::new();
        let mut piece = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 << 10 {
            match stream.read(&mut piece).await? {
                0 => break,
                n => head.extend_from_slice(&piece[..n]),
            }
        }
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await?;
        while stream.read(&mut piece).await? > 0 {}
        io::Result::Ok(())
    })
    .await;
}

/// A connection's socket that notes since when a write has been waiting for the client to
/// read (its receive window full): [`Connections::close_stalled`] closes it past the stall
/// timeout.
struct Watched {
    stream: TcpStream,
    blocked: Arc<AtomicU64>,
}

impl Watched {
    fn note<T>(&self, polled: &Poll<io::Result<T>>) {
        match polled {
            Poll::Pending => {
                let _ =
                    self.blocked
                        .compare_exchange(0, now_ms(), Ordering::AcqRel, Ordering::Acquire);
            }
            Poll::Ready(_) => self.blocked.store(0, Ordering::Release),
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.note(&polled);
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.note(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The slowest a request body may arrive on average, after its first `--body-timeout-ms`:
/// 8 KiB/s (a 512 MiB transcript in under 18 hours; any working uplink is far faster). The
/// body timeout alone restarts with every piece, so a body trickling a byte at a time held its
/// request (and a `PUT` slot) indefinitely.
pub const MIN_BODY_BYTES_PER_SEC: u64 = 8 << 10;

/// A request body that fails when, past its grace (the body timeout, from its first poll), it
/// has come at less than [`MIN_BODY_BYTES_PER_SEC`] on average since then.
struct Paced<B> {
    inner: Pin<Box<B>>,
    grace: Duration,
    start: Option<Instant>,
    received: u64,
}

impl<B> Paced<B> {
    fn new(inner: B, grace: Duration) -> Paced<B> {
        Paced {
            inner: Box::pin(inner),
            grace,
            start: None,
            received: 0,
        }
    }
}

impl<B> http_body::Body for Paced<B>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        let start = *self.start.get_or_insert_with(Instant::now);
        let polled = self.inner.as_mut().poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                self.received += data.len() as u64;
            }
            let late = start.elapsed().saturating_sub(self.grace);
            let due = late.as_millis() as u64 * MIN_BODY_BYTES_PER_SEC / 1000;
            if self.received < due && !self.inner.is_end_stream() {
                return Poll::Ready(Some(Err(format!(
                    "the body came slower than {MIN_BODY_BYTES_PER_SEC} bytes a second"
                )
                .into())));
            }
        }
        polled.map(|f| f.map(|r| r.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request in progress on a connection, until its response body is done or dropped.
struct Busy(Arc<AtomicUsize>);

impl Busy {
    fn new(busy: Arc<AtomicUsize>) -> Busy {
        busy.fetch_add(1, Ordering::AcqRel);
        Busy(busy)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
        memory::release().ended();
    }
}

struct Guarded {
    inner: Body,
    _busy: Busy,
}

impl http_body::Body for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_connection_is_accepted_with_nagle_off() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(async move { tokio::net::TcpStream::connect(addr).await });
        let stream = accept(&listener).await.unwrap();
        assert!(
            stream.nodelay().unwrap(),
            "responses would wait for delayed ACKs"
        );
        client.await.unwrap().unwrap();
    }
}
