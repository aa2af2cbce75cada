//! The `#[wasm_bindgen]` surface. Thin: it converts and forwards.
//!
//! One module per JS class, used by the package's worker (`js/worker.js`), which the page-side
//! API (`js/index.js`) starts and talks to by messages:
//! - [`client`]: `Client`, one server's engine (assembled by the core's
//!   [`Engine::assemble`](crate::engine::Engine::assemble)) and the chats beside it;
//! - [`session`]: `SessionHandle`, one open session;
//! - [`chats`]: `Chats`, the windowed chat files and prompt backfill in the same storage;
//! - [`tabs`]: the other tabs of the origin, told what this worker's search writers grew;
//! - [`bench`](mod@bench): hidden hooks on `Client` for `npm run bench:search` (not the API).
//!
//! Errors become real JS `Error`s with readable messages ([`error`]); options arrive as plain
//! objects, each key checked against the struct that reads it ([`options`]); a view's state
//! leaves as one JSON string.

mod bench;
mod chats;
mod client;
mod error;
mod options;
mod session;
mod tabs;

use wasm_bindgen::prelude::*;

/// Runs when the module is instantiated (in the worker, or on a page that loads it): the core
/// logs through `log`, and this sends it to the console.
#[wasm_bindgen(start)]
pub fn start() {
    // Already set when the module is instantiated twice in one global: keep the first.
    let _ = console_log::init_with_level(log::Level::Info);
}

/// The package's version.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
