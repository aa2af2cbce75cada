//! Sessions on disk: ids (hostile until checked), their paths under the data directory, and
//! the session list's summaries, cached per file so listing does not re-read transcripts.

use crate::transcript::reader::tail_before;
use crate::transcript::{reader, torn, FileId};
use scrollback_protocol::{EventKind, Line, SessionSummary};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// The transcript's file name inside a session's folder.
pub const TRANSCRIPT: &str = "transcript.jsonl";
/// An optional metadata file inside a session's folder: `{"title": "..."}`.
pub const META: &str = "meta.json";
pub use scrollback_protocol::MAX_ID_LEN;

/// Checks a session id: the protocol's one rule ([`scrollback_protocol::check_session_id`]),
/// shared with the client, so every id accepted here is one a client can cache.
pub fn check_id(id: &str) -> Result<(), String> {
    scrollback_protocol::check_session_id(id)
}

/// A session's folder (the id must have passed [`check_id`]).
pub fn dir(data: &Path, id: &str) -> PathBuf {
    debug_assert!(check_id(id).is_ok());
    data.join(id)
}

/// A session's transcript file (the id must have passed [`check_id`]).
pub fn transcript_path(data: &Path, id: &str) -> PathBuf {
    dir(data, id).join(TRANSCRIPT)
}

/// The session list's summaries, cached per transcript file.
///
/// An entry is kept with the file's identity, length and modification time. A file that only
/// grew is brought up to date by reading just the new lines; a replaced or changed one is read
/// again (backwards from the end for status and settings, forwards from the start for the title):
/// see `read_into`, which holds at most [`SUMMARY_LINE_BYTES`] of any line.
#[derive(Default)]
pub struct Summaries {
    cache: Mutex<HashMap<String, Cached>>,
}

#[derive(Clone)]
struct Cached {
    file: FileId,
    len: u64,
    modified: Option<SystemTime>,
    meta_modified: Option<SystemTime>,
    /// End of the complete lines read.
    end: u64,
    /// The bytes just before `end` (at most [`reader::TAIL_BYTES`]): a file that grew is taken as
    /// appended to only while it still holds them (a file rewritten in place and longer is
    /// read again).
    tail: Vec<u8>,
    summary: SessionSummary,
    /// Whether the title came from the transcript (it may still be found in new lines).
    titled: bool,
}

/// The longest title, in characters, before it is shortened with `…`.
const TITLE_CHARS: usize = 60;
/// How far forward the title is looked for.
const TITLE_SCAN_BYTES: u64 = 1 << 20;

fn shorten(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let flat = words.join(" ");
    if flat.chars().count() <= TITLE_CHARS {
        return flat;
    }
    let mut cut: String = flat.chars().take(TITLE_CHARS - 1).collect();
    // Cut between words when the cut lands in one (and a word boundary is near).
    if let Some(space) = cut.rfind(' ').filter(|&i| i > cut.len() / 2) {
        cut.truncate(space);
    }
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

/// The most of `meta.json` read: a title is short, and a larger file is not a title's.
const META_BYTES: u64 = 64 << 10;

fn meta_title(dir: &Path) -> Option<String> {
    let file = crate::transcript::open_regular(&dir.join(META)).ok()?;
    let mut text = Vec::new();
    file.take(META_BYTES + 1).read_to_end(&mut text).ok()?;
    if text.len() as u64 > META_BYTES {
        return None;
    }
    let value: Value = serde_json::from_slice(&text).ok()?;
    let title = value.get("title")?.as_str()?;
    let title = shorten(title);
    (!title.is_empty()).then_some(title)
}

/// The longest line the summary reads whole. Status and settings come from lines at most this
/// long; a longer line (a large tool result, a long message) is skipped for them, and only its
/// head is read for its seq ([`Line::seq_of_head`]): listing sessions holds at most about this
/// much of any line, however long the lines in the files. An append's look at the newest seq
/// reads the same way ([`crate::transcript::newest_seq`]).
pub const SUMMARY_LINE_BYTES: usize = 64 << 10;

/// Sets the summary's status or settings from a status or settings line (the fields it has).
fn apply_fields(summary: &mut SessionSummary, line: &Line) {
    let event = line.event();
    let text = |k: &str| event.get(k).and_then(Value::as_str).map(str::to_owned);
    match line.kind() {
        EventKind::Status => {
            if let Some(s) = text("status") {
                summary.status = s;
            }
        }
        EventKind::Settings => {
            if let Some(m) = text("model") {
                summary.model = m;
            }
            if let Some(p) = text("permissionMode") {
                summary.permission_mode = p;
            }
        }
        _ => {}
    }
}

fn fresh(id: &str) -> SessionSummary {
    SessionSummary {
        id: id.to_owned(),
        title: String::new(),
        status: "idle".into(),
        model: String::new(),
        permission_mode: String::new(),
        seq: 0,
    }
}

/// Brings a summary up to date with the complete lines in `[from, end)` (line boundaries), as
/// if they followed the lines it was read from: the title forwards (the first user message, in
/// lines that end within the file's first [`TITLE_SCAN_BYTES`]), the newest seq, status and
/// settings backwards from `end`, up to the newest status line and settings line.
///
/// Bounded per line: a line longer than [`SUMMARY_LINE_BYTES`] is not read whole (it is
/// scanned for its start, one block held at a time). Its seq is read from its head, as the
/// server writes lines (`{"seq":N,...`, [`Line::seq_of_head`]); such a line that does not open
/// with its seq is skipped like an unreadable one. It never gives the status or settings.
fn read_into<F: Read + Seek>(
    path: &Path,
    file: &mut F,
    from: u64,
    end: u64,
    summary: &mut SessionSummary,
    titled: &mut bool,
) -> io::Result<()> {
    let scan_end = end.min(TITLE_SCAN_BYTES);
    let mut at = from;
    while at < scan_end && !*titled {
        let Some((bytes, next)) = reader::line_at(file, at, scan_end)? else {
            break;
        };
        if let Some(line) = reader::parse(path, at, &bytes) {
            if line.kind() == EventKind::UserMessage {
                if let Some(t) = line.text().map(shorten).filter(|t| !t.is_empty()) {
                    summary.title = t;
                    *titled = true;
                }
            }
        }
        at = next;
    }
    // A settings line may name one field: the newest line naming the model and the newest
    // naming the mode are looked for apart (the client's fold keeps each one the same way).
    let (mut status, mut settings, mut newest) = (None, Vec::new(), None);
    let (mut model, mut mode) = (false, false);
    let mut lines = reader::BackLines::bounded(file, from, end, SUMMARY_LINE_BYTES);
    while let Some(found) = lines.next_found()? {
        if found.skipped > 0 {
            if newest.is_none() {
                newest = Line::seq_of_head(&found.bytes);
            }
            continue;
        }
        let Some(line) = reader::parse(path, found.offset, &found.bytes) else {
            continue;
        };
        newest.get_or_insert(line.seq());
        match line.kind() {
            EventKind::Status if status.is_none() => status = Some(line),
            EventKind::Settings => {
                let names = |k: &str| line.event().get(k).is_some_and(Value::is_string);
                let (m, p) = (names("model"), names("permissionMode"));
                if (m && !model) || (p && !mode) {
                    (model, mode) = (model || m, mode || p);
                    settings.push(line);
                }
            }
            _ => {}
        }
        if status.is_some() && model && mode {
            break;
        }
    }
    if let Some(seq) = newest {
        summary.seq = seq;
    }
    // Oldest first, so that the newest line naming a field gives it.
    for line in settings.iter().rev().chain(status.iter()) {
        apply_fields(summary, line);
    }
    Ok(())
}

impl Summaries {
    /// Every session in `data` (folders holding a transcript), most recently changed first.
    pub fn list(&self, data: &Path) -> io::Result<Vec<SessionSummary>> {
        let mut found = Vec::new();
        let entries = match std::fs::read_dir(data) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        for entry in entries.flatten() {
            let Some(id) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if check_id(&id).is_err() {
                continue;
            }
            match self.summary(data, &id) {
                Ok(Some((summary, modified))) => found.push((modified, summary)),
                Ok(None) => {}
                Err(e) => eprintln!("scrollback-server: cannot read session {id:?}: {e}"),
            }
        }
        found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
        let ids: HashSet<&str> = found.iter().map(|(_, s)| s.id.as_str()).collect();
        self.lock().retain(|id, _| ids.contains(id.as_str()));
        Ok(found.into_iter().map(|(_, s)| s).collect())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cached>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One session's summary and its file's modification time; `None` when it has no transcript.
    pub fn summary(
        &self,
        data: &Path,
        id: &str,
    ) -> io::Result<Option<(SessionSummary, Option<SystemTime>)>> {
        let dir = dir(data, id);
        let path = dir.join(TRANSCRIPT);
        let mut file = match crate::transcript::open_regular(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        let (file_id, len, modified) = (FileId::of(&meta), meta.len(), meta.modified().ok());
        let meta_modified = std::fs::metadata(dir.join(META))
            .and_then(|m| m.modified())
            .ok();
        let cached = self.lock().get(id).cloned();
        let unchanged = |c: &Cached| c.file == file_id && c.meta_modified == meta_modified;
        let entry = match cached {
            Some(c) if unchanged(&c) && c.len == len && c.modified == modified => c,
            Some(mut c)
                if unchanged(&c)
                    && c.len < len
                    && tail_before(&mut file, c.end).is_ok_and(|t| t == c.tail) =>
            {
                // Appended to: read only what is new.
                let end = torn::complete_end_of(&mut file, &meta)?;
                read_into(&path, &mut file, c.end, end, &mut c.summary, &mut c.titled)?;
                c.tail = tail_before(&mut file, end)?;
                c.end = end;
                c.len = len;
                c.modified = modified;
                c
            }
            _ => {
                let end = torn::complete_end_of(&mut file, &meta)?;
                let (mut summary, mut titled) = (fresh(id), false);
                read_into(&path, &mut file, 0, end, &mut summary, &mut titled)?;
                if let Some(title) = meta_title(&dir) {
                    summary.title = title;
                    titled = true;
                }
                Cached {
                    file: file_id,
                    len,
                    modified,
                    meta_modified,
                    end,
                    tail: tail_before(&mut file, end)?,
                    summary,
                    titled,
                }
            }
        };
        let mut summary = entry.summary.clone();
        if summary.title.is_empty() {
            summary.title = id.to_owned();
        }
        self.lock().insert(id.to_owned(), entry);
        Ok(Some((summary, modified)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_could_leave_the_folder_are_refused() {
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "../x",
            "a\\b",
            "a b",
            "a%2Fb",
            "é",
            &"x".repeat(129),
        ] {
            assert!(check_id(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["long", "a.b_c-D9", "..a", &"x".repeat(128)] {
            assert!(check_id(good).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn a_file_rewritten_in_place_and_longer_is_read_again() {
        let data = std::env::temp_dir().join(format!("scrollback-summary-{}", std::process::id()));
        std::fs::create_dir_all(data.join("s")).unwrap();
        let line = |seq: u64, status: &str| {
            format!(r#"{{"seq":{seq},"ts":1,"event":{{"type":"status","status":"{status}"}}}}"#)
        };
        let path = transcript_path(&data, "s");
        std::fs::write(
            &path,
            format!("{}\n{}\n", line(1, "idle"), line(2, "working")),
        )
        .unwrap();
        let summaries = Summaries::default();
        let seq_status = |s: &Summaries| {
            let (summary, _) = s.summary(&data, "s").unwrap().unwrap();
            (summary.seq, summary.status)
        };
        assert_eq!(seq_status(&summaries), (2, "working".to_string()));
        // The same file (same inode), written again from its start: three other lines.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let text = [line(1, "idle"), line(2, "idle"), line(3, "waiting")].join("\n") + "\n";
        std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
        drop(file);
        assert_eq!(seq_status(&summaries), (3, "waiting".to_string()));
        // Appended to: read from where it was.
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, format!("{}\n", line(4, "idle")).as_bytes()).unwrap();
        drop(file);
        assert_eq!(seq_status(&summaries), (4, "idle".to_string()));
        std::fs::remove_dir_all(&data).unwrap();
    }

    #[test]
    fn a_settings_line_naming_one_field_keeps_the_other_from_an_older_line() {
        let data = std::env::temp_dir().join(format!("scrollback-settings-{}", std::process::id()));
        std::fs::create_dir_all(data.join("s")).unwrap();
        let line = |seq: u64, event: &str| format!(r#"{{"seq":{seq},"ts":1,"event":{event}}}"#);
        let lines = [
            line(
                1,
                r#"{"type":"settings","model":"m1","permissionMode":"plan"}"#,
            ),
            line(2, r#"{"type":"userMessage","text":"hi"}"#),
            line(3, r#"{"type":"settings","model":"m2"}"#),
            line(4, r#"{"type":"status","status":"idle"}"#),
        ];
        std::fs::write(transcript_path(&data, "s"), lines.join("\n") + "\n").unwrap();
        let (summary, _) = Summaries::default().summary(&data, "s").unwrap().unwrap();
        assert_eq!(
            (summary.model.as_str(), summary.permission_mode.as_str()),
            ("m2", "plan")
        );
        std::fs::remove_dir_all(&data).unwrap();
    }

    #[test]
    fn titles_are_flattened_and_shortened() {
        assert_eq!(shorten("  fix\n the   build "), "fix the build");
        let long = shorten(&"word ".repeat(30));
        assert!(long.ends_with('…') && long.chars().count() <= TITLE_CHARS);
    }
}
