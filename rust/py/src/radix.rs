//! `sglr._core.RadixTree`: the KV prefix index, exposed with integer node handles.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use sglr_radix::{Namespace, NodeId, RadixTree, SummaryLimits};

use crate::buffers::{extract_all, slots_to_numpy, IdArray};
use crate::errors::radix_error;

/// Inputs at least this long are processed with the GIL released; shorter ones finish faster
/// than a release/re-acquire round trip.
const DETACH_MIN_TOKENS: usize = 4096;

type SlotArray<'py> = Bound<'py, PyArray1<i32>>;
type SummaryRow = (i64, Option<String>, usize, usize, usize, usize, u64, u32, u64, Vec<u32>);
type SummaryTuple = (usize, usize, Vec<SummaryRow>);

#[pyclass(name = "RadixTree", module = "sglr._core", frozen)]
pub(crate) struct PyRadixTree {
    // NOTE: a mutex (not `&mut self`) so a call that released the GIL makes a concurrent call
    // wait instead of failing with a borrow error.
    tree: Mutex<RadixTree>,
    namespace_ids: Mutex<HashMap<String, Namespace>>,
}

impl PyRadixTree {
    pub(crate) fn tree(&self) -> MutexGuard<'_, RadixTree> {
        self.tree.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Interns a namespace name as a small integer (distinct names never collide).
    pub(crate) fn namespace(&self, name: Option<&str>) -> Option<Namespace> {
        let name = name?;
        let mut ids = self.namespace_ids.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let next = ids.len() as Namespace;
        Some(*ids.entry(name.to_owned()).or_insert(next))
    }
}

#[pymethods]
impl PyRadixTree {
    #[new]
    fn new() -> Self {
        Self { tree: Mutex::new(RadixTree::new()), namespace_ids: Mutex::new(HashMap::new()) }
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

    /// `match_prefix` over many sequences in one call (GIL released). Returns
    /// `(slots, offsets, nodes)`: the matched slots of all sequences concatenated (int32), the
    /// int64 offsets (sequence `i` owns `slots[offsets[i]:offsets[i+1]]`) and the node handles.
    #[pyo3(signature = (tokens_list, namespace=None))]
    fn match_prefix_batch<'py>(
        &self,
        py: Python<'py>,
        tokens_list: &Bound<'py, PyAny>,
        namespace: Option<&str>,
    ) -> PyResult<(SlotArray<'py>, Bound<'py, PyArray1<i64>>, Vec<u64>)> {
        let arrays = extract_all(tokens_list, "tokens")?;
        let slices: Vec<_> = arrays.iter().map(IdArray::as_slice).collect();
        let namespace = self.namespace(namespace);
        let (slots, offsets, nodes) = py.detach(|| {
            let mut tree = self.tree();
            let mut slots = Vec::with_capacity(slices.iter().map(|tokens| tokens.len()).sum());
            let mut offsets = Vec::with_capacity(slices.len() + 1);
            let mut nodes = Vec::with_capacity(slices.len());
            offsets.push(0i64);
            for tokens in &slices {
                let node = tree.match_prefix_into(namespace, tokens, &mut slots);
                offsets.push(slots.len() as i64);
                nodes.push(node.to_u64());
            }
            (slots, offsets, nodes)
        });
        Ok((slots_to_numpy(py, slots), PyArray1::from_vec(py, offsets), nodes))
    }

    /// `insert` over many sequences in one call (GIL released); returns each `num_cached`.
    /// Stops at the first length mismatch (earlier sequences stay inserted).
    #[pyo3(signature = (tokens_list, slots_list, namespace=None))]
    fn insert_batch(
        &self,
        py: Python<'_>,
        tokens_list: &Bound<'_, PyAny>,
        slots_list: &Bound<'_, PyAny>,
        namespace: Option<&str>,
    ) -> PyResult<Vec<usize>> {
        let token_arrays = extract_all(tokens_list, "tokens")?;
        let slot_arrays = extract_all(slots_list, "slots")?;
        if token_arrays.len() != slot_arrays.len() {
            return Err(PyValueError::new_err(format!(
                "tokens_list has {} sequences but slots_list has {}",
                token_arrays.len(),
                slot_arrays.len()
            )));
        }
        let pairs: Vec<_> =
            token_arrays.iter().zip(&slot_arrays).map(|(t, s)| (t.as_slice(), s.as_slice())).collect();
        let namespace = self.namespace(namespace);
        let result = py.detach(|| {
            let mut tree = self.tree();
            pairs
                .iter()
                .map(|(tokens, slots)| {
                    tree.insert(namespace, tokens, slots).map(|outcome| outcome.num_cached)
                })
                .collect::<Result<Vec<_>, _>>()
        });
        result.map_err(|e| radix_error(py, e))
    }

    /// Locks each listed node (all or nothing).
    fn lock_batch(&self, py: Python<'_>, nodes: Vec<u64>) -> PyResult<()> {
        let nodes: Vec<NodeId> = nodes.into_iter().map(NodeId::from_u64).collect();
        self.tree().lock_all(&nodes).map_err(|e| radix_error(py, e))
    }

    /// Unlocks each listed node (all or nothing).
    fn unlock_batch(&self, py: Python<'_>, nodes: Vec<u64>) -> PyResult<()> {
        let nodes: Vec<NodeId> = nodes.into_iter().map(NodeId::from_u64).collect();
        self.tree().unlock_all(&nodes).map_err(|e| radix_error(py, e))
    }

    /// Locks `node` and its ancestors against eviction.
    fn lock(&self, py: Python<'_>, node: u64) -> PyResult<()> {
        self.tree().lock(NodeId::from_u64(node)).map_err(|e| radix_error(py, e))
    }

    /// Releases one lock taken by `lock`.
    fn unlock(&self, py: Python<'_>, node: u64) -> PyResult<()> {
        self.tree().unlock(NodeId::from_u64(node)).map_err(|e| radix_error(py, e))
    }

    /// Current lock count of `node`.
    fn lock_ref(&self, py: Python<'_>, node: u64) -> PyResult<u32> {
        self.tree().lock_ref(NodeId::from_u64(node)).map_err(|e| radix_error(py, e))
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
        py.detach(|| self.tree().check_invariants()).map_err(|e| radix_error(py, e))
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

    /// A bounded summary (GIL released): `(num_nodes, num_tokens, nodes)`, each node
    /// `(parent, namespace, depth, prefix_len, num_tokens, num_subtree_tokens, num_hits,
    /// lock_ref, idle_ticks, head_tokens)` with `parent` its parent's position (-1 at the top),
    /// parents first; at most `max_nodes` nodes, `max_depth` deep, `max_head_tokens` per edge.
    fn summarize(
        &self,
        py: Python<'_>,
        max_nodes: usize,
        max_depth: usize,
        max_head_tokens: usize,
    ) -> SummaryTuple {
        let limits = SummaryLimits { max_nodes, max_depth, max_head_tokens };
        let summary = py.detach(|| self.tree().summarize(limits));
        let names: HashMap<Namespace, String> = {
            let ids = self.namespace_ids.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            ids.iter().map(|(name, &id)| (id, name.clone())).collect()
        };
        let nodes = summary
            .nodes
            .into_iter()
            .map(|n| {
                let parent = n.parent.map_or(-1, |p| p as i64);
                let namespace = n.namespace.and_then(|id| names.get(&id).cloned());
                (
                    parent,
                    namespace,
                    n.depth,
                    n.prefix_len,
                    n.num_tokens,
                    n.num_subtree_tokens,
                    n.num_hits,
                    n.lock_ref,
                    n.idle_ticks,
                    n.head_tokens,
                )
            })
            .collect();
        (summary.num_nodes, summary.num_tokens, nodes)
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
