//! `sglr._core.Scheduler`: the waiting queue and cache-aware admission, one `select` per
//! engine step against a `sglr._core.RadixTree`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyInt;
use sglr_radix::{Namespace, NodeId, TokenId};
use sglr_sched::{
    NewRequest, Policy, RatioConfig, SchedConfig, SchedError, Scheduler, StarvationGuard, StepInput,
};

use crate::buffers::IdArray;
use crate::errors::sglr_error;
use crate::radix::PyRadixTree;
use crate::sched_decision::PyDecision;
use crate::sched_index::NamespacedTree;

/// Prompts at least this long are inserted into the waiting trie with the GIL released.
const DETACH_MIN_TOKENS: usize = 4096;

struct State {
    core: Scheduler<NodeId>,
    /// The scheduler's own namespace ids: index = id.
    namespace_names: Vec<String>,
    namespace_ids: HashMap<String, Namespace>,
    /// The tree the remembered cache matches refer to.
    last_tree: Option<Py<PyRadixTree>>,
}

#[pyclass(name = "Scheduler", module = "sglr._core", frozen)]
pub(crate) struct PyScheduler {
    // NOTE: every guard on this mutex is dropped before the thread waits for the GIL, so a
    // selection running without the GIL can never deadlock against a caller holding it.
    state: Mutex<State>,
}

fn sched_error(py: Python<'_>, error: SchedError) -> PyErr {
    let class_name = match &error {
        SchedError::DuplicateRequest(_) => "DuplicateRequestError",
        SchedError::EmptyPrompt(_) => "EmptyPromptError",
        SchedError::RequestTooLarge { .. } => "RequestTooLargeError",
        SchedError::Config(_) => "SchedulerConfigError",
        // A lock refused right after a match, or broken bookkeeping: a bug, never bad input.
        SchedError::Index(_) | SchedError::Invariant(_) => "InvariantError",
    };
    sglr_error(py, class_name, error.to_string())
}

fn config_error(py: Python<'_>, message: String) -> PyErr {
    sched_error(py, SchedError::Config(message))
}

fn count(py: Python<'_>, name: &str, value: i64) -> PyResult<usize> {
    usize::try_from(value).map_err(|_| config_error(py, format!("{name} must be >= 0, got {value}")))
}

fn count_arg(name: &str, value: i64) -> PyResult<usize> {
    usize::try_from(value).map_err(|_| PyValueError::new_err(format!("{name} must be >= 0, got {value}")))
}

/// A request id: a Python int in `[0, 2**64)`.
fn rid_arg(rid: &Bound<'_, PyAny>) -> PyResult<u64> {
    if !rid.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err("rid must be an int"));
    }
    rid.extract::<u64>().map_err(|_| PyValueError::new_err(format!("rid must be in [0, 2**64), got {rid}")))
}

fn monotonic_now(py: Python<'_>) -> PyResult<f64> {
    py.import("time")?.call_method0("monotonic")?.extract()
}

impl PyScheduler {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &self,
        py: Python<'_>,
        rid: &Bound<'_, PyAny>,
        token_ids: &Bound<'_, PyAny>,
        max_new_tokens: i64,
        namespace: Option<&str>,
        arrival_time: Option<f64>,
        placing: Placing,
    ) -> PyResult<()> {
        let Placing { max_prefix_len, priority_key, is_requeue } = placing;
        let rid = rid_arg(rid)?;
        let max_new_tokens = count_arg("max_new_tokens", max_new_tokens)?;
        let tokens: Arc<[TokenId]> = Arc::from(IdArray::extract(token_ids, "token_ids")?.as_slice());
        let arrival_s = match arrival_time {
            Some(seconds) if seconds.is_finite() => seconds,
            Some(seconds) => {
                return Err(PyValueError::new_err(format!("arrival_time must be finite, got {seconds}")))
            }
            None => monotonic_now(py)?,
        };
        let num_tokens = tokens.len();
        let add = || {
            let mut state = self.state();
            let namespace = namespace.map(|name| state.intern(name));
            let request = NewRequest {
                rid,
                tokens,
                max_new_tokens,
                namespace,
                arrival_s,
                max_prefix_len,
                priority_key,
            };
            if is_requeue {
                state.core.requeue(request)
            } else {
                state.core.add(request)
            }
        };
        let result = if num_tokens >= DETACH_MIN_TOKENS { py.detach(add) } else { add() };
        result.map_err(|e| sched_error(py, e))
    }
}

/// Where `push` puts a request: its prefix limit, priority key, and whether at the head.
struct Placing {
    max_prefix_len: Option<usize>,
    priority_key: i64,
    is_requeue: bool,
}

impl State {
    fn intern(&mut self, name: &str) -> Namespace {
        if let Some(&id) = self.namespace_ids.get(name) {
            return id;
        }
        let id = self.namespace_names.len() as Namespace;
        self.namespace_names.push(name.to_owned());
        self.namespace_ids.insert(name.to_owned(), id);
        id
    }
}

#[pymethods]
impl PyScheduler {
    #[new]
    #[pyo3(signature = (
        policy = "lpm",
        *,
        max_prefill_tokens = 16384,
        max_running_requests = 256,
        enable_chunked_prefill = true,
        in_batch_share_min_len = Some(32),
        starvation_guard = true,
        max_wait_steps = Some(1000),
        max_wait_s = Some(30.0),
        clip_max_new_tokens = 4096,
        init_new_token_ratio = 0.7,
        min_new_token_ratio = 0.098,
        new_token_ratio_decay_steps = 600,
        retract_decode_steps = 20,
        max_request_tokens = None,
        max_match_tokens_per_step = 1 << 20,
        seed = 0,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        policy: &str,
        max_prefill_tokens: i64,
        max_running_requests: i64,
        enable_chunked_prefill: bool,
        in_batch_share_min_len: Option<i64>,
        starvation_guard: bool,
        max_wait_steps: Option<i64>,
        max_wait_s: Option<f64>,
        clip_max_new_tokens: i64,
        init_new_token_ratio: f64,
        min_new_token_ratio: f64,
        new_token_ratio_decay_steps: i64,
        retract_decode_steps: i64,
        max_request_tokens: Option<i64>,
        max_match_tokens_per_step: i64,
        seed: u64,
    ) -> PyResult<Self> {
        let policy: Policy = policy.parse().map_err(|e| sched_error(py, e))?;
        let optional = |name: &str, value: Option<i64>| value.map(|v| count(py, name, v)).transpose();
        let decay_steps = count(py, "new_token_ratio_decay_steps", new_token_ratio_decay_steps)?;
        let config = SchedConfig {
            policy,
            max_prefill_tokens: count(py, "max_prefill_tokens", max_prefill_tokens)?,
            enable_chunked_prefill,
            max_running_requests: count(py, "max_running_requests", max_running_requests)?,
            clip_max_new_tokens: count(py, "clip_max_new_tokens", clip_max_new_tokens)?,
            in_batch_share_min_len: optional("in_batch_share_min_len", in_batch_share_min_len)?,
            starvation_guard: starvation_guard
                .then(|| -> PyResult<StarvationGuard> {
                    Ok(StarvationGuard {
                        max_wait_steps: optional("max_wait_steps", max_wait_steps)?.map(|steps| steps as u64),
                        max_wait_s,
                    })
                })
                .transpose()?,
            new_token_ratio: RatioConfig {
                init: init_new_token_ratio,
                min: min_new_token_ratio,
                decay_steps: u32::try_from(decay_steps)
                    .map_err(|_| config_error(py, "new_token_ratio_decay_steps is too large".into()))?,
            },
            retract_decode_steps: count(py, "retract_decode_steps", retract_decode_steps)?,
            max_request_tokens: optional("max_request_tokens", max_request_tokens)?,
            max_match_tokens_per_step: count(py, "max_match_tokens_per_step", max_match_tokens_per_step)?,
            seed,
        };
        let core = Scheduler::new(config).map_err(|e| sched_error(py, e))?;
        Ok(Self {
            state: Mutex::new(State {
                core,
                namespace_names: Vec::new(),
                namespace_ids: HashMap::new(),
                last_tree: None,
            }),
        })
    }

    /// Queues a request at the back. `token_ids`: prompt (plus output so far, for a request
    /// that ran before); `arrival_time`: seconds on `time.monotonic()`'s clock (default now).
    // The Python signature (keyword arguments) sets the arity.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (rid, token_ids, max_new_tokens, namespace=None, *, arrival_time=None, max_prefix_len=None, priority_key=0))]
    fn add_request(
        &self,
        py: Python<'_>,
        rid: &Bound<'_, PyAny>,
        token_ids: &Bound<'_, PyAny>,
        max_new_tokens: i64,
        namespace: Option<&str>,
        arrival_time: Option<f64>,
        max_prefix_len: Option<usize>,
        priority_key: i64,
    ) -> PyResult<()> {
        let placing = Placing { max_prefix_len, priority_key, is_requeue: false };
        self.push(py, rid, token_ids, max_new_tokens, namespace, arrival_time, placing)
    }

    /// Puts a retracted request back at the head of the queue (offered before every other
    /// request, in requeue order). `token_ids` includes what it generated so far;
    /// `max_new_tokens` is what it may still generate.
    // The Python signature (keyword arguments) sets the arity.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (rid, token_ids, max_new_tokens, namespace=None, *, arrival_time=None, max_prefix_len=None, priority_key=0))]
    fn requeue(
        &self,
        py: Python<'_>,
        rid: &Bound<'_, PyAny>,
        token_ids: &Bound<'_, PyAny>,
        max_new_tokens: i64,
        namespace: Option<&str>,
        arrival_time: Option<f64>,
        max_prefix_len: Option<usize>,
        priority_key: i64,
    ) -> PyResult<()> {
        let placing = Placing { max_prefix_len, priority_key, is_requeue: true };
        self.push(py, rid, token_ids, max_new_tokens, namespace, arrival_time, placing)
    }

    /// Drops a waiting request (abort); returns whether it was held. For the request whose
    /// chunked prefill is in progress, the engine still owns its slots and lock.
    fn remove(&self, rid: &Bound<'_, PyAny>) -> PyResult<bool> {
        let rid = rid_arg(rid)?;
        Ok(self.state().core.remove(rid))
    }

    /// One admission step: matches and locks in `tree` (never evicts), with the GIL released.
    ///
    /// `num_free_slots`: free slots of the KV pool; `running_tokens_left`: for each running
    /// (decoding) request, the output tokens it may still generate; `now`: seconds on
    /// `time.monotonic()`'s clock (default now).
    #[pyo3(signature = (tree, num_free_slots, running_tokens_left=None, *, now=None))]
    fn select(
        &self,
        py: Python<'_>,
        tree: &Bound<'_, PyRadixTree>,
        num_free_slots: i64,
        running_tokens_left: Option<&Bound<'_, PyAny>>,
        now: Option<f64>,
    ) -> PyResult<PyDecision> {
        let num_free_slots = count_arg("num_free_slots", num_free_slots)?;
        let running =
            running_tokens_left.map(|obj| IdArray::extract(obj, "running_tokens_left")).transpose()?;
        let running = running.as_ref().map(|ids| ids.as_slice());
        let now_s = match now {
            Some(seconds) if seconds.is_finite() => seconds,
            Some(seconds) => return Err(PyValueError::new_err(format!("now must be finite, got {seconds}"))),
            None => monotonic_now(py)?,
        };
        let namespaces: Vec<Namespace> = {
            let mut state = self.state();
            let is_same_tree = state.last_tree.as_ref().is_some_and(|last| last.is(tree));
            if !is_same_tree {
                // Remembered matches are node handles of the previous tree.
                state.core.invalidate_matches();
                state.last_tree = Some(tree.clone().unbind());
            }
            let tree = tree.get();
            state.namespace_names.iter().map(|name| tree.namespace(Some(name)).expect("named")).collect()
        };
        let tree = tree.get();
        let input =
            StepInput { num_free_slots, running_tokens_left: running.as_deref().unwrap_or(&[]), now_s };
        let decision = py.detach(|| {
            let mut state = self.state();
            let mut guard = tree.tree();
            let mut index = NamespacedTree { tree: &mut guard, namespaces: &namespaces };
            state.core.select(&mut index, &input)
        });
        let decision = decision.map_err(|e| sched_error(py, e))?;
        PyDecision::new(py, decision)
    }

    /// The first `limit` waiting requests in the order the next selection offers them, as
    /// `(rid, matched_len, is_urgent, priority_key)`; reads only (`Scheduler::preview`).
    fn waiting_order(&self, py: Python<'_>, limit: i64) -> PyResult<Vec<(u64, usize, bool, i64)>> {
        let limit = count_arg("limit", limit)?;
        let now_s = monotonic_now(py)?;
        let order = self.state().core.preview(now_s, limit);
        Ok(order.into_iter().map(|w| (w.rid, w.matched_len, w.is_urgent, w.priority_key)).collect())
    }

    /// Requests held (waiting, plus the one whose chunked prefill is in progress).
    fn __len__(&self) -> usize {
        self.state().core.len()
    }

    fn __contains__(&self, rid: &Bound<'_, PyAny>) -> bool {
        rid_arg(rid).is_ok_and(|rid| self.state().core.contains(rid))
    }

    /// The request whose chunked prefill is in progress (continued first next step).
    #[getter]
    fn chunked_rid(&self) -> Option<u64> {
        self.state().core.chunked_rid()
    }

    /// Selections run so far.
    #[getter]
    fn step(&self) -> u64 {
        self.state().core.step()
    }

    #[getter]
    fn policy(&self) -> &'static str {
        self.state().core.config().policy.name()
    }

    /// Admissions the starvation guard moved ahead of the policy order.
    #[getter]
    fn num_starved_admissions(&self) -> u64 {
        self.state().core.num_starved_admissions()
    }

    /// Fraction of `max_new_tokens` reserved for output at admission, in [min, 1].
    #[getter]
    fn new_token_ratio(&self) -> f64 {
        self.state().core.new_token_ratio().value()
    }

    #[setter]
    fn set_new_token_ratio(&self, value: f64) -> PyResult<()> {
        if !value.is_finite() {
            return Err(PyValueError::new_err(format!("new_token_ratio must be finite, got {value}")));
        }
        self.state().core.new_token_ratio_mut().set(value);
        Ok(())
    }

    /// Call after each decode step that did not retract; returns the new ratio.
    fn decay_new_token_ratio(&self) -> f64 {
        self.state().core.new_token_ratio_mut().decay()
    }

    /// Call when the engine goes idle.
    fn reset_new_token_ratio(&self) {
        self.state().core.new_token_ratio_mut().reset();
    }

    /// Call after retracting requests, with sums over the requests still running; raises
    /// the ratio to what they are expected to use. Returns the new ratio.
    fn on_retract(
        &self,
        num_decoded_tokens: i64,
        num_max_new_tokens: i64,
        num_running: i64,
    ) -> PyResult<f64> {
        let decoded = count_arg("num_decoded_tokens", num_decoded_tokens)?;
        let max_new = count_arg("num_max_new_tokens", num_max_new_tokens)?;
        let running = count_arg("num_running", num_running)?;
        Ok(self.state().core.on_retract(decoded, max_new, running))
    }

    /// Raises `sglr.errors.InvariantError` if the queue's bookkeeping is inconsistent.
    fn check_invariants(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.state().core.check_invariants()).map_err(|e| sched_error(py, e))
    }

    fn __repr__(&self) -> String {
        let state = self.state();
        format!(
            "Scheduler(policy={:?}, num_requests={}, step={}, new_token_ratio={:.3})",
            state.core.config().policy.name(),
            state.core.len(),
            state.core.step(),
            state.core.new_token_ratio().value()
        )
    }
}
