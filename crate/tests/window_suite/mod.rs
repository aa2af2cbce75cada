//! The windowed chat file's suite, written once over the `Store` trait and run on every backend:
//! a test file brings its store factory and calls `window_cases!(factory)`, which makes every
//! case a test on both targets (`scrollback::async_test!`: a `#[test]` natively, through
//! pollster, and a `#[wasm_bindgen_test]` on wasm32).
//!
//! The factory is an expression of type `impl Future<Output = (Guard, S)>`: a fresh, empty store
//! per case, and a guard dropped when the case ends (a temporary folder to remove, say).

#![allow(dead_code)]

use scrollback::store::{Store, StoreResult};
use scrollback::testing::{Hook, Hooked, Op, Yield};
use scrollback::window::{
    BackfillRequest, BackfillStop, CharsPerToken, ChatFile, ChatTail, Chats, Cursor, PatchOp,
    PromptBackfill, WindowError, WriteOptions,
};

/// Makes one test per case for a store factory.
macro_rules! window_cases {
    ($make:expr) => {
        window_cases!(@each $make;
            tail_returns_the_header_the_newest_lines_and_where_they_start,
            tail_of_a_missing_chat_is_not_found_or_empty,
            before_walks_back_to_the_first_message_in_pages,
            long_lines_and_odd_lines_read_back_exactly,
            save_keeps_the_bytes_before_the_cursor_and_replaces_the_rest,
            patch_appends_and_rewrites_from_an_index,
            a_first_save_creates_the_chat,
            every_write_changes_the_signature_and_stale_cursors_are_refused,
            an_outside_edit_invalidates_cursors,
            offsets_out_of_bounds_before_the_body_or_inside_a_line_are_refused,
            the_window_baseline_is_checked,
            a_start_index_past_the_window_is_refused,
            integrity_mismatch_is_refused_unless_forced_and_force_skips_nothing_else,
            a_changed_header_rewrites_the_file_and_shifts_the_cursor,
            a_header_cut_between_surrogate_halves_is_a_header,
            a_backup_undoes_the_last_write,
            a_backup_cut_off_is_never_restored,
            a_write_that_fails_after_the_cut_changes_nothing,
            a_write_cut_off_midway_is_put_back_by_the_next_call,
            a_restore_cut_off_midway_is_finished_by_the_next_call,
            reads_go_on_while_the_disk_is_full,
            a_line_that_is_not_utf8_is_shown_not_refused,
            writes_to_one_chat_are_serialized,
            bad_arguments_are_refused_and_change_nothing,
            an_unterminated_last_line_is_kept_whole,
            data_loss_full_save_then_stale_windowed_save_is_refused,
            data_loss_two_windows_same_size_rewrite_stale_save_is_refused,
            random_patch_sequences_keep_the_window_equal_to_the_file_suffix,
            backfill_fills_the_budget_without_touching_the_window,
            backfill_stops_at_page_and_message_caps_and_the_start,
            backfill_serves_repeat_generations_from_its_lru_cache,
            backfill_reports_a_stale_cursor_and_takes_nothing,
            backfill_with_a_warm_cache_reports_an_outside_edit_as_stale,
            named_chats_normalize_and_find_older_spellings,
            chats_are_listed_and_deleted_with_their_backups,
            an_empty_file_is_a_chat_with_no_header_yet,
        );
    };
    (@each $make:expr; $($name:ident),* $(,)?) => {
        $(
            scrollback::async_test!(fn $name() {
                let (_guard, store) = $make.await;
                crate::window_suite::$name(store).await
            });
        )*
    };
}

pub const PATH: &str = "chats/alice/2024-01-01.jsonl";
pub const HEADER: &str = r#"{"user_name":"User","character_name":"Alice","chat_metadata":{"integrity":"4b1d-chat-a","note":"x"}}"#;

/// A message line; `i` makes it unique, and the text has multibyte characters.
pub fn msg(i: usize) -> String {
    format!(r#"{{"name":"User","is_user":true,"mes":"message {i:04} — ünïcode ✓"}}"#)
}

pub fn msgs(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(msg).collect()
}

/// The bytes a chat of `header` and `lines` is on disk.
pub fn file_bytes(header: &str, lines: &[String]) -> Vec<u8> {
    let mut out = format!("{header}\n").into_bytes();
    for l in lines {
        out.extend_from_slice(l.as_bytes());
        out.push(b'\n');
    }
    out
}

/// The whole blob, through the store.
pub async fn bytes<S: Store>(store: &S, path: &str) -> Vec<u8> {
    let size = store.stat(path).await.unwrap().map_or(0, |m| m.size);
    store.read(path, 0, size as usize).await.unwrap()
}

/// A chat of `n` messages written by a full save.
pub async fn chat_of<'a, S: Store>(chats: &'a Chats<S>, n: usize) -> ChatFile<'a, S> {
    let chat = chats.chat(PATH).unwrap();
    chat.replace(HEADER, &msgs(0..n), opts()).await.unwrap();
    chat
}

fn opts() -> WriteOptions {
    WriteOptions::default()
}

/// The patch that appends `lines` after the window.
fn append(lines: Vec<String>) -> PatchOp {
    PatchOp::Append { lines }
}

/// Asserts that the chat at [`PATH`] is, byte for byte, `header` and `lines`.
async fn assert_holds<S: Store>(chats: &Chats<S>, header: &str, lines: &[String]) {
    assert_eq!(bytes(chats.store(), PATH).await, file_bytes(header, lines));
}

/// Asserts that every call in `results` was refused for its stale cursor.
fn assert_all_stale<T: std::fmt::Debug>(results: impl IntoIterator<Item = Result<T, WindowError>>) {
    for result in results {
        assert!(
            matches!(result, Err(WindowError::SignatureMismatch { .. })),
            "{result:?}"
        );
    }
}

/// Asserts that every write in `results` was refused for its stale cursor and that the chat at
/// [`PATH`] is still `intact`, byte for byte.
async fn assert_refused_as_stale<S: Store>(
    chats: &Chats<S>,
    results: impl IntoIterator<Item = Result<Cursor, WindowError>>,
    intact: &[u8],
) {
    assert_all_stale(results);
    assert_eq!(
        bytes(chats.store(), PATH).await,
        intact,
        "byte for byte intact"
    );
}

pub async fn tail_returns_the_header_the_newest_lines_and_where_they_start<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chat_of(&chats, 10).await;
    let t = chat.tail(4, false).await.unwrap();
    assert_eq!(t.header.as_deref(), Some(HEADER));
    assert_eq!(t.lines, msgs(6..10));
    let full = file_bytes(HEADER, &msgs(0..10));
    assert_eq!(t.cursor.size, full.len() as u64);
    assert_eq!(
        t.cursor.offset,
        file_bytes(HEADER, &msgs(0..6)).len() as u64
    );
    assert!(t.has_more_before);

    // A tail longer than the chat holds all of it and reaches the body's start.
    let all = chat.tail(50, false).await.unwrap();
    assert_eq!(all.lines, msgs(0..10));
    assert_eq!(all.cursor.offset, HEADER.len() as u64 + 1);
    assert!(!all.has_more_before);
    assert_eq!(all.cursor.size, t.cursor.size);
    assert_eq!(all.cursor.modified_millis, t.cursor.modified_millis);

    // A header-only chat.
    let empty = chats.chat("chats/bob/empty.jsonl").unwrap();
    empty.replace(HEADER, &[], opts()).await.unwrap();
    let e = empty.tail(5, false).await.unwrap();
    assert!(e.lines.is_empty() && !e.has_more_before);
    assert_eq!(e.cursor.offset, HEADER.len() as u64 + 1);

    // The cursor serializes as the seed's camelCase object.
    let json = serde_json::to_value(t.cursor).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"offset": t.cursor.offset, "size": t.cursor.size, "modifiedMillis": t.cursor.modified_millis})
    );
}

pub async fn tail_of_a_missing_chat_is_not_found_or_empty<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chats.chat("chats/nobody/none.jsonl").unwrap();
    assert!(matches!(
        chat.tail(10, false).await,
        Err(WindowError::NotFound(_))
    ));
    let t = chat.tail(10, true).await.unwrap();
    assert_eq!(t.header, None);
    assert!(t.lines.is_empty() && !t.has_more_before);
    assert_eq!(t.cursor, Cursor::default());
    assert!(
        chats.store().stat(chat.path()).await.unwrap().is_none(),
        "reading created nothing"
    );
}

pub async fn before_walks_back_to_the_first_message_in_pages<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chat_of(&chats, 95).await;
    let t = chat.tail(20, false).await.unwrap();
    let mut seen = t.lines.clone();
    let mut cursor = t.cursor;
    let mut more = t.has_more_before;
    let mut singles = Vec::new();
    while more {
        let page = chat.before(cursor, 30).await.unwrap();
        assert!(page.cursor.same_file_version(&cursor));
        assert!(page.cursor.offset < cursor.offset);
        let mut lines = page.lines.clone();
        lines.extend(seen);
        seen = lines;
        singles.push(page.clone());
        cursor = page.cursor;
        more = page.has_more_before;
    }
    assert_eq!(seen, msgs(0..95), "pages prepend to exactly the whole chat");
    assert_eq!(
        singles.iter().map(|p| p.lines.len()).collect::<Vec<_>>(),
        vec![30, 30, 15]
    );

    // before_pages in one call returns what repeated before calls return.
    let pages = chat.before_pages(t.cursor, 30, 10).await.unwrap();
    assert_eq!(pages, singles);
    let two = chat.before_pages(t.cursor, 30, 2).await.unwrap();
    assert_eq!(two, singles[..2].to_vec());
    assert!(two[1].has_more_before);

    // At the start there is nothing before.
    let first = chat.before(cursor, 10).await.unwrap();
    assert!(first.lines.is_empty() && !first.has_more_before);
    assert_eq!(first.cursor, cursor);
}

pub async fn long_lines_and_odd_lines_read_back_exactly<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chats.chat(PATH).unwrap();
    // Lines longer than a read block, an empty line, a line with \r, multibyte text across
    // block boundaries.
    let big = format!(r#"{{"mes":"{}"}}"#, "ß→".repeat(70_000));
    let lines = vec![
        msg(0),
        big.clone(),
        String::new(),
        "{\"mes\":\"crlf\"}\r".to_string(),
        big.clone(),
        msg(5),
    ];
    let c = chat.replace(HEADER, &lines, opts()).await.unwrap();
    assert_holds(&chats, HEADER, &lines).await;
    let t = chat.tail(2, false).await.unwrap();
    assert_eq!(t.lines, lines[4..].to_vec());
    let rest = chat.before_pages(t.cursor, 1, 10).await.unwrap();
    let got: Vec<String> = rest.iter().rev().flat_map(|p| p.lines.clone()).collect();
    assert_eq!(got, lines[..4].to_vec());
    assert_eq!(rest.last().unwrap().cursor.offset, c.offset);
}

pub async fn save_keeps_the_bytes_before_the_cursor_and_replaces_the_rest<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chat_of(&chats, 30).await;
    let t = chat.tail(10, false).await.unwrap();
    // The window is edited: one message changed, one removed, two added.
    let mut window = t.lines.clone();
    window[3] = r#"{"mes":"edited"}"#.to_string();
    window.remove(7);
    window.push(msg(100));
    window.push(msg(101));
    let c = chat.save(t.cursor, HEADER, &window, opts()).await.unwrap();
    let mut expect = msgs(0..20);
    expect.extend(window.clone());
    assert_holds(&chats, HEADER, &expect).await;
    assert_eq!(
        c.offset, t.cursor.offset,
        "the window still starts where it did"
    );
    assert_eq!(c.size, file_bytes(HEADER, &expect).len() as u64);
    assert_ne!(c, t.cursor);
    // The returned cursor is the window's: the file from it is the window.
    let again = chat.tail(window.len(), false).await.unwrap();
    assert_eq!((again.cursor, again.lines), (c, window.clone()));
    // Saving an empty window drops the window's lines and keeps the rest.
    let c2 = chat.save(c, HEADER, &[], opts()).await.unwrap();
    assert_holds(&chats, HEADER, &msgs(0..20)).await;
    assert_eq!(c2.offset, c2.size);
}

pub async fn patch_appends_and_rewrites_from_an_index<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chat_of(&chats, 20).await;
    let t = chat.tail(5, false).await.unwrap();
    let c1 = chat
        .patch(t.cursor, HEADER, &append(msgs(20..22)), opts())
        .await
        .unwrap();
    assert_holds(&chats, HEADER, &msgs(0..22)).await;
    assert_eq!(c1.offset, t.cursor.offset);

    // Rewrite from the window's third line (message 17): 17..22 become two new lines.
    let new = vec![r#"{"mes":"a"}"#.to_string(), r#"{"mes":"b"}"#.to_string()];
    let op = PatchOp::RewriteFromIndex {
        start_index: 2,
        lines: new.clone(),
    };
    let c2 = chat.patch(c1, HEADER, &op, opts()).await.unwrap();
    let mut expect = msgs(0..17);
    expect.extend(new.clone());
    assert_holds(&chats, HEADER, &expect).await;
    assert_eq!(c2.offset, t.cursor.offset);

    // From index 0: the whole window; from its length: an append.
    let op = PatchOp::RewriteFromIndex {
        start_index: 0,
        lines: vec![msg(50)],
    };
    let c3 = chat.patch(c2, HEADER, &op, opts()).await.unwrap();
    expect.truncate(15);
    expect.push(msg(50));
    assert_holds(&chats, HEADER, &expect).await;
    let op = PatchOp::RewriteFromIndex {
        start_index: 1,
        lines: vec![msg(51)],
    };
    let c4 = chat.patch(c3, HEADER, &op, opts()).await.unwrap();
    expect.push(msg(51));
    assert_holds(&chats, HEADER, &expect).await;
    let t4 = chat.tail(2, false).await.unwrap();
    assert_eq!((t4.cursor, t4.lines), (c4, vec![msg(50), msg(51)]));

    // The op is, as JSON, what the JS API's `patch` takes (and `ChatWindow` makes), so a Tauri
    // command taking a `PatchOp` gets it from `invoke` as is; both ways.
    for (json, op) in [
        (
            r#"{"rewriteFromIndex":3,"lines":["x"]}"#,
            PatchOp::RewriteFromIndex {
                start_index: 3,
                lines: vec!["x".into()],
            },
        ),
        (
            r#"{"append":["y"]}"#,
            PatchOp::Append {
                lines: vec!["y".into()],
            },
        ),
    ] {
        assert_eq!(serde_json::from_str::<PatchOp>(json).unwrap(), op);
        assert_eq!(serde_json::to_string(&op).unwrap(), json);
    }
    for neither in [
        r#"{"append":["y"],"lines":["x"]}"#,
        r#"{"rewriteFromIndex":3}"#,
        r#"{}"#,
    ] {
        let e = serde_json::from_str::<PatchOp>(neither).unwrap_err();
        assert!(e.to_string().contains("{append: lines}"), "{neither}: {e}");
    }
}

pub async fn a_first_save_creates_the_chat<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chats.chat("chats/new/one.jsonl").unwrap();
    let t = chat.tail(10, true).await.unwrap();
    let bad = PatchOp::RewriteFromIndex {
        start_index: 1,
        lines: vec![msg(0)],
    };
    assert!(matches!(
        chat.patch(t.cursor, HEADER, &bad, opts()).await,
        Err(WindowError::StartIndexOutOfBounds {
            start_index: 1,
            window_lines: 0
        })
    ));
    let c = chat
        .patch(t.cursor, HEADER, &append(msgs(0..3)), opts())
        .await
        .unwrap();
    assert_eq!(
        bytes(chats.store(), chat.path()).await,
        file_bytes(HEADER, &msgs(0..3))
    );
    assert_eq!(c.offset, HEADER.len() as u64 + 1);
    let again = chat.tail(10, false).await.unwrap();
    assert_eq!(again.cursor, c);
    // The missing-chat cursor is stale once the chat exists.
    assert!(matches!(
        chat.save(Cursor::default(), HEADER, &[], opts()).await,
        Err(WindowError::SignatureMismatch { .. })
    ));
}

pub async fn every_write_changes_the_signature_and_stale_cursors_are_refused<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chat_of(&chats, 10).await;
    let t = chat.tail(3, false).await.unwrap();
    let mut seen = vec![t.cursor];
    let mut cursor = t.cursor;
    // Same-size rewrites, back to back: size unchanged, no clock tick needed.
    for i in 0..5 {
        let line = format!(r#"{{"mes":"same length {i}"}}"#);
        let op = PatchOp::RewriteFromIndex {
            start_index: 2,
            lines: vec![line],
        };
        let next = chat.patch(cursor, HEADER, &op, opts()).await.unwrap();
        assert!(
            seen.iter()
                .all(|c| c.modified_millis != next.modified_millis),
            "write {i} reissued a stamp: {next:?} in {seen:?}"
        );
        if i > 0 {
            assert_eq!(next.size, cursor.size, "the rewrite keeps the size");
        }
        seen.push(next);
        cursor = next;
    }
    let before = bytes(chats.store(), PATH).await;
    for stale in &seen[..seen.len() - 1] {
        assert_all_stale([
            chat.before(*stale, 2).await.map(|_| ()),
            chat.save(*stale, HEADER, &[], opts()).await.map(|_| ()),
            chat.patch(*stale, HEADER, &append(vec![msg(9)]), opts())
                .await
                .map(|_| ()),
        ]);
    }
    assert_eq!(
        bytes(chats.store(), PATH).await,
        before,
        "refused writes changed nothing"
    );
    // The latest cursor still works, and a read does not change the signature.
    chat.before(cursor, 2).await.unwrap();
    assert_eq!(chat.tail(3, false).await.unwrap().cursor, cursor);
}

pub async fn an_outside_edit_invalidates_cursors<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chat_of(&chats, 10).await;
    let t = chat.tail(3, false).await.unwrap();
    // Another program appends a line, bypassing the window layer.
    chats
        .store()
        .append(PATH, format!("{}\n", msg(10)).as_bytes())
        .await
        .unwrap();
    let err = chat
        .patch(t.cursor, HEADER, &append(vec![msg(99)]), opts())
        .await;
    assert!(
        matches!(err, Err(WindowError::SignatureMismatch { .. })),
        "{err:?}"
    );
    assert!(matches!(
        chat.before(t.cursor, 3).await,
        Err(WindowError::SignatureMismatch { .. })
    ));
    assert_holds(&chats, HEADER, &msgs(0..11)).await;
    // A fresh tail sees the edit and works.
    let t2 = chat.tail(3, false).await.unwrap();
    assert_eq!(t2.lines, msgs(8..11));
    assert!(t2.cursor.modified_millis > t.cursor.modified_millis);
    chat.patch(t2.cursor, HEADER, &append(vec![msg(11)]), opts())
        .await
        .unwrap();
    // The sidecar lost (another program cleaned the folder): the file is adopted afresh.
    chats.store().remove(&format!("{PATH}.sig")).await.unwrap();
    let t3 = chat.tail(3, false).await.unwrap();
    assert_eq!(t3.lines, msgs(9..12));
    chat.before(t3.cursor, 1).await.unwrap();
}

pub async fn offsets_out_of_bounds_before_the_body_or_inside_a_line_are_refused<S: Store>(
    store: S,
) {
    let chats = Chats::new(store);
    let chat = chat_of(&chats, 10).await;
    let t = chat.tail(3, false).await.unwrap();
    let at = |offset: u64| Cursor { offset, ..t.cursor };
    let snapshot = bytes(chats.store(), PATH).await;
    let append = append(vec![msg(99)]);

    let past = at(t.cursor.size + 1);
    assert!(matches!(
        chat.before(past, 1).await,
        Err(WindowError::OffsetOutOfBounds { .. })
    ));
    assert!(matches!(
        chat.patch(past, HEADER, &append, opts()).await,
        Err(WindowError::OffsetOutOfBounds { offset, size }) if offset == size + 1
    ));
    for offset in [0, 5, HEADER.len() as u64] {
        assert!(matches!(
            chat.save(at(offset), HEADER, &[], opts()).await,
            Err(WindowError::OffsetBeforeBody { body_start, .. }) if body_start == HEADER.len() as u64 + 1
        ));
        assert!(matches!(
            chat.before(at(offset), 1).await,
            Err(WindowError::OffsetBeforeBody { .. })
        ));
    }
    let inside = at(t.cursor.offset + 3);
    assert!(matches!(
        chat.patch(inside, HEADER, &append, opts()).await,
        Err(WindowError::NotAtLineBoundary { .. })
    ));
    assert!(matches!(
        chat.before(inside, 1).await,
        Err(WindowError::NotAtLineBoundary { .. })
    ));
    assert_eq!(bytes(chats.store(), PATH).await, snapshot);
    // The end of the file and the body's start are boundaries: an empty window, all the body.
    let end = chat.before(at(t.cursor.size), 1).await.unwrap();
    assert_eq!(end.lines, vec![msg(9)]);
    let start = chat.before(at(HEADER.len() as u64 + 1), 1).await.unwrap();
    assert!(start.lines.is_empty());
    for e in [
        WindowError::OffsetOutOfBounds { offset: 1, size: 0 },
        WindowError::OffsetBeforeBody {
            offset: 0,
            body_start: 1,
        },
        WindowError::NotAtLineBoundary { offset: 1 },
    ] {
        assert!(e.is_stale_cursor());
    }
}

pub async fn the_window_baseline_is_checked<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chat_of(&chats, 20).await;
    let t = chat.tail(5, false).await.unwrap();
    let snapshot = bytes(chats.store(), PATH).await;
    for wrong in [0, 4, 6, 50] {
        let o = WriteOptions {
            expected_window_line_count: Some(wrong),
            force: false,
        };
        let r = chat
            .patch(t.cursor, HEADER, &append(vec![msg(20)]), o)
            .await;
        assert_eq!(
            r,
            Err(WindowError::WindowBaselineMismatch {
                expected: wrong,
                actual: 5
            })
        );
        let o = WriteOptions {
            expected_window_line_count: Some(wrong),
            force: true,
        };
        let r = chat.save(t.cursor, HEADER, &[], o).await;
        assert_eq!(
            r,
            Err(WindowError::WindowBaselineMismatch {
                expected: wrong,
                actual: 5
            }),
            "force does not skip the baseline"
        );
    }
    assert_eq!(bytes(chats.store(), PATH).await, snapshot);
    let o = WriteOptions {
        expected_window_line_count: Some(5),
        force: false,
    };
    let c = chat
        .patch(t.cursor, HEADER, &append(vec![msg(20)]), o)
        .await
        .unwrap();
    let o = WriteOptions {
        expected_window_line_count: Some(6),
        force: false,
    };
    chat.patch(
        c,
        HEADER,
        &PatchOp::RewriteFromIndex {
            start_index: 6,
            lines: vec![msg(21)],
        },
        o,
    )
    .await
    .unwrap();
    assert_holds(&chats, HEADER, &msgs(0..22)).await;
}

pub async fn a_start_index_past_the_window_is_refused<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chat_of(&chats, 20).await;
    let t = chat.tail(5, false).await.unwrap();
    let snapshot = bytes(chats.store(), PATH).await;
    for start_index in [6, 7, 1000] {
        let op = PatchOp::RewriteFromIndex {
            start_index,
            lines: vec![msg(1)],
        };
        assert_eq!(
            chat.patch(
                t.cursor,
                HEADER,
                &op,
                WriteOptions {
                    force: true,
                    ..opts()
                }
            )
            .await,
            Err(WindowError::StartIndexOutOfBounds {
                start_index,
                window_lines: 5
            })
        );
    }
    assert_eq!(bytes(chats.store(), PATH).await, snapshot);
}

pub async fn integrity_mismatch_is_refused_unless_forced_and_force_skips_nothing_else<S: Store>(
    store: S,
) {
    let chats = Chats::new(store);
    let chat = chat_of(&chats, 20).await;
    let t = chat.tail(5, false).await.unwrap();
    let other = HEADER.replace("4b1d-chat-a", "9999-chat-b");
    let snapshot = bytes(chats.store(), PATH).await;
    let append = append(vec![msg(20)]);
    assert_eq!(
        chat.patch(t.cursor, &other, &append, opts()).await,
        Err(WindowError::IntegrityMismatch {
            on_disk: "4b1d-chat-a".into(),
            incoming: "9999-chat-b".into()
        })
    );
    assert!(matches!(
        chat.save(t.cursor, &other, &[], opts()).await,
        Err(WindowError::IntegrityMismatch { .. })
    ));
    // A full save takes no cursor, and is checked all the same (one meant for another chat
    // would otherwise overwrite this one whole); a baseline means nothing to it.
    assert!(matches!(
        chat.replace(&other, &msgs(0..1), opts()).await,
        Err(WindowError::IntegrityMismatch { .. })
    ));
    let baseline = WriteOptions {
        expected_window_line_count: Some(20),
        ..opts()
    };
    assert!(matches!(
        chat.replace(HEADER, &msgs(0..1), baseline).await,
        Err(WindowError::InvalidArgument(_))
    ));
    assert_eq!(bytes(chats.store(), PATH).await, snapshot);
    // force skips integrity but not the signature or the offset checks.
    let force = WriteOptions {
        force: true,
        ..opts()
    };
    let stale = Cursor {
        modified_millis: t.cursor.modified_millis + 1,
        ..t.cursor
    };
    assert!(matches!(
        chat.patch(stale, &other, &append, force).await,
        Err(WindowError::SignatureMismatch { .. })
    ));
    let inside = Cursor {
        offset: t.cursor.offset + 1,
        ..t.cursor
    };
    assert!(matches!(
        chat.patch(inside, &other, &append, force).await,
        Err(WindowError::NotAtLineBoundary { .. })
    ));
    assert_eq!(bytes(chats.store(), PATH).await, snapshot);
    chat.patch(t.cursor, &other, &append, force).await.unwrap();
    assert_holds(&chats, &other, &msgs(0..21)).await;
    // Forced, a full save writes another chat's header too.
    let back = chat.replace(HEADER, &msgs(0..21), force).await.unwrap();
    assert_holds(&chats, HEADER, &msgs(0..21)).await;
    let c = chat
        .patch(back, &other, &PatchOp::Append { lines: vec![] }, force)
        .await
        .unwrap();
    // A header without a slug is not checked.
    let plain = r#"{"user_name":"User","chat_metadata":{}}"#;
    chat.save(c, plain, &[], opts()).await.unwrap();
}

pub async fn a_changed_header_rewrites_the_file_and_shifts_the_cursor<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chat_of(&chats, 40).await;
    let t = chat.tail(5, false).await.unwrap();
    let longer = HEADER.replace(
        r#""note":"x""#,
        r#""note":"a much longer note than before""#,
    );
    let c = chat
        .patch(t.cursor, &longer, &append(vec![msg(40)]), opts())
        .await
        .unwrap();
    assert_holds(&chats, &longer, &msgs(0..41)).await;
    assert_eq!(
        c.offset,
        t.cursor.offset + (longer.len() - HEADER.len()) as u64
    );
    let again = chat.tail(6, false).await.unwrap();
    assert_eq!((again.cursor, again.lines), (c, msgs(35..41)));
    // The same header with its keys reordered is the same header: written in place.
    let reordered = r#"{"character_name":"Alice","user_name":"User","chat_metadata":{"note":"a much longer note than before","integrity":"4b1d-chat-a"}}"#;
    let c2 = chat
        .patch(c, reordered, &append(vec![msg(41)]), opts())
        .await
        .unwrap();
    assert_holds(&chats, &longer, &msgs(0..42)).await;
    assert_eq!(c2.offset, c.offset);
    // A shorter header, rewriting from an index.
    let op = PatchOp::RewriteFromIndex {
        start_index: 1,
        lines: vec![msg(90)],
    };
    let c3 = chat.patch(c2, HEADER, &op, opts()).await.unwrap();
    let mut expect = msgs(0..36);
    expect.push(msg(90));
    assert_holds(&chats, HEADER, &expect).await;
    assert_eq!(c3.offset, t.cursor.offset);
    assert!(chats
        .store()
        .stat(&format!("{PATH}.tmp"))
        .await
        .unwrap()
        .is_none());
}

/// A JavaScript app that cut a string between the halves of a surrogate pair (a title
/// truncated by `slice`) writes the lone half as an escape: `JSON.stringify` does. Such a
/// header is JSON, and the chat is saved with it as written.
pub async fn a_header_cut_between_surrogate_halves_is_a_header<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chat_of(&chats, 3).await;
    let t = chat.tail(5, false).await.unwrap();
    let cut = HEADER.replace(r#""note":"x""#, r#""note":"cut \ud83d""#);
    let c = chat
        .patch(t.cursor, &cut, &append(vec![msg(3)]), opts())
        .await
        .unwrap();
    assert_holds(&chats, &cut, &msgs(0..4)).await;
    // Its slug is still read: another chat's is refused.
    let other = cut.replace("4b1d-chat-a", "9999-chat-b");
    assert!(matches!(
        chat.patch(c, &other, &append(vec![msg(4)]), opts()).await,
        Err(WindowError::IntegrityMismatch { .. })
    ));
    // The same header respelled is the same: written in place.
    let respelled = cut.replace(r#"{"user_name""#, r#"{ "user_name""#);
    let c2 = chat
        .patch(c, &respelled, &append(vec![msg(4)]), opts())
        .await
        .unwrap();
    assert_holds(&chats, &cut, &msgs(0..5)).await;
    assert_eq!(c2.offset, c.offset);
}

pub async fn a_backup_undoes_the_last_write<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chats.chat(PATH).unwrap();
    assert!(matches!(
        chat.restore_backup().await,
        Err(WindowError::NotFound(_))
    ));
    let chat = chat_of(&chats, 30).await;
    let original = bytes(chats.store(), PATH).await;
    let t = chat.tail(10, false).await.unwrap();
    let op = PatchOp::RewriteFromIndex {
        start_index: 2,
        lines: vec![msg(99)],
    };
    chat.patch(t.cursor, HEADER, &op, opts()).await.unwrap();
    assert_ne!(bytes(chats.store(), PATH).await, original);
    chat.restore_backup().await.unwrap();
    assert_eq!(bytes(chats.store(), PATH).await, original);
    assert!(
        matches!(
            chat.before(t.cursor, 1).await,
            Err(WindowError::SignatureMismatch { .. })
        ),
        "a restore changes the signature"
    );
    assert!(
        matches!(chat.restore_backup().await, Err(WindowError::NotFound(_))),
        "only once"
    );

    // A header change backs up the whole file.
    let t = chat.tail(10, false).await.unwrap();
    let other = HEADER.replace("x", "yy");
    chat.save(t.cursor, &other, &[], opts()).await.unwrap();
    chat.restore_backup().await.unwrap();
    assert_eq!(bytes(chats.store(), PATH).await, original);

    // No undo over somebody else's edit.
    let t = chat.tail(10, false).await.unwrap();
    chat.save(t.cursor, HEADER, &[], opts()).await.unwrap();
    chats.store().append(PATH, b"{}\n").await.unwrap();
    assert!(matches!(
        chat.restore_backup().await,
        Err(WindowError::NotFound(_))
    ));
}

/// Fails the appends to a chat's backup while it is set (a full disk while the backup is
/// copied).
#[derive(Default)]
pub struct FailingBackup(std::cell::Cell<bool>);

impl Hook for FailingBackup {
    async fn before(&self, op: Op<'_>) -> StoreResult<()> {
        match op {
            Op::Append(path) if self.0.get() && path.ends_with(".bak") => {
                Err(scrollback::store::StoreError::QuotaExceeded)
            }
            _ => Ok(()),
        }
    }
}

/// A write whose backup could not be copied fails and changes nothing, and leaves no undo: the
/// backup of the write before is gone, and a half-copied one is never restored.
pub async fn a_backup_cut_off_is_never_restored<S: Store>(store: S) {
    let chats = Chats::new(Hooked::new(store, FailingBackup::default()));
    let chat = chat_of(&chats, 30).await;
    let t = chat.tail(10, false).await.unwrap();
    let op = PatchOp::RewriteFromIndex {
        start_index: 2,
        lines: vec![msg(99)],
    };
    let c = chat.patch(t.cursor, HEADER, &op, opts()).await.unwrap();
    let patched = bytes(chats.store(), PATH).await;
    // A header change backs up the whole file: its copy fails.
    chats.store().hook.0.set(true);
    let other = HEADER.replace("x", "yy");
    assert!(chat.save(c, &other, &[], opts()).await.is_err());
    chats.store().hook.0.set(false);
    assert_eq!(
        bytes(chats.store(), PATH).await,
        patched,
        "the failed save changed nothing"
    );
    assert!(
        matches!(chat.restore_backup().await, Err(WindowError::NotFound(_))),
        "no undo from a backup cut off"
    );
    assert_eq!(bytes(chats.store(), PATH).await, patched);
}

/// A storage that fails on cue: `Fault::NextChatAppend` fails the next append to a chat file
/// or its temporary copy (the new lines do not fit), and no other call (the put-back, no
/// bigger than what the cut freed, fits); `Fault::Crash` fails that append and every call
/// after it (the tab closed, the app killed) until it is lifted; `Fault::Writes` fails every
/// write (a full disk).
#[derive(Default)]
pub struct Faults {
    fault: std::cell::Cell<Fault>,
    fired: std::cell::Cell<bool>,
}

#[derive(Clone, Copy, Default, PartialEq)]
pub enum Fault {
    #[default]
    None,
    NextChatAppend,
    Crash,
    Writes,
}

impl Faults {
    fn set(&self, fault: Fault) {
        self.fault.set(fault);
        self.fired.set(false);
    }
}

impl Hook for Faults {
    async fn before(&self, op: Op<'_>) -> StoreResult<()> {
        let full = Err(scrollback::store::StoreError::QuotaExceeded);
        let chat_append =
            matches!(op, Op::Append(p) if p.ends_with(".jsonl") || p.ends_with(".jsonl.tmp"));
        let writes = matches!(
            op,
            Op::Append(_) | Op::Write(_) | Op::Truncate(_) | Op::Rename { .. }
        );
        match self.fault.get() {
            Fault::Crash if self.fired.get() => full,
            Fault::NextChatAppend | Fault::Crash if chat_append && !self.fired.get() => {
                self.fired.set(true);
                full
            }
            Fault::Writes if writes => full,
            _ => Ok(()),
        }
    }
}

/// A write that fails once it has cut the file (the new lines do not fit) puts the chat back:
/// byte for byte as before, the caller's cursor still good, so it can try again.
pub async fn a_write_that_fails_after_the_cut_changes_nothing<S: Store>(store: S) {
    let chats = Chats::new(Hooked::new(store, Faults::default()));
    let chat = chat_of(&chats, 30).await;
    let original = bytes(chats.store(), PATH).await;
    let t = chat.tail(10, false).await.unwrap();
    let mut window = t.lines.clone();
    window[2] = msg(99);
    let baseline = WriteOptions {
        expected_window_line_count: Some(10),
        force: false,
    };
    let writes = [
        ("a windowed save", Cut::Save(window.clone())),
        (
            "a rewrite from an index",
            Cut::Patch(PatchOp::RewriteFromIndex {
                start_index: 2,
                lines: window[2..].to_vec(),
            }),
        ),
        ("an append", Cut::Patch(append(msgs(30..32)))),
        ("a header change", Cut::Save(Vec::new())),
    ];
    for (what, write) in &writes {
        chats.store().hook.set(Fault::NextChatAppend);
        let header = match what {
            &"a header change" => HEADER.replace("x", "yy"),
            _ => HEADER.to_string(),
        };
        let failed = match write {
            Cut::Save(lines) => chat.save(t.cursor, &header, lines, baseline).await,
            Cut::Patch(op) => chat.patch(t.cursor, &header, op, baseline).await,
        };
        chats.store().hook.set(Fault::None);
        assert!(
            matches!(failed, Err(WindowError::Store(_))),
            "{what}: {failed:?}"
        );
        assert_eq!(bytes(chats.store(), PATH).await, original, "{what}");
        assert_eq!(
            chat.tail(10, false).await.unwrap().cursor,
            t.cursor,
            "{what}"
        );
    }
    // The same cursor writes once there is room.
    let c = chat
        .patch(t.cursor, HEADER, &append(msgs(30..31)), baseline)
        .await
        .unwrap();
    assert_holds(&chats, HEADER, &msgs(0..31)).await;
    assert_eq!(chat.tail(11, false).await.unwrap().cursor, c);
}

/// What a write does, for [`a_write_that_fails_after_the_cut_changes_nothing`].
pub enum Cut {
    Save(Vec<String>),
    Patch(PatchOp),
}

/// A write cut off midway (the app gone after the cut, before the new lines were written, so
/// not even its own put-back ran) is put back by the next call on the chat, whatever it is.
pub async fn a_write_cut_off_midway_is_put_back_by_the_next_call<S: Store>(store: S) {
    let chats = Chats::new(Hooked::new(store, Faults::default()));
    let chat = chat_of(&chats, 30).await;
    let t = chat.tail(10, false).await.unwrap();
    let op = PatchOp::RewriteFromIndex {
        start_index: 2,
        lines: vec![msg(99)],
    };
    chats.store().hook.set(Fault::Crash);
    assert!(chat.patch(t.cursor, HEADER, &op, opts()).await.is_err());
    chats.store().hook.set(Fault::None);
    // Left cut: the window's lines from its third are gone from the file, kept in the backup.
    assert!(bytes(chats.store(), PATH).await.len() < file_bytes(HEADER, &msgs(0..30)).len());

    // The next process: its first read puts the chat back as it was.
    let chat = chats.chat(PATH).unwrap();
    let again = chat.tail(10, false).await.unwrap();
    assert_eq!(again.lines, msgs(20..30));
    assert_holds(&chats, HEADER, &msgs(0..30)).await;
    assert_eq!(again.cursor, t.cursor, "the same bytes, the same version");
    assert!(
        matches!(chat.restore_backup().await, Err(WindowError::NotFound(_))),
        "nothing to undo: the write never happened"
    );
    chat.patch(t.cursor, HEADER, &op, opts()).await.unwrap();
    let mut patched = msgs(0..22);
    patched.push(msg(99));
    assert_holds(&chats, HEADER, &patched).await;
}

/// A restore cut off midway (the chat emptied, the backup half copied back) is finished by the
/// next call: the chat is as before the write it undid, never empty.
pub async fn a_restore_cut_off_midway_is_finished_by_the_next_call<S: Store>(store: S) {
    let chats = Chats::new(Hooked::new(store, Faults::default()));
    let chat = chat_of(&chats, 30).await;
    let t = chat.tail(10, false).await.unwrap();
    // A header change: its backup is the whole file, so its restore empties the chat first.
    let other = HEADER.replace("x", "yy");
    chat.save(t.cursor, &other, &t.lines, opts()).await.unwrap();
    chats.store().hook.set(Fault::Crash);
    assert!(chat.restore_backup().await.is_err());
    chats.store().hook.set(Fault::None);

    let chat = chats.chat(PATH).unwrap();
    assert_eq!(chat.tail(10, false).await.unwrap().lines, msgs(20..30));
    assert_holds(&chats, HEADER, &msgs(0..30)).await;
    assert!(
        matches!(chat.restore_backup().await, Err(WindowError::NotFound(_))),
        "restored once"
    );
}

/// A full disk refuses writes, never reads: a chat edited by another program (or never seen
/// by this layer) opens, though its signature cannot be recorded, with the same cursor each
/// time; a write then fails and changes nothing.
pub async fn reads_go_on_while_the_disk_is_full<S: Store>(store: S) {
    let chats = Chats::new(Hooked::new(store, Faults::default()));
    let chat = chat_of(&chats, 10).await;
    chats
        .store()
        .append(PATH, format!("{}\n", msg(10)).as_bytes())
        .await
        .unwrap();
    chats
        .store()
        .write("chats/imported.jsonl", &file_bytes(HEADER, &msgs(0..2)))
        .await
        .unwrap();
    chats.store().hook.set(Fault::Writes);
    let t = chat.tail(5, false).await.unwrap();
    assert_eq!(t.lines, msgs(6..11));
    assert_eq!(chat.tail(5, false).await.unwrap().cursor, t.cursor);
    let imported = chats.chat("chats/imported.jsonl").unwrap();
    assert_eq!(imported.tail(5, false).await.unwrap().lines, msgs(0..2));
    assert!(chat
        .patch(t.cursor, HEADER, &append(msgs(11..12)), opts())
        .await
        .is_err());
    chats.store().hook.set(Fault::None);
    assert_holds(&chats, HEADER, &msgs(0..11)).await;
    chat.patch(t.cursor, HEADER, &append(msgs(11..12)), opts())
        .await
        .unwrap();
    assert_holds(&chats, HEADER, &msgs(0..12)).await;
}

/// A line with bytes that are not UTF-8 (a character torn by another writer) is shown with
/// U+FFFD in their place, not a chat that cannot open; the file keeps its bytes.
pub async fn a_line_that_is_not_utf8_is_shown_not_refused<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chat_of(&chats, 5).await;
    chats
        .store()
        .append(PATH, b"{\"mes\":\"caf\xc3\"}\n")
        .await
        .unwrap();
    let t = chat.tail(2, false).await.unwrap();
    assert_eq!(
        t.lines,
        vec![msg(4), "{\"mes\":\"caf\u{fffd}\"}".to_string()]
    );
    assert!(bytes(chats.store(), PATH).await.ends_with(b"caf\xc3\"}\n"));
    // A window after it is written as any other.
    let c = chat
        .patch(t.cursor, HEADER, &append(msgs(5..6)), opts())
        .await
        .unwrap();
    assert_eq!(chat.tail(1, false).await.unwrap().lines, msgs(5..6));
    assert_eq!(chat.before(c, 10).await.unwrap().lines, msgs(0..4));
}

/// (Each storage call yields to the executor first, so that the two writes interleave.)
pub async fn writes_to_one_chat_are_serialized<S: Store>(store: S) {
    let chats = Chats::new(Hooked::new(store, Yield));
    let chat = chat_of(&chats, 10).await;
    let t = chat.tail(3, false).await.unwrap();
    // Two writers with the same cursor at once (two commands racing): one wins, the other is
    // refused as stale, whatever the interleaving of their storage calls.
    let (a, b) = futures_util::future::join(
        chat.patch(t.cursor, HEADER, &append(vec![msg(10)]), opts()),
        chats.chat(PATH).unwrap().patch(
            t.cursor,
            HEADER,
            &PatchOp::RewriteFromIndex {
                start_index: 0,
                lines: vec![msg(77)],
            },
            opts(),
        ),
    )
    .await;
    let (ok, err) = match (a, b) {
        (Ok(c), Err(e)) | (Err(e), Ok(c)) => (c, e),
        other => panic!("exactly one write must win: {other:?}"),
    };
    assert!(
        matches!(err, WindowError::SignatureMismatch { .. }),
        "{err:?}"
    );
    let on_disk = bytes(&chats.store().inner, PATH).await;
    let appended = file_bytes(HEADER, &msgs(0..11));
    let mut rewritten_lines = msgs(0..7);
    rewritten_lines.push(msg(77));
    let rewritten = file_bytes(HEADER, &rewritten_lines);
    assert!(
        on_disk == appended || on_disk == rewritten,
        "one whole write, not a mix"
    );
    assert_eq!(chat.tail(100, false).await.unwrap().cursor.size, ok.size);
}

pub async fn bad_arguments_are_refused_and_change_nothing<S: Store>(store: S) {
    let chats = Chats::new(store);
    for path in [
        "",
        "chats/../etc/passwd.jsonl",
        "chats//x.jsonl",
        "chats/./x.jsonl",
        "chats/x.json",
        "chats/.jsonl",
        "chats/x.jsonl.bak",
        "chats\\x.jsonl",
    ] {
        assert!(
            matches!(chats.chat(path), Err(WindowError::InvalidArgument(_))),
            "{path:?}"
        );
    }
    let chat = chat_of(&chats, 10).await;
    let t = chat.tail(3, false).await.unwrap();
    let snapshot = bytes(chats.store(), PATH).await;
    assert!(matches!(
        chat.tail(0, false).await,
        Err(WindowError::InvalidArgument(_))
    ));
    assert!(matches!(
        chat.before(t.cursor, 0).await,
        Err(WindowError::InvalidArgument(_))
    ));
    assert!(matches!(
        chat.before_pages(t.cursor, 5, 0).await,
        Err(WindowError::InvalidArgument(_))
    ));
    let split = vec![msg(1), "{\"a\":1}\n{\"b\":2}".to_string()];
    assert!(matches!(
        chat.save(t.cursor, HEADER, &split, opts()).await,
        Err(WindowError::InvalidLine(_))
    ));
    for header in ["not json", "[1,2]", "{\"a\":1}\n{}", ""] {
        assert!(
            matches!(
                chat.patch(t.cursor, header, &append(vec![]), opts()).await,
                Err(WindowError::InvalidLine(_))
            ),
            "{header:?}"
        );
        assert!(matches!(
            chat.replace(header, &[], opts()).await,
            Err(WindowError::InvalidLine(_))
        ));
    }
    assert_eq!(bytes(chats.store(), PATH).await, snapshot);
    assert_eq!(chat.tail(3, false).await.unwrap().cursor, t.cursor);
    for e in [
        WindowError::InvalidArgument(String::new()),
        WindowError::NotFound(String::new()),
    ] {
        assert!(!e.is_stale_cursor());
    }
    // Every kind has a distinct name.
    let kinds = [
        WindowError::SignatureMismatch {
            cursor: t.cursor,
            size: 0,
            modified_millis: 0,
        }
        .kind(),
        WindowError::OffsetOutOfBounds { offset: 0, size: 0 }.kind(),
        WindowError::OffsetBeforeBody {
            offset: 0,
            body_start: 0,
        }
        .kind(),
        WindowError::NotAtLineBoundary { offset: 0 }.kind(),
        WindowError::WindowBaselineMismatch {
            expected: 0,
            actual: 0,
        }
        .kind(),
        WindowError::StartIndexOutOfBounds {
            start_index: 0,
            window_lines: 0,
        }
        .kind(),
        WindowError::IntegrityMismatch {
            on_disk: String::new(),
            incoming: String::new(),
        }
        .kind(),
    ];
    let mut unique = kinds.to_vec();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), kinds.len());
}

pub async fn an_unterminated_last_line_is_kept_whole<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chats.chat(PATH).unwrap();
    // Written by another program, without a final newline.
    let raw = format!("{HEADER}\n{}\n{}", msg(0), msg(1));
    chats.store().write(PATH, raw.as_bytes()).await.unwrap();
    let t = chat.tail(1, false).await.unwrap();
    assert_eq!(t.lines, vec![msg(1)]);
    let c = chat
        .patch(t.cursor, HEADER, &append(vec![msg(2)]), opts())
        .await
        .unwrap();
    assert_holds(&chats, HEADER, &msgs(0..3)).await;
    assert_eq!(chat.tail(2, false).await.unwrap().cursor, c);

    // An empty window at the unterminated end: the new lines start after the added newline.
    chats.store().write(PATH, raw.as_bytes()).await.unwrap();
    let end = chat.tail(2, false).await.unwrap();
    let empty_at_end = Cursor {
        offset: end.cursor.size,
        ..end.cursor
    };
    let c = chat
        .save(empty_at_end, HEADER, &[msg(2)], opts())
        .await
        .unwrap();
    assert_holds(&chats, HEADER, &msgs(0..3)).await;
    let t = chat.tail(1, false).await.unwrap();
    assert_eq!((t.cursor, t.lines), (c, vec![msg(2)]));

    // A header alone, without its newline.
    chats.store().write(PATH, HEADER.as_bytes()).await.unwrap();
    let t = chat.tail(5, false).await.unwrap();
    assert!(t.lines.is_empty());
    assert_eq!(t.header.as_deref(), Some(HEADER));
    let c = chat
        .patch(t.cursor, HEADER, &append(vec![msg(0)]), opts())
        .await
        .unwrap();
    assert_holds(&chats, HEADER, &msgs(0..1)).await;
    assert_eq!(chat.tail(5, false).await.unwrap().cursor, c);
}

/// The windowed chat file's first data-loss scenario (design.md, rules W1, W2): a 300-message chat open as a 50-message window, then a
/// full save (the fallback path, by a caller that held the whole chat), then a windowed save
/// with the cursor read before it.
pub async fn data_loss_full_save_then_stale_windowed_save_is_refused<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chat_of(&chats, 300).await;
    let window = chat.tail(50, false).await.unwrap();
    assert_eq!(window.lines, msgs(250..300));

    let mut full = msgs(0..300);
    full[10] = r#"{"mes":"an old message edited in the full view"}"#.to_string();
    full.push(msg(300));
    chat.replace(HEADER, &full, opts()).await.unwrap();
    let after_full = bytes(chats.store(), PATH).await;
    assert_eq!(after_full, file_bytes(HEADER, &full));

    // The window still holds the old cursor; both ways of writing it are refused.
    let mut edited = window.lines.clone();
    edited.push(r#"{"mes":"typed in the stale window"}"#.to_string());
    let results = [
        chat.save(window.cursor, HEADER, &edited, opts()).await,
        chat.patch(
            window.cursor,
            HEADER,
            &append(vec![edited.last().unwrap().clone()]),
            WriteOptions {
                expected_window_line_count: Some(50),
                force: true,
            },
        )
        .await,
        chat.patch(
            window.cursor,
            HEADER,
            &PatchOp::RewriteFromIndex {
                start_index: 0,
                lines: edited.clone(),
            },
            opts(),
        )
        .await,
    ];
    assert_refused_as_stale(&chats, results, &after_full).await;
    let all = chat.tail(1000, false).await.unwrap();
    assert_eq!(all.lines, full, "all 301 messages");
}

/// The windowed chat file's second data-loss scenario (design.md, rules W1, W2): the same 300-message chat open in two windows (say the
/// UI's, and one kept by a view the app switched away from and back); one saves a windowed edit
/// of exactly the same length, so the size does not change; the other then saves its stale
/// window.
pub async fn data_loss_two_windows_same_size_rewrite_stale_save_is_refused<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chat_of(&chats, 300).await;
    let first = chat.tail(50, false).await.unwrap();
    let second = chat.tail(50, false).await.unwrap();
    assert_eq!(first.cursor, second.cursor);

    let mut edit = first.lines.clone();
    edit[49] = edit[49].replace("message 0299", "MESSAGE 0299");
    let c = chat
        .save(first.cursor, HEADER, &edit, opts())
        .await
        .unwrap();
    assert_eq!(c.size, first.cursor.size, "same size");
    let after = bytes(chats.store(), PATH).await;

    let mut stale = second.lines.clone();
    stale.truncate(10); // the stale window would also drop 40 messages
    let results = [
        chat.save(second.cursor, HEADER, &stale, opts()).await,
        chat.save(
            second.cursor,
            HEADER,
            &stale,
            WriteOptions {
                force: true,
                ..opts()
            },
        )
        .await,
        chat.patch(second.cursor, HEADER, &append(vec![msg(300)]), opts())
            .await,
    ];
    assert_refused_as_stale(&chats, results, &after).await;
    let mut expect = msgs(0..250);
    expect.extend(edit);
    assert_eq!(chat.tail(1000, false).await.unwrap().lines, expect);
}

/// The seed for randomized tests: `WINDOW_SEED` when set, else the clock (natively); printed
/// so a failure can be replayed.
fn seed() -> u64 {
    #[cfg(not(target_arch = "wasm32"))]
    {
        if let Some(s) = std::env::var("WINDOW_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
        {
            return s;
        }
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    }
    #[cfg(target_arch = "wasm32")]
    {
        // No clock in the test harness without js-sys; vary by the page's address layout.
        let probe = Box::new(0u8);
        0x5eed_0003 ^ (&*probe as *const u8 as u64)
    }
}

/// Random windowed edits (appends, rewrites from every index, saves, header changes, paging
/// back, reloads), each checked against a model: after every step the file is the model's
/// bytes and the bytes from the window's cursor to the end are exactly the window.
pub async fn random_patch_sequences_keep_the_window_equal_to_the_file_suffix<S: Store>(store: S) {
    let seed = seed();
    println!("random_patch_sequences seed: {seed} (replay with WINDOW_SEED={seed})");
    let mut rng = oorandom::Rand64::new(seed as u128);
    let chats = Chats::new(store);
    let headers = [
        HEADER.to_string(),
        HEADER.replace(r#""note":"x""#, r#""note":"a longer note""#),
    ];
    let mut next_id = 1000;
    for run in 0..4 {
        let path = format!("chats/random/run{run}.jsonl");
        let chat = chats.chat(&path).unwrap();
        let n = rng.rand_range(0..40) as usize;
        let mut model: Vec<String> = msgs(0..n);
        let mut header = headers[0].clone();
        chat.replace(&header, &model, opts()).await.unwrap();
        let t = chat
            .tail(1 + rng.rand_range(0..10) as usize, false)
            .await
            .unwrap();
        let mut window = t.lines.clone();
        let mut cursor = t.cursor;
        let mut has_more = t.has_more_before;
        for step in 0..60 {
            let mut fresh = |k: u64, rng: &mut oorandom::Rand64| -> Vec<String> {
                let k = rng.rand_range(0..k) as usize;
                let lines: Vec<String> = (0..k)
                    .map(|_| {
                        next_id += 1;
                        let pad = "x".repeat(rng.rand_range(0..40) as usize);
                        format!(r#"{{"mes":"m{next_id} {pad}"}}"#)
                    })
                    .collect();
                lines
            };
            let new_header = if rng.rand_range(0..6) == 0 {
                headers[rng.rand_range(0..2) as usize].clone()
            } else {
                header.clone()
            };
            let baseline = (rng.rand_range(0..2) == 0).then_some(window.len());
            let o = WriteOptions {
                expected_window_line_count: baseline,
                force: false,
            };
            let what = rng.rand_range(0..6);
            let described;
            match what {
                0 => {
                    let lines = fresh(4, &mut rng);
                    described = format!("append {}", lines.len());
                    cursor = chat
                        .patch(cursor, &new_header, &append(lines.clone()), o)
                        .await
                        .unwrap();
                    model.extend(lines.clone());
                    window.extend(lines);
                    header = new_header;
                }
                1 | 2 => {
                    let start = rng.rand_range(0..window.len() as u64 + 1) as usize;
                    let lines = fresh(4, &mut rng);
                    described = format!("rewrite from {start} with {}", lines.len());
                    let op = PatchOp::RewriteFromIndex {
                        start_index: start,
                        lines: lines.clone(),
                    };
                    cursor = chat.patch(cursor, &new_header, &op, o).await.unwrap();
                    let keep = model.len() - window.len() + start;
                    model.truncate(keep);
                    model.extend(lines.clone());
                    window.truncate(start);
                    window.extend(lines);
                    header = new_header;
                }
                3 => {
                    let lines = fresh(6, &mut rng);
                    described = format!("save {}", lines.len());
                    cursor = chat.save(cursor, &new_header, &lines, o).await.unwrap();
                    model.truncate(model.len() - window.len());
                    model.extend(lines.clone());
                    window = lines;
                    header = new_header;
                }
                4 => {
                    described = "before".into();
                    let page = chat
                        .before(cursor, 1 + rng.rand_range(0..8) as usize)
                        .await
                        .unwrap();
                    assert_eq!(
                        page.has_more_before,
                        page.cursor.offset > (header.len() + 1) as u64
                    );
                    let mut w = page.lines.clone();
                    w.extend(window);
                    window = w;
                    cursor = page.cursor;
                    has_more = page.has_more_before;
                }
                _ => {
                    described = "reload".into();
                    let t = chat
                        .tail(1 + rng.rand_range(0..10) as usize, false)
                        .await
                        .unwrap();
                    window = t.lines;
                    cursor = t.cursor;
                    has_more = t.has_more_before;
                }
            }
            let ctx = format!("seed {seed}, run {run}, step {step}: {described}");
            let on_disk = bytes(chats.store(), &path).await;
            assert_eq!(on_disk, file_bytes(&header, &model), "{ctx}");
            let suffix = &on_disk[cursor.offset as usize..];
            let window_bytes: Vec<u8> = window
                .iter()
                .flat_map(|l| format!("{l}\n").into_bytes())
                .collect();
            assert_eq!(
                suffix,
                &window_bytes[..],
                "{ctx}: the window is the file's suffix"
            );
            assert_eq!(cursor.size, on_disk.len() as u64, "{ctx}");
            if !window.is_empty() {
                let t = chat.tail(window.len(), false).await.unwrap();
                assert_eq!((t.cursor, &t.lines), (cursor, &window), "{ctx}");
                assert_eq!(t.has_more_before, model.len() > window.len(), "{ctx}");
            }
            let _ = has_more;
        }
    }
}

/// A chat whose every message is 40 characters, 10 tokens at 4 characters a token.
fn ten_token(i: usize) -> String {
    let s = format!(r#"{{"mes":"m{i:05}{}"}}"#, "-".repeat(24));
    assert_eq!(s.chars().count(), 40);
    s
}

/// A chat of 300 ten-token messages, and its newest 50 as the window.
async fn backfill_chat<'a, S: Store>(chats: &'a Chats<S>) -> (ChatFile<'a, S>, ChatTail) {
    let chat = chats.chat(PATH).unwrap();
    let lines: Vec<String> = (0..300).map(ten_token).collect();
    chat.replace(HEADER, &lines, opts()).await.unwrap();
    let window = chat.tail(50, false).await.unwrap();
    (chat, window)
}

fn request<'a>(window: &'a [String], cursor: Cursor, budget: usize) -> BackfillRequest<'a> {
    BackfillRequest {
        window,
        cursor,
        has_more_before: true,
        budget_tokens: budget,
        page_lines: 20,
        max_pages: 100,
        max_messages: 10_000,
    }
}

pub async fn backfill_fills_the_budget_without_touching_the_window<S: Store>(store: S) {
    let chats = Chats::new(store);
    let (chat, t) = backfill_chat(&chats).await;
    let before = bytes(chats.store(), PATH).await;
    let backfill = PromptBackfill::new(PromptBackfill::DESKTOP_PAGES);
    let est = CharsPerToken::default();
    // The window takes 500 tokens; 1,005 more fit 100 messages, and the 101st would not.
    let b = backfill
        .collect(&chat, &request(&t.lines, t.cursor, 1_505), &est)
        .await
        .unwrap();
    assert_eq!(b.window_tokens, 500);
    assert_eq!(b.older, (150..250).map(ten_token).collect::<Vec<_>>());
    assert_eq!(b.older_tokens, 1_000);
    assert_eq!(b.stop, BackfillStop::Budget);
    let history: Vec<&str> = b.history(&t.lines).collect();
    assert_eq!(history.len(), 150);
    assert_eq!(history[0], ten_token(150));
    assert_eq!(history[149], ten_token(299));
    // Nothing written, and the window's cursor is still good.
    assert_eq!(bytes(chats.store(), PATH).await, before);
    assert_eq!(chat.tail(50, false).await.unwrap().cursor, t.cursor);
    // The window alone over budget: nothing read.
    let b = backfill
        .collect(&chat, &request(&t.lines, t.cursor, 100), &est)
        .await
        .unwrap();
    assert!(b.older.is_empty() && b.pages_read == 0);
    assert_eq!(b.stop, BackfillStop::Budget);
    // A custom estimator: a closure.
    let b = backfill
        .collect(&chat, &request(&t.lines, t.cursor, 60), &|_: &str| 1)
        .await
        .unwrap();
    assert_eq!(b.window_tokens, 50);
    assert_eq!(b.older, (240..250).map(ten_token).collect::<Vec<_>>());
}

pub async fn backfill_stops_at_page_and_message_caps_and_the_start<S: Store>(store: S) {
    let chats = Chats::new(store);
    let (chat, t) = backfill_chat(&chats).await;
    let est = CharsPerToken::default();
    let backfill = PromptBackfill::new(12);
    let mut r = request(&t.lines, t.cursor, usize::MAX);
    r.max_pages = 3;
    let b = backfill.collect(&chat, &r, &est).await.unwrap();
    assert_eq!((b.older.len(), &b.stop), (60, &BackfillStop::PageCap));
    assert_eq!(b.older, (190..250).map(ten_token).collect::<Vec<_>>());

    let mut r = request(&t.lines, t.cursor, usize::MAX);
    r.max_messages = 33;
    let b = backfill.collect(&chat, &r, &est).await.unwrap();
    assert_eq!((b.older.len(), &b.stop), (33, &BackfillStop::MessageCap));
    assert_eq!(b.older, (217..250).map(ten_token).collect::<Vec<_>>());

    let r = request(&t.lines, t.cursor, usize::MAX);
    let b = backfill.collect(&chat, &r, &est).await.unwrap();
    assert_eq!(b.stop, BackfillStop::StartOfChat);
    assert_eq!(b.older, (0..250).map(ten_token).collect::<Vec<_>>());
    assert!(
        backfill.cached_pages() <= 12,
        "the cache keeps its capacity"
    );

    let all = chat.tail(300, false).await.unwrap();
    let mut r = request(&all.lines, all.cursor, usize::MAX);
    r.has_more_before = all.has_more_before;
    let b = backfill.collect(&chat, &r, &est).await.unwrap();
    assert_eq!(
        (b.older.len(), b.pages_read, b.stop),
        (0, 0, BackfillStop::StartOfChat)
    );
}

pub async fn backfill_serves_repeat_generations_from_its_lru_cache<S: Store>(store: S) {
    let chats = Chats::new(store);
    let (chat, t) = backfill_chat(&chats).await;
    let est = CharsPerToken::default();
    let backfill = PromptBackfill::new(PromptBackfill::MOBILE_PAGES);
    let r = request(&t.lines, t.cursor, 500 + 1_000);
    let first = backfill.collect(&chat, &r, &est).await.unwrap();
    assert_eq!(first.older.len(), 100);
    assert_eq!((first.pages_read, first.pages_cached), (5, 0));
    // It read what the budget needed (5 pages of 20), not the page cap (100).
    let second = backfill.collect(&chat, &r, &est).await.unwrap();
    assert_eq!(second.older, first.older);
    assert_eq!((second.pages_read, second.pages_cached), (0, 5));

    // After a write the signature differs: pages of the old version are not served.
    let c = chat
        .patch(t.cursor, HEADER, &append(vec![ten_token(300)]), opts())
        .await
        .unwrap();
    let mut window = t.lines.clone();
    window.push(ten_token(300));
    let r = request(&window, c, 510 + 1_000);
    let third = backfill.collect(&chat, &r, &est).await.unwrap();
    assert_eq!(third.older, first.older);
    assert_eq!(third.pages_cached, 0);
    assert!(backfill.cached_pages() <= PromptBackfill::MOBILE_PAGES);

    // A page size is part of the key; the least recently used pages go first.
    let small = PromptBackfill::new(2);
    let mut r = request(&window, c, usize::MAX);
    r.max_pages = 4;
    let b = small.collect(&chat, &r, &est).await.unwrap();
    assert_eq!((b.older.len(), small.cached_pages()), (80, 2));
    r.max_pages = 1;
    let again = small.collect(&chat, &r, &est).await.unwrap();
    assert_eq!(
        (again.pages_read, again.pages_cached),
        (1, 0),
        "the first page was evicted"
    );
    r.page_lines = 10;
    let other = small.collect(&chat, &r, &est).await.unwrap();
    assert_eq!((other.pages_read, other.older.len()), (1, 10));
}

pub async fn backfill_reports_a_stale_cursor_and_takes_nothing<S: Store>(store: S) {
    let chats = Chats::new(store);
    let (chat, t) = backfill_chat(&chats).await;
    chat.patch(t.cursor, HEADER, &append(vec![ten_token(300)]), opts())
        .await
        .unwrap();
    let backfill = PromptBackfill::new(12);
    let est = CharsPerToken::default();
    let b = backfill
        .collect(&chat, &request(&t.lines, t.cursor, usize::MAX), &est)
        .await
        .expect("a stale cursor is an outcome, not an error");
    assert!(b.is_stale());
    assert!(matches!(
        b.stop,
        BackfillStop::StaleCursor(WindowError::SignatureMismatch { .. })
    ));
    assert!(b.older.is_empty());
    assert_eq!(
        b.history(&t.lines).count(),
        50,
        "generation goes on with the window"
    );
    // Other failures are errors.
    let mut r = request(&t.lines, t.cursor, 10);
    r.page_lines = 0;
    assert!(matches!(
        backfill.collect(&chat, &r, &est).await,
        Err(WindowError::InvalidArgument(_))
    ));
}

/// The pages of the caller's cursor are in the cache when another hand edits the chat: the
/// backfill must not serve them (an older version of the file) but report the stale cursor.
pub async fn backfill_with_a_warm_cache_reports_an_outside_edit_as_stale<S: Store>(store: S) {
    let chats = Chats::new(store);
    let (chat, t) = backfill_chat(&chats).await;
    let est = CharsPerToken::default();
    let backfill = PromptBackfill::new(PromptBackfill::MOBILE_PAGES);
    let r = request(&t.lines, t.cursor, 500 + 1_000);
    let warm = backfill.collect(&chat, &r, &est).await.unwrap();
    assert_eq!((warm.older.len(), warm.pages_read), (100, 5));
    let again = backfill.collect(&chat, &r, &est).await.unwrap();
    assert_eq!(
        (again.pages_read, again.pages_cached),
        (0, 5),
        "the cache is warm"
    );

    // Another program rewrites an old message in place: the file is a different version.
    let mut file = bytes(chats.store(), PATH).await;
    let at = file.len() / 3;
    file[at..at + 1].copy_from_slice(b"#");
    file.extend_from_slice(format!("{}\n", ten_token(999)).as_bytes());
    chats.store().write(PATH, &file).await.unwrap();

    let stale = backfill.collect(&chat, &r, &est).await.unwrap();
    assert!(
        matches!(
            stale.stop,
            BackfillStop::StaleCursor(WindowError::SignatureMismatch { .. })
        ),
        "{:?}",
        stale.stop
    );
    assert!(
        stale.older.is_empty(),
        "no page of the old version is served"
    );
    assert_eq!((stale.pages_cached, stale.pages_read), (0, 0));
    // A fresh window reads the new version.
    let t2 = chat.tail(50, false).await.unwrap();
    let fresh = backfill
        .collect(&chat, &request(&t2.lines, t2.cursor, usize::MAX), &est)
        .await
        .unwrap();
    assert_eq!(fresh.stop, BackfillStop::StartOfChat);
    assert_eq!(fresh.pages_cached, 0);
}

/// Every spelling of a name opens one chat; a chat stored under an older spelling is found
/// (and moved to the normalized name with its signature and backup); bad names are refused.
pub async fn named_chats_normalize_and_find_older_spellings<S: Store>(store: S) {
    use scrollback::window::normalize_chat_name;
    let chats = Chats::new(store);
    let a = chats.named("chats", " notes.jsonl ").await.unwrap();
    assert_eq!(a.path(), "chats/notes.jsonl");
    let twice = chats.named("chats", "notes.jsonl.jsonl").await.unwrap();
    assert_eq!(twice.path(), "chats/notes.jsonl", "no chat of its own");
    drop(twice);
    let c = a
        .save(Cursor::default(), HEADER, &msgs(0..3), opts())
        .await
        .unwrap();
    for spelling in ["notes", "notes.jsonl", "  notes "] {
        let t = chats
            .named("chats", spelling)
            .await
            .unwrap()
            .tail(10, false)
            .await
            .unwrap();
        assert_eq!(t.lines, msgs(0..3), "{spelling:?}");
        assert_eq!(t.cursor, c, "the same version, under every spelling");
    }

    // Written by a version that kept names as given: "old.jsonl" at chats/old.jsonl.jsonl.
    let legacy = chats.chat("chats/old.jsonl.jsonl").unwrap();
    let c = legacy
        .save(Cursor::default(), HEADER, &msgs(0..4), opts())
        .await
        .unwrap();
    let c = legacy
        .patch(c, HEADER, &append(msgs(4..5)), opts())
        .await
        .unwrap();
    drop(legacy);
    let found = chats.named("chats", "old").await.unwrap();
    assert_eq!(found.path(), "chats/old.jsonl");
    let t = found.tail(10, false).await.unwrap();
    assert_eq!(t.lines, msgs(0..5));
    assert_eq!(t.cursor.size, c.size);
    assert!(
        chats
            .store()
            .stat("chats/old.jsonl.jsonl")
            .await
            .unwrap()
            .is_none(),
        "moved"
    );
    // Its backup came along: the last write can still be undone.
    found.restore_backup().await.unwrap();
    assert_eq!(found.tail(10, false).await.unwrap().lines, msgs(0..4));
    // A name that is nothing once normalized, or that escapes the folder, is refused.
    for bad in ["", " .jsonl", "../x", "a//b"] {
        assert!(
            matches!(
                chats.named("chats", bad).await,
                Err(WindowError::InvalidArgument(_))
            ),
            "{bad:?}"
        );
    }
    assert_eq!(normalize_chat_name("x.jsonl").unwrap(), "x");
}

pub async fn chats_are_listed_and_deleted_with_their_backups<S: Store>(store: S) {
    let chats = Chats::new(store);
    assert_eq!(chats.list("chats").await.unwrap(), vec![], "no folder yet");
    let trip = chats.named("chats", "trip").await.unwrap();
    let c = trip.replace(HEADER, &msgs(0..3), opts()).await.unwrap();
    trip.patch(c, HEADER, &append(msgs(3..4)), opts())
        .await
        .unwrap();
    let notes = chats.named("chats", " notes ").await.unwrap();
    notes.replace(HEADER, &msgs(0..1), opts()).await.unwrap();
    let listed = chats.list("chats").await.unwrap();
    let names: Vec<(&str, u64)> = listed.iter().map(|e| (e.name.as_str(), e.size)).collect();
    assert_eq!(
        names,
        vec![
            ("notes", file_bytes(HEADER, &msgs(0..1)).len() as u64),
            ("trip", file_bytes(HEADER, &msgs(0..4)).len() as u64),
        ],
        "by name, the signatures and backups beside them not listed"
    );

    assert!(trip.delete().await.unwrap(), "it was there");
    assert!(!trip.delete().await.unwrap(), "and is gone");
    let names: Vec<String> = (chats.list("chats").await.unwrap().into_iter())
        .map(|e| e.name)
        .collect();
    assert_eq!(names, vec!["notes".to_string()]);
    assert!(matches!(
        trip.tail(10, false).await,
        Err(WindowError::NotFound(_))
    ));
    assert!(
        matches!(trip.restore_backup().await, Err(WindowError::NotFound(_))),
        "its backup went with it"
    );
    assert!(matches!(
        trip.patch(c, HEADER, &append(msgs(9..10)), opts()).await,
        Err(WindowError::SignatureMismatch { .. })
    ));
    // Started again from nothing.
    let again = trip
        .save(Cursor::default(), HEADER, &msgs(5..6), opts())
        .await
        .unwrap();
    let t = trip.tail(10, false).await.unwrap();
    assert_eq!((t.lines, t.cursor), (msgs(5..6), again));
}

pub async fn an_empty_file_is_a_chat_with_no_header_yet<S: Store>(store: S) {
    let chats = Chats::new(store);
    let chat = chats.chat("chats/empty.jsonl").unwrap();
    chats.store().write(chat.path(), b"").await.unwrap();
    for allow_not_found in [false, true] {
        let t = chat.tail(10, allow_not_found).await.unwrap();
        assert_eq!((t.header, t.lines.len(), t.cursor.offset), (None, 0, 0));
    }
    // As a new chat: the app writes its header with its first lines.
    let t = chat.tail(10, false).await.unwrap();
    let c = chat
        .patch(t.cursor, HEADER, &append(msgs(0..2)), opts())
        .await
        .unwrap();
    assert_eq!(
        bytes(chats.store(), chat.path()).await,
        file_bytes(HEADER, &msgs(0..2))
    );
    let again = chat.tail(10, false).await.unwrap();
    assert_eq!(
        (again.header.as_deref(), again.lines, again.cursor),
        (Some(HEADER), msgs(0..2), c)
    );
    // A full save of an empty file too.
    chats.store().write(chat.path(), b"").await.unwrap();
    chat.replace(HEADER, &msgs(3..4), opts()).await.unwrap();
    assert_eq!(
        bytes(chats.store(), chat.path()).await,
        file_bytes(HEADER, &msgs(3..4))
    );
}
