//! `sglr._core`: the only crate that knows pyo3. Each submodule wraps one pure-Rust core.

mod buffers;
mod errors;
mod radix;
mod sched;
mod sched_decision;
mod sched_index;

use pyo3::prelude::*;

#[pymodule]
fn _core(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<radix::PyRadixTree>()?;
    module.add_class::<sched::PyScheduler>()?;
    module.add_class::<sched_decision::PyDecision>()?;
    module.add_class::<sched_decision::PyAdmission>()?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
