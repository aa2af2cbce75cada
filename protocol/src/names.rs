//! Names: the one rule for session ids (the server accepts exactly the ids a client can file
//! its cache under), and the keys a cache files text it does not control under.
//!
//! A key is one path segment made from text the cache does not control (a host name, a session
//! id from the network). [`encode`] keeps lowercase ASCII letters, digits, `-` and `.` (except a
//! leading `.`) and writes every other byte as `%XX` with uppercase hex, so a key:
//! - is never empty, `.` or `..`, never hidden, and holds no `/`, `\`, `:` or NUL;
//! - decodes back to exactly its text ([`decode`]), so two different texts never share a key;
//! - stays distinct on case-insensitive filesystems (an uppercase letter is always escaped);
//! - never ends with a `.` or a space and is never a name Windows reserves (`CON`, `NUL`,
//!   `COM1`...: those are uppercase, and an uppercase letter is escaped).

/// The longest session id accepted, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// The longest key kept: most filesystems refuse a name over 255 bytes.
pub const MAX_KEY_LEN: usize = 200;

/// Why a name cannot be used as a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// An empty session id or host.
    #[error("empty name")]
    Empty,
    /// Encoded, the name would be longer than [`MAX_KEY_LEN`] bytes.
    #[error("name too long for a cache key ({0} bytes encoded)")]
    TooLong(usize),
}

/// The key for a text: see the module's rules.
pub fn encode(text: &str) -> Result<String, KeyError> {
    if text.is_empty() {
        return Err(KeyError::Empty);
    }
    // A name Windows reserves (`nul`, `com1.txt`: any case, any extension) has its first letter
    // escaped, so no key is one on any OS.
    let reserved = is_reserved_name(text);
    let last = text.len() - 1;
    let mut out = String::with_capacity(text.len());
    for (i, b) in text.bytes().enumerate() {
        let plain = b.is_ascii_lowercase() && !(reserved && i == 0)
            || b.is_ascii_digit()
            || b == b'-'
            // Not first (a hidden name), not last (Windows drops a trailing dot: `a.` is `a`).
            || (b == b'.' && i > 0 && i < last);
        if plain {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.len() > MAX_KEY_LEN {
        return Err(KeyError::TooLong(out.len()));
    }
    Ok(out)
}

/// Whether a file name is one Windows reserves for a device whatever its case and extension:
/// `CON`, `PRN`, `AUX`, `NUL`, `COM0`-`COM9`, `LPT0`-`LPT9`, `CONIN$`, `CONOUT$` (`nul.txt` too).
pub fn is_reserved_name(name: &str) -> bool {
    let stem = name.split('.').next().unwrap_or("").trim_end_matches(' ');
    let stem = stem.to_ascii_uppercase();
    match stem.as_str() {
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$" => true,
        s if s.len() == 4 && (s.starts_with("COM") || s.starts_with("LPT")) => {
            s.as_bytes()[3].is_ascii_digit()
        }
        _ => false,
    }
}

/// The text a key was made from; `None` when `key` is not something [`encode`] produces.
pub fn decode(key: &str) -> Option<String> {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = key.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let text = String::from_utf8(out).ok()?;
    (encode(&text).ok()? == key).then_some(text)
}

/// Checks a session id (hostile until checked), the one rule for server and client: 1 to
/// [`MAX_ID_LEN`] of `A-Z a-z 0-9 . _ -`, not `.` or `..`, and short enough that its cache key
/// ([`encode`]) fits in [`MAX_KEY_LEN`] bytes (an uppercase letter or `_` takes three). Anything
/// else could name a path outside the session's folder or a session a client cannot cache, so
/// it is refused before any path is built. The error says which rule failed.
pub fn check_session_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_ID_LEN {
        return Err(format!(
            "bad session id: must be 1 to {MAX_ID_LEN} characters"
        ));
    }
    if id == "." || id == ".." {
        return Err("bad session id: must not be `.` or `..`".into());
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err("bad session id: only letters, digits, `.`, `_` and `-` are allowed".into());
    }
    if let Err(KeyError::TooLong(n)) = encode(id) {
        return Err(format!(
            "bad session id: too long for a client's cache key ({n} bytes encoded, at most \
             {MAX_KEY_LEN}; an uppercase letter or `_` counts three)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_the_server_accepts_is_one_a_client_can_key() {
        assert!(
            check_session_id(&"A".repeat(128)).is_err(),
            "384 bytes encoded"
        );
        assert!(check_session_id(&"A".repeat(66)).is_ok());
        assert!(check_session_id(&"A".repeat(67)).is_err());
        assert!(check_session_id(&"a".repeat(128)).is_ok());
        assert!(check_session_id(&"a".repeat(129)).is_err());
        // Every id over a small alphabet up to a length: accepted implies keyed.
        let alphabet = [b'a', b'Z', b'_', b'.', b'-', b'7'];
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let len = 1 + (rng % 130) as usize;
            let id: String = (0..len)
                .map(|i| alphabet[((rng >> (i % 50)) as usize + i) % alphabet.len()] as char)
                .collect();
            if check_session_id(&id).is_ok() {
                let key = encode(&id).expect("an accepted id keys");
                assert_eq!(decode(&key).as_deref(), Some(id.as_str()));
            }
        }
    }

    #[test]
    fn keys_are_never_names_windows_reserves() {
        for id in [
            "CON", "nul", "Aux", "COM1", "lpt9", "nul.txt", "a.", "a", "a ", "x.y",
        ] {
            let key = encode(id).unwrap();
            assert!(!is_reserved_name(&key), "{id:?} -> {key:?}");
            assert!(!key.ends_with(['.', ' ']), "{id:?} -> {key:?}");
            assert_eq!(decode(&key).as_deref(), Some(id), "{id:?} -> {key:?}");
        }
        assert_ne!(
            encode("a."),
            encode("a"),
            "no two keys one folder on Windows"
        );
        assert_eq!(encode("x.y").unwrap(), "x.y");
        assert_eq!(encode("nul").unwrap(), "%6Eul");
    }
}
