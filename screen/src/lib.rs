//! Scrollback's small page-side module (`pkg/scrollback_screen.js`): the opening session's
//! first screen, folded in the page from the answer to the request `Scrollback.open` asks at
//! once (`opening`), while the worker, its module and the store are still starting.
//!
//! It is the crate's own fold and view ([`View::opening`], [`View::resumed`]) and nothing else:
//! the worker's module is about ten times its size. Thin: it converts and forwards. Each
//! function answers the JSON of a whole session state (`ready`, neither verified nor live), or
//! `undefined` when there is nothing to show or the answer does not parse (the session's own
//! open then reports it).

use scrollback::engine::{SavedScreen, View};
use scrollback::protocol::{parse_catch_up, parse_page};
use wasm_bindgen::prelude::*;

/// A first visit's first screen: the opening window (`/transcript?limit=80`, its body as
/// `bytes`) folded as session `id`'s view shows it.
#[wasm_bindgen(js_name = openingScreen)]
pub fn opening_screen(id: &str, bytes: &[u8]) -> Option<String> {
    let lines = parse_page(std::str::from_utf8(bytes).ok()?).ok()?;
    serde_json::to_string(&View::opening(id, &lines)?).ok()
}

/// A reopen's first screen: the last screen the page saved (`screen`, its JSON) with what the
/// check of its cursor (`/catchup?cursor=N`, its body as `bytes`) brought folded on. Nothing
/// when it brought nothing new or the saved screen is not the server's any more.
#[wasm_bindgen(js_name = resumedScreen)]
pub fn resumed_screen(screen: &str, bytes: &[u8]) -> Option<String> {
    let screen: SavedScreen = serde_json::from_str(screen).ok()?;
    let answer = parse_catch_up(std::str::from_utf8(bytes).ok()?).ok()?;
    serde_json::to_string(&View::resumed(screen, answer)?).ok()
}
