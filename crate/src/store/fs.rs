//! A native filesystem store: blobs are files below a root folder (for a Tauri backend and the
//! CLI). Not compiled for wasm.
//!
//! Every path is checked with [`segments`] and joined segment by segment below the root, so no
//! path can escape it. Appends open the file in append mode (O(bytes)); whole-blob writes go to
//! a temporary file beside the target and are renamed over it, so a reader sees the old blob or
//! the new one, never half of one (a temporary file a crash left behind is removed by the
//! next [`Store::list`] of its folder once it is ten minutes old). Stamps are the files'
//! modification times in milliseconds.
//!
//! Durability: a whole-blob write syncs its temporary file before the rename and (on Unix) the
//! folder after it, so a write that returned survives a crash or a power cut as the old blob or
//! the new one. Appends and cuts are not synced one by one (live streaming appends one line at
//! a time): the files they changed are noted, and [`Store::flush`] syncs them, with the folders
//! a rename changed.
//!
//! The operations are plain blocking `std::fs` calls inside `async fn`s: each is one short
//! system call or a few, and the cache above awaits them one at a time.

use super::{portable, segments, Entry, Meta, Store, StoreError, StoreResult};
use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::UNIX_EPOCH;

/// How a temporary file's name begins (a hidden file); [`Store::list`] never shows such files,
/// so names beginning with it are reserved.
const TMP_PREFIX: &str = ".~scrollback-tmp.";

/// How old a temporary file must be before [`Store::list`] takes it for one a crash left
/// behind and removes it. A write holds its temporary file for the few system calls of one
/// `write`: anything this old is abandoned, whichever process named it.
const ABANDONED_TMP: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Blobs as files below a root folder.
#[derive(Debug)]
pub struct FsStore {
    root: PathBuf,
    tmp_counter: AtomicU64,
    /// What the next [`Store::flush`] syncs.
    unsynced: Mutex<Unsynced>,
}

/// What changed since the last [`Store::flush`] and is not on disk for sure yet.
#[derive(Debug, Default)]
struct Unsynced {
    /// Files appended to or cut (by their current name: a rename carries the note over).
    files: HashSet<PathBuf>,
    /// Folders whose entries changed: a rename, a file an append created, a whole write's
    /// rename whose folder sync failed.
    dirs: HashSet<PathBuf>,
}

impl FsStore {
    /// A store over `root`, created on first write if it does not exist.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            tmp_counter: AtomicU64::new(0),
            unsynced: Mutex::default(),
        }
    }

    /// The notes of what the next flush syncs (a panic elsewhere while they were held left
    /// them whole: each change is one insert or remove).
    fn unsynced(&self) -> MutexGuard<'_, Unsynced> {
        self.unsynced.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Syncs each of `paths` with `sync`; those whose sync failed, with their errors (one
    /// removed since is not a failure: nothing of it is left to keep).
    fn sync_each(
        &self,
        paths: HashSet<PathBuf>,
        sync: fn(&Path) -> io::Result<()>,
    ) -> Vec<(PathBuf, StoreError)> {
        let mut failed = Vec::new();
        for path in paths {
            match sync(&path) {
                Err(e) if e.kind() != ErrorKind::NotFound => {
                    let name = path.strip_prefix(&self.root).unwrap_or(&path);
                    let e = err(&name.to_string_lossy(), e);
                    failed.push((path, e));
                }
                _ => {}
            }
        }
        failed
    }

    /// Notes that the folder holding `file` changed, for the next flush.
    fn dir_changed(&self, file: &Path) {
        if let Some(dir) = file.parent() {
            self.unsynced().dirs.insert(dir.to_path_buf());
        }
    }

    /// The root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file path of a checked store path. Beyond [`segments`], every segment must be a
    /// portable file name ([`portable`]) on every OS, so a path means the same file everywhere
    /// and none can reach outside the root on Windows (`C:` as a segment replaces the root).
    fn resolve(&self, path: &str) -> StoreResult<PathBuf> {
        let mut p = self.root.clone();
        for seg in segments(path)? {
            if !portable(seg) {
                return Err(StoreError::InvalidPath(path.to_string()));
            }
            p.push(seg);
        }
        Ok(p)
    }
}

/// Maps an I/O error to a store error, naming the store path.
fn err(path: &str, e: io::Error) -> StoreError {
    match e.kind() {
        ErrorKind::NotFound => StoreError::NotFound(path.to_string()),
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded => StoreError::QuotaExceeded,
        _ => StoreError::Io(format!("{path}: {e}")),
    }
}

/// Milliseconds since the epoch of a file's modification time (0 when the platform has none).
fn stamp(meta: &fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

/// Makes a folder's entries durable (a file created, renamed or replaced in it). Unix only:
/// opening a folder as a file, to sync it, fails on Windows.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Makes a file's bytes and size durable. Opened for writing: Windows flushes only a file
/// opened so.
fn sync_file(file: &Path) -> io::Result<()> {
    OpenOptions::new().write(true).open(file)?.sync_all()
}

fn create_parent(file: &Path) -> io::Result<()> {
    match file.parent() {
        Some(dir) => fs::create_dir_all(dir),
        None => Ok(()),
    }
}

impl Store for FsStore {
    async fn list(&self, dir: &str) -> StoreResult<Vec<Entry>> {
        let p = self.resolve(dir)?;
        let entries = match fs::read_dir(&p) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound || e.kind() == ErrorKind::NotADirectory => {
                return Ok(Vec::new())
            }
            Err(e) => return Err(err(dir, e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| err(dir, e))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue; // not written by a store
            };
            if name.starts_with(TMP_PREFIX) {
                // Never listed; removed once abandoned (a crash between its write and its
                // rename), or it would hold disk space that no budget counts, for good.
                let abandoned = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > ABANDONED_TMP);
                if abandoned {
                    let _ = fs::remove_file(entry.path());
                }
                continue;
            }
            let meta = match entry.metadata() {
                Ok(meta) => meta,
                Err(e) if e.kind() == ErrorKind::NotFound => continue, // removed meanwhile
                Err(e) => return Err(err(dir, e)),
            };
            out.push(if meta.is_dir() {
                Entry {
                    name,
                    is_dir: true,
                    size: 0,
                    modified: 0,
                }
            } else {
                Entry {
                    name,
                    is_dir: false,
                    size: meta.len(),
                    modified: stamp(&meta),
                }
            });
        }
        Ok(out)
    }

    async fn stat(&self, path: &str) -> StoreResult<Option<Meta>> {
        let p = self.resolve(path)?;
        match fs::metadata(&p) {
            Ok(meta) if meta.is_file() => Ok(Some(Meta {
                size: meta.len(),
                modified: stamp(&meta),
            })),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == ErrorKind::NotFound || e.kind() == ErrorKind::NotADirectory => {
                Ok(None)
            }
            Err(e) => Err(err(path, e)),
        }
    }

    async fn read(&self, path: &str, offset: u64, len: usize) -> StoreResult<Vec<u8>> {
        let p = self.resolve(path)?;
        let mut file = File::open(&p).map_err(|e| err(path, e))?;
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| err(path, e))?;
        let mut out = Vec::with_capacity(len.min(1 << 20));
        file.take(len as u64)
            .read_to_end(&mut out)
            .map_err(|e| err(path, e))?;
        Ok(out)
    }

    async fn write(&self, path: &str, bytes: &[u8]) -> StoreResult<()> {
        let p = self.resolve(path)?;
        create_parent(&p).map_err(|e| err(path, e))?;
        let n = self.tmp_counter.fetch_add(1, Ordering::Relaxed);
        let mut tmp_name =
            std::ffi::OsString::from(format!("{TMP_PREFIX}{}.{n}.", std::process::id()));
        tmp_name.push(p.file_name().unwrap_or_default());
        let tmp = p.with_file_name(tmp_name);
        // Synced before the rename: renamed first, a crash could leave the new name on a file
        // whose bytes never reached the disk (an empty or zero-filled blob).
        let result = File::create(&tmp)
            .and_then(|mut f| {
                f.write_all(bytes)?;
                f.sync_all()
            })
            .and_then(|()| fs::rename(&tmp, &p));
        if let Err(e) = result {
            let _ = fs::remove_file(&tmp);
            return Err(err(path, e));
        }
        // The rename itself is durable once its folder is. Should that sync fail, the write
        // did happen: the next flush tries again and reports it.
        if let Some(dir) = p.parent() {
            if let Err(e) = sync_dir(dir) {
                log::info!("scrollback: {path}: syncing its folder failed ({e}), left to flush");
                self.dir_changed(&p);
            }
        }
        Ok(())
    }

    async fn append(&self, path: &str, bytes: &[u8]) -> StoreResult<u64> {
        let p = self.resolve(path)?;
        let open = || OpenOptions::new().append(true).create(true).open(&p);
        let mut file = match open() {
            Err(e) if e.kind() == ErrorKind::NotFound => {
                create_parent(&p).map_err(|e| err(path, e))?;
                open()
            }
            other => other,
        }
        .map_err(|e| err(path, e))?;
        let before = file.metadata().map_err(|e| err(path, e))?.len();
        if let Err(e) = file.write_all(bytes) {
            // Leave no partial line behind when the disk fills up mid-write.
            let _ = file.set_len(before);
            return Err(err(path, e));
        }
        // Synced at the next flush, not here: one sync per streamed line would cost more
        // than the line's write.
        if before == 0 {
            self.dir_changed(&p); // perhaps created: its folder's entry too
        }
        self.unsynced().files.insert(p);
        Ok(before + bytes.len() as u64)
    }

    async fn truncate(&self, path: &str, len: u64) -> StoreResult<()> {
        let p = self.resolve(path)?;
        let file = OpenOptions::new()
            .write(true)
            .open(&p)
            .map_err(|e| err(path, e))?;
        // A cut only: `set_len` past the end would grow the blob with zeros.
        let size = file.metadata().map_err(|e| err(path, e))?.len();
        if len >= size {
            return Ok(());
        }
        file.set_len(len).map_err(|e| err(path, e))?;
        self.unsynced().files.insert(p);
        Ok(())
    }

    async fn rename(&self, from: &str, to: &str) -> StoreResult<()> {
        let (f, t) = (self.resolve(from)?, self.resolve(to)?);
        if !f.is_file() {
            return Err(StoreError::NotFound(from.to_string()));
        }
        create_parent(&t).map_err(|e| err(to, e))?;
        fs::rename(&f, &t).map_err(|e| err(from, e))?;
        // What was appended under the old name is synced under the new one (a chat's rewrite
        // appends to a temporary file, then renames it over the chat), with the folders.
        let mut unsynced = self.unsynced();
        if unsynced.files.remove(&f) {
            unsynced.files.insert(t.clone());
        }
        drop(unsynced);
        self.dir_changed(&f);
        self.dir_changed(&t);
        Ok(())
    }

    async fn remove(&self, path: &str) -> StoreResult<()> {
        let p = self.resolve(path)?;
        let result = match fs::symlink_metadata(&p) {
            Ok(meta) if meta.is_dir() => fs::remove_dir_all(&p),
            Ok(_) => fs::remove_file(&p),
            Err(e) => Err(e),
        };
        match result {
            Err(e) if e.kind() != ErrorKind::NotFound && e.kind() != ErrorKind::NotADirectory => {
                Err(err(path, e))
            }
            _ => Ok(()),
        }
    }

    /// Syncs the files appended to or cut since the last flush, then the folders whose entries
    /// changed. A file or folder removed since is skipped (nothing of it to keep); one whose
    /// sync fails stays noted for the next flush, and the first failure is reported.
    async fn flush(&self) -> StoreResult<()> {
        let Unsynced { files, dirs } = std::mem::take(&mut *self.unsynced());
        let failed_files = self.sync_each(files, sync_file);
        let failed_dirs = self.sync_each(dirs, sync_dir);
        // What failed is noted again, for the next flush to try.
        let mut unsynced = self.unsynced();
        let mut first_error = None;
        for (path, e) in failed_files {
            unsynced.files.insert(path);
            first_error.get_or_insert(e);
        }
        for (path, e) in failed_dirs {
            unsynced.dirs.insert(path);
            first_error.get_or_insert(e);
        }
        first_error.map_or(Ok(()), Err)
    }
}
