//! The kernels' instruction set as Python sees it (rust/kernels' isa decides it once per process).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use sglr_kernels::isa::Isa;

/// `(isa, cpu, requested)`: the instruction set the kernels use, the best this CPU offers, and
/// the `SGLR_CPU_ISA` cap (None when unset). ValueError when that variable names none.
#[pyfunction]
pub(crate) fn cpu_isa() -> PyResult<(&'static str, &'static str, Option<&'static str>)> {
    let choice = Isa::configured().map_err(|error| PyValueError::new_err(error.to_string()))?;
    Ok((choice.isa.name(), choice.cpu.name(), choice.requested.map(Isa::name)))
}
