//! The memory the pages and catch-ups being built and sent hold, bounded for the whole process.
//!
//! A line is sent whole however long (the client keeps the server's lines byte for byte), so a
//! session with one long line makes a big answer: a 100 MB tool output was about 280 MB while
//! its page was built, and its body stayed held as long as the client did not read it (up to
//! the stall timeout): eight clients that never read held 2.3 GB. Two bounds:
//!
//! - at most [`BUILDS`] answers are built at once (the others wait their turn: a usual page is
//!   built in a millisecond), so the memory of building is a few answers', whatever the number
//!   of requests;
//! - every built body counts against the budget (`--answer-budget-mb`) until it is sent or its
//!   connection closes, and one that would pass it is refused with 503 and `Retry-After` (the
//!   client retries: a 5xx is retried after the server's delay). A body larger than the whole
//!   budget is sent when nothing else is held.
//!
//! A body is handed to the connection in pieces of [`PIECE`] bytes, so what it holds is let go
//! as the client reads, and its share of the budget when the client has it all.

use crate::error::ApiError;
use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use serde_json::{json, Value};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, SemaphorePermit};

/// The most answers built at once.
pub const BUILDS: usize = 2;

/// The bytes of a body handed to the connection at a time.
pub const PIECE: usize = 64 << 10;

/// The budget's unit: permits are kibibytes.
const UNIT: u64 = 1 << 10;

/// The process's answers: the build turns and the budget of bodies held.
pub struct Answers {
    builds: Semaphore,
    held: Arc<Semaphore>,
    /// The budget, in [`UNIT`]s.
    units: u32,
    refused: AtomicU64,
}

impl Answers {
    /// A budget of `bytes` for the bodies held at once (at least one unit).
    pub fn new(bytes: u64) -> Answers {
        let units = (bytes / UNIT).clamp(1, u64::from(u32::MAX >> 3)) as u32;
        Answers {
            builds: Semaphore::new(BUILDS),
            held: Arc::new(Semaphore::new(units as usize)),
            units,
            refused: AtomicU64::new(0),
        }
    }

    /// A turn to build an answer: waits while [`BUILDS`] are being built.
    pub async fn build(&self) -> SemaphorePermit<'_> {
        self.builds
            .acquire()
            .await
            .expect("the build turns are never closed")
    }

    /// `body` (JSON) as a response, its bytes held against the budget until it is sent; a 503
    /// when the budget cannot hold it now.
    pub fn send(&self, body: String) -> Result<Response, ApiError> {
        let units = (body.len() as u64)
            .div_ceil(UNIT)
            .clamp(1, u64::from(self.units)) as u32;
        let Ok(permit) = self.held.clone().try_acquire_many_owned(units) else {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(ApiError(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server is sending as much as it holds at once; try again".into(),
            ));
        };
        let body = Held {
            rest: Bytes::from(body),
            _permit: Some(permit),
        };
        Ok((
            [(header::CONTENT_TYPE, "application/json")],
            Body::new(body),
        )
            .into_response())
    }

    /// `{"held": bytes, "budget": bytes, "refused": n}` for `/stats`.
    pub fn json(&self) -> Value {
        let free = self.held.available_permits() as u64;
        json!({
            "held": (u64::from(self.units) - free) * UNIT,
            "budget": u64::from(self.units) * UNIT,
            "refused": self.refused.load(Ordering::Relaxed),
        })
    }
}

/// A body handed out in pieces, holding its share of the budget until its last piece is taken
/// (or it is dropped with its connection).
struct Held {
    rest: Bytes,
    _permit: Option<OwnedSemaphorePermit>,
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if self.rest.is_empty() {
            self._permit = None;
            return Poll::Ready(None);
        }
        let n = self.rest.len().min(PIECE);
        let piece = self.rest.split_to(n);
        if self.rest.is_empty() {
            self._permit = None; // the client has it all but this piece
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
