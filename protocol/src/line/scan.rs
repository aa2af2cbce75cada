//! Reading a line without building its event: the top level's `seq`, `ts` and `event`, and of
//! the event only the fields the hot paths need (`type`, `text`, `messageId`, whether it is
//! `folded`), each string kept as where it lies in the line when it has no escapes. Every value
//! is still read to its end, so a line that is not JSON is refused as before, and a key given
//! twice means its last value, as in a parsed map.

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;
use std::fmt;
use std::ops::Range;

/// A string read from a line: where it lies in the line's text (no escapes), or decoded.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Str {
    At(Range<usize>),
    Owned(Box<str>),
}

impl Str {
    pub(super) fn get<'a>(&'a self, raw: &'a str) -> &'a str {
        match self {
            Str::At(r) => &raw[r.clone()],
            Str::Owned(s) => s,
        }
    }
}

/// The top level: its `seq` and `ts` as parsed values, its `event` as the event's text.
#[derive(Default)]
pub(super) struct Top<'a> {
    pub seq: Option<Value>,
    pub ts: Option<Value>,
    pub event: Option<&'a RawValue>,
}

/// The event's fields the hot paths read. `ty` and `text` are `Some` only for strings.
#[derive(Debug, Clone, Default)]
pub(super) struct Head {
    pub ty: Option<Str>,
    pub text: Option<Str>,
    pub message_id: Option<Str>,
    pub folded: bool,
}

/// Reads the top level of `raw` (the whole text must be one JSON value).
pub(super) fn top(raw: &str) -> Result<Top<'_>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(raw);
    let top = de.deserialize_any(TopVisitor)?;
    de.end()?;
    Ok(top)
}

/// Reads the head of an event whose text lies at `at` in `line`. The event was read whole by
/// [`top`], so this fails only when the event is not an object (a data error) or when one of
/// its strings does not decode (a lone surrogate escape, a syntax error).
pub(super) fn head(line: &str, at: Range<usize>) -> Result<Head, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(&line[at]);
    de.deserialize_map(HeadVisitor {
        base: line.as_ptr() as usize,
    })
}

/// Where `part` (a slice of the line starting at address `base`) lies in it.
fn range(base: usize, part: &str) -> Range<usize> {
    let start = part.as_ptr() as usize - base;
    start..start + part.len()
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top<'de>, A::Error> {
        let mut top = Top::default();
        while let Some(key) = map.next_key_seed(KeySeed(&["seq", "ts", "event"]))? {
            match key {
                Some(0) => top.seq = Some(map.next_value()?),
                Some(1) => top.ts = Some(map.next_value()?),
                Some(2) => top.event = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(top)
    }
}

struct HeadVisitor {
    base: usize,
}

impl<'de> Visitor<'de> for HeadVisitor {
    type Value = Head;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Head, A::Error> {
        let mut head = Head::default();
        let keys = &["type", "text", "messageId", crate::rows::FOLDED];
        while let Some(key) = map.next_key_seed(KeySeed(keys))? {
            let base = self.base;
            match key {
                Some(0) => head.ty = map.next_value_seed(StrSeed { base })?,
                Some(1) => head.text = map.next_value_seed(StrSeed { base })?,
                Some(2) => head.message_id = map.next_value_seed(StrSeed { base })?,
                Some(_) => {
                    head.folded = true;
                    map.next_value_seed(Checked)?;
                }
                None => {
                    map.next_value_seed(Checked)?;
                }
            }
        }
        Ok(head)
    }
}

/// A key: its index in the names wanted, or `None` for any other (escaped keys decoded).
struct KeySeed(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|k| *k == key))
    }
}

/// A value that is kept when it is a string, and read past otherwise.
struct StrSeed {
    base: usize,
}

impl<'de> DeserializeSeed<'de> for StrSeed {
    type Value = Option<Str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<Str>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrSeed {
    type Value = Option<Str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Option<Str>, E> {
        Ok(Some(Str::At(range(self.base, s))))
    }
    fn visit_str<E>(self, s: &str) -> Result<Option<Str>, E> {
        Ok(Some(Str::Owned(s.into())))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<Str>, A::Error> {
        Checked.visit_map(map).map(|_| None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<Str>, A::Error> {
        Checked.visit_seq(seq).map(|_| None)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Option<Str>, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Option<Str>, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Option<Str>, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Option<Str>, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Option<Str>, E> {
        Ok(None)
    }
}

/// An event's value read past as building the event's map reads it ([`super::Line::event`]):
/// numbers within an f64's range, nesting within serde_json's limit, strings that decode. So
/// an event the scan accepts is one that builds, never an empty map in its place (which
/// would have no `type`, and would make two messages' deltas one row).
struct Checked;

impl<'de> DeserializeSeed<'de> for Checked {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Checked {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Checked)?.is_some() {
            map.next_value_seed(Checked)?;
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Checked)?.is_some() {}
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}
