//! The test kit, compiled only with the `testing` feature: the suites every backend must pass,
//! written once, and the one helper that makes a test of an async case on both targets.
//!
//! - [`store`]: the storage trait's operations, as every backend must answer them;
//! - [`rules`]: every rule of the chunk store;
//! - [`Hooked`]: a store that runs a test's [`Hook`] before each operation it forwards (to
//!   let other tasks run, as [`Yield`] does, or to hold, count or fail some of them);
//! - [`async_test!`](crate::async_test): one async test, a `#[test]` natively (driven by
//!   `pollster`, a dev-dependency of the invoking crate) and a `#[wasm_bindgen_test]` on wasm32:
//!   the one place that attribute pair is written, for every suite macro;
//! - [`store_suite!`](crate::store_suite): one test per check of [`store`] and rule of
//!   [`rules`] for the store an async factory makes; with `limit_writes` also the quota
//!   checks, for a backend with the quota hook ([`LimitWrites`]), with `clock` the stamps'
//!   clock check.
//!
//! Every test uses its own paths and server name, so tests that share a store (one browser
//! origin) do not collide. A test file that uses the kit needs the feature, which the crate's
//! own tests get from its dev-dependency on itself (`Cargo.toml`).

mod hooked;
pub mod rules;
pub mod store;

pub use hooked::{Hook, Hooked, Op, Yield};

use crate::protocol::Line;
use crate::store::{MemoryStore, Store};

/// One async test for both targets, the body an async block's:
/// `scrollback::async_test!(fn name() { ... });` is a `#[test]` natively (the body driven by
/// `pollster::block_on`) and a `#[wasm_bindgen_test]` on wasm32.
#[macro_export]
macro_rules! async_test {
    ($(#[$meta:meta])* fn $name:ident() $body:block) => {
        $(#[$meta])*
        #[cfg(not(target_arch = "wasm32"))]
        #[test]
        fn $name() {
            ::pollster::block_on(async move $body)
        }

        $(#[$meta])*
        #[cfg(target_arch = "wasm32")]
        #[::wasm_bindgen_test::wasm_bindgen_test]
        async fn $name() $body
    };
}

/// One test per storage check and chunk-store rule for the store an async factory makes (a
/// fresh store per test), and after a `;` the extra checks the backend can take: `limit_writes`,
/// the quota checks (the store implements [`LimitWrites`](crate::testing::LimitWrites));
/// `clock`, stamps from the clock ([`store::stamps_follow_the_clock`]).
/// `scrollback::store_suite!(async || MemoryStore::new(); limit_writes);`
#[macro_export]
macro_rules! store_suite {
    ($make:expr $(; $($extra:ident),+)?) => {
        $crate::__suite_tests! { $make;
            store::list_stat_read_write,
            store::append_matches_model,
            store::truncate_cuts,
            store::rename_moves_and_replaces,
            store::remove_blob_and_folder,
            store::invalid_paths_refused,
            store::stamps_never_go_back,
            rules::newest_lines_cross_chunks,
            rules::a_cursor_inside_a_chunk_is_a_hit,
            rules::a_delta_run_straddling_a_boundary_is_one_row,
            rules::pages_stop_between_rows_and_may_be_short,
            rules::paging_back_through_a_long_chunk,
            rules::only_the_suffix_is_served_and_gaps_bound_fetches,
            rules::an_overlapping_page_is_refused,
            rules::an_empty_chunk_is_a_gap_not_a_seam,
            rules::an_empty_open_chunk_is_no_open_chunk,
            rules::a_readers_purge_opens_it_cold,
            rules::a_seq_jump_rotates_the_open_chunk,
            rules::a_batch_appends_as_lines_one_by_one,
            rules::a_line_the_server_skips_is_a_hole_not_a_gap,
            rules::a_torn_tail_is_cut_off,
            rules::damage_mid_file_purges_the_session,
            rules::a_coalesced_newest_chunk_purges_the_session,
            rules::another_format_version_is_deleted,
            rules::hostile_ids_are_encoded_or_refused,
            rules::eviction_takes_the_least_recently_opened,
            rules::retain_only_and_purges,
            rules::a_wiped_store_gives_misses,
        }
        $($($crate::__suite_extra! { $make; $extra })+)?
    };
}

/// The extra checks of [`store_suite!`](crate::store_suite), by name.
#[macro_export]
#[doc(hidden)]
macro_rules! __suite_extra {
    ($make:expr; limit_writes) => {
        $crate::__suite_tests! { $make;
            store::a_quota_failure_changes_nothing,
            store::a_refused_rewrite_keeps_the_old_bytes,
            rules::a_full_quota_stops_writing_and_loses_nothing_shown,
            rules::a_quota_hit_by_a_page_stops_writing,
            rules::a_refused_write_relieves_the_quota,
        }
    };
    ($make:expr; clock) => {
        $crate::__suite_tests! { $make; store::stamps_follow_the_clock }
    };
}

/// One test per `module::name` (see [`store_suite!`](crate::store_suite)).
#[macro_export]
#[doc(hidden)]
macro_rules! __suite_tests {
    ($make:expr; $($module:ident :: $name:ident),* $(,)?) => {
        $(
            $crate::async_test!(fn $name() {
                let store = ::std::sync::Arc::new(($make)().await);
                $crate::testing::$module::$name(store).await;
            });
        )*
    };
}

/// A store whose free space a test can set: at most `bytes` more bytes are accepted from now
/// on, and a write past that fails with [`StoreError::QuotaExceeded`](crate::store::StoreError)
/// and leaves nothing half-written. `None` lifts the limit. Each backend's own `limit_writes`.
pub trait LimitWrites: Store {
    /// See the trait.
    fn limit_writes(&self, bytes: Option<u64>);
}

impl LimitWrites for MemoryStore {
    fn limit_writes(&self, bytes: Option<u64>) {
        MemoryStore::limit_writes(self, bytes);
    }
}

#[cfg(target_arch = "wasm32")]
impl LimitWrites for crate::store::IdbStore {
    fn limit_writes(&self, bytes: Option<u64>) {
        crate::store::IdbStore::limit_writes(self, bytes);
    }
}

#[cfg(target_arch = "wasm32")]
impl LimitWrites for crate::store::OpfsStore {
    fn limit_writes(&self, bytes: Option<u64>) {
        crate::store::OpfsStore::limit_writes(self, bytes);
    }
}

/// A small deterministic generator, so a failing case can be replayed.
pub struct Lcg(pub u64);

impl Lcg {
    /// The next number (31 bits).
    pub fn draw(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.draw() % n.max(1)
    }

    /// `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.draw() & 0xff) as u8).collect()
    }
}

/// A name no other test (or earlier run in the same browser profile) uses.
#[cfg(target_arch = "wasm32")]
pub fn unique(tag: &str) -> String {
    format!(
        "{tag}-{}-{}",
        js_sys::Date::now() as u64,
        (js_sys::Math::random() * 1e9) as u64
    )
}

/// Resolves after `ms` milliseconds (in a page or a worker).
#[cfg(target_arch = "wasm32")]
pub async fn sleep(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let global = js_sys::global();
        let set_timeout: js_sys::Function = js_sys::Reflect::get(&global, &"setTimeout".into())
            .expect("setTimeout")
            .into();
        set_timeout
            .call2(&global, &resolve, &ms.into())
            .expect("setTimeout");
    });
    wasm_bindgen_futures::JsFuture::from(promise)
        .await
        .expect("a timer");
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

/// The size of the blob at `path`, which must exist.
pub async fn size<S: Store>(store: &S, path: &str) -> u64 {
    store
        .stat(path)
        .await
        .expect("stat")
        .expect("the blob")
        .size
}

/// Asserts that a store whose storage was deleted under it (site data cleared, a database
/// deleted) reads as empty: every blob of `paths` is gone and reads as not found, and `dir`
/// lists nothing.
pub async fn assert_reads_as_empty<S: Store>(store: &S, paths: &[&str], dir: &str) {
    for path in paths {
        assert_eq!(store.stat(path).await.expect("stat"), None, "{path}");
        assert!(
            matches!(
                store.read(path, 0, 10).await,
                Err(crate::store::StoreError::NotFound(_))
            ),
            "{path}"
        );
    }
    assert_eq!(store.list(dir).await.expect("list"), vec![], "{dir}");
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
