//! The conformance suite, written once and run against every backend: the storage trait's
//! operations ([`store`]) and every rule of the chunk store ([`rules`]).
//!
//! A backend's test file invokes [`chunk_store_suite!`](crate::chunk_store_suite) with an async
//! factory for a store; it expands to one test per rule, `#[test]` natively (driven by
//! `pollster`, a dev-dependency of the invoking crate) and `#[wasm_bindgen_test]` on wasm32.
//! Every test uses its own server name and paths, so tests that share a store (one browser
//! origin) do not collide.

pub mod rules;
pub mod store;

use crate::protocol::Line;
use crate::store::Store;

/// Expands to one test per conformance rule for the store an async factory makes:
/// `scrollback::chunk_store_suite!(async || MemoryStore::new());`
#[macro_export]
#[doc(hidden)]
macro_rules! chunk_store_suite {
    ($make:expr) => {
        $crate::__conformance_tests! { $make;
            store::write_read_and_stat,
            store::append_grows_in_place,
            store::truncate_cuts,
            store::rename_replaces,
            store::list_and_remove,
            store::paths_never_escape,
            rules::newest_lines_cross_chunks,
            rules::a_cursor_inside_a_chunk_is_a_hit,
            rules::a_delta_run_straddling_a_boundary_is_one_row,
            rules::pages_stop_between_rows_and_may_be_short,
            rules::paging_back_through_a_long_chunk,
            rules::only_the_suffix_is_served_and_gaps_bound_fetches,
            rules::an_overlapping_page_is_refused,
            rules::a_seq_jump_rotates_the_open_chunk,
            rules::a_torn_tail_is_cut_off,
            rules::damage_mid_file_purges_the_session,
            rules::a_coalesced_newest_chunk_purges_the_session,
            rules::another_format_version_is_deleted,
            rules::hostile_ids_are_encoded_or_refused,
            rules::eviction_takes_the_least_recently_opened,
            rules::retain_only_and_purges,
            rules::a_wiped_store_gives_misses,
        }
    };
}

/// One test per `module::name` (see [`chunk_store_suite!`](crate::chunk_store_suite)).
#[macro_export]
#[doc(hidden)]
macro_rules! __conformance_tests {
    ($make:expr; $($module:ident :: $name:ident),* $(,)?) => {
        $(
            #[cfg(not(target_arch = "wasm32"))]
            #[test]
            fn $name() {
                ::pollster::block_on(async {
                    let store = ::std::sync::Arc::new(($make)().await);
                    $crate::chunks::conformance::$module::$name(store).await;
                });
            }

            #[cfg(target_arch = "wasm32")]
            #[::wasm_bindgen_test::wasm_bindgen_test]
            async fn $name() {
                let store = ::std::sync::Arc::new(($make)().await);
                $crate::chunks::conformance::$module::$name(store).await;
            }
        )*
    };
}

/// Event kinds for [`line`]: a user message, deltas of two messages, usage, a tool call, a
/// large tool result, an unknown type.
pub const KINDS: u8 = 7;

/// A transcript line of kind `kind % KINDS` at `seq`. Every delta's text is unique (`t<seq> `),
/// so adjacent deltas of one message always join, whether raw or coalesced.
pub fn line(seq: u64, kind: u8) -> Line {
    let ts = 1_788_546_972.603_075_7 + seq as f64 / 7.0;
    let event = match kind % KINDS {
        0 => format!(r#"{{"type":"userMessage","text":"question <b>{seq}</b>"}}"#),
        1 => format!(r#"{{"type":"assistantText","text":"t{seq} ","messageId":"a"}}"#),
        2 => format!(r#"{{"type":"assistantText","text":"t{seq} ","messageId":"b"}}"#),
        3 => format!(r#"{{"type":"usageDelta","context":{seq}}}"#),
        4 => format!(
            r#"{{"type":"toolCall","id":"c{seq}","name":"read","input":{{"path":"../{seq}"}}}}"#
        ),
        5 => format!(
            r#"{{"type":"toolResult","id":"c{seq}","output":"{}"}}"#,
            "x".repeat(200 + (seq as usize * 37) % 3000)
        ),
        _ => format!(r#"{{"type":"futureThing","n":{seq}}}"#),
    };
    Line::parse(&format!(r#"{{"seq":{seq},"ts":{ts},"event":{event}}}"#)).expect("a valid line")
}

/// A transcript of seqs `1..=n` whose kinds follow a fixed pattern with delta runs.
pub fn transcript(n: u64) -> Vec<Line> {
    const PATTERN: [u8; 16] = [0, 1, 1, 1, 3, 1, 1, 4, 5, 1, 1, 1, 1, 2, 2, 6];
    (1..=n)
        .map(|seq| line(seq, PATTERN[(seq % 16) as usize]))
        .collect()
}

/// The seqs of some lines.
pub fn seqs(lines: &[Line]) -> Vec<u64> {
    lines.iter().map(Line::seq).collect()
}

/// Writes a scratch blob until the store's stamp is above `after`, so the next write is
/// ordered after everything stamped so far on backends whose clock is coarse (milliseconds).
pub async fn stamp_after<S: Store>(store: &S, path: &str, after: u64) -> u64 {
    loop {
        store.write(path, b"").await.expect("scratch write");
        let stamp = store
            .stat(path)
            .await
            .expect("stat")
            .expect("exists")
            .modified;
        if stamp > after {
            return stamp;
        }
    }
}
