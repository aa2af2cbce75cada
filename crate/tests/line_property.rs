//! Property: `Line::parse` reads only a line's head (seq, ts, the event's type, text and
//! messageId) and builds the event on demand, yet answers exactly what parsing the whole line
//! into a map answers, over random spellings: keys in any order, given twice, escaped; strings
//! with and without escapes; events that are not objects. And the row rule, which compares
//! two deltas byte for byte around their texts before it compares them parsed, joins the same
//! lines whatever their spelling, and an event of every known type reads (`Event::read`, which
//! reads the event's text straight into its shape) as the same event however it is spelled.
#![cfg(not(target_arch = "wasm32"))]

use proptest::prelude::*;
use scrollback::fold::Event;
use scrollback::protocol::{joins, EventKind, Line, LineError};
use serde_json::{Map, Value};

/// What parsing the whole line into a map gives (the definition `Line::parse` keeps).
fn reference(raw: &str) -> Result<(u64, f64, Map<String, Value>), LineError> {
    let raw = raw.trim_end_matches(['\n', '\r']);
    if raw.contains(['\n', '\r']) {
        return Err(LineError::Multiline);
    }
    let value: Value = serde_json::from_str(raw).map_err(|e| LineError::NotJson(e.to_string()))?;
    let Value::Object(mut obj) = value else {
        return Err(LineError::NotJson(String::new()));
    };
    let seq = obj
        .get("seq")
        .and_then(Value::as_u64)
        .filter(|s| *s >= 1)
        .ok_or(LineError::BadSeq)?;
    let ts = obj
        .get("ts")
        .and_then(Value::as_f64)
        .ok_or(LineError::BadTs)?;
    let Some(Value::Object(event)) = obj.remove("event") else {
        return Err(LineError::NoEvent);
    };
    match event.get("type") {
        Some(Value::String(_)) => Ok((seq, ts, event)),
        _ => Err(LineError::NoType),
    }
}

/// A JSON value as text, from a small set that covers the spellings that matter.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(r#""a""#.to_owned()),
        Just(r#""b c""#.to_owned()),
        Just(r#""\u0061""#.to_owned()), // "a", escaped
        Just(r#""é\n""#.to_owned()),
        Just("3".to_owned()),
        Just("3.0".to_owned()),
        Just("-1".to_owned()),
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just(r#"{"x":[1,{"y":"z"}]}"#.to_owned()),
        Just(r#"{ "x" : [ 1 , { "y" : "z" } ] }"#.to_owned()),
        Just("[]".to_owned()),
    ]
}

/// An event key: the ones the head reads, spelled plainly or escaped, and others.
fn event_key() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("type"),
        Just("t\\u0079pe"),
        Just("text"),
        Just("te\\u0078t"),
        Just("messageId"),
        Just("folded"),
        Just("provenance"),
        Just("role"),
    ]
}

fn object(members: &[(String, String)]) -> String {
    let body: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("\"{k}\":{v}"))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// An event: mostly an `assistantText` or `status` object with random other members (which
/// can repeat or replace its type), sometimes not an object at all.
fn event() -> impl Strategy<Value = String> {
    let ty = prop_oneof![
        Just(r#""assistantText""#.to_owned()),
        Just(r#""status""#.to_owned()),
        Just(r#""assistant\u0054ext""#.to_owned()),
        Just(r#""futureThing""#.to_owned()),
    ];
    let members = prop::collection::vec((event_key(), value()), 0..5);
    prop_oneof![
        8 => (ty, members, 0usize..6).prop_map(|(ty, members, at)| {
            let mut m: Vec<(String, String)> =
                members.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            m.insert(at.min(m.len()), ("type".to_owned(), ty));
            object(&m)
        }),
        1 => value(),
    ]
}

/// An event of a known type with members drawn from its shape's fields (spelled plainly or
/// escaped, repeated, of the right type or not) and others.
fn known_event() -> impl Strategy<Value = String> {
    let shapes: [(&str, &[&str]); 10] = [
        ("userMessage", &["text", "queuedId"]),
        ("usageDelta", &["context", "output"]),
        ("status", &["status"]),
        ("settings", &["model", "permissionMode"]),
        ("messageQueued", &["id", "text"]),
        ("toolCall", &["id", "name", "input"]),
        ("toolResult", &["id", "output", "isError"]),
        ("command", &["id", "command", "done", "output"]),
        ("compacting", &["active"]),
        ("error", &["message"]),
    ];
    let shape = prop::sample::select(shapes.to_vec());
    shape.prop_flat_map(|(ty, fields)| {
        let key = prop_oneof![
            4 => prop::sample::select(fields.to_vec()).prop_map(str::to_owned),
            // The first field with its first letter escaped: the same key.
            1 => Just(format!("\\u{:04x}{}", fields[0].as_bytes()[0], &fields[0][1..])),
            1 => Just("role".to_owned()),
        ];
        let member = (
            key,
            prop_oneof![value(), Just("false".to_owned()), Just("7".to_owned())],
        );
        (prop::collection::vec(member, 0..6), 0usize..6).prop_map(move |(members, at)| {
            let mut m = members;
            m.insert(at.min(m.len()), ("type".to_owned(), format!("\"{ty}\"")));
            object(&m)
        })
    })
}

/// A line: seq, ts and event in any order, sometimes repeated, sometimes missing or wrong.
fn line() -> impl Strategy<Value = String> {
    let seq = prop_oneof![
        4 => (1u64..50).prop_map(|s| s.to_string()),
        1 => Just("0".to_owned()),
        1 => Just("2.0".to_owned()),
        1 => Just(r#""2""#.to_owned()),
    ];
    let ts = prop_oneof![
        4 => Just("1788546972.6030757".to_owned()),
        1 => Just("5".to_owned()),
        1 => Just("null".to_owned()),
    ];
    let extra = prop::collection::vec(
        (prop_oneof![Just("seq"), Just("ts"), Just("other")], value()),
        0..2,
    );
    (seq, ts, event(), extra, any::<u8>()).prop_map(|(seq, ts, event, extra, order)| {
        let mut m = vec![
            ("seq".to_owned(), seq),
            ("ts".to_owned(), ts),
            ("event".to_owned(), event),
        ];
        m.rotate_left(order as usize % 3);
        if order & 0x10 != 0 {
            m.swap(0, 1);
        }
        for (k, v) in extra {
            m.insert(order as usize % (m.len() + 1), (k.to_owned(), v));
        }
        object(&m)
    })
}

/// The same line spelled another way: the event's members in reverse order.
fn respelled(line: &Line) -> Line {
    let reversed: Map<String, Value> = line
        .event()
        .iter()
        .rev()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Line::new(line.seq(), line.ts(), reversed).unwrap()
}

/// A streamed delta of one of two messages, with or without a second field.
fn delta() -> impl Strategy<Value = (String, String, bool)> {
    (
        prop_oneof![Just("a"), Just("b"), Just("ab"), Just("\\u0063")],
        prop_oneof![Just("m1"), Just("m2")],
        any::<bool>(),
    )
        .prop_map(|(t, m, extra)| (t.to_owned(), m.to_owned(), extra))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn the_parse_answers_what_the_whole_map_answers(raw in line()) {
        let got = Line::parse(&raw);
        match (reference(&raw), got) {
            (Ok((seq, ts, event)), Ok(line)) => {
                prop_assert_eq!(line.seq(), seq);
                prop_assert_eq!(line.ts().to_bits(), ts.to_bits());
                let ty = event["type"].as_str().unwrap();
                prop_assert_eq!(line.event_type(), ty);
                prop_assert_eq!(line.kind(), EventKind::from_type(ty));
                prop_assert_eq!(line.text(), event.get("text").and_then(Value::as_str));
                prop_assert_eq!(
                    line.message_id(),
                    event.get("messageId").and_then(Value::as_str)
                );
                prop_assert_eq!(line.event(), &event);
                prop_assert_eq!(line.raw(), raw.as_str());
                let again = respelled(&line);
                prop_assert_eq!(&again, &line);
            }
            (Err(want), Err(got)) => prop_assert_eq!(
                std::mem::discriminant(&got),
                std::mem::discriminant(&want),
                "{} gave {}", raw, got
            ),
            (want, got) => prop_assert!(false, "{}: want {:?}, got {:?}", raw, want, got),
        }
    }

    #[test]
    fn the_row_rule_joins_the_same_lines_however_they_are_spelled(
        a in delta(),
        b in delta(),
    ) {
        let spell = |seq: u64, (text, message, extra): &(String, String, bool)| {
            let more = if *extra { r#","role":"assistant""# } else { "" };
            Line::parse(&format!(
                r#"{{"seq":{seq},"ts":1,"event":{{"type":"assistantText","text":"{text}","messageId":"{message}"{more}}}}}"#
            ))
            .unwrap()
        };
        let (older, newer) = (spell(1, &a), spell(2, &b));
        let want = joins(&older, &newer);
        prop_assert_eq!(joins(&respelled(&older), &respelled(&newer)), want);
        prop_assert_eq!(joins(&older, &respelled(&newer)), want);
        // Same message, same other fields, a clean append: one row.
        let same = a.1 == b.1 && a.2 == b.2;
        let clean = scrollback::protocol::clean_append(
            older.text().unwrap(),
            newer.text().unwrap(),
        );
        prop_assert_eq!(want, same && clean);
    }

    #[test]
    fn an_event_reads_the_same_however_it_is_spelled(event in known_event()) {
        let line = Line::parse(&format!(r#"{{"seq":1,"ts":1,"event":{event}}}"#)).unwrap();
        // The event as the map reads it, written out once more: each key once, in order,
        // nothing escaped that need not be.
        let plain = Line::new(1, 1.0, line.event().clone()).unwrap();
        prop_assert_eq!(Event::read(&line), Event::read(&plain), "{}", event);
    }
}
