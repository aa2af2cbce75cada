//! Scrollback: a client-side transcript cache for AI chat apps.
//!
//! The crate is the whole client: the wire ([`protocol`]), the storage trait and its backends
//! ([`store`]), the chunk cache over it ([`chunks`]), the sync engine ([`engine`]) behind a
//! transport trait ([`transport`]), the display fold ([`fold`]) and the windowed chat file
//! ([`window`]). Core modules do not depend on `web-sys`; only the browser backends, the
//! browser transport and the `wasm` binding layer do.

#![warn(missing_docs)]

pub mod chunks;
pub mod engine;
pub mod fold;
pub mod search;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
pub mod transport;
pub mod window;

/// The wire, shared with the server: the `scrollback-protocol` crate.
pub use scrollback_protocol as protocol;

#[cfg(all(target_arch = "wasm32", feature = "bindings"))]
mod wasm;
