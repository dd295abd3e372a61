//! `sglr._core.GrammarConstraint` / `GrammarState` and the batched `fill_grammar_bitmasks`:
//! EBNF grammars and recursive JSON schemas as token masks. Compiling, masking and jump-forward
//! release the GIL.

use std::sync::Arc;

use numpy::{PyReadwriteArray1, PyReadwriteArray2};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use sglr_fsm::CompileLimits;
use sglr_grammar::{
    grammar_to_ebnf, json_schema_to_grammar, parse_ebnf, structural_tag_to_grammar, GrammarError,
    GrammarMatcher, ParseState, ParserLimits, StructuralTag, TagStructure,
};
use sglr_schema::JsonSchemaOptions;
use sglr_vocab::Vocabulary;

use crate::buffers::IdArray;
use crate::errors::{fsm_error, sglr_error};
use crate::fsm::PyVocabulary;

/// Longest jump-forward run, in bytes.
const MAX_FORCED_BYTES: usize = 256;

pub(crate) fn grammar_error(py: Python<'_>, error: GrammarError) -> PyErr {
    let class_name = match &error {
        GrammarError::Schema(inner) => return fsm_error(py, inner.clone()),
        GrammarError::Lexeme { source: sglr_fsm::FsmError::AutomatonTooLarge { .. }, .. } => {
            "ConstraintTooLargeError"
        }
        GrammarError::Syntax { line, column, .. } => {
            let built =
                py.import("sglr.errors").and_then(|m| m.getattr("GrammarSyntaxError")).and_then(|class| {
                    let kwargs = PyDict::new(py);
                    kwargs.set_item("line", line)?;
                    kwargs.set_item("column", column)?;
                    class.call((error.to_string(),), Some(&kwargs))
                });
            return match built {
                Ok(instance) => PyErr::from_value(instance),
                Err(import_failure) => import_failure,
            };
        }
        GrammarError::StructuralTag { field, .. } => {
            // The field travels as an attribute so the server can name it.
            let built = py
                .import("sglr.errors")
                .and_then(|m| m.getattr("InvalidStructuralTagError"))
                .and_then(|class| {
                    let kwargs = PyDict::new(py);
                    kwargs.set_item("field", field)?;
                    class.call((error.to_string(),), Some(&kwargs))
                });
            return match built {
                Ok(instance) => PyErr::from_value(instance),
                Err(import_failure) => import_failure,
            };
        }
        GrammarError::UndefinedRule(_) | GrammarError::Lexeme { .. } => "GrammarSyntaxError",
        GrammarError::EmptyLanguage => "EmptyConstraintError",
        GrammarError::ParserTooLarge { .. } | GrammarError::GrammarTooLarge(_) => "ConstraintTooLargeError",
        GrammarError::TokenOutOfRange { .. } => "TokenNotAllowedError",
        GrammarError::BitmaskTooSmall { .. } => "BitmaskShapeError",
        GrammarError::Invariant(_) => "InvariantError",
    };
    sglr_error(py, class_name, error.to_string())
}

/// A compiled grammar over one vocabulary, shared by every request using it.
#[pyclass(name = "GrammarConstraint", module = "sglr._core", frozen)]
pub(crate) struct PyGrammarConstraint {
    matcher: Arc<GrammarMatcher>,
    vocabulary: Arc<Vocabulary>,
}

#[pymethods]
impl PyGrammarConstraint {
    /// Compiles EBNF / GBNF / Lark-style grammar text (start rule `root`, else `start`).
    #[staticmethod]
    fn from_ebnf(py: Python<'_>, text: String, vocabulary: &PyVocabulary) -> PyResult<Self> {
        let grammar = py.detach(|| parse_ebnf(&text)).map_err(|e| grammar_error(py, e))?;
        Ok(Self::build(grammar, vocabulary))
    }

    /// Compiles a JSON schema (JSON text) with `$ref` recursion as grammar rules.
    #[staticmethod]
    #[pyo3(signature = (schema, vocabulary, *, whitespace_pattern=None, additional_properties=false,
                        implied_types=true, properties_any_order=false))]
    fn from_json_schema(
        py: Python<'_>,
        schema: String,
        vocabulary: &PyVocabulary,
        whitespace_pattern: Option<String>,
        additional_properties: bool,
        implied_types: bool,
        properties_any_order: bool,
    ) -> PyResult<Self> {
        let options = JsonSchemaOptions {
            properties_any_order,
            ..schema_options(whitespace_pattern, additional_properties, implied_types)
        };
        let grammar =
            py.detach(|| json_schema_to_grammar(&schema, &options)).map_err(|e| grammar_error(py, e))?;
        Ok(Self::build(grammar, vocabulary))
    }

    /// Compiles a structural tag: `structures` as `(begin, schema JSON text, end)`, and the
    /// `triggers` that open them; schemas are read as `from_json_schema` reads them.
    #[staticmethod]
    #[pyo3(signature = (structures, triggers, vocabulary, *, whitespace_pattern=None,
                        additional_properties=false, implied_types=true))]
    fn from_structural_tag(
        py: Python<'_>,
        structures: Vec<(String, String, String)>,
        triggers: Vec<String>,
        vocabulary: &PyVocabulary,
        whitespace_pattern: Option<String>,
        additional_properties: bool,
        implied_types: bool,
    ) -> PyResult<Self> {
        let tag = StructuralTag {
            structures: structures
                .into_iter()
                .map(|(begin, schema, end)| TagStructure { begin, schema, end })
                .collect(),
            triggers,
        };
        let options = schema_options(whitespace_pattern, additional_properties, implied_types);
        let grammar =
            py.detach(|| structural_tag_to_grammar(&tag, &options)).map_err(|e| grammar_error(py, e))?;
        Ok(Self::build(grammar, vocabulary))
    }

    /// A fresh state at the start of the output.
    fn start(&self, py: Python<'_>) -> PyResult<PyGrammarState> {
        let state = py.detach(|| self.matcher.start()).map_err(|e| grammar_error(py, e))?;
        Ok(PyGrammarState { matcher: self.matcher.clone(), vocabulary: self.vocabulary.clone(), state })
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.vocabulary.vocab_size()
    }

    #[getter]
    fn num_rules(&self) -> usize {
        self.matcher.grammar().num_rules()
    }

    #[getter]
    fn num_lexemes(&self) -> usize {
        self.matcher.grammar().num_lexemes()
    }

    /// Lexeme DFAs built so far (they are built on first use).
    #[getter]
    fn num_lexemes_built(&self) -> usize {
        self.matcher.num_lexemes_built()
    }

    /// Bytes held by the lexeme DFAs built so far and the memoised lexeme masks.
    #[getter]
    fn memory_bytes(&self) -> usize {
        self.matcher.memory_bytes()
    }

    /// Memoised inside-a-lexeme token masks.
    #[getter]
    fn num_lexeme_masks(&self) -> usize {
        self.matcher.num_lexeme_masks()
    }
}

fn schema_options(
    whitespace_pattern: Option<String>,
    additional_properties: bool,
    implied_types: bool,
) -> JsonSchemaOptions {
    let defaults = JsonSchemaOptions::default();
    JsonSchemaOptions {
        whitespace_pattern: whitespace_pattern.unwrap_or(defaults.whitespace_pattern.clone()),
        additional_properties_default: additional_properties,
        implied_types,
        ..defaults
    }
}

impl PyGrammarConstraint {
    fn build(grammar: sglr_grammar::Grammar, vocabulary: &PyVocabulary) -> Self {
        let matcher = GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default());
        Self { matcher: Arc::new(matcher), vocabulary: vocabulary.shared() }
    }
}

/// One output's position in a grammar. `copy()` gives an independent position.
#[pyclass(name = "GrammarState", module = "sglr._core")]
pub(crate) struct PyGrammarState {
    matcher: Arc<GrammarMatcher>,
    vocabulary: Arc<Vocabulary>,
    state: ParseState,
}

#[pymethods]
impl PyGrammarState {
    fn copy(&self) -> Self {
        Self { matcher: self.matcher.clone(), vocabulary: self.vocabulary.clone(), state: self.state.clone() }
    }

    #[getter]
    fn is_accepting(&self) -> bool {
        self.matcher.is_accepting(&self.state)
    }

    /// EOS was taken: only EOS may follow.
    #[getter]
    fn is_finished(&self) -> bool {
        self.state.is_finished()
    }

    #[getter]
    fn num_bytes(&self) -> usize {
        self.state.num_bytes()
    }

    /// Takes one token; False (and no change) when the grammar forbids it.
    fn try_advance(&mut self, py: Python<'_>, token: u32) -> PyResult<bool> {
        let Self { matcher, vocabulary, state } = self;
        py.detach(|| matcher.advance_token(state, vocabulary, token)).map_err(|e| grammar_error(py, e))
    }

    /// Takes raw bytes; False (and no change) when they leave the language.
    fn advance_bytes(&mut self, py: Python<'_>, data: Vec<u8>) -> PyResult<bool> {
        let Self { matcher, state, .. } = self;
        py.detach(|| matcher.advance_bytes(state, &data)).map_err(|e| grammar_error(py, e))
    }

    /// The bytes every continuation starts with (jump-forward), without taking them.
    fn forced_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let forced = py
            .detach(|| self.matcher.forced_bytes(&self.state, MAX_FORCED_BYTES))
            .map_err(|e| grammar_error(py, e))?;
        Ok(PyBytes::new(py, &forced))
    }

    /// Writes the allowed-token bitmask into `out` (1-D int32, zeroed first).
    fn fill_bitmask(&self, py: Python<'_>, mut out: PyReadwriteArray1<'_, i32>) -> PyResult<()> {
        let words =
            out.as_slice_mut().map_err(|_| PyValueError::new_err("out must be a contiguous int32 array"))?;
        py.detach(|| {
            words.fill(0);
            self.matcher.fill_mask(&self.state, &self.vocabulary, bytemuck_words(words))
        })
        .map(|_| ())
        .map_err(|e| grammar_error(py, e))
    }

    fn check_invariants(&self, py: Python<'_>) -> PyResult<()> {
        self.matcher.check_invariants(&self.state).map_err(|e| grammar_error(py, e))
    }

    fn __repr__(&self) -> String {
        format!("GrammarState(num_bytes={}, accepting={})", self.state.num_bytes(), self.is_accepting())
    }
}

/// The same words seen as `u32` (masks are bit patterns; the sign bit is token 31).
fn bytemuck_words(words: &mut [i32]) -> &mut [u32] {
    // SAFETY: i32 and u32 have the same size and alignment and every bit pattern is valid.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u32>(), words.len()) }
}

/// Fills row `rows[i]` of `out` (2-D int32, C-contiguous) with the mask of `states[i]`, for a
/// whole batch in one call with the GIL released. Rows are zeroed before they are filled.
#[pyfunction]
pub(crate) fn fill_grammar_bitmasks(
    py: Python<'_>,
    states: &Bound<'_, PyAny>,
    mut out: PyReadwriteArray2<'_, i32>,
    rows: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let mut batch: Vec<(Arc<GrammarMatcher>, Arc<Vocabulary>, ParseState)> = Vec::new();
    for item in states.try_iter()? {
        let item = item?;
        let state = item
            .cast::<PyGrammarState>()
            .map_err(|_| PyTypeError::new_err("states must contain GrammarState objects"))?;
        let state = state.borrow();
        batch.push((state.matcher.clone(), state.vocabulary.clone(), state.state.clone()));
    }
    let rows: Vec<usize> = IdArray::extract(rows, "rows")?.as_slice().iter().map(|&r| r as usize).collect();
    let shape = out.as_array().shape().to_vec();
    let (num_rows, row_words) = (shape[0], shape[1]);
    if rows.len() != batch.len() || rows.iter().any(|&r| r >= num_rows) {
        return Err(PyValueError::new_err("rows must name one in-range row per state"));
    }
    let words =
        out.as_slice_mut().map_err(|_| PyValueError::new_err("out must be a C-contiguous int32 array"))?;
    py.detach(|| {
        for ((matcher, vocabulary, state), &row) in batch.iter().zip(&rows) {
            let slice = &mut words[row * row_words..(row + 1) * row_words];
            slice.fill(0);
            matcher.fill_mask(state, vocabulary, bytemuck_words(slice))?;
        }
        Ok(())
    })
    .map_err(|e| grammar_error(py, e))
}

/// Whether a JSON schema (JSON text) has a `$ref` cycle, which only the grammar path admits
/// to any depth.
#[pyfunction]
pub(crate) fn json_schema_is_recursive(py: Python<'_>, schema: String) -> bool {
    py.detach(|| sglr_schema::schema_is_recursive(&schema))
}

/// A JSON schema's grammar as GBNF rules whose start rule is `name` (other rules `name_<id>`),
/// for embedding in a larger EBNF grammar (tool calls wrap each tool's arguments schema).
#[pyfunction]
#[pyo3(signature = (schema, name, *, whitespace_pattern=None, additional_properties=false,
                    properties_any_order=false))]
pub(crate) fn json_schema_to_ebnf(
    py: Python<'_>,
    schema: String,
    name: String,
    whitespace_pattern: Option<String>,
    additional_properties: bool,
    properties_any_order: bool,
) -> PyResult<String> {
    let defaults = JsonSchemaOptions::default();
    let options = JsonSchemaOptions {
        whitespace_pattern: whitespace_pattern.unwrap_or(defaults.whitespace_pattern.clone()),
        additional_properties_default: additional_properties,
        properties_any_order,
        ..defaults
    };
    let grammar =
        py.detach(|| json_schema_to_grammar(&schema, &options)).map_err(|e| grammar_error(py, e))?;
    grammar_to_ebnf(&grammar, &name).map_err(|e| grammar_error(py, e))
}
