//! How schemas are read and how far the regex back end unfolds them.

/// How JSON text may be laid out and how far generic values and recursion unfold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonSchemaOptions {
    /// Regex for the whitespace allowed between JSON tokens. The default `[ ]?` admits both
    /// compact output and Python's `json.dumps` layout while keeping a model from looping on
    /// whitespace; `[ \t\n\r]*` is the fully flexible choice.
    pub whitespace_pattern: String,
    /// What an object allows when its schema says nothing about `additionalProperties`:
    /// `false` (the default) admits only declared properties, as generation wants; `true`
    /// follows the JSON Schema specification and admits any other property too.
    pub additional_properties_default: bool,
    /// The types of a schema without `type` whose keywords belong to one type (`properties`,
    /// `minLength`, `minimum` ...): `true` (the default) admits only the types those keywords
    /// imply (`{"properties": ...}` is an object), as generation wants; `false` follows the
    /// specification, where such keywords constrain only values of their own type and every
    /// other type stays free (`{"properties": ...}` also admits `"text"` and `3`). `enum` and
    /// `const` restrict the types either way.
    pub implied_types: bool,
    /// Nesting depth of arrays/objects inside an unconstrained value (`{}` or `true`, and the
    /// members an object or array leaves free). `None`: any depth, as the schema says, which
    /// no regex can hold: such a schema is refused (`FsmError::UnsupportedSchema` naming
    /// the keyword that leaves the value free) and the grammar path takes it.
    pub max_any_depth: Option<usize>,
    /// How many times one `$ref` may be unfolded inside itself; deeper recursion is cut.
    pub max_recursion_depth: usize,
    /// Largest regex (bytes) the schema may expand to; past it `AutomatonTooLarge`, which
    /// routes the schema to the grammar path (lexemes built on first use). Determinizing a
    /// schema regex costs 1 to 5 ms per KiB of it here (with the first mask), so the default
    /// keeps an eager DFA to a few ms.
    pub max_regex_len: usize,
    /// Largest string length bound (`maxLength`, or `minLength` without one) spelled out as a
    /// counted repetition: each counted character is a copy of a character's ~13 DFA states,
    /// which determinization pays for (about 85 µs a count here: `maxLength` 10,000 took a
    /// second). Past it the string is refused (`FsmError::UnsupportedSchema` naming the
    /// keyword) and the grammar path takes it as a counted lexeme built directly
    /// (`sglr_fsm::json::json_string_of_length`). `None`: spelled out whatever the bound.
    pub max_unrolled_length: Option<usize>,
    /// Whether an object's declared properties may come in any order (each at most once,
    /// every `required` one present), as JSON text written by hand or by another program
    /// often lists them. `false` (the default): in the order the schema lists them, one
    /// sequence a model follows at no cost. Any order is exact on both paths: the regex path
    /// spells out the orders of up to [`MAX_REGEX_ANY_ORDER_PROPERTIES`] properties (past
    /// them `UnsupportedSchema` naming `properties` routes the schema to the grammar path),
    /// the grammar path has one rule set per set of properties written so far, up to a bound
    /// it refuses past by name.
    pub properties_any_order: bool,
}

impl Default for JsonSchemaOptions {
    fn default() -> Self {
        Self {
            whitespace_pattern: "[ ]?".into(),
            additional_properties_default: false,
            implied_types: true,
            max_any_depth: Some(3),
            max_recursion_depth: 3,
            max_regex_len: DEFAULT_MAX_REGEX_LEN,
            max_unrolled_length: Some(DEFAULT_MAX_UNROLLED_LENGTH),
            properties_any_order: false,
        }
    }
}

/// [`JsonSchemaOptions::max_regex_len`]'s default.
pub const DEFAULT_MAX_REGEX_LEN: usize = 4 << 10;

/// [`JsonSchemaOptions::max_unrolled_length`]'s default: a string bound this large already
/// costs a few ms of determinization (`benches/results/maskbench_grammar_cpu.md`).
pub const DEFAULT_MAX_UNROLLED_LENGTH: usize = 32;

/// Most declared properties of one object whose orders the regex path spells out under
/// [`JsonSchemaOptions::properties_any_order`]: n properties appear in about e·n! places of the
/// regex (16 of 3 properties' orders and subsets; 65 of 4), so past 3 the grammar path's rules
/// (one per set of properties written) are smaller.
pub const MAX_REGEX_ANY_ORDER_PROPERTIES: usize = 3;
