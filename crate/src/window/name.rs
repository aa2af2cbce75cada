//! Chat names: the one rule that turns what an app calls a chat into where it is stored, used by
//! the JS binding and a Tauri command alike (seed 003's `normalizeChatFileName`).

use super::WindowError;
use crate::store::portable;

/// The longest chat name, in bytes: with `.jsonl` and the layer's `.sig`, `.bak` and `.tmp`
/// beside it, within the 255 bytes most file systems allow a name.
pub const MAX_CHAT_NAME: usize = 200;

/// The extension of a chat file.
pub const CHAT_EXTENSION: &str = ".jsonl";

/// A chat's name as it is stored: trimmed, without its `.jsonl` suffixes, trimmed again, so
/// `" notes.jsonl "`, `"notes.jsonl"`, `"notes.jsonl.jsonl"` and `"notes"` all name `notes`. The name is one file's:
/// one that is empty after that, `.` or `..`, or holds a path separator (`/`, `\`) or NUL is
/// refused ([`WindowError::InvalidArgument`]), so every call that takes a name refuses what
/// this refuses, and no name reaches another folder; so is one that is not the same one file
/// on every OS ([`portable`]: `a:b`, `CON`) or longer than [`MAX_CHAT_NAME`] bytes, in every
/// store alike.
pub fn normalize_chat_name(name: &str) -> Result<String, WindowError> {
    // Every `.jsonl` off, so that a name normalizes once and for all: `a.jsonl.jsonl` is `a`,
    // never a chat of its own that an older spelling of `a` would be taken for.
    let mut stem = name.trim();
    while let Some(shorter) = stem.strip_suffix(CHAT_EXTENSION) {
        stem = shorter.trim();
    }
    let refuse = |why: &str| {
        let shown: String = name.chars().take(64).collect();
        let more = if shown.len() < name.len() { "…" } else { "" };
        Err(WindowError::InvalidArgument(format!(
            "a chat name {why}: {shown:?}{more}"
        )))
    };
    if stem.is_empty() {
        return refuse("cannot be empty (once trimmed and without .jsonl)");
    }
    if stem == "." || stem == ".." || stem.contains(['/', '\\', '\0']) {
        return refuse("cannot be . or .., nor hold / or \\");
    }
    // One rule in every store: a name a browser's storage takes and a desktop's file system
    // refuses would be a chat an app could not move from its web build to its Tauri build.
    if !portable(&format!("{stem}{CHAT_EXTENSION}")) {
        return refuse("cannot hold < > : \" | ? * or a control character, nor begin with .~ (the store's own files), nor be a name Windows keeps for a device (CON, NUL, COM1…)");
    }
    if stem.len() > MAX_CHAT_NAME {
        return refuse(&format!(
            "is at most {MAX_CHAT_NAME} bytes (this one is {})",
            stem.len()
        ));
    }
    Ok(stem.to_string())
}

/// The path of the chat called `name` in `folder` (`folder/<normalized name>.jsonl`).
pub fn chat_path(folder: &str, name: &str) -> Result<String, WindowError> {
    let name = normalize_chat_name(name)?;
    Ok(if folder.is_empty() {
        format!("{name}{CHAT_EXTENSION}")
    } else {
        format!("{folder}/{name}{CHAT_EXTENSION}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_name_agree() {
        for spelling in [
            "notes",
            " notes",
            "notes.jsonl",
            " notes.jsonl ",
            "notes .jsonl",
        ] {
            assert_eq!(
                normalize_chat_name(spelling).unwrap(),
                "notes",
                "{spelling:?}"
            );
        }
        // Once and for all: a normalized name normalizes to itself, so no chat's file can be
        // taken for an older spelling of another's.
        for spelling in ["a.jsonl.jsonl", "a .jsonl .jsonl", " a.jsonl .jsonl"] {
            let name = normalize_chat_name(spelling).unwrap();
            assert_eq!(name, "a", "{spelling:?}");
            assert_eq!(normalize_chat_name(&name).unwrap(), name);
        }
        assert_eq!(normalize_chat_name("Ünï cøde").unwrap(), "Ünï cøde");
        // Not a file's name: refused by the rule every call applies.
        for bad in [
            "..", ". ", "...jsonl", "a/../b", "/abs", "a\\b", "nul\0", "chats/x",
        ] {
            assert!(
                matches!(
                    normalize_chat_name(bad),
                    Err(WindowError::InvalidArgument(_))
                ),
                "{bad:?}"
            );
        }
        assert_eq!(normalize_chat_name("...").unwrap(), "...");
        // Not the same one file on every OS, or too long for one: refused in every store alike
        // (a desktop's file system would refuse it where a browser's storage took it).
        for (bad, says) in [
            ("a:b", "cannot hold"),
            ("why?", "cannot hold"),
            ("tab\there", "cannot hold"),
            ("CON", "device"),
            ("nul", "device"),
            ("com1.notes", "device"),
            // A store's own file (FsStore hides such a file, and removes it once old).
            (".~scrollback-tmp.x", "begin with .~"),
        ] {
            match normalize_chat_name(bad) {
                Err(WindowError::InvalidArgument(m)) => assert!(m.contains(says), "{bad:?}: {m}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        let long = "é".repeat(MAX_CHAT_NAME / 2);
        assert_eq!(normalize_chat_name(&long).unwrap(), long);
        match normalize_chat_name(&format!("{long}x")) {
            Err(WindowError::InvalidArgument(m)) => {
                assert!(m.contains("at most 200 bytes (this one is 201)"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            normalize_chat_name("Q - 2024-01-01@12h30m").unwrap(),
            "Q - 2024-01-01@12h30m"
        );
        for empty in ["", "  ", ".jsonl", " .jsonl "] {
            assert!(matches!(
                normalize_chat_name(empty),
                Err(WindowError::InvalidArgument(_))
            ));
        }
        assert_eq!(chat_path("chats", " x.jsonl").unwrap(), "chats/x.jsonl");
        assert_eq!(chat_path("", "x").unwrap(), "x.jsonl");
    }
}
