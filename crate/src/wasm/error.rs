//! What a binding call can fail with. Each error becomes a real JS `Error` (a `TypeError` for a
//! bad argument) whose message says what went wrong; a network or server error also carries its
//! `kind` (the retry rule's class: `unavailable`, `gone`, `unauthorized`, `refused`) and, when
//! the server answered, its HTTP `status`.

use crate::chunks::KeyError;
use crate::store::StoreError;
use crate::transport::{Retry, TransportError};
use wasm_bindgen::prelude::*;

/// A failed binding call.
#[derive(Debug, thiserror::Error)]
pub enum BindingError {
    /// The options object does not have the documented shape.
    #[error("bad options: {0}")]
    Options(String),
    /// `storage` names no backend.
    #[error("unknown storage {0:?}: use \"auto\", \"opfs\", \"indexeddb\" or \"memory\"")]
    Storage(String),
    /// The storage backend could not be opened.
    #[error("cannot open the storage: {0}")]
    Store(#[from] StoreError),
    /// The server could not be reached or refused.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The session list does not have this id.
    #[error("no session {0:?} on the server")]
    NoSuchSession(String),
    /// The cache cannot name a folder after this id.
    #[error("session id {0:?} cannot be cached: {1}")]
    Key(String, KeyError),
    /// An anchor that is not a seq.
    #[error("anchor must be a whole number from 1, got {0}")]
    Anchor(f64),
}

impl From<BindingError> for JsValue {
    fn from(e: BindingError) -> JsValue {
        let message = e.to_string();
        let error: js_sys::Error = match e {
            BindingError::Options(_) | BindingError::Storage(_) | BindingError::Anchor(_) => {
                js_sys::TypeError::new(&message).into()
            }
            _ => {
                let error = js_sys::Error::new(&message);
                error.set_name("ScrollbackError");
                error
            }
        };
        if let BindingError::Transport(e) = &e {
            // The retry rule's class of the error (`unavailable`, `gone`, `unauthorized`,
            // `refused`), and the HTTP status when the server answered.
            let kind = Retry::classify(e).kind();
            let _ = js_sys::Reflect::set(&error, &"kind".into(), &kind.into());
            if let Some(status) = e.status() {
                let _ = js_sys::Reflect::set(&error, &"status".into(), &status.into());
            }
        }
        error.into()
    }
}

/// A seq from JS (a number, or nothing).
pub(super) fn anchor(value: Option<f64>) -> Result<Option<u64>, BindingError> {
    match value {
        None => Ok(None),
        Some(n) if n >= 1.0 && n.fract() == 0.0 && n <= 9_007_199_254_740_991.0 => {
            Ok(Some(n as u64))
        }
        Some(n) => Err(BindingError::Anchor(n)),
    }
}
