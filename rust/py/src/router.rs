//! `sglr._core.PrefixForest`: the router's approximate per-replica prefix trees.

use std::sync::{Mutex, MutexGuard};

use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sglr_router::{CacheAwareRule, PrefixForest, ReplicaLoad, RouterTreeError};

use crate::buffers::IdArray;
use crate::errors::sglr_error;

/// Keys at least this long are matched with the GIL released; shorter ones finish faster than a
/// release/re-acquire round trip.
const DETACH_MIN_KEYS: usize = 2048;

fn router_error(py: Python<'_>, error: RouterTreeError) -> PyErr {
    let class_name = match &error {
        RouterTreeError::UnknownReplica(_) => "UnknownReplicaError",
        RouterTreeError::DuplicateReplica(_) => "DuplicateReplicaError",
        RouterTreeError::NoReplicas => "NoReplicaAvailableError",
        RouterTreeError::ZeroCapacity => "RouterConfigError",
        RouterTreeError::Invariant(_) => "InvariantError",
    };
    sglr_error(py, class_name, error.to_string())
}

#[pyclass(name = "PrefixForest", module = "sglr._core", frozen)]
pub(crate) struct PyPrefixForest {
    // NOTE: a mutex so a call that released the GIL makes a concurrent call wait.
    forest: Mutex<PrefixForest>,
}

impl PyPrefixForest {
    fn forest(&self) -> MutexGuard<'_, PrefixForest> {
        self.forest.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[pymethods]
impl PyPrefixForest {
    #[new]
    fn new(py: Python<'_>, max_keys_per_tree: usize) -> PyResult<Self> {
        let forest = PrefixForest::new(max_keys_per_tree).map_err(|e| router_error(py, e))?;
        Ok(Self { forest: Mutex::new(forest) })
    }

    fn add_replica(&self, py: Python<'_>, replica: u32) -> PyResult<()> {
        self.forest().add_replica(replica).map_err(|e| router_error(py, e))
    }

    fn remove_replica(&self, py: Python<'_>, replica: u32) -> PyResult<()> {
        self.forest().remove_replica(replica).map_err(|e| router_error(py, e))
    }

    fn replica_ids(&self) -> Vec<u32> {
        self.forest().replica_ids()
    }

    fn num_keys(&self, py: Python<'_>, replica: u32) -> PyResult<usize> {
        self.forest().num_keys(replica).map_err(|e| router_error(py, e))
    }

    /// Stored prefix length of `key` in every replica's tree, as `{replica: matched_len}`.
    fn match_lens(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Vec<(u32, usize)>> {
        let key = IdArray::extract(key, "key")?;
        let key = key.as_slice();
        let run = || {
            let forest = self.forest();
            forest
                .replica_ids()
                .into_iter()
                .map(|replica| (replica, forest.match_len(replica, &key).unwrap_or(0)))
                .collect()
        };
        Ok(if key.len() >= DETACH_MIN_KEYS { py.detach(run) } else { run() })
    }

    /// `(replica, matched_len)` of the longest stored prefix, or None without replicas.
    fn best_match(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<(u32, usize)>> {
        let key = IdArray::extract(key, "key")?;
        let key = key.as_slice();
        let run = || self.forest().best_match(&key).map(|m| (m.replica, m.matched_len));
        Ok(if key.len() >= DETACH_MIN_KEYS { py.detach(run) } else { run() })
    }

    fn insert(&self, py: Python<'_>, replica: u32, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = IdArray::extract(key, "key")?;
        let key = key.as_slice();
        let outcome = if key.len() >= DETACH_MIN_KEYS {
            py.detach(|| self.forest().insert(replica, &key))
        } else {
            self.forest().insert(replica, &key)
        };
        outcome.map_err(|e| router_error(py, e))
    }

    /// The cache-aware policy's choice for `key`, made and recorded in one call: match every
    /// replica in `loads` (`{replica: requests in flight}`), choose by the thresholds, insert
    /// into the chosen tree from where its match ended. Returns `(replica, matched_len)`.
    fn route(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        loads: &Bound<'_, PyDict>,
        balance_abs_threshold: u64,
        balance_rel_threshold: f64,
        cache_threshold: f64,
    ) -> PyResult<(u32, usize)> {
        let key = IdArray::extract(key, "key")?;
        let key = key.as_slice();
        let loads = loads
            .iter()
            .map(|(replica, num_in_flight)| {
                Ok(ReplicaLoad { replica: replica.extract()?, num_in_flight: num_in_flight.extract()? })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let rule = CacheAwareRule { balance_abs_threshold, balance_rel_threshold, cache_threshold };
        let run =
            || self.forest().route(&key, &loads, &rule).map(|routed| (routed.replica, routed.matched_len));
        let outcome = if key.len() >= DETACH_MIN_KEYS { py.detach(run) } else { run() };
        outcome.map_err(|e| router_error(py, e))
    }

    fn check_invariants(&self, py: Python<'_>) -> PyResult<()> {
        self.forest().check_invariants().map_err(|e| router_error(py, e))
    }
}

/// `(ids as a uint32 array, stream)` of a request body whose member `field` is a non-empty list
/// of integer literals in u32 range, read without building Python objects; None otherwise (the
/// caller parses the body).
#[pyfunction]
pub(crate) fn scan_id_prompt<'py>(
    py: Python<'py>,
    body: &[u8],
    field: &str,
) -> Option<(Bound<'py, PyArray1<u32>>, bool)> {
    sglr_router::scan_id_prompt(body, field).map(|prompt| (prompt.ids.into_pyarray(py), prompt.stream))
}
