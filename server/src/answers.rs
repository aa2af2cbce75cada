//! The memory the pages, catch-ups and streams' queues being sent hold, bounded for the whole
//! process.
//!
//! A line is sent whole however long (the client keeps the server's lines byte for byte), so a
//! session with one long line makes a big answer: a 100 MB tool output was about 280 MB while
//! its page was built, and its body stayed held as long as the client did not read it (up to
//! the stall timeout): eight clients that never read held 2.3 GB. Two bounds:
//!
//! - at most [`BUILDS`] answers are built at once (the others wait their turn: a usual page is
//!   built in a millisecond), so the memory of building is a few answers', whatever the number
//!   of requests; an event stream's catch-up, and any large read of a stream later (a reset's
//!   window, a long line), take a turn too;
//! - every built body, and every event a stream has queued for its client, counts against the
//!   budget (`--answer-budget-mb`) until it is handed to the connection (or the connection
//!   closes). An answer that would pass the budget is refused with 503 and `Retry-After` (the
//!   client retries: a 5xx is retried after the server's delay); a stream that cannot have
//!   budget for new lines ends (its client reconnects, through its catch-up). A body larger
//!   than the whole budget is sent when nothing else is held;
//! - the line a transcript `PUT` is receiving, held whole to be checked (twice its length: the
//!   parse is a second copy), counts too, and so does a posted message's body (held whole to
//!   be parsed): a request whose body cannot is a 503 to retry, and one holding it past the
//!   grace is closed to make room like an answer.
//!
//! A client that reads slowly, but reads, is never stalled (`--stall-timeout-ms` catches only
//! no progress at all), so it could hold its share for as long as it likes while every other
//! answer is refused. As at the connection cap, the old make room for the new: when an answer
//! cannot have its budget, the connections whose shares have been held longest, past a grace
//! (`--answer-grace-ms`, [`GRACE_MS`] by default), are closed, oldest first, until what they hold
//! would make room; the answer then waits up to [`WAIT`] for the budget they let go before its
//! 503. `/stats` counts them (`answers.evicted`).
//!
//! A body is handed to the connection in pieces of [`PIECE`] bytes, so what it holds is let go
//! as the client reads, and its share of the budget when the client has it all.

use crate::error::ApiError;
use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, SemaphorePermit};

/// The most answers built at once.
pub const BUILDS: usize = 2;

/// The bytes of a body handed to the connection at a time.
pub const PIECE: usize = 64 << 10;

/// How long (milliseconds) a share of the budget is held before its connection may be closed
/// to make room for an answer that cannot have its own (`--answer-grace-ms`'s default): a
/// client reading a usual page or catch-up has it long before.
pub const GRACE_MS: u64 = 10_000;

/// How long an answer that closed connections to make room waits for the budget they held.
pub const WAIT: Duration = Duration::from_millis(1_500);

/// The budget's unit: permits are this many bytes (a stream's delta costs one or two).
const UNIT: u64 = 256;

/// A connection's close handle: `listen` puts one in each request's extensions, and a share
/// of the budget keeps it, so the budget can close the connection to make room.
#[derive(Clone)]
pub struct Closer(pub Arc<Notify>);

/// The process's answers: the build turns and the budget of bodies held. Cloning shares them.
#[derive(Clone)]
pub struct Answers(Arc<Inner>);

struct Inner {
    builds: Semaphore,
    held: Arc<Semaphore>,
    /// The budget, in [`UNIT`]s.
    units: u32,
    grace_ms: u64,
    refused: AtomicU64,
    evicted: AtomicU64,
    /// The shares that can be closed (those that know their connection), by when they began.
    shares: Mutex<BTreeMap<u64, Arc<Holder>>>,
    next: AtomicU64,
}

/// What the budget knows of a share: since when it holds something, how much, and how to
/// close its connection.
struct Holder {
    /// Since when (see [`now_ms`]) it holds something; 0 when nothing.
    since: AtomicU64,
    units: AtomicU64,
    close: Arc<Notify>,
    closed: AtomicBool,
}

/// Milliseconds on a clock the shares share, from 1 (0 means "holds nothing").
fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// The 503 of a request body (a `PUT`'s line, a posted message) the budget cannot hold now.
pub fn full() -> ApiError {
    ApiError(
        StatusCode::SERVICE_UNAVAILABLE,
        "the server is holding as much as it can at once; try again".into(),
    )
}

/// The 503 of an answer the budget cannot hold now.
pub fn busy() -> ApiError {
    ApiError(
        StatusCode::SERVICE_UNAVAILABLE,
        "the server is sending as much as it holds at once; try again".into(),
    )
}

impl Answers {
    /// A budget of `bytes` for the bodies held at once (at least one unit), whose shares may
    /// be closed to make room after [`GRACE_MS`].
    pub fn new(bytes: u64) -> Answers {
        Answers::with_grace(bytes, Duration::from_millis(GRACE_MS))
    }

    /// [`Answers::new`] with another grace before a share may be closed to make room.
    pub fn with_grace(bytes: u64, grace: Duration) -> Answers {
        let units = (bytes / UNIT).clamp(1, u64::from(u32::MAX >> 3)) as u32;
        Answers(Arc::new(Inner {
            builds: Semaphore::new(BUILDS),
            held: Arc::new(Semaphore::new(units as usize)),
            units,
            grace_ms: grace.as_millis() as u64,
            refused: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            shares: Mutex::default(),
            next: AtomicU64::new(0),
        }))
    }

    /// A turn to build an answer: waits while [`BUILDS`] are being built.
    pub async fn build(&self) -> SemaphorePermit<'_> {
        self.0
            .builds
            .acquire()
            .await
            .expect("the build turns are never closed")
    }

    /// A share of the budget holding nothing yet, for an answer on the connection `close`
    /// closes (`None`: a share that is never closed to make room).
    pub fn share(&self, close: Option<Closer>) -> Share {
        let holder = close.map(|Closer(close)| {
            let holder = Arc::new(Holder {
                since: AtomicU64::new(0),
                units: AtomicU64::new(0),
                close,
                closed: AtomicBool::new(false),
            });
            let key = self.0.next.fetch_add(1, Ordering::Relaxed);
            lock(&self.0.shares).insert(key, holder.clone());
            (key, holder)
        });
        Share {
            inner: self.0.clone(),
            holder,
            permit: None,
        }
    }

    /// `body` (JSON) as a response, its bytes held against the budget until it is sent; a 503
    /// when the budget cannot hold it, even after closing the connections that held theirs
    /// past the grace. `close` closes this answer's connection.
    pub async fn send(&self, body: String, close: Option<Closer>) -> Result<Response, ApiError> {
        let mut share = self.share(close);
        if !share.grow(body.len() as u64).await {
            return Err(busy());
        }
        let body = Held {
            rest: Bytes::from(body),
            share,
        };
        Ok((
            [(header::CONTENT_TYPE, "application/json")],
            Body::new(body),
        )
            .into_response())
    }

    /// `{"held": bytes, "budget": bytes, "refused": n, "evicted": n}` for `/stats`
    /// (`refused`: answers refused and streams ended for want of budget; `evicted`: connections
    /// closed to make room).
    pub fn json(&self) -> Value {
        let free = self.0.held.available_permits() as u64;
        json!({
            "held": (u64::from(self.0.units) - free) * UNIT,
            "budget": u64::from(self.0.units) * UNIT,
            "refused": self.0.refused.load(Ordering::Relaxed),
            "evicted": self.0.evicted.load(Ordering::Relaxed),
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    /// Closes the connections whose shares have been held past the grace, oldest first, until
    /// what they hold and what is free make `wanted` units; whether any was closed.
    fn evict(&self, wanted: u64) -> bool {
        let now = now_ms();
        let mut old: Vec<(u64, Arc<Holder>)> = lock(&self.shares)
            .values()
            .filter_map(|h| {
                let since = h.since.load(Ordering::Acquire);
                let old = since != 0 && now.saturating_sub(since) >= self.grace_ms;
                (old && !h.closed.load(Ordering::Acquire)).then(|| (since, h.clone()))
            })
            .collect();
        old.sort_by_key(|(since, _)| *since);
        let mut room = self.held.available_permits() as u64;
        let mut any = false;
        for (_, holder) in &old {
            if room >= wanted {
                break;
            }
            if holder.closed.swap(true, Ordering::AcqRel) {
                continue;
            }
            holder.close.notify_one();
            self.evicted.fetch_add(1, Ordering::Relaxed);
            room += holder.units.load(Ordering::Acquire);
            any = true;
        }
        any
    }
}

/// A part of the budget held for one answer or one stream's queue: it grows as events are
/// queued and is let go when they have been handed to the connection (or with the share).
pub struct Share {
    inner: Arc<Inner>,
    holder: Option<(u64, Arc<Holder>)>,
    permit: Option<OwnedSemaphorePermit>,
}

impl Share {
    /// Holds `bytes` more if the budget has them now (a share larger than the whole budget is
    /// had when nothing else is held).
    pub fn try_grow(&mut self, bytes: u64) -> bool {
        let mine = self.permit.as_ref().map_or(0, |p| p.num_permits() as u64);
        if mine >= u64::from(self.inner.units) {
            return true; // it holds the whole budget already
        }
        let units = bytes
            .div_ceil(UNIT)
            .clamp(1, u64::from(self.inner.units).saturating_sub(mine).max(1));
        let Ok(more) = self.inner.held.clone().try_acquire_many_owned(units as u32) else {
            return false;
        };
        match &mut self.permit {
            Some(permit) => permit.merge(more),
            None => {
                self.permit = Some(more);
                if let Some((_, h)) = &self.holder {
                    h.since.store(now_ms(), Ordering::Release);
                }
            }
        }
        if let Some((_, h)) = &self.holder {
            h.units.store(mine + units, Ordering::Release);
        }
        true
    }

    /// Holds `bytes` more: at once if the budget has them, otherwise after closing the
    /// connections that held their shares past the grace and waiting (up to [`WAIT`]) for
    /// what they let go. `false` (counted as refused) when it cannot be had.
    pub async fn grow(&mut self, bytes: u64) -> bool {
        if self.try_grow(bytes) {
            return true;
        }
        if self.inner.evict(bytes.div_ceil(UNIT)) {
            let deadline = tokio::time::Instant::now() + WAIT;
            while tokio::time::Instant::now() < deadline {
                // Polled, not queued on the semaphore: a waiter there would take every permit
                // let go until it had its own, and refuse every smaller answer meanwhile.
                tokio::time::sleep(Duration::from_millis(10)).await;
                if self.try_grow(bytes) {
                    return true;
                }
            }
        }
        self.inner.refused.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Holds `bytes` in all ([`Share::grow`] by what it lacks, if anything); `false` when it
    /// cannot.
    pub async fn grow_to(&mut self, bytes: u64) -> bool {
        bytes <= self.held() || self.grow(bytes - self.held()).await
    }

    /// Lets go of everything held (what it was held for has been handed to the connection).
    pub fn release(&mut self) {
        if self.permit.take().is_some() {
            if let Some((_, h)) = &self.holder {
                h.since.store(0, Ordering::Release);
                h.units.store(0, Ordering::Release);
            }
        }
    }

    /// The bytes it holds (in whole units).
    pub fn held(&self) -> u64 {
        self.permit.as_ref().map_or(0, |p| p.num_permits() as u64) * UNIT
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.permit.is_none()
    }

    /// The build turns of the budget this share is of.
    pub fn answers(&self) -> Answers {
        Answers(self.inner.clone())
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        if let Some((key, _)) = self.holder.take() {
            lock(&self.inner.shares).remove(&key);
        }
    }
}

/// A body handed out in pieces, holding its share of the budget until its last piece is taken
/// (or it is dropped with its connection).
struct Held {
    rest: Bytes,
    share: Share,
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if self.rest.is_empty() {
            self.share.release();
            return Poll::Ready(None);
        }
        let n = self.rest.len().min(PIECE);
        let piece = self.rest.split_to(n);
        if self.rest.is_empty() {
            self.share.release(); // the client has it all but this piece
        }
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.rest.len() as u64)
    }
}
