//! `sglr._core`: the only crate that knows pyo3. Each submodule wraps one pure-Rust core.

mod attn;
mod buffers;
mod decode;
mod errors;
mod fsm;
mod grammar;
mod isa;
mod moe;
mod norm;
mod radix;
mod router;
mod sched;
mod sched_decision;
mod sched_index;

use pyo3::prelude::*;

// NOTE: constrained decoding builds automata and token masks lazily, a burst of small and
// mask-sized buffers on the first steps of a request; the system allocator spent about a fifth
// of that time in malloc and free (perf, mask_profile over MaskBench).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[pymodule]
fn _core(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<radix::PyRadixTree>()?;
    module.add_class::<router::PyPrefixForest>()?;
    module.add_function(wrap_pyfunction!(router::scan_id_prompt, module)?)?;
    module.add_class::<sched::PyScheduler>()?;
    module.add_class::<sched_decision::PyDecision>()?;
    module.add_class::<sched_decision::PyAdmission>()?;
    module.add_class::<fsm::PyVocabulary>()?;
    module.add_class::<fsm::PyTokenFsm>()?;
    module.add_function(wrap_pyfunction!(fsm::fill_bitmasks, module)?)?;
    module.add_function(wrap_pyfunction!(fsm::json_schema_to_regex_py, module)?)?;
    module.add_class::<grammar::PyGrammarConstraint>()?;
    module.add_class::<grammar::PyGrammarState>()?;
    module.add_function(wrap_pyfunction!(grammar::fill_grammar_bitmasks, module)?)?;
    module.add_function(wrap_pyfunction!(grammar::json_schema_is_recursive, module)?)?;
    module.add_function(wrap_pyfunction!(grammar::json_schema_to_ebnf, module)?)?;
    module.add_function(wrap_pyfunction!(attn::decode_attention, module)?)?;
    module.add_function(wrap_pyfunction!(attn::store_kv_rows, module)?)?;
    module.add_function(wrap_pyfunction!(norm::rms_norm, module)?)?;
    module.add_function(wrap_pyfunction!(moe::moe_expert_mlp, module)?)?;
    module.add_function(wrap_pyfunction!(isa::cpu_isa, module)?)?;
    module.add_class::<decode::PyQ8Matrix>()?;
    module.add_class::<decode::PyGgufMatrix>()?;
    module.add_class::<decode::PyCpuDecodeModel>()?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
