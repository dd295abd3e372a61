//! JSON text, not JSON Schema: the regexes of its strings, numbers, literals and object keys
//! (in every spelling JSON allows), and automata built directly for what such a regex would
//! make slow or large: strings counted by length ([`json_string_of_length`],
//! [`json_string_counter`]), keys outside a declared set ([`undeclared_key_dfa`]) and the token
//! masks of a counted string body over a vocabulary ([`CountedBody`]). The schema compiler
//! (`sglr-schema`) writes its regexes from these pieces; the grammar path builds lexemes from
//! the automata.

mod counted_body;
mod keys;
mod string;
mod text;
mod undeclared;

pub use counted_body::{CountedBody, CountedBodyMask};
pub use keys::{key_in, key_not_in};
pub use string::{json_string_counter, json_string_counter_after_space, json_string_of_length};
pub use text::{
    class_char, encoded_char, json_string_regex, repeat, string_literal, INTEGER, NUMBER, STRING_CHAR,
};
pub use undeclared::{undeclared_key_dfa, undeclared_key_dfa_and_twins, TwinnedKeyDfa};
