//! Names on disk: the server and session keys, and chunk names.
//!
//! Keys are the protocol's ([`encode`], [`decode`]): the same rule that bounds the session ids
//! a server accepts, so every id a server accepts keys here.

use super::coverage::{Chunk, Kind};
pub use crate::protocol::{decode, encode, KeyError, MAX_KEY_LEN};

/// The key of a server: `<host>_<port>`, or `<host>_<port>_<prefix>` for one reached under a
/// path prefix (`https://gw.example.com/sandbox` is `gw.example.com_443_sandbox`), so that two
/// servers behind one origin keep two caches. The one rule every cache folder, session list,
/// search pack and writer role of a server is named by (through [`crate::chunks::Cache`]).
///
/// The host is lowercased (host names are case-insensitive) and encoded, so `_` and `:` (IPv6)
/// never appear raw in it. An empty host is kept as `%00` rather than refused: a server key is
/// never a reason to have no cache.
///
/// The prefix is the URL's path without its trailing slashes (`/p` and `/p/` are one server,
/// `/` none: a server at the root keeps the `<host>_<port>` it always had) nor its leading one;
/// its case is kept (paths are case-sensitive) and every byte but `a-z`, `0-9` and `-` is
/// escaped as `%XX` (`prefix_key`), so the key holds no raw `_` past the port (nothing else
/// parses as the same host, port and prefix) and no raw `.` (no key is another one's
/// `.sessions.json` or `.search.idx`). A key that would pass [`MAX_KEY_LEN`] that way takes a
/// digest of the prefix instead, `<host>_<port>__<16 hex digits>` (the `__` no escaped prefix
/// has), so a long prefix still names one bounded, stable folder.
pub fn server_key(host: &str, port: u16, prefix: &str) -> String {
    let host = host.to_ascii_lowercase();
    let host = encode(&host).unwrap_or_else(|_| {
        // Empty or absurdly long: the first is `%00`, the second a stable digest.
        if host.is_empty() {
            "%00".into()
        } else {
            format!("%00{:016x}", fnv1a(host.as_bytes()))
        }
    });
    let prefix = prefix.trim_end_matches('/');
    let prefix = prefix.strip_prefix('/').unwrap_or(prefix);
    if prefix.is_empty() {
        return format!("{host}_{port}");
    }
    let key = format!("{host}_{port}_{}", prefix_key(prefix));
    if key.len() <= MAX_KEY_LEN {
        key
    } else {
        format!("{host}_{port}__{:016x}", fnv1a(prefix.as_bytes()))
    }
}

/// A path prefix as part of a folder name: `a-z`, `0-9` and `-` as they are, every other byte
/// (`/`, `.`, `_`, `%`, uppercase letters: case-insensitive file systems) as `%XX`. One byte
/// gives one token and back, so two prefixes never give one key.
fn prefix_key(prefix: &str) -> String {
    let mut out = String::with_capacity(prefix.len());
    for b in prefix.bytes() {
        if b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
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
        assert_eq!(server_key("10.0.2.2", 8443, ""), "10.0.2.2_8443");
        assert_eq!(server_key("Example.COM", 80, ""), "example.com_80");
        assert_ne!(server_key("a_1", 2, ""), server_key("a", 12, ""));
        assert_eq!(server_key("::1", 80, ""), "%3A%3A1_80");
    }

    /// Two servers behind one gateway (`https://gw/sandbox`, `https://gw/prod`) keep two
    /// caches; a server at the root keeps the key it had before prefixes were keyed.
    #[test]
    fn server_keys_keep_path_prefixes_apart() {
        let gw = |prefix| server_key("gw.example.com", 443, prefix);
        // No prefix, or only slashes: today's `<host>_<port>`, so existing caches are kept.
        for none in ["", "/", "//"] {
            assert_eq!(gw(none), "gw.example.com_443", "{none:?}");
        }
        assert_eq!(gw("/sandbox"), "gw.example.com_443_sandbox");
        assert_eq!(gw("/prod"), "gw.example.com_443_prod");
        // A trailing slash is the same server; the leading one is implied.
        assert_eq!(gw("/sandbox/"), gw("/sandbox"));
        assert_eq!(gw("sandbox"), gw("/sandbox"));
        assert_eq!(gw("/a/b/"), "gw.example.com_443_a%2Fb");
        // Paths are case-sensitive, and stay apart on a case-insensitive file system too.
        assert_eq!(gw("/Prod"), "gw.example.com_443_%50rod");
        assert_ne!(gw("/Prod").to_lowercase(), gw("/prod").to_lowercase());

        // No two hosts, ports and prefixes give one key, and every key is one plain name.
        let hosts = ["gw", "gw_443", "gw_443_a", "a", "::1", ""];
        let ports = [443, 4430, 1];
        let prefixes = [
            "",
            "/a",
            "/a/b",
            "/a_b",
            "/a%2Fb",
            "/a.b",
            "/A",
            "/..",
            "/../x",
            "/_",
            "/__x",
            "//a",
            "/a/",
            "/b.sessions.json",
            "/b.search.idx",
        ];
        let mut seen = std::collections::HashMap::new();
        for host in hosts {
            for port in ports {
                for prefix in prefixes {
                    let key = server_key(host, port, prefix);
                    assert!(!key.is_empty() && !key.starts_with('.'), "{key}");
                    assert!(!key.contains(['/', '\\', ':', '\0', ' ']), "{key}");
                    let normalized = prefix.trim_end_matches('/');
                    let was = seen.insert(key.clone(), (host, port, normalized));
                    assert!(
                        was.is_none() || was == Some((host, port, normalized)),
                        "{key}: {was:?} and {:?}",
                        (host, port, prefix)
                    );
                }
            }
        }
        // Nothing kept beside a server's folder is another server's folder.
        for key in seen.keys() {
            for beside in [".sessions.json", ".search.idx"] {
                assert!(
                    !seen.contains_key(&format!("{key}{beside}")),
                    "{key}{beside}"
                );
            }
        }
    }

    /// A long prefix names a bounded, stable folder of its own, as a long host does.
    #[test]
    fn server_keys_of_long_prefixes_are_bounded_and_stable() {
        let long = format!("/{}", "Segment/".repeat(100));
        let other = format!("/{}", "Segment/".repeat(101));
        let key = server_key("gw.example.com", 443, &long);
        assert_eq!(key, server_key("gw.example.com", 443, &long), "stable");
        assert_eq!(
            key,
            server_key("gw.example.com", 443, long.trim_end_matches('/'))
        );
        assert!(
            key.starts_with("gw.example.com_443__") && key.len() == 20 + 16,
            "{key}"
        );
        assert_ne!(key, server_key("gw.example.com", 443, &other));
        assert_ne!(key, server_key("gw.example.com", 8443, &long));
        // The longest host and the longest prefix still fit a file name with what sits beside
        // the folder (`.sessions.json`), under the 255 bytes of common file systems.
        let host = "h".repeat(MAX_KEY_LEN);
        let key = server_key(&host, 65535, &long);
        assert!(key.len() + ".sessions.json".len() <= 255, "{}", key.len());
        // A prefix that just fits is kept readable; one byte more and it is a digest.
        let fits = format!("/{}", "p".repeat(MAX_KEY_LEN - "h_1_".len()));
        assert_eq!(server_key("h", 1, &fits).len(), MAX_KEY_LEN);
        assert!(server_key("h", 1, &format!("{fits}p")).starts_with("h_1__"));
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
