//! Chat names: the one rule that turns what an app calls a chat into where it is stored, used by
//! the JS binding and a Tauri command alike (seed 003's `normalizeChatFileName`).

use super::WindowError;

/// The extension of a chat file.
pub const CHAT_EXTENSION: &str = ".jsonl";

/// A chat's name as it is stored: trimmed, without one `.jsonl` suffix, trimmed again, so
/// `" notes.jsonl "`, `"notes.jsonl"` and `"notes"` all name `notes`. The name is one file's:
/// one that is empty after that, `.` or `..`, or holds a path separator (`/`, `\`) or NUL is
/// refused ([`WindowError::InvalidArgument`]), so every call that takes a name refuses what
/// this refuses, and no name reaches another folder.
pub fn normalize_chat_name(name: &str) -> Result<String, WindowError> {
    let trimmed = name.trim();
    let stem = trimmed
        .strip_suffix(CHAT_EXTENSION)
        .unwrap_or(trimmed)
        .trim();
    let refuse = |why: &str| {
        let shown: String = name.chars().take(64).collect();
        let more = if shown.len() < name.len() { "…" } else { "" };
        Err(WindowError::InvalidArgument(format!(
            "a chat name {why}: {shown:?}{more}"
        )))
    };
    if stem.is_empty() {
        return refuse("is not empty once trimmed and without .jsonl");
    }
    if stem == "." || stem == ".." || stem.contains(['/', '\\', '\0']) {
        return refuse("is a file's name (not . or .., no / or \\)");
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
        assert_eq!(normalize_chat_name("a.jsonl.jsonl").unwrap(), "a.jsonl");
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
