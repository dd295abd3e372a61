//! `sglr._core.RadixTree`: the KV prefix index, exposed with integer node handles.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use numpy::PyArray1;
use pyo3::prelude::*;
use sglr_radix::{Namespace, NodeId, RadixTree};

use crate::buffers::{slots_to_numpy, IdArray};
use crate::errors::radix_error;

/// Inputs at least this long are processed with the GIL released; shorter ones finish faster
/// than a release/re-acquire round trip.
const DETACH_MIN_TOKENS: usize = 4096;

#[pyclass(name = "RadixTree", module = "sglr._core", frozen)]
pub(crate) struct PyRadixTree {
    // NOTE: a mutex (not `&mut self`) so a call that released the GIL makes a concurrent call
    // wait instead of failing with a borrow error.
    tree: Mutex<RadixTree>,
    namespace_ids: Mutex<HashMap<String, Namespace>>,
}

impl PyRadixTree {
    fn tree(&self) -> MutexGuard<'_, RadixTree> {
        self.tree
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Interns a namespace name as a small integer (distinct names never collide).
    fn namespace(&self, name: Option<&str>) -> Option<Namespace> {
        let name = name?;
        let mut ids = self
            .namespace_ids
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let next = ids.len() as Namespace;
        Some(*ids.entry(name.to_owned()).or_insert(next))
    }
}

#[pymethods]
impl PyRadixTree {
    #[new]
    fn new() -> Self {
        Self {
            tree: Mutex::new(RadixTree::new()),
            namespace_ids: Mutex::new(HashMap::new()),
        }
    }

    /// Longest cached prefix of `tokens`: `(slot ids as int32 array, node handle)`.
    #[pyo3(signature = (tokens, namespace=None))]
    fn match_prefix<'py>(
        &self,
        py: Python<'py>,
        tokens: &Bound<'py, PyAny>,
        namespace: Option<&str>,
    ) -> PyResult<(Bound<'py, PyArray1<i32>>, u64)> {
        let tokens = IdArray::extract(tokens, "tokens")?;
        let tokens = tokens.as_slice();
        let namespace = self.namespace(namespace);
        let outcome = if tokens.len() >= DETACH_MIN_TOKENS {
            py.detach(|| self.tree().match_prefix(namespace, &tokens))
        } else {
            self.tree().match_prefix(namespace, &tokens)
        };
        Ok((slots_to_numpy(py, outcome.slots), outcome.node.to_u64()))
    }

    /// Length of the longest cached prefix and its node handle, without copying slot ids.
    #[pyo3(signature = (tokens, namespace=None))]
    fn match_prefix_len(
        &self,
        py: Python<'_>,
        tokens: &Bound<'_, PyAny>,
        namespace: Option<&str>,
    ) -> PyResult<(usize, u64)> {
        let tokens = IdArray::extract(tokens, "tokens")?;
        let tokens = tokens.as_slice();
        let namespace = self.namespace(namespace);
        let (matched_len, node) = if tokens.len() >= DETACH_MIN_TOKENS {
            py.detach(|| self.tree().match_prefix_len(namespace, &tokens))
        } else {
            self.tree().match_prefix_len(namespace, &tokens)
        };
        Ok((matched_len, node.to_u64()))
    }

    /// Caches `tokens` with KV `slots`; returns how many leading tokens were already cached
    /// (the caller frees its own slots for that span).
    #[pyo3(signature = (tokens, slots, namespace=None))]
    fn insert(
        &self,
        py: Python<'_>,
        tokens: &Bound<'_, PyAny>,
        slots: &Bound<'_, PyAny>,
        namespace: Option<&str>,
    ) -> PyResult<usize> {
        Ok(self.insert_impl(py, tokens, slots, namespace)?.0)
    }

    /// Like `insert`, also returning the handle of the node where the sequence ends:
    /// `(num_cached, node)`.
    #[pyo3(signature = (tokens, slots, namespace=None))]
    fn insert_with_node(
        &self,
        py: Python<'_>,
        tokens: &Bound<'_, PyAny>,
        slots: &Bound<'_, PyAny>,
        namespace: Option<&str>,
    ) -> PyResult<(usize, u64)> {
        self.insert_impl(py, tokens, slots, namespace)
    }

    /// Locks `node` and its ancestors against eviction.
    fn lock(&self, py: Python<'_>, node: u64) -> PyResult<()> {
        self.tree()
            .lock(NodeId::from_u64(node))
            .map_err(|e| radix_error(py, e))
    }

    /// Releases one lock taken by `lock`.
    fn unlock(&self, py: Python<'_>, node: u64) -> PyResult<()> {
        self.tree()
            .unlock(NodeId::from_u64(node))
            .map_err(|e| radix_error(py, e))
    }

    /// Current lock count of `node`.
    fn lock_ref(&self, py: Python<'_>, node: u64) -> PyResult<u32> {
        self.tree()
            .lock_ref(NodeId::from_u64(node))
            .map_err(|e| radix_error(py, e))
    }

    /// Evicts LRU unlocked leaves until at least `num_tokens` are freed (or none is left);
    /// returns the freed slot ids for the KV pool.
    fn evict<'py>(&self, py: Python<'py>, num_tokens: usize) -> Bound<'py, PyArray1<i32>> {
        let freed = if num_tokens >= DETACH_MIN_TOKENS {
            py.detach(|| self.tree().evict(num_tokens))
        } else {
            self.tree().evict(num_tokens)
        };
        slots_to_numpy(py, freed)
    }

    fn evictable_size(&self) -> usize {
        self.tree().evictable_size()
    }

    fn protected_size(&self) -> usize {
        self.tree().protected_size()
    }

    fn total_size(&self) -> usize {
        self.tree().total_size()
    }

    fn num_nodes(&self) -> usize {
        self.tree().num_nodes()
    }

    /// Drops every node (the caller has already reclaimed the cached slots).
    fn reset(&self) {
        self.tree().reset();
    }

    /// Raises `sglr.errors.InvariantError` if any structural or size invariant is broken.
    fn check_invariants(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.tree().check_invariants())
            .map_err(|e| radix_error(py, e))
    }

    /// Depth-first dump: a list of `(depth, tokens, slots, lock_ref)`.
    #[pyo3(signature = (namespace=None))]
    fn dump(&self, namespace: Option<&str>) -> Vec<(usize, Vec<u32>, Vec<u32>, u32)> {
        let namespace = self.namespace(namespace);
        self.tree()
            .dump(namespace)
            .into_iter()
            .map(|view| (view.depth, view.tokens, view.slots, view.lock_ref))
            .collect()
    }

    fn __repr__(&self) -> String {
        let tree = self.tree();
        format!(
            "RadixTree(num_nodes={}, evictable_size={}, protected_size={})",
            tree.num_nodes(),
            tree.evictable_size(),
            tree.protected_size()
        )
    }
}

impl PyRadixTree {
    fn insert_impl(
        &self,
        py: Python<'_>,
        tokens: &Bound<'_, PyAny>,
        slots: &Bound<'_, PyAny>,
        namespace: Option<&str>,
    ) -> PyResult<(usize, u64)> {
        let tokens = IdArray::extract(tokens, "tokens")?;
        let slots = IdArray::extract(slots, "slots")?;
        let (tokens, slots) = (tokens.as_slice(), slots.as_slice());
        let namespace = self.namespace(namespace);
        let result = if tokens.len() >= DETACH_MIN_TOKENS {
            py.detach(|| self.tree().insert(namespace, &tokens, &slots))
        } else {
            self.tree().insert(namespace, &tokens, &slots)
        };
        let outcome = result.map_err(|e| radix_error(py, e))?;
        Ok((outcome.num_cached, outcome.node.to_u64()))
    }
}
