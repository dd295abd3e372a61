//! `"type": "string"`: length bounds, `pattern` and the common `format`s.

use serde_json::{Map, Value};
use sglr_fsm::json::json_string_regex;
use sglr_fsm::FsmError;

use super::literal::NEVER;
use crate::error::unsupported;
use crate::pattern::{full_match_char_bounds, pattern_body};
use crate::reader::SchemaReader;

/// `YYYY-MM-DD` with real month lengths (29 February in leap years only) and no year 0.
const DATE: &str = concat!(
    "(?:(?:000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})-",
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))",
    "|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29)"
);
const TIME: &str = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
const EMAIL: &str = r"[A-Za-z0-9!#$%&'*+=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+=?^_`{|}~-]+)*@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?";
const UUID: &str = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
const IPV4_OCTET: &str = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
const HOST_LABEL: &str = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?";
const URI_CHAR: &str = r"(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})";
const URI_SCHEME: &str = r"[A-Za-z][A-Za-z0-9+.\-]*:";

/// Regex (without quotes) of the formats we enforce. Other formats are annotations for
/// validators by default and are not enforced (the string is unconstrained).
fn format_body(format: &str) -> Option<String> {
    Some(match format {
        "date" => DATE.into(),
        "time" => TIME.into(),
        "date-time" => format!("{DATE}[Tt]{TIME}"),
        "email" => EMAIL.into(),
        "uuid" => UUID.into(),
        "ipv4" => format!(r"(?:{IPV4_OCTET}\.){{3}}{IPV4_OCTET}"),
        "hostname" => format!(r"{HOST_LABEL}(?:\.{HOST_LABEL})*"),
        // `/` may also be written `\/` inside JSON strings.
        "uri" => format!(r"{URI_SCHEME}(?:{URI_CHAR}|\\/)*"),
        "uri-reference" => format!(r"(?:{URI_SCHEME})?(?:{URI_CHAR}|\\/)*"),
        _ => return None,
    })
}

/// A string value under the string keywords of `schema`.
pub(super) fn string_schema(
    reader: &SchemaReader,
    schema: &Map<String, Value>,
    path: &str,
) -> Result<String, FsmError> {
    let min_len = reader.usize_keyword(schema, "minLength", path)?.unwrap_or(0);
    let max_len = reader.usize_keyword(schema, "maxLength", path)?;
    let format = match schema.get("format") {
        Some(Value::String(name)) => format_body(name).map(|body| (name.as_str(), body)),
        _ => None,
    };
    let pattern = match schema.get("pattern") {
        Some(Value::String(pattern)) => Some(pattern.as_str()),
        Some(_) => {
            return Err(FsmError::InvalidSchema {
                path: path.into(),
                message: "'pattern' must be a string".into(),
            })
        }
        None => None,
    };
    if let Some(max) = max_len {
        if max < min_len {
            return Ok(NEVER.into());
        }
    }
    let body = match (format, pattern) {
        (Some(_), Some(_)) => {
            return Err(unsupported(
                "pattern",
                path,
                "'pattern' together with an enforced 'format' cannot be expressed as one regex",
            ))
        }
        (Some((name, body)), None) => {
            let bounds = full_match_char_bounds(&body).unwrap_or((0, None));
            check_length_implied(bounds, min_len, max_len, path, &format!("format '{name}'"))?;
            body
        }
        (None, Some(pattern)) => {
            let body = pattern_body(pattern).map_err(|reason| unsupported("pattern", path, &reason))?;
            let bounds = (body.min_chars, body.max_chars);
            check_length_implied(bounds, min_len, max_len, path, "'pattern'")?;
            body.regex
        }
        (None, None) => {
            let bound = max_len.unwrap_or(min_len);
            if reader.options().max_unrolled_length.is_some_and(|limit| bound > limit) {
                let keyword = if max_len.is_some() { "maxLength" } else { "minLength" };
                return Err(unsupported(
                    keyword,
                    path,
                    &format!("a length bound of {bound} would unroll into a DFA that grows with it"),
                ));
            }
            return Ok(json_string_regex(min_len, max_len));
        }
    };
    Ok(format!("\"{body}\""))
}

/// A length bound next to a pattern/format is only accepted when every match already satisfies
/// it: intersecting two regular languages is beyond a regex string.
fn check_length_implied(
    (min_chars, max_chars): (usize, Option<usize>),
    min_len: usize,
    max_len: Option<usize>,
    path: &str,
    what: &str,
) -> Result<(), FsmError> {
    let implied =
        min_chars >= min_len && max_len.is_none_or(|max| max_chars.is_some_and(|max_chars| max_chars <= max));
    if implied {
        Ok(())
    } else {
        let keyword = if min_len > 0 { "minLength" } else { "maxLength" };
        Err(unsupported(
            keyword,
            path,
            &format!("length bounds together with {what} cannot be expressed as one regex"),
        ))
    }
}
