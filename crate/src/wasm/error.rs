//! What a binding call can fail with, and the one way an error reaches JS. Each error becomes a
//! real JS `Error` whose message says what went wrong and whose `name` says which family it is
//! of (`index.d.ts`): a `TypeError` for a bad argument (options, a server URL, a session id
//! that cannot be cached or put in a URL, an anchor); a `ChatError` for a refused chat
//! operation, with its `kind` ([`WindowError::kind`]); else a `ScrollbackError`, which for a
//! network or server error carries its `kind` (the retry rule's class: `unavailable`, `gone`,
//! `unauthorized`, `refused`) and, when the server answered, its HTTP `status`.

use crate::chunks::KeyError;
use crate::store::StoreError;
use crate::transport::{BadServer, Retry, TransportError};
use crate::window::WindowError;
use serde::Serialize;
use wasm_bindgen::prelude::*;

/// A failed binding call.
#[derive(Debug, thiserror::Error)]
pub enum BindingError {
    /// The options object does not have the documented shape (the message says where).
    #[error("{0}")]
    Options(String),
    /// `server` is not an http(s) address.
    #[error(transparent)]
    Server(#[from] BadServer),
    /// `storage` names no backend.
    #[error("unknown storage {0:?}: use \"auto\", \"opfs\", \"indexeddb\" or \"memory\"")]
    Storage(String),
    /// The storage backend could not be opened.
    #[error("cannot open the storage: {0}")]
    Store(#[from] StoreError),
    /// The server could not be reached or refused.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The cache cannot name a folder after this id.
    #[error("session id {} cannot be cached: {}", brief(.0), .1)]
    Key(String, KeyError),
    /// An anchor that is not a seq (what it was instead).
    #[error("anchor must be a whole number from 1, got {0}")]
    Anchor(String),
    /// A chat operation was refused (its check's `kind` goes with it).
    #[error(transparent)]
    Chat(#[from] WindowError),
    /// A search asked of a cache opened with `search: false`.
    #[error("search is off: this Scrollback was opened with search: false")]
    SearchOff,
    /// The cache cleared while this worker has sessions open (how many).
    #[error("close this Scrollback's {0} open session view(s) before clearing the cache")]
    ViewsOpen(usize),
    /// The view was closed before the call's answer came (an older page still on its way).
    #[error("this session view is closed")]
    Closed,
    /// An answer that could not be made into a JS value.
    #[error("cannot pass the answer to JS: {0}")]
    Convert(String),
}

impl BindingError {
    /// The JS error's `name`.
    fn name(&self) -> &'static str {
        match self {
            BindingError::Options(_)
            | BindingError::Server(_)
            | BindingError::Storage(_)
            | BindingError::Key(..)
            | BindingError::Anchor(_)
            | BindingError::Transport(TransportError::BadId(_)) => "TypeError",
            BindingError::Chat(_) => "ChatError",
            _ => "ScrollbackError",
        }
    }

    /// The JS error's `kind`: a chat check's, or the retry rule's class of a server error.
    fn kind(&self) -> Option<&'static str> {
        match self {
            BindingError::Transport(TransportError::BadId(_)) => None, // nothing was sent
            BindingError::Transport(e) => Some(Retry::classify(e).kind()),
            BindingError::Chat(e) => Some(e.kind()),
            _ => None,
        }
    }

    /// The JS error's `status`: the HTTP status, when the server answered.
    fn status(&self) -> Option<u16> {
        match self {
            BindingError::Transport(e) => e.status(),
            _ => None,
        }
    }
}

impl From<BindingError> for JsValue {
    fn from(e: BindingError) -> JsValue {
        let message = e.to_string();
        let error: js_sys::Error = match e.name() {
            "TypeError" => js_sys::TypeError::new(&message).into(),
            name => {
                let error = js_sys::Error::new(&message);
                error.set_name(name);
                error
            }
        };
        if let Some(kind) = e.kind() {
            let _ = js_sys::Reflect::set(&error, &"kind".into(), &kind.into());
        }
        if let Some(status) = e.status() {
            let _ = js_sys::Reflect::set(&error, &"status".into(), &status.into());
        }
        error.into()
    }
}

/// `id` quoted for a message, its first 64 characters when it is longer (an id is the caller's,
/// and may be anything).
fn brief(id: &str) -> String {
    match id.char_indices().nth(64) {
        Some((at, _)) => format!("{:?}… ({} bytes)", &id[..at], id.len()),
        None => format!("{id:?}"),
    }
}

/// A plain value for JS (objects as plain objects, maps as objects: JSON-compatible).
pub(super) fn to_js<T: Serialize>(value: &T) -> Result<JsValue, BindingError> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| BindingError::Convert(e.to_string()))
}

/// A seq from JS (a number, or nothing).
pub(super) fn anchor(value: JsValue) -> Result<Option<u64>, BindingError> {
    if value.is_undefined() || value.is_null() {
        return Ok(None);
    }
    match value.as_f64() {
        Some(n) if n >= 1.0 && n.fract() == 0.0 && n <= 9_007_199_254_740_991.0 => {
            Ok(Some(n as u64))
        }
        Some(n) => Err(BindingError::Anchor(n.to_string())),
        None => Err(BindingError::Anchor(kind_of(&value).into())),
    }
}

/// What a JS value is, for a message: `"a string"`, `"an array"`, `"an object"`, ...
fn kind_of(value: &JsValue) -> &'static str {
    match value.js_typeof().as_string().as_deref() {
        _ if js_sys::Array::is_array(value) => "an array",
        Some("string") => "a string",
        Some("boolean") => "a boolean",
        Some("bigint") => "a bigint",
        Some("function") => "a function",
        Some("symbol") => "a symbol",
        _ => "an object",
    }
}
