//! `sglr._core.Decision` / `Admission`: one selection's outcome as Python objects and int32
//! arrays, built once after the selection (with the GIL held again).

use numpy::PyArray1;
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PySlice};
use sglr_radix::NodeId;
use sglr_sched::Decision;

use crate::buffers::slots_to_numpy;

/// One admitted request of a `Decision`.
#[pyclass(name = "Admission", module = "sglr._core", frozen, get_all)]
pub(crate) struct PyAdmission {
    rid: u64,
    prefix_len: usize,
    extend_len: usize,
    is_prompt_done: bool,
    is_continuation: bool,
    node: Option<u64>,
    waited_steps: u64,
    is_urgent: bool,
}

#[pymethods]
impl PyAdmission {
    fn __repr__(&self) -> String {
        format!(
            "Admission(rid={}, prefix_len={}, extend_len={}, is_prompt_done={}, \
             is_continuation={}, node={:?})",
            self.rid,
            self.prefix_len,
            self.extend_len,
            if self.is_prompt_done { "True" } else { "False" },
            if self.is_continuation { "True" } else { "False" },
            self.node
        )
    }
}

/// What one `Scheduler.select` decided.
#[pyclass(name = "Decision", module = "sglr._core", frozen)]
pub(crate) struct PyDecision {
    #[pyo3(get)]
    step: u64,
    #[pyo3(get)]
    admitted: Py<PyList>,
    #[pyo3(get)]
    prefix_slots: Py<PyArray1<i32>>,
    #[pyo3(get)]
    prefix_offsets: Py<PyArray1<i64>>,
    #[pyo3(get)]
    num_tokens_to_evict: usize,
    #[pyo3(get)]
    num_prefill_tokens: usize,
    #[pyo3(get)]
    stop_reason: &'static str,
    offsets: Vec<i64>,
}

impl PyDecision {
    pub(crate) fn new(py: Python<'_>, decision: Decision<NodeId>) -> PyResult<Self> {
        let mut offsets = Vec::with_capacity(decision.admissions.len() + 1);
        offsets.push(0i64);
        let admitted = PyList::empty(py);
        for admission in &decision.admissions {
            offsets.push(admission.slots.end as i64);
            admitted.append(Py::new(
                py,
                PyAdmission {
                    rid: admission.rid,
                    prefix_len: admission.prefix_len,
                    extend_len: admission.extend_len,
                    is_prompt_done: admission.is_prompt_done,
                    is_continuation: admission.is_continuation,
                    node: admission.node.map(NodeId::to_u64),
                    waited_steps: admission.waited_steps,
                    is_urgent: admission.is_urgent,
                },
            )?)?;
        }
        Ok(Self {
            step: decision.step,
            admitted: admitted.unbind(),
            prefix_slots: slots_to_numpy(py, decision.prefix_slots).unbind(),
            prefix_offsets: PyArray1::from_slice(py, &offsets).unbind(),
            num_tokens_to_evict: decision.num_tokens_to_evict,
            num_prefill_tokens: decision.num_prefill_tokens,
            stop_reason: decision.stop.name(),
            offsets,
        })
    }
}

#[pymethods]
impl PyDecision {
    /// The matched prefix slots of the `i`-th admission (a view into `prefix_slots`).
    fn prefix_slots_of<'py>(&self, py: Python<'py>, i: isize) -> PyResult<Bound<'py, PyAny>> {
        let n = (self.offsets.len() - 1) as isize;
        let index = if i < 0 { i + n } else { i };
        if !(0..n).contains(&index) {
            return Err(PyIndexError::new_err(format!(
                "admission index {i} out of range for {n} admissions"
            )));
        }
        let (start, end) = (self.offsets[index as usize], self.offsets[index as usize + 1]);
        let slice = PySlice::new(py, start as isize, end as isize, 1);
        self.prefix_slots.bind(py).as_any().get_item(slice)
    }

    fn __len__(&self) -> usize {
        self.offsets.len() - 1
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.admitted.bind(py).as_any().try_iter().map(Bound::into_any)
    }

    fn __repr__(&self) -> String {
        format!(
            "Decision(step={}, num_admitted={}, num_prefill_tokens={}, num_tokens_to_evict={}, stop_reason={:?})",
            self.step,
            self.offsets.len() - 1,
            self.num_prefill_tokens,
            self.num_tokens_to_evict,
            self.stop_reason
        )
    }
}
