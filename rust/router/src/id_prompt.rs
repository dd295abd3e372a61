//! The routing key of a request body whose prompt is a plain list of token ids, read straight
//! from the body's bytes: the router then builds no interpreter object per id (nor for the rest
//! of the body) just to learn where to send the request.
//!
//! Only the plain case is answered; anything else (not a JSON object, the field missing or not
//! a non-empty list of integer literals in u32 range, JSON this parser refuses) is `None`, and
//! the caller parses the body as before. So a `Some` is exactly what parsing the whole body
//! would have given: integer literals are the only numbers read as u64, `true`/`false` are not
//! numbers, and a repeated member counts with its last value, as in Python's `json`.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

/// What the router reads from a body: the ids, and whether it asks for a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdPrompt {
    pub ids: Vec<u32>,
    /// The member `stream` is `true` (not merely truthy).
    pub stream: bool,
}

/// The ids in member `field` of the JSON object `body`, or `None` outside the plain case.
///
/// One pass over the bytes that builds nothing but the ids: the other members are checked for
/// well-formedness and skipped. Any value that is not what the plain case wants (a non-object
/// body, a non-array `field`, an id that is not an integer literal in u32 range) fails the
/// parse, which is the `None` the caller falls back on.
pub fn scan_id_prompt(body: &[u8], field: &str) -> Option<IdPrompt> {
    // Skipped strings are not checked for UTF-8 by the parser; Python refuses the whole body.
    let body = std::str::from_utf8(body).ok()?;
    let mut deserializer = serde_json::Deserializer::from_str(body);
    let prompt = BodySeed { field }.deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    prompt.filter(|prompt| !prompt.ids.is_empty())
}

struct BodySeed<'f> {
    field: &'f str,
}

impl<'de> DeserializeSeed<'de> for BodySeed<'_> {
    type Value = Option<IdPrompt>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for BodySeed<'_> {
    type Value = Option<IdPrompt>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Self::Value, A::Error> {
        // A repeated member counts with its last value.
        let (mut ids, mut stream) = (None, false);
        while let Some(name) = members.next_key::<String>()? {
            if name == self.field {
                ids = Some(members.next_value::<Vec<u32>>()?);
            } else if name == "stream" {
                stream = members.next_value::<Value>()? == Value::Bool(true);
            } else {
                members.next_value::<IgnoredAny>()?;
            }
        }
        Ok(ids.map(|ids| IdPrompt { ids, stream }))
    }
}

#[cfg(test)]
mod tests {
    use super::{scan_id_prompt, IdPrompt};

    fn ids(body: &str) -> Option<Vec<u32>> {
        scan_id_prompt(body.as_bytes(), "input_ids").map(|prompt| prompt.ids)
    }

    #[test]
    fn reads_plain_id_lists_and_the_stream_flag() {
        let body = br#"{"input_ids": [1, 0, 4294967295], "sampling_params": {"n": 1e3}, "stream": true}"#;
        assert_eq!(
            scan_id_prompt(body, "input_ids"),
            Some(IdPrompt { ids: vec![1, 0, 4294967295], stream: true })
        );
        let not_true = br#"{"input_ids": [7], "stream": 1}"#;
        assert!(!scan_id_prompt(not_true, "input_ids").unwrap().stream);
        assert_eq!(ids(r#" {"input_ids": [5], "input_ids": [6, 7]} "#), Some(vec![6, 7]));
        assert_eq!(scan_id_prompt(br#"{"prompt": [3]}"#, "prompt").unwrap().ids, [3]);
    }

    #[test]
    fn leaves_everything_else_to_the_caller() {
        for body in [
            r#"{"input_ids": []}"#,
            r#"{"input_ids": [1, 2.0]}"#,
            r#"{"input_ids": [1, 1e2]}"#,
            r#"{"input_ids": [true]}"#,
            r#"{"input_ids": [-1]}"#,
            r#"{"input_ids": [-0]}"#,
            r#"{"input_ids": [4294967296]}"#,
            r#"{"input_ids": ["a"]}"#,
            r#"{"input_ids": [[1]]}"#,
            r#"{"input_ids": 1}"#,
            r#"{"text": "hi"}"#,
            r#"[1, 2]"#,
            r#"{"input_ids": [1], "x": NaN}"#,
            r#"{"input_ids": [1]} trailing"#,
            "\u{feff}{\"input_ids\": [1]}",
            "{\"input_ids\": [1], \"x\": \"a\nb\"}",
            r#"{"input_ids": [1], "x": "\q"}"#,
            r#"{"input_ids": [1], "x": "\u12"}"#,
            r#"{"input_ids": [1], "x": [1,]}"#,
            r#"{"input_ids": [1], "x": 01}"#,
        ] {
            assert_eq!(ids(body), None, "{body}");
        }
        assert_eq!(scan_id_prompt(b"{\"input_ids\": [1], \"x\": \"\xff\"}", "input_ids"), None);
    }
}
