//! Lone surrogate escapes. JSON's grammar allows `"\ud83d"`, half of a UTF-16 pair, and
//! JavaScript writes one wherever a string was cut between the halves (a tool's output
//! truncated by `slice`, a reply streamed as JS strings). A Rust string cannot hold it, so a
//! line holding one is read as if each lone half were `\ufffd` (U+FFFD, what a decoder shows
//! for a cut byte sequence), and its bytes are kept as sent.

/// Reads JSON text as JavaScript wrote it: where `serde_json` refuses a lone surrogate escape,
/// the text is read again with each lone half as U+FFFD. For every JSON text a writer may
/// produce that is not a transcript line (a line is [`super::Line::parse`]'s).
pub fn parse_json<T: serde::de::DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    serde_json::from_str(text).or_else(|e| match replace_lone(text) {
        Some(clean) => serde_json::from_str(&clean),
        None => Err(e),
    })
}

/// `raw` with every lone surrogate escape replaced by `\ufffd`, or `None` when it has none.
/// The two escapes have the same length, so every offset into `raw` is one into the result.
pub(super) fn replace_lone(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out: Option<Vec<u8>> = None;
    let mut i = 0;
    while let Some(found) = memchr::memchr(b'\\', &bytes[i..]) {
        let at = i + found;
        i = at + 2; // any escape is at least two bytes: `\\` must not start another
        if bytes.get(at + 1) != Some(&b'u') {
            continue;
        }
        let Some(unit) = unit_at(bytes, at) else {
            continue;
        };
        i = at + 6;
        let lone = match unit {
            0xD800..=0xDBFF => match unit_at(bytes, at + 6) {
                Some(0xDC00..=0xDFFF) => {
                    i = at + 12;
                    false
                }
                _ => true,
            },
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            out.get_or_insert_with(|| bytes.to_vec())[at..at + 6].copy_from_slice(b"\\ufffd");
        }
    }
    // ASCII replaced ASCII, so the text is still UTF-8.
    out.map(|b| String::from_utf8(b).expect("an ASCII escape replaced by another"))
}

/// The UTF-16 unit of a `\uXXXX` escape starting at `at`, if one starts there.
fn unit_at(bytes: &[u8], at: usize) -> Option<u16> {
    let hex = bytes.get(at..at + 6)?.strip_prefix(b"\\u")?;
    u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::replace_lone;

    #[test]
    fn only_lone_halves_are_replaced() {
        for (raw, want) in [
            (r#""\ud83d\ude00""#, None),
            (r#""\u00e9\n\\ud83d""#, None),
            (r#""\ud83d""#, Some(r#""\ufffd""#)),
            (r#""\ude00\ud83d""#, Some(r#""\ufffd\ufffd""#)),
            (r#""\ud83d\ud83d\ude00""#, Some(r#""\ufffd\ud83d\ude00""#)),
            (r#""\\\ud83dx""#, Some(r#""\\\ufffdx""#)),
            (r#""\ud83d\u0041""#, Some(r#""\ufffd\u0041""#)),
            (r#""\ud8"#, None),
        ] {
            assert_eq!(replace_lone(raw).as_deref(), want, "{raw}");
        }
    }
}
