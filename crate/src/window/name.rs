//! Chat names: the one rule that turns what an app calls a chat into where it is stored, used by
//! the JS binding and a Tauri command alike (seed 003's `normalizeChatFileName`).

use super::WindowError;

/// The extension of a chat file.
pub const CHAT_EXTENSION: &str = ".jsonl";

/// A chat's name as it is stored: trimmed, without one `.jsonl` suffix, trimmed again, so
/// `" notes.jsonl "`, `"notes.jsonl"` and `"notes"` all name `notes`. A name that is empty
/// after that is refused ([`WindowError::InvalidArgument`]).
pub fn normalize_chat_name(name: &str) -> Result<String, WindowError> {
    let trimmed = name.trim();
    let stem = trimmed
        .strip_suffix(CHAT_EXTENSION)
        .unwrap_or(trimmed)
        .trim();
    if stem.is_empty() {
        return Err(WindowError::InvalidArgument(format!(
            "a chat name is not empty once trimmed and without .jsonl: {name:?}"
        )));
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
