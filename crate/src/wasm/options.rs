//! Objects from JS (options, a patch, a backfill request), read as the struct that declares
//! them, and refused when they hold a key it does not (one whose value is `undefined` is not
//! held).
//!
//! serde-wasm-bindgen reads only the fields a struct names, so `deny_unknown_fields` never
//! fires: a misspelt key would be silently ignored, and `{ expectedWindowLinecount: 9 }` would
//! skip the check it asks for. [`read`] compares the object's keys with the struct's fields
//! first, the names as its `Deserialize` knows them ([`fields_of`]), so the list is never
//! written twice.

use serde::de::{self, DeserializeOwned, Visitor};
use wasm_bindgen::{JsCast, JsValue};

/// Reads `value`, a plain object, as `T`; else says what is wrong with it, in JS's names
/// (`what` names the object: `"options"`, `"patch"`).
pub(super) fn read<T: DeserializeOwned>(what: &str, value: JsValue) -> Result<T, String> {
    let plain = value.is_object() && !value.is_function() && !js_sys::Array::is_array(&value);
    let Some(object) = value.dyn_ref::<js_sys::Object>().filter(|_| plain) else {
        return Err(format!("{what} must be an object"));
    };
    let fields = fields_of::<T>();
    for key in js_sys::Object::keys(object).iter() {
        // A key left `undefined` (`{ ...options, storage: undefined }`) is one not given.
        let given = js_sys::Reflect::get(object, &key).is_ok_and(|v| !v.is_undefined());
        let key = key.as_string().unwrap_or_default();
        if given && !fields.contains(&key.as_str()) {
            return Err(format!(
                "{what} has no {key:?}: it takes {}",
                fields.join(", ")
            ));
        }
    }
    convert(what, value)
}

/// Reads `value` as `T` (a cursor, lines, a number); else says what is wrong with it.
pub(super) fn convert<T: DeserializeOwned>(what: &str, value: JsValue) -> Result<T, String> {
    serde_wasm_bindgen::from_value(value).map_err(|e| {
        // (Its message is a JS error's: "Error: missing field `server`".)
        let message = e.to_string();
        let message = message.strip_prefix("Error: ").unwrap_or(&message);
        format!("{what}: {}", in_js_words(message))
    })
}

/// serde-wasm-bindgen's words for a value of the wrong type, as JS would say them: `invalid
/// type: JsValue(Object({"mes":"x"})), expected a string` is `invalid type: an object, expected
/// a string`; a list or an object asked of a string or a number (which it reads with
/// `Reflect.get`) is `expected an array or an object`.
fn in_js_words(message: &str) -> String {
    let message = &numbers_in_js_words(message);
    if message.contains("Reflect.get called on non-object") {
        return "expected an array or an object".into();
    }
    let Some(start) = message.find("JsValue(") else {
        return message.to_string();
    };
    let inner = &message[start + "JsValue(".len()..];
    // The value's printout ends at the parenthesis that closes `JsValue(`.
    let mut depth = 1;
    let Some(end) = inner.char_indices().find_map(|(i, c)| {
        depth += match c {
            '(' => 1,
            ')' => -1,
            _ => 0,
        };
        (depth == 0).then_some(i)
    }) else {
        return message.to_string();
    };
    let kind = inner[..end].split(['(', ')']).next().unwrap_or("");
    let named = match kind {
        "Object" => "an object",
        "Array" => "an array",
        "Function" => "a function",
        "Symbol" => "a symbol",
        "BigInt" => "a bigint",
        _ => "a value of another type",
    };
    let rest = &inner[end + 1..];
    format!("{}{named}{rest}", &message[..start])
}

/// serde's words for a JS number, as JS would say them: `invalid type: floating point `-1.0`,
/// expected u64` (every JS number is a double) is `invalid type: the number -1, expected a
/// whole number, 0 or more`.
fn numbers_in_js_words(message: &str) -> String {
    let mut out = message.to_string();
    for unsigned in ["u64", "u32", "usize"] {
        out = out.replace(
            &format!("expected {unsigned}"),
            "expected a whole number, 0 or more",
        );
    }
    let Some(start) = out.find("floating point `") else {
        return out;
    };
    let rest = &out[start + "floating point `".len()..];
    let Some(end) = rest.find('`') else {
        return out;
    };
    let number = &rest[..end];
    let number = number.strip_suffix(".0").unwrap_or(number);
    format!("{}the number {number}{}", &out[..start], &rest[end + 1..])
}

/// The fields struct `T` reads, by the names its `Deserialize` knows (`rename_all` applied):
/// asked of it with a deserializer that only records them. Empty for anything but a struct.
fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Fields<'a>(&'a mut &'static [&'static str]);

    impl<'de> de::Deserializer<'de> for Fields<'_> {
        type Error = de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("fields taken"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }

    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Fields(&mut fields));
    fields
}
