//! Names on disk: the server and session keys, and chunk names.
//!
//! Keys are the protocol's ([`encode`], [`decode`]): the same rule that bounds the session ids
//! a server accepts, so every id a server accepts keys here.

use super::coverage::{Chunk, Kind};
pub use crate::protocol::{decode, encode, KeyError, MAX_KEY_LEN};

/// The key of a server: `<host>_<port>`, the host lowercased (host names are case-insensitive)
/// and encoded, so `_` and `:` (IPv6) never appear raw in it. An empty host is kept as `%00`
/// rather than refused: a server key is never a reason to have no cache.
pub fn server_key(host: &str, port: u16) -> String {
    let host = host.to_ascii_lowercase();
    let host = encode(&host).unwrap_or_else(|_| {
        // Empty or absurdly long: the first is `%00`, the second a stable digest.
        if host.is_empty() {
            "%00".into()
        } else {
            format!("%00{:016x}", fnv1a(host.as_bytes()))
        }
    });
    format!("{host}_{port}")
}

/// A stable 64-bit digest (FNV-1a), for over-long host names only.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The blob in a session folder whose stamp says when the session was last opened.
pub const TOUCH: &str = "touch";

/// A chunk's file name: `<first>-<end>.rows.jsonl`, `<first>-<end>.raw.jsonl` or
/// `<first>-open.raw.jsonl`.
pub fn chunk_name(chunk: &Chunk) -> String {
    match chunk.kind {
        Kind::Rows => format!("{}-{}.rows.jsonl", chunk.first, chunk.end),
        Kind::Raw => format!("{}-{}.raw.jsonl", chunk.first, chunk.end),
        Kind::Open => format!("{}-open.raw.jsonl", chunk.first),
    }
}

/// Reads a chunk name: its first seq, its end (`None` for the open chunk, whose end is in its
/// last line) and kind. `None` for any other name, including non-canonical numbers.
pub fn parse_chunk_name(name: &str) -> Option<(u64, Option<u64>, Kind)> {
    let number = |s: &str| -> Option<u64> {
        let n: u64 = s.parse().ok()?;
        (n >= 1 && n.to_string() == s).then_some(n)
    };
    if let Some(range) = name.strip_suffix(".rows.jsonl") {
        let (first, end) = range.split_once('-')?;
        let (first, end) = (number(first)?, number(end)?);
        return (end > first).then_some((first, Some(end), Kind::Rows));
    }
    let range = name.strip_suffix(".raw.jsonl")?;
    let (first, end) = range.split_once('-')?;
    let first = number(first)?;
    if end == "open" {
        return Some((first, None, Kind::Open));
    }
    let end = number(end)?;
    (end > first).then_some((first, Some(end), Kind::Raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_never_escape() {
        for text in [
            "abc", "3f2c-11", "..", ".", "a/b", "../x", "A", "a", "x:y", "ü", "a%41", "\0",
        ] {
            let key = encode(text).unwrap();
            assert_eq!(decode(&key).as_deref(), Some(text), "{text:?} -> {key:?}");
            assert!(!key.starts_with('.') && !key.contains(['/', '\\', ':', '\0']));
        }
        assert_ne!(encode("A").unwrap().to_lowercase(), encode("a").unwrap());
        assert_eq!(encode(""), Err(KeyError::Empty));
        assert!(matches!(
            encode(&"x".repeat(201)),
            Err(KeyError::TooLong(201))
        ));
        assert_eq!(decode("%2e"), None, "lowercase hex is not canonical");
        assert_eq!(decode("A"), None);
    }

    #[test]
    fn server_keys_keep_host_and_port_apart() {
        assert_eq!(server_key("10.0.2.2", 8443), "10.0.2.2_8443");
        assert_eq!(server_key("Example.COM", 80), "example.com_80");
        assert_ne!(server_key("a_1", 2), server_key("a", 12));
        assert_eq!(server_key("::1", 80), "%3A%3A1_80");
    }

    #[test]
    fn chunk_names_parse_only_when_canonical() {
        assert_eq!(
            parse_chunk_name("1-1650.rows.jsonl"),
            Some((1, Some(1650), Kind::Rows))
        );
        assert_eq!(
            parse_chunk_name("2001-2400.raw.jsonl"),
            Some((2001, Some(2400), Kind::Raw))
        );
        assert_eq!(
            parse_chunk_name("2600-open.raw.jsonl"),
            Some((2600, None, Kind::Open))
        );
        for bad in [
            "01-5.raw.jsonl",
            "5-5.raw.jsonl",
            "0-3.raw.jsonl",
            "3-open.rows.jsonl",
            "touch",
            "1-2.raw",
        ] {
            assert_eq!(parse_chunk_name(bad), None, "{bad}");
        }
    }
}
