//! The `#[wasm_bindgen]` surface. Thin: it converts and forwards.

use wasm_bindgen::prelude::*;

/// The package's version.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
