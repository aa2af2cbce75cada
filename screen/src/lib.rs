//! Scrollback's small page-side module (`pkg/scrollback_screen.js`): the opening session's
//! first screen, folded in the page from the answer to the request `Scrollback.open` asks at
//! once (`opening`), while the worker, its module and the store are still starting.
//!
//! It is the crate's own fold and view ([`View::opening`], [`View::resumed`]) and nothing else:
//! the worker's module is about ten times its size. Thin: it converts and forwards. Each
//! function answers the JSON of a whole session state (`ready`, neither verified nor live), or
//! `undefined` when there is nothing to show or the answer does not parse (the session's own
//! open then reports it).

#![warn(missing_docs)]

use scrollback::engine::{SavedScreen, View};
use scrollback::protocol::{CatchUpQuery, TranscriptQuery, OPENING_WINDOW};
use scrollback::transport::{parse_catch_up_for, parse_page_for};
use wasm_bindgen::prelude::*;

/// A first visit's first screen: the opening window (`/transcript?limit=80`, its body as
/// `bytes`) folded as session `id`'s view shows it. An answer the worker's open would refuse
/// (the transport's checks: seqs rising, no raw line folding others away) is not drawn.
#[wasm_bindgen(js_name = openingScreen)]
pub fn opening_screen(id: &str, bytes: &[u8]) -> Option<String> {
    let query = TranscriptQuery {
        limit: Some(OPENING_WINDOW),
        ..TranscriptQuery::default()
    };
    let page = parse_page_for(&query, std::str::from_utf8(bytes).ok()?).ok()?;
    serde_json::to_string(&View::opening(id, &page.lines)?).ok()
}

/// A reopen's first screen: the last screen the page saved (`screen`, its JSON) with what the
/// check of its cursor (`/catchup?cursor=N`, its body as `bytes`) brought folded on. Nothing
/// when it brought nothing new, the saved screen is not the server's any more, or the answer
/// is one the worker's open would refuse (another session's, seqs not rising, a raw line
/// folding others away).
#[wasm_bindgen(js_name = resumedScreen)]
pub fn resumed_screen(screen: &str, bytes: &[u8]) -> Option<String> {
    let screen: SavedScreen = serde_json::from_str(screen).ok()?;
    let query = CatchUpQuery::new(screen.cursor, OPENING_WINDOW);
    let body = std::str::from_utf8(bytes).ok()?;
    let caught = parse_catch_up_for(&screen.id, &query, body).ok()?;
    serde_json::to_string(&View::resumed(screen, caught.answer)?).ok()
}

/// Runs the fold the opening screen will take (`resumed`: a reopen's, else a first visit's) once
/// over a small built-in session, so that the engine compiles the code it runs while the page
/// is likely still waiting for the answer (V8 compiles a module's functions on their first
/// call: 15-30 ms of this module's first fold on the bench's machine, 5-8 ms for the same fold
/// once compiled). The compile is paid once either way, so the page skips this when the answer
/// is already in; the run itself takes well under a millisecond.
#[wasm_bindgen(js_name = warmUp)]
pub fn warm_up(resumed: bool) {
    if resumed {
        let _ = resumed_screen(SAMPLE_SCREEN, SAMPLE_ANSWER.as_bytes());
    } else {
        let _ = opening_screen("warm-up", SAMPLE_PAGE.as_bytes());
    }
}

/// A page of one line of each kind the fold reads.
const SAMPLE_PAGE: &str = r#"[
{"seq":1,"ts":1.5,"event":{"type":"settings","model":"m","permissionMode":"p"}},
{"seq":2,"ts":1.5,"event":{"type":"userMessage","text":"a"}},
{"seq":3,"ts":1.5,"event":{"type":"assistantText","text":"b","messageId":"m"}},
{"seq":4,"ts":1.5,"event":{"type":"assistantText","text":"c","messageId":"m"}},
{"seq":5,"ts":1.5,"event":{"type":"toolCall","id":"t","name":"n","input":{}}},
{"seq":6,"ts":1.5,"event":{"type":"toolResult","id":"t","output":"o","isError":false}},
{"seq":7,"ts":1.5,"event":{"type":"usageDelta","context":1}},
{"seq":8,"ts":1.5,"event":{"type":"status","status":"working"}},
{"seq":9,"ts":1.5,"event":{"type":"messageQueued","id":"q","text":"d"}},
{"seq":10,"ts":1.5,"event":{"type":"command","id":"c","command":"/x","done":false}},
{"seq":11,"ts":1.5,"event":{"type":"compacting","active":true}},
{"seq":12,"ts":1.5,"event":{"type":"error","message":"e"}},
{"seq":13,"ts":1.5,"event":{"type":"other"}}]"#;

/// A saved screen of a row of each kind, at seq 3 (the fingerprint of the answer's first line).
const SAMPLE_SCREEN: &str = r#"{"id":"warm-up","rows":[
{"kind":"user","seq":1,"ts":1.5,"text":"a","queuedId":"q"},
{"kind":"tool","seq":2,"ts":1.5,"id":"t","name":"n","input":{},"result":{"seq":2,"ts":1.5,"output":"o","isError":false}},
{"kind":"assistant","seq":3,"ts":1.5,"lastSeq":3,"text":"b","messageId":"m"}],
"status":"idle","model":"m","permissionMode":"p","contextTokens":1,"queued":[],"waitingCommands":[],
"compactingSince":null,"moreHistory":false,"cursor":3,
"cursorFingerprint":"aee2900e1b1a94e7"}"#;

/// Its check's answer: the line at its cursor and two more.
const SAMPLE_ANSWER: &str = r#"{"state":"caughtUp","summary":{"id":"warm-up","title":"","status":"idle","model":"m","permissionMode":"p","seq":5},"lines":[
{"seq":3,"ts":1.5,"event":{"type":"assistantText","text":"b","messageId":"m"}},
{"seq":4,"ts":1.5,"event":{"type":"assistantText","text":"c","messageId":"m"}},
{"seq":5,"ts":1.5,"event":{"type":"command","id":"c","command":"/x","done":true}}]}"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warm_up_samples_run_both_folds_through() {
        let opened = opening_screen("warm-up", SAMPLE_PAGE.as_bytes()).unwrap();
        assert!(opened.contains(r#""cursor":13"#), "{opened}");
        let resumed = resumed_screen(SAMPLE_SCREEN, SAMPLE_ANSWER.as_bytes()).unwrap();
        assert!(resumed.contains(r#""text":"bc""#), "{resumed}");
        assert!(resumed.contains(r#""kind":"command""#), "{resumed}");
    }

    /// What the worker's open refuses is not drawn first either: a raw line whose `folded`
    /// claims the lines after it (hiding them), seqs that do not rise, another session's answer.
    #[test]
    fn an_answer_the_worker_refuses_is_not_drawn() {
        let folding = r#"{"seq":3,"ts":1.5,"event":{"type":"assistantText","text":"b","messageId":"m","folded":{"through":5,"first":"b","last":"b"}}}"#;
        let third =
            r#"{"seq":3,"ts":1.5,"event":{"type":"assistantText","text":"b","messageId":"m"}}"#;
        let page = SAMPLE_PAGE.replacen(third, folding, 1);
        assert_ne!(page, SAMPLE_PAGE);
        assert_eq!(opening_screen("warm-up", page.as_bytes()), None);
        let falling = SAMPLE_PAGE.replacen(r#""seq":4,"#, r#""seq":2,"#, 1);
        assert_eq!(opening_screen("warm-up", falling.as_bytes()), None);

        // (The cursor's line left as saved: its fingerprint matches.)
        let fourth =
            r#"{"seq":4,"ts":1.5,"event":{"type":"assistantText","text":"c","messageId":"m"}}"#;
        let folding = r#"{"seq":4,"ts":1.5,"event":{"type":"assistantText","text":"c","messageId":"m","folded":{"through":5,"first":"c","last":"c"}}}"#;
        let answer = SAMPLE_ANSWER.replacen(fourth, folding, 1);
        assert_ne!(answer, SAMPLE_ANSWER);
        assert_eq!(resumed_screen(SAMPLE_SCREEN, answer.as_bytes()), None);
        let other = SAMPLE_ANSWER.replacen(r#""id":"warm-up""#, r#""id":"other""#, 1);
        assert_eq!(resumed_screen(SAMPLE_SCREEN, other.as_bytes()), None);
        let falling = SAMPLE_ANSWER.replacen(r#""seq":5,"#, r#""seq":4,"#, 1);
        assert_eq!(resumed_screen(SAMPLE_SCREEN, falling.as_bytes()), None);
    }
}
