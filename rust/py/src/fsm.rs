//! `sglr._core.Vocabulary`, `TokenFsm` and the batched `fill_bitmasks`: regex / JSON-schema
//! constraints as token masks. Compiling and filling release the GIL.

use std::sync::Arc;

use numpy::{PyArray1, PyReadwriteArray1, PyReadwriteArray2};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use sglr_fsm::{CompileLimits, TokenFsm};
use sglr_schema::{json_schema_to_regex, JsonSchemaOptions, DEFAULT_MAX_UNROLLED_LENGTH};
use sglr_vocab::{TokenEncoding, Vocabulary};

use crate::buffers::IdArray;
use crate::errors::fsm_error;

#[pyclass(name = "Vocabulary", module = "sglr._core", frozen)]
pub(crate) struct PyVocabulary {
    inner: Arc<Vocabulary>,
}

#[pymethods]
impl PyVocabulary {
    /// `tokens[i]` is token i: `bytes` (raw), `str` (decoded with `encoding`) or `None`
    /// (special / unused: never allowed). EOS ids are allowed exactly in accepting states.
    #[new]
    #[pyo3(signature = (tokens, eos_token_ids, encoding="utf8"))]
    fn new(
        py: Python<'_>,
        tokens: &Bound<'_, PyAny>,
        eos_token_ids: &Bound<'_, PyAny>,
        encoding: &str,
    ) -> PyResult<Self> {
        let encoding = TokenEncoding::from_name(encoding).map_err(|e| fsm_error(py, e.into()))?;
        let eos = IdArray::extract(eos_token_ids, "eos_token_ids")?.as_slice().to_vec();
        let mut raw: Vec<Option<Vec<u8>>> = Vec::new();
        let mut text: Vec<(usize, String)> = Vec::new();
        for (index, item) in tokens.try_iter()?.enumerate() {
            let item = item?;
            if item.is_none() {
                raw.push(None);
            } else if let Ok(bytes) = item.cast::<PyBytes>() {
                raw.push(Some(bytes.as_bytes().to_vec()));
            } else if let Ok(string) = item.cast::<PyString>() {
                text.push((index, string.to_cow()?.into_owned()));
                raw.push(None);
            } else {
                return Err(PyTypeError::new_err(format!("token {index} must be bytes, str or None")));
            }
        }
        let built = py.detach(move || {
            for (index, token) in text {
                raw[index] = Some(encoding.decode(&token)?);
            }
            Vocabulary::new(raw, eos)
        });
        Ok(Self { inner: Arc::new(built.map_err(|e| fsm_error(py, e.into()))?) })
    }

    /// Number of token ids (mask width in bits).
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    /// int32 words per mask row: `ceil(vocab_size / 32)`.
    #[getter]
    fn num_mask_words(&self) -> usize {
        self.inner.num_mask_words()
    }

    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.inner.eos_token_ids().to_vec()
    }

    /// Content hash: equal vocabularies have equal fingerprints (a compile-cache key).
    #[getter]
    fn fingerprint(&self) -> u64 {
        self.inner.fingerprint()
    }

    /// Bytes of an ordinary token; `None` for specials, EOS and out-of-range ids.
    fn token_bytes<'py>(&self, py: Python<'py>, token_id: u32) -> Option<Bound<'py, PyBytes>> {
        self.inner.token_bytes(token_id).map(|b| PyBytes::new(py, b))
    }

    /// Heap bytes of the token table, its trie and the walks shared by its FSMs.
    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    /// Forgets the trie walks shared between FSMs (benchmarks measure cold costs with it).
    fn clear_caches(&self) {
        self.inner.clear_caches()
    }

    fn __len__(&self) -> usize {
        self.inner.vocab_size()
    }

    fn __repr__(&self) -> String {
        format!(
            "Vocabulary(vocab_size={}, num_ordinary_tokens={}, eos_token_ids={:?})",
            self.inner.vocab_size(),
            self.inner.num_ordinary_tokens(),
            self.inner.eos_token_ids()
        )
    }
}

impl PyVocabulary {
    pub(crate) fn shared(&self) -> Arc<Vocabulary> {
        self.inner.clone()
    }
}

#[pyclass(name = "TokenFsm", module = "sglr._core", frozen)]
pub(crate) struct PyTokenFsm {
    inner: Arc<TokenFsm>,
    pattern: String,
}

fn limits(dfa_size_limit: Option<usize>, nfa_size_limit: Option<usize>) -> CompileLimits {
    let defaults = CompileLimits::default();
    CompileLimits {
        dfa_size_limit: dfa_size_limit.unwrap_or(defaults.dfa_size_limit),
        determinize_size_limit: dfa_size_limit.unwrap_or(defaults.determinize_size_limit),
        nfa_size_limit: nfa_size_limit.unwrap_or(defaults.nfa_size_limit),
        ..defaults
    }
}

#[allow(clippy::too_many_arguments)]
fn schema_options(
    whitespace_pattern: Option<String>,
    additional_properties: bool,
    implied_types: bool,
    max_any_depth: Option<usize>,
    max_recursion_depth: Option<usize>,
    max_regex_len: Option<usize>,
    max_unrolled_length: Option<usize>,
    properties_any_order: bool,
) -> JsonSchemaOptions {
    let defaults = JsonSchemaOptions::default();
    JsonSchemaOptions {
        whitespace_pattern: whitespace_pattern.unwrap_or(defaults.whitespace_pattern),
        additional_properties_default: additional_properties,
        implied_types,
        max_any_depth,
        max_recursion_depth: max_recursion_depth.unwrap_or(defaults.max_recursion_depth),
        max_regex_len: max_regex_len.unwrap_or(defaults.max_regex_len),
        max_unrolled_length,
        properties_any_order,
    }
}

/// Errors of a mask buffer that is not a writable C-contiguous int32 array.
fn not_contiguous(what: &str) -> PyErr {
    PyValueError::new_err(format!("{what} must be a C-contiguous writable int32 array"))
}

#[pymethods]
impl PyTokenFsm {
    /// Compiles `pattern` (the whole output must match it) for `vocabulary`.
    #[staticmethod]
    #[pyo3(signature = (pattern, vocabulary, *, dfa_size_limit=None, nfa_size_limit=None))]
    fn from_regex(
        py: Python<'_>,
        pattern: String,
        vocabulary: &PyVocabulary,
        dfa_size_limit: Option<usize>,
        nfa_size_limit: Option<usize>,
    ) -> PyResult<Self> {
        let vocab = vocabulary.inner.clone();
        let limits = limits(dfa_size_limit, nfa_size_limit);
        let compiled = py.detach(|| TokenFsm::from_regex(&pattern, vocab, &limits));
        Ok(Self { inner: Arc::new(compiled.map_err(|e| fsm_error(py, e))?), pattern })
    }

    /// Compiles a JSON schema (JSON text) for `vocabulary`; see `json_schema_to_regex`.
    #[staticmethod]
    #[pyo3(signature = (schema, vocabulary, *, whitespace_pattern=None, additional_properties=false,
                        implied_types=true, max_any_depth=Some(3), max_recursion_depth=None, dfa_size_limit=None,
                        nfa_size_limit=None, max_regex_len=None,
                        max_unrolled_length=Some(DEFAULT_MAX_UNROLLED_LENGTH), properties_any_order=false))]
    #[allow(clippy::too_many_arguments)]
    fn from_json_schema(
        py: Python<'_>,
        schema: String,
        vocabulary: &PyVocabulary,
        whitespace_pattern: Option<String>,
        additional_properties: bool,
        implied_types: bool,
        max_any_depth: Option<usize>,
        max_recursion_depth: Option<usize>,
        dfa_size_limit: Option<usize>,
        nfa_size_limit: Option<usize>,
        max_regex_len: Option<usize>,
        max_unrolled_length: Option<usize>,
        properties_any_order: bool,
    ) -> PyResult<Self> {
        let options = schema_options(
            whitespace_pattern,
            additional_properties,
            implied_types,
            max_any_depth,
            max_recursion_depth,
            max_regex_len,
            max_unrolled_length,
            properties_any_order,
        );
        let vocab = vocabulary.inner.clone();
        let limits = limits(dfa_size_limit, nfa_size_limit);
        let compiled = py.detach(|| {
            let pattern = json_schema_to_regex(&schema, &options)?;
            TokenFsm::from_regex(&pattern, vocab, &limits).map(|fsm| (fsm, pattern))
        });
        let (fsm, pattern) = compiled.map_err(|e| fsm_error(py, e))?;
        Ok(Self { inner: Arc::new(fsm), pattern })
    }

    /// The regex this FSM enforces (for a schema: the regex it compiled to).
    #[getter]
    fn pattern(&self) -> &str {
        &self.pattern
    }

    #[getter]
    fn start_state(&self) -> u32 {
        self.inner.start_state()
    }

    /// The state after EOS; only EOS is allowed from it.
    #[getter]
    fn terminal_state(&self) -> u32 {
        self.inner.terminal_state()
    }

    #[getter]
    fn num_states(&self) -> usize {
        self.inner.num_states()
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocabulary().vocab_size()
    }

    #[getter]
    fn num_mask_words(&self) -> usize {
        self.inner.vocabulary().num_mask_words()
    }

    fn is_accepting(&self, py: Python<'_>, state: u32) -> PyResult<bool> {
        self.inner.is_accepting(state).map_err(|e| fsm_error(py, e))
    }

    fn is_terminal(&self, state: u32) -> bool {
        self.inner.is_terminal(state)
    }

    /// Writes the allowed-token bitmask of `state` into `out` (1-D int32, at least
    /// `num_mask_words` long; extra words are zeroed): bit t of word t // 32 = token t allowed.
    fn fill_bitmask(&self, py: Python<'_>, state: u32, mut out: PyReadwriteArray1<'_, i32>) -> PyResult<()> {
        let words = out.as_slice_mut().map_err(|_| not_contiguous("out"))?;
        let result = if self.inner.is_row_ready(state) {
            self.inner.fill_bitmask(state, words)
        } else {
            py.detach(|| self.inner.fill_bitmask(state, words))
        };
        result.map_err(|e| fsm_error(py, e))
    }

    /// Allowed token ids of `state`, ascending (EOS included when accepting).
    fn allowed_token_ids<'py>(&self, py: Python<'py>, state: u32) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let ids = py.detach(|| self.inner.allowed_token_ids(state)).map_err(|e| fsm_error(py, e))?;
        Ok(PyArray1::from_vec(py, ids.into_iter().map(|id| id as i32).collect()))
    }

    /// The state after `token`; raises `TokenNotAllowedError` if the mask forbids it.
    fn advance(&self, py: Python<'_>, state: u32, token: u32) -> PyResult<u32> {
        self.inner.advance(state, token).map_err(|e| fsm_error(py, e))
    }

    /// Like `advance`, returning None for a forbidden token.
    fn try_advance(&self, py: Python<'_>, state: u32, token: u32) -> PyResult<Option<u32>> {
        self.inner.try_advance(state, token).map_err(|e| fsm_error(py, e))
    }

    /// Advances through a token sequence; raises at the first forbidden token.
    fn advance_many(&self, py: Python<'_>, state: u32, tokens: &Bound<'_, PyAny>) -> PyResult<u32> {
        let tokens = IdArray::extract(tokens, "tokens")?;
        self.inner.advance_many(state, &tokens.as_slice()).map_err(|e| fsm_error(py, e))
    }

    /// The state after raw bytes (a jump-forward string), or None if they leave the language.
    fn advance_bytes(&self, py: Python<'_>, state: u32, data: &[u8]) -> PyResult<Option<u32>> {
        self.inner.advance_bytes(state, data).map_err(|e| fsm_error(py, e))
    }

    /// `(forced_bytes, next_state)`: the longest string every continuation of `state` starts
    /// with (never past an accepting state or into a partial UTF-8 character).
    fn jump_forward<'py>(&self, py: Python<'py>, state: u32) -> PyResult<(Bound<'py, PyBytes>, u32)> {
        let jump = self.inner.jump_forward(state).map_err(|e| fsm_error(py, e))?;
        Ok((PyBytes::new(py, &jump.bytes), jump.state))
    }

    /// Precomputes the rows of up to `max_states` token-reachable states; returns how many.
    #[pyo3(signature = (max_states=usize::MAX))]
    fn build_all(&self, py: Python<'_>, max_states: usize) -> usize {
        py.detach(|| self.inner.build_all(max_states))
    }

    /// Sizes: num_states, num_rows_built, num_dense_rows, memory_bytes.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.inner.stats();
        let dict = PyDict::new(py);
        dict.set_item("num_states", stats.num_states)?;
        dict.set_item("num_rows_built", stats.num_rows_built)?;
        dict.set_item("num_dense_rows", stats.num_dense_rows)?;
        dict.set_item("memory_bytes", stats.memory_bytes)?;
        Ok(dict)
    }

    fn check_invariants(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.check_invariants()).map_err(|e| fsm_error(py, e))
    }

    fn __repr__(&self) -> String {
        let stats = self.inner.stats();
        format!(
            "TokenFsm(num_states={}, num_rows_built={}, vocab_size={})",
            stats.num_states,
            stats.num_rows_built,
            self.inner.vocabulary().vocab_size()
        )
    }
}

/// Fills the masks of a batch in one call: row `rows[i]` (default `i`) of `out` (2-D int32,
/// C-contiguous, `[num_rows, >= num_mask_words]`) gets the mask of `fsms[i]` in `states[i]`.
/// Every input is checked before any row is written; the GIL is released while filling.
#[pyfunction]
#[pyo3(signature = (fsms, states, out, rows=None))]
pub(crate) fn fill_bitmasks(
    py: Python<'_>,
    fsms: &Bound<'_, PyAny>,
    states: &Bound<'_, PyAny>,
    mut out: PyReadwriteArray2<'_, i32>,
    rows: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let mut batch: Vec<Arc<TokenFsm>> = Vec::new();
    for item in fsms.try_iter()? {
        let item = item?;
        let fsm = item
            .cast::<PyTokenFsm>()
            .map_err(|_| PyTypeError::new_err("fsms must contain TokenFsm objects"))?;
        batch.push(fsm.get().inner.clone());
    }
    let states = IdArray::extract(states, "states")?;
    let states = states.as_slice();
    if states.len() != batch.len() {
        return Err(PyValueError::new_err(format!("{} fsms but {} states", batch.len(), states.len())));
    }
    let shape = out.as_array().shape().to_vec();
    let (num_rows, row_words) = (shape[0], shape[1]);
    let row_ids: Vec<usize> = match rows {
        None => (0..batch.len()).collect(),
        Some(rows) => IdArray::extract(rows, "rows")?.as_slice().iter().map(|&r| r as usize).collect(),
    };
    if row_ids.len() != batch.len() {
        return Err(PyValueError::new_err("rows must have one entry per fsm"));
    }
    if let Some(&bad) = row_ids.iter().find(|&&r| r >= num_rows) {
        return Err(PyValueError::new_err(format!(
            "row {bad} is out of range for a bitmask with {num_rows} rows"
        )));
    }
    let words = out.as_slice_mut().map_err(|_| not_contiguous("out"))?;
    let requests: Vec<(&TokenFsm, u32, usize)> = batch
        .iter()
        .zip(states.iter())
        .zip(row_ids.iter())
        .map(|((fsm, &state), &row)| (fsm.as_ref(), state, row))
        .collect();
    py.detach(|| sglr_fsm::fill_bitmask_rows(&requests, words, row_words)).map_err(|e| fsm_error(py, e))
}

/// Compiles a JSON schema (JSON text) to the regex `TokenFsm.from_json_schema` enforces.
#[pyfunction]
#[pyo3(signature = (schema, *, whitespace_pattern=None, additional_properties=false,
                    implied_types=true, max_any_depth=Some(3), max_recursion_depth=None, max_regex_len=None,
                    max_unrolled_length=Some(DEFAULT_MAX_UNROLLED_LENGTH), properties_any_order=false))]
#[pyo3(name = "json_schema_to_regex")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn json_schema_to_regex_py(
    py: Python<'_>,
    schema: String,
    whitespace_pattern: Option<String>,
    additional_properties: bool,
    implied_types: bool,
    max_any_depth: Option<usize>,
    max_recursion_depth: Option<usize>,
    max_regex_len: Option<usize>,
    max_unrolled_length: Option<usize>,
    properties_any_order: bool,
) -> PyResult<String> {
    let options = schema_options(
        whitespace_pattern,
        additional_properties,
        implied_types,
        max_any_depth,
        max_recursion_depth,
        max_regex_len,
        max_unrolled_length,
        properties_any_order,
    );
    py.detach(|| json_schema_to_regex(&schema, &options)).map_err(|e| fsm_error(py, e))
}
