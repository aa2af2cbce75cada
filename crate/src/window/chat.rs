//! [`Chats`] and [`ChatFile`]: the windowed reads and writes of one chat file over a [`Store`].

use super::lines::{ends_with_newline, is_line_boundary, line_starts, lines_before, read_header};
use super::name::{chat_path, normalize_chat_name, CHAT_EXTENSION};
use super::signature::{self, State};
use super::{ChatChunk, ChatEntry, ChatTail, Cursor, PatchOp, WindowError, WriteOptions};
use crate::protocol::parse_json;
use crate::store::{segments, Store};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

type Result<T> = std::result::Result<T, WindowError>;
type ChatLock = async_lock::Mutex<()>;

/// How many bytes a copy moves per storage call (header rewrites, backups).
const COPY_BLOCK: usize = 1 << 20;

/// The chats kept in one store, with one write lock per chat (per name without case: two
/// spellings may be one file).
///
/// Hold one `Chats` per store for the life of the app (in a Tauri app, in managed state), so
/// that every operation on a chat, from any command, is serialized on that chat's lock.
#[derive(Debug)]
pub struct Chats<S> {
    store: S,
    locks: Mutex<HashMap<String, Weak<ChatLock>>>,
}

impl<S: Store> Chats<S> {
    /// Chats over `store`.
    pub fn new(store: S) -> Self {
        Self {
            store,
            locks: Mutex::new(HashMap::new()),
        }
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// One chat, by its path in the store: `/`-separated segments, none empty, `.` or `..`,
    /// the last ending in `.jsonl` (so the layer's own blobs beside it, `<chat>.sig`,
    /// `<chat>.bak` and `<chat>.tmp`, can never be taken for a chat). A path from the network
    /// or the UI is refused here rather than used raw.
    pub fn chat(&self, path: &str) -> Result<ChatFile<'_, S>> {
        let segs = segments(path).map_err(|_| bad_path(path))?;
        let name = segs.last().copied().unwrap_or_default();
        if name.len() <= ".jsonl".len() || !name.ends_with(".jsonl") {
            return Err(bad_path(path));
        }
        let lock = {
            // Keyed without case or accents: on a file system that ignores case (macOS's and
            // Windows', where a Tauri app runs) `Notes` and `notes` are one file, and on macOS's
            // a name's composed and decomposed spellings too: one file must be one lock.
            let key = crate::search::tokens::fold(path);
            let mut locks = self.locks.lock().unwrap();
            match locks.get(&key).and_then(Weak::upgrade) {
                Some(lock) => lock,
                None => {
                    locks.retain(|_, l| l.strong_count() > 0);
                    let lock = Arc::new(ChatLock::new(()));
                    locks.insert(key, Arc::downgrade(&lock));
                    lock
                }
            }
        };
        Ok(ChatFile {
            store: &self.store,
            path: path.to_string(),
            sig: format!("{path}.sig"),
            bak: format!("{path}.bak"),
            tmp: format!("{path}.tmp"),
            lock,
        })
    }
}

impl<S: Store> Chats<S> {
    /// The chats in `folder`, by name (as stored: the normalized name, or an older spelling not
    /// yet moved), each with its size and the store's modification time; sorted by name. The
    /// layer's own blobs beside each chat are not chats.
    pub async fn list(&self, folder: &str) -> Result<Vec<ChatEntry>> {
        let mut chats: Vec<ChatEntry> = (self.store.list(folder).await?.into_iter())
            .filter(|e| !e.is_dir)
            .filter_map(|e| {
                let name = e.name.strip_suffix(CHAT_EXTENSION)?.to_string();
                Some(ChatEntry {
                    name,
                    size: e.size,
                    modified_millis: e.modified,
                })
            })
            .filter(|e| !e.name.is_empty())
            .collect();
        chats.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(chats)
    }

    /// The chat called `name` in `folder`, at `folder/<name>.jsonl` with the name normalized by
    /// [`normalize_chat_name`] (trimmed, without `.jsonl`), so every
    /// spelling of a name opens the same chat.
    ///
    /// A chat stored under an older spelling (by a version that kept names as given, so
    /// `"notes.jsonl"` lives at `notes.jsonl.jsonl`, `" notes"` at ` notes.jsonl`) is still
    /// found: when no chat has the normalized path, the folder is searched for a chat whose
    /// name normalizes the same (the newest if several), and it is moved to the normalized
    /// path, with its signature and backup, under the chat's lock. That search costs one folder
    /// listing, and only when the chat does not exist under its normalized path.
    pub async fn named(&self, folder: &str, name: &str) -> Result<ChatFile<'_, S>> {
        let path = chat_path(folder, name)?;
        let chat = self.chat(&path)?;
        let _guard = chat.lock.lock().await;
        if self.store.stat(&path).await?.is_none() {
            if let Some(old) = self.older_spelling(&path).await? {
                for ext in ["", ".sig", ".bak"] {
                    let from = format!("{old}{ext}");
                    if self.store.stat(&from).await?.is_some() {
                        self.store.rename(&from, &format!("{path}{ext}")).await?;
                    }
                }
                log::info!("chat {old:?} moved to its normalized name {path:?}");
            }
        }
        drop(_guard);
        Ok(chat)
    }

    /// Another chat in `path`'s folder whose name normalizes to `path`'s.
    async fn older_spelling(&self, path: &str) -> Result<Option<String>> {
        let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
        let stem = &file[..file.len() - CHAT_EXTENSION.len()];
        let mut best: Option<(u64, String)> = None;
        for entry in self.store.list(dir).await? {
            let Some(other) = entry.name.strip_suffix(CHAT_EXTENSION) else {
                continue;
            };
            if entry.is_dir || entry.name == file || segments(&entry.name).is_err() {
                continue;
            }
            if normalize_chat_name(other).is_ok_and(|n| n == stem)
                && best.as_ref().is_none_or(|(m, _)| entry.modified > *m)
            {
                best = Some((entry.modified, entry.name));
            }
        }
        Ok(best.map(|(_, name)| {
            if dir.is_empty() {
                name
            } else {
                format!("{dir}/{name}")
            }
        }))
    }
}

fn bad_path(path: &str) -> WindowError {
    WindowError::InvalidArgument(format!(
        "not a chat path (segments, ending in .jsonl): {path:?}"
    ))
}

/// One chat file: a header line, then one message a line (JSONL), read and written as a window.
///
/// Every operation takes the chat's lock, so writes are serialized and a read never sees half a
/// write. Reads cost the lines they return, not the file.
#[derive(Debug)]
pub struct ChatFile<'a, S> {
    store: &'a S,
    path: String,
    sig: String,
    bak: String,
    tmp: String,
    lock: Arc<ChatLock>,
}

/// A cursor that passed the checks every cursor operation makes.
struct Checked {
    state: State,
    /// The header on disk (`None`: the chat does not exist).
    header: Option<String>,
    body_start: u64,
}

impl<S: Store> ChatFile<'_, S> {
    /// The chat's path in the store (also its id in the prompt-backfill cache).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The header and the last `max_lines` message lines, with the cursor where they start.
    /// A missing chat is [`WindowError::NotFound`], or, with `allow_not_found`, an empty tail
    /// (no header, no lines, [`Cursor::default()`]) that a first save can start from.
    pub async fn tail(&self, max_lines: usize, allow_not_found: bool) -> Result<ChatTail> {
        positive("max_lines", max_lines)?;
        let _guard = self.lock.lock().await;
        let state = self.current().await?;
        let Some(meta) = state.meta else {
            if allow_not_found {
                return Ok(ChatTail {
                    header: None,
                    lines: Vec::new(),
                    cursor: Cursor::default(),
                    has_more_before: false,
                });
            }
            return Err(WindowError::NotFound(self.path.clone()));
        };
        if meta.size == 0 {
            // An empty file (made by hand, or cut off before its header): no header yet, as a
            // new chat has none, so the app writes its own; its cursor is the file's.
            return Ok(ChatTail {
                header: None,
                lines: Vec::new(),
                cursor: cursor_at(0, &state),
                has_more_before: false,
            });
        }
        let (header, body_start) = read_header(self.store, &self.path, meta.size).await?;
        let (start, lines) =
            lines_before(self.store, &self.path, body_start, meta.size, max_lines).await?;
        Ok(ChatTail {
            header: Some(header),
            lines,
            cursor: cursor_at(start, &state),
            has_more_before: start > body_start,
        })
    }

    /// Up to `max_lines` message lines just before the cursor, and the cursor where they start.
    pub async fn before(&self, cursor: Cursor, max_lines: usize) -> Result<ChatChunk> {
        Ok(self
            .before_pages(cursor, max_lines, 1)
            .await?
            .pop()
            .expect("one page"))
    }

    /// Up to `max_pages` pages of `max_lines` lines going backwards from the cursor, newest page
    /// first, in one call: what `before` would return called again with each page's cursor.
    /// Stops early at the start of the chat (the last page then has `has_more_before` false).
    pub async fn before_pages(
        &self,
        cursor: Cursor,
        max_lines: usize,
        max_pages: usize,
    ) -> Result<Vec<ChatChunk>> {
        positive("max_lines", max_lines)?;
        positive("max_pages", max_pages)?;
        let _guard = self.lock.lock().await;
        let checked = self.check(cursor).await?;
        let mut pages = Vec::new();
        let mut end = cursor.offset;
        while pages.len() < max_pages {
            let (start, lines) =
                lines_before(self.store, &self.path, checked.body_start, end, max_lines).await?;
            let has_more_before = start > checked.body_start;
            pages.push(ChatChunk {
                lines,
                cursor: cursor_at(start, &checked.state),
                has_more_before,
            });
            end = start;
            if !has_more_before {
                break;
            }
        }
        Ok(pages)
    }

    /// Checks that `cursor` still fits the chat (signature, bounds, body, line boundary: the
    /// checks every cursor operation makes) without reading any line. The prompt backfill asks
    /// this before it serves pages from its cache.
    pub async fn verify(&self, cursor: Cursor) -> Result<()> {
        let _guard = self.lock.lock().await;
        self.check(cursor).await.map(|_| ())
    }

    /// Windowed save: keeps the bytes before `cursor.offset`, writes `header` and replaces
    /// everything from the cursor on with `lines` (the caller's whole window). Returns the new
    /// cursor (same offset, shifted only if the header's length changed).
    ///
    /// On a missing chat (cursor [`Cursor::default()`]) it creates the chat.
    pub async fn save(
        &self,
        cursor: Cursor,
        header: &str,
        lines: &[String],
        options: WriteOptions,
    ) -> Result<Cursor> {
        self.write(cursor, header, Cut::Window, lines, options)
            .await
    }

    /// Windowed patch: [`PatchOp::Append`] adds lines at the end, [`PatchOp::RewriteFromIndex`]
    /// replaces the window from its `start_index`-th line on. Returns the new cursor.
    pub async fn patch(
        &self,
        cursor: Cursor,
        header: &str,
        op: &PatchOp,
        options: WriteOptions,
    ) -> Result<Cursor> {
        match op {
            PatchOp::Append { lines } => self.write(cursor, header, Cut::End, lines, options).await,
            PatchOp::RewriteFromIndex { start_index, lines } => {
                self.write(cursor, header, Cut::Line(*start_index), lines, options)
                    .await
            }
        }
    }

    /// Full save: replaces the whole chat with `header` and `lines`, whatever lines are on disk
    /// (the fallback for a caller that holds the whole chat). It takes no cursor, so the only
    /// check is integrity, unless `options.force`: a full save meant for another chat (its
    /// header's `chat_metadata.integrity` differs from the one on disk) is refused as a
    /// windowed write is. A baseline (`expected_window_line_count`) means nothing without a
    /// window, and is refused. It changes the signature like any write, so every window read
    /// before it is refused afterwards. Returns the cursor of a window holding all of `lines`.
    pub async fn replace(
        &self,
        header: &str,
        lines: &[String],
        options: WriteOptions,
    ) -> Result<Cursor> {
        validate(header, lines)?;
        if options.expected_window_line_count.is_some() {
            return Err(WindowError::InvalidArgument(
                "a full save has no window: expectedWindowLineCount is for save and patch".into(),
            ));
        }
        let _guard = self.lock.lock().await;
        let state = self.current().await?;
        let checked = match state.meta.filter(|m| m.size > 0) {
            None => Checked {
                state,
                header: None,
                body_start: 0,
            },
            Some(meta) => {
                let (h, body_start) = read_header(self.store, &self.path, meta.size).await?;
                Checked {
                    state,
                    header: Some(h),
                    body_start,
                }
            }
        };
        check_integrity(checked.header.as_deref(), header, options.force)?;
        let from = checked.body_start;
        self.apply(&checked, from, from, header, lines, true).await
    }

    /// Undoes the last write of the window layer: puts back the bytes it replaced (kept in the
    /// chat's backup blob, `<chat>.bak`). Refused with [`WindowError::NotFound`] when there is
    /// no backup of the chat's current state (no write yet, already restored, or the file
    /// changed since by another hand). Every cursor is stale afterwards: reload the tail. A
    /// restore cut off midway is finished by the next call on the chat.
    pub async fn restore_backup(&self) -> Result<()> {
        let _guard = self.lock.lock().await;
        let state = self.current().await?;
        let no_backup =
            || WindowError::NotFound(format!("backup of the current state of {}", self.path));
        let Some(backup) = self.backup().await?.filter(|_| state.backup) else {
            return Err(no_backup());
        };
        signature::undo_ready(self.store, &self.sig, state.stamp + 1).await?;
        self.put_back_from(backup).await?;
        signature::finish_write(self.store, &self.path, &self.sig, &state, false).await?;
        Ok(())
    }

    /// The chat's current state, a write cut off after its backup was complete (a crash, a
    /// closed tab, a full disk) put back first: no call ever reads a half-written chat.
    async fn current(&self) -> Result<State> {
        let state = signature::current(self.store, &self.path, &self.sig).await?;
        if !state.cut_off {
            return Ok(state);
        }
        log::warn!(
            "{}: a write was cut off; putting back its backup",
            self.path
        );
        self.put_back().await?;
        signature::put_back_done(self.store, &self.path, &self.sig, state.stamp).await
    }

    /// The backup: where its bytes go (its record's `cut`), and where its body starts and
    /// ends in the backup blob; `None` when there is no whole backup.
    async fn backup(&self) -> Result<Option<Backup>> {
        let Some(bak) = self.store.stat(&self.bak).await? else {
            return Ok(None);
        };
        let (record, body) = read_header(self.store, &self.bak, bak.size).await?;
        Ok(serde_json::from_str::<BackupRecord>(&record)
            .ok()
            .map(|r| Backup {
                cut: r.cut,
                body,
                end: bak.size,
            }))
    }

    /// Cuts the chat where the backup's bytes were taken from and puts them back
    /// ([`ChatFile::put_back_from`]).
    async fn put_back(&self) -> Result<()> {
        match self.backup().await? {
            Some(backup) => self.put_back_from(backup).await,
            None => Err(WindowError::NotFound(format!("backup of {}", self.path))),
        }
    }

    /// Cuts the chat at `backup`'s cut and puts its bytes back. Done again from the start, it
    /// gives the same bytes: so a put-back cut off is finished by the next.
    async fn put_back_from(&self, Backup { cut, body, end }: Backup) -> Result<()> {
        if cut == 0 {
            self.store.write(&self.path, b"").await?;
        } else {
            self.store.truncate(&self.path, cut).await?;
        }
        copy(self.store, &self.bak, body, end, &self.path).await
    }

    /// Deletes the chat, with its signature and backup (so it cannot be restored); answers
    /// whether there was a chat. Every cursor of it is stale afterwards: a save from
    /// [`Cursor::default()`] starts it again.
    pub async fn delete(&self) -> Result<bool> {
        let _guard = self.lock.lock().await;
        let existed = self.store.stat(&self.path).await?.is_some();
        // The chat first: a delete cut off midway leaves at worst a signature or a backup with
        // no chat, which the next write replaces and no restore takes (no chat, no state).
        for blob in [&self.path, &self.sig, &self.bak, &self.tmp] {
            self.store.remove(blob).await?;
        }
        Ok(existed)
    }

    /// The checks every cursor operation makes: signature, bounds, body, line boundary.
    async fn check(&self, cursor: Cursor) -> Result<Checked> {
        let state = self.current().await?;
        let size = state.size();
        if (cursor.size, cursor.modified_millis) != (size, state.stamp) {
            return Err(WindowError::SignatureMismatch {
                cursor,
                size,
                modified_millis: state.stamp,
            });
        }
        if cursor.offset > size {
            return Err(WindowError::OffsetOutOfBounds {
                offset: cursor.offset,
                size,
            });
        }
        if size == 0 {
            // No chat, or an empty file: no header, nothing to keep.
            return Ok(Checked {
                state,
                header: None,
                body_start: 0,
            });
        }
        let (header, body_start) = read_header(self.store, &self.path, size).await?;
        if cursor.offset < body_start {
            return Err(WindowError::OffsetBeforeBody {
                offset: cursor.offset,
                body_start,
            });
        }
        if !is_line_boundary(self.store, &self.path, cursor.offset, body_start, size).await? {
            return Err(WindowError::NotAtLineBoundary {
                offset: cursor.offset,
            });
        }
        Ok(Checked {
            state,
            header: Some(header),
            body_start,
        })
    }

    async fn write(
        &self,
        cursor: Cursor,
        header: &str,
        cut: Cut,
        lines: &[String],
        options: WriteOptions,
    ) -> Result<Cursor> {
        validate(header, lines)?;
        let _guard = self.lock.lock().await;
        let checked = self.check(cursor).await?;
        check_integrity(checked.header.as_deref(), header, options.force)?;
        let size = checked.state.size();
        let needs_starts =
            options.expected_window_line_count.is_some() || matches!(cut, Cut::Line(i) if i > 0);
        let starts = if needs_starts {
            line_starts(self.store, &self.path, cursor.offset, size).await?
        } else {
            Vec::new()
        };
        if let Some(expected) = options.expected_window_line_count {
            if expected != starts.len() {
                return Err(WindowError::WindowBaselineMismatch {
                    expected,
                    actual: starts.len(),
                });
            }
        }
        let at = match cut {
            Cut::Window | Cut::Line(0) => cursor.offset,
            Cut::End => size,
            Cut::Line(i) if i == starts.len() => size,
            Cut::Line(i) => *starts.get(i).ok_or(WindowError::StartIndexOutOfBounds {
                start_index: i,
                window_lines: starts.len(),
            })?,
        };
        let rewrite = checked
            .header
            .as_deref()
            .is_none_or(|h| !same_header(h, header));
        self.apply(&checked, cursor.offset, at, header, lines, rewrite)
            .await
    }

    /// Replaces everything from `at` (a line boundary at or after the body start) with `lines`,
    /// writing `header`: in place when the header is unchanged (truncate and append, O(lines)),
    /// otherwise by rewriting the file through a temporary blob (O(file)). Keeps a backup of what
    /// it replaces, and returns the cursor of the window that started at `offset`.
    async fn apply(
        &self,
        checked: &Checked,
        offset: u64,
        at: u64,
        header: &str,
        lines: &[String],
        rewrite: bool,
    ) -> Result<Cursor> {
        let (store, path) = (self.store, self.path.as_str());
        let size = checked.state.size();
        let exists = checked.state.meta.is_some();
        // A last line without its newline gets one before anything is written after it.
        let needs_newline = exists
            && !lines.is_empty()
            && at == size
            && (!rewrite || at > checked.body_start)
            && !ends_with_newline(store, path, size).await?;
        let mut body = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum::<usize>() + 1);
        if needs_newline {
            body.push(b'\n');
        }
        for line in lines {
            body.extend_from_slice(line.as_bytes());
            body.push(b'\n');
        }

        // Marked under way (and without a backup) before the backup is overwritten: a backup
        // cut off midway (a full disk, a crash) is then never taken for the last write's undo,
        // which would cut the chat and put back a part of it.
        signature::begin_write(store, &self.sig, &checked.state).await?;
        if exists {
            let from = if rewrite { 0 } else { at };
            let record = serde_json::to_string(&BackupRecord { cut: from }).expect("serializes");
            store
                .write(&self.bak, format!("{record}\n").as_bytes())
                .await?;
            copy(store, path, from, size, &self.bak).await?;
            signature::let_go(store, &self.bak).await?;
            // From here on a write cut off is put back: now, or by the next call.
            signature::undo_ready(store, &self.sig, checked.state.stamp).await?;
        }
        let mut touched = false;
        let written = async {
            if rewrite {
                store
                    .write(&self.tmp, format!("{header}\n").as_bytes())
                    .await?;
                copy(store, path, checked.body_start, at, &self.tmp).await?;
                store.append(&self.tmp, &body).await?;
                touched = true;
                store.rename(&self.tmp, path).await?;
                Ok(header.len() as u64 + 1 + (offset - checked.body_start))
            } else {
                touched = true;
                if at < size {
                    store.truncate(path, at).await?;
                }
                if !body.is_empty() {
                    store.append(path, &body).await?;
                }
                Ok(offset)
            }
        };
        let new_offset = match written.await {
            Ok(new_offset) => new_offset,
            Err(e) if exists => {
                // A failed write changes nothing: the chat as it was, its cursors good again
                // (the same bytes keep their stamp). Should that fail too, the next call does it.
                let put_back = async {
                    if touched {
                        self.put_back().await?;
                    }
                    signature::put_back_done(store, path, &self.sig, checked.state.stamp).await
                };
                if let Err(again) = put_back.await {
                    log::warn!("{path}: a failed write is not put back yet ({again})");
                }
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        let new_offset = new_offset + u64::from(needs_newline && offset == at);
        let state = signature::finish_write(store, path, &self.sig, &checked.state, exists).await?;
        Ok(cursor_at(new_offset, &state))
    }
}

/// Where a write cuts the file.
#[derive(Clone, Copy)]
enum Cut {
    /// At the cursor: the whole window is replaced.
    Window,
    /// At the end: an append.
    End,
    /// At the window's n-th line.
    Line(usize),
}

/// A whole backup, as [`ChatFile::backup`] finds it.
struct Backup {
    /// Where its bytes go in the chat.
    cut: u64,
    /// Where they start and end in the backup blob.
    body: u64,
    end: u64,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct BackupRecord {
    /// The replaced bytes started here; the backup's body is them.
    cut: u64,
}

fn cursor_at(offset: u64, state: &State) -> Cursor {
    Cursor {
        offset,
        size: state.size(),
        modified_millis: state.stamp,
    }
}

/// The integrity check every write makes unless forced: when both the header on disk and the
/// one written carry `chat_metadata.integrity`, they are the same chat's.
fn check_integrity(on_disk: Option<&str>, header: &str, force: bool) -> Result<()> {
    let Some(on_disk) = on_disk.filter(|_| !force) else {
        return Ok(());
    };
    if let (Some(on_disk), Some(incoming)) = (integrity(on_disk), integrity(header)) {
        if on_disk != incoming {
            return Err(WindowError::IntegrityMismatch { on_disk, incoming });
        }
    }
    Ok(())
}

fn positive(name: &str, n: usize) -> Result<()> {
    if n == 0 {
        return Err(WindowError::InvalidArgument(format!(
            "{name} must be at least 1"
        )));
    }
    Ok(())
}

/// A header must be one line holding a JSON object; a message line must be one line.
fn validate(header: &str, lines: &[String]) -> Result<()> {
    if header.contains('\n') || !parse_json::<Value>(header).is_ok_and(|v| v.is_object()) {
        return Err(WindowError::InvalidLine(
            "the header must be one line holding a JSON object".into(),
        ));
    }
    if let Some(i) = lines.iter().position(|l| l.contains('\n')) {
        return Err(WindowError::InvalidLine(format!(
            "message line {i} contains a newline"
        )));
    }
    Ok(())
}

/// Whether two headers say the same (as JSON values; byte equality for a header on disk that
/// is not JSON).
fn same_header(on_disk: &str, incoming: &str) -> bool {
    match (parse_json::<Value>(on_disk), parse_json::<Value>(incoming)) {
        (Ok(a), Ok(b)) => a == b,
        _ => on_disk == incoming,
    }
}

/// The chat's identity slug, `chat_metadata.integrity`, as the seed app writes it.
fn integrity(header: &str) -> Option<String> {
    let v: Value = parse_json(header).ok()?;
    v.get("chat_metadata")?
        .get("integrity")?
        .as_str()
        .map(str::to_string)
}

/// Appends the bytes `[from, to)` of one blob to another, a block at a time.
async fn copy<S: Store>(store: &S, src: &str, from: u64, to: u64, dst: &str) -> Result<()> {
    let mut pos = from;
    while pos < to {
        let block = store
            .read(src, pos, COPY_BLOCK.min((to - pos) as usize))
            .await?;
        if block.is_empty() {
            return Err(crate::store::StoreError::Io(format!("{src} ended early")).into());
        }
        store.append(dst, &block).await?;
        pos += block.len() as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[test]
    fn spellings_of_one_file_share_one_lock() {
        let chats = Chats::new(MemoryStore::new());
        let a = chats.chat("chats/Notes.jsonl").unwrap();
        let b = chats.chat("chats/notes.jsonl").unwrap();
        let c = chats.chat("chats/other.jsonl").unwrap();
        assert!(Arc::ptr_eq(&a.lock, &b.lock));
        assert!(!Arc::ptr_eq(&a.lock, &c.lock));
        // A name composed and decomposed (as macOS writes it): one file there, one lock.
        let d = chats.chat("chats/Caf\u{e9}.jsonl").unwrap();
        let e = chats.chat("chats/cafe\u{301}.jsonl").unwrap();
        assert!(Arc::ptr_eq(&d.lock, &e.lock));
    }
}
