//! JSON Schema for constrained decoding, read once for both constraint paths.
//!
//! Reading ([`SchemaReader`]): references within the document ([`pointer`],
//! [`schema_is_recursive`]), what the declared draft changes, keyword bookkeeping
//! ([`is_annotation`], [`keyword_type`]), `allOf` merged into one schema object
//! ([`SchemaReader::merge_all_of`]), `oneOf` branches proven disjoint
//! ([`SchemaReader::one_of_branches`]), `enum` / `const` values decided against the other
//! keywords ([`SchemaReader::admitted_literals`]), numeric bounds and `pattern`s (ECMA syntax,
//! matched anywhere) translated to regexes over the JSON-encoded string.
//!
//! Back ends: a schema as one regex over JSON text ([`json_schema_to_regex`], for
//! `sglr_fsm::TokenFsm::from_regex`), here; a schema as a grammar (recursive references as
//! rules) in `sglr_grammar::json_schema_to_grammar`, which reads through [`SchemaReader`] and
//! offers each sub-schema to this regex back end first. Neither back end ignores a keyword: what
//! it cannot enforce is refused (`sglr_fsm::FsmError::UnsupportedSchema`, naming the keyword).

mod admits;
mod disjoint;
mod draft;
mod error;
mod keywords;
mod merge;
mod numeric;
mod options;
mod pattern;
mod reader;
mod refs;
mod to_regex;

pub use keywords::{is_annotation, keyword_type, non_negative_integer};
pub use merge::branches_with_siblings;
pub use numeric::split_decimal;
pub use options::{
    JsonSchemaOptions, DEFAULT_MAX_REGEX_LEN, DEFAULT_MAX_UNROLLED_LENGTH, MAX_REGEX_ANY_ORDER_PROPERTIES,
};
pub use reader::SchemaReader;
pub use refs::{pointer, schema_is_recursive, value_is_recursive};
pub use to_regex::{json_schema_to_regex, json_value_to_regex, NEVER as NEVER_REGEX};
