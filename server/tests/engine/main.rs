//! The engine (the `scrollback` crate's, native) against the real server, one module a concern.
//! One test binary rather than one per file: each links the whole engine, server and HTTP
//! client, and six of them took a fifth of the native layer's compile.
//!
//!     cargo test -p scrollback-server --release --test engine [MODULE::][TEST]

mod budget;
mod errors;
mod figures;
mod gateway;
mod http;
mod model;
mod search;
mod silence;
mod storage;
mod summary;
mod support;
mod tabs;
