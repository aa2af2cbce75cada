//! The chunk store: the transcript cache as chunk blobs over any [`Store`](crate::store::Store)
//! (design.md decisions 1, 2, 5, 9 and 10).
//!
//! Layout: `transcripts/v1/<server>/<sessionId>/` holds the session's chunks, `<server>` being
//! `<host>_<port>`, or `<host>_<port>_<prefix>` for a server under a path prefix
//! ([`names::server_key`]), each chunk named by the seqs it covers, half-open `[first, end)`:
//!
//! ```text
//! <first>-<end>.rows.jsonl   a coalesced page; end is the `before` it was fetched with
//! <first>-<end>.raw.jsonl    an uncoalesced page or a closed live run
//! <first>-open.raw.jsonl     the live run; end = its last line's seq + 1
//! touch                      empty; its stamp is the session's last open (the budget's recency)
//! ```
//!
//! Each chunk is the server's JSON lines, byte for byte, oldest first, one a line. Only the
//! *suffix* is served: the run of adjacent chunks (one's `end` is the next one's `first`)
//! ending at the newest chunk, which is always raw. Chunks are read backwards in blocks, never
//! whole ([`lines`]).
//!
//! - [`Cache`]: one server: [`Cache::session`], the budget ([`Cache::enforce_budget`], and
//!   [`Cache::relieve_quota`] after a quota error), pruning ([`Cache::retain_only`],
//!   [`Cache::purge`], [`Cache::clear`]), sizes.
//! - [`SessionCache`]: one session: [`open`](SessionCache::open) (touch, list, repair),
//!   [`newest`](SessionCache::newest), [`cursor`](SessionCache::cursor),
//!   [`page`](SessionCache::page), [`gap_after`](SessionCache::gap_after),
//!   [`store_page`](SessionCache::store_page), [`append`](SessionCache::append),
//!   [`purge`](SessionCache::purge), [`size`](SessionCache::size).
//!
//! The cache is never load-bearing: every storage error answers as if the cache were empty,
//! and after a write failure a session's cache stops writing, with one `log::warn!`.

mod cache;
pub mod coverage;
pub mod lines;
pub mod names;
mod session;

pub use cache::{Cache, SessionInfo};
pub use names::KeyError;
pub use session::{Page, SessionCache};
