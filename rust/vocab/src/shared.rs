//! Results constraint engines compute from a vocabulary, keyed by an exact description of what
//! they walked, kept in the vocabulary so every constraint over it shares them.

use std::any::Any;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::bounded::BoundedCache;

type Entry = Arc<dyn Any + Send + Sync>;

#[derive(Debug)]
pub(crate) struct SharedResults {
    cache: Mutex<BoundedCache<Vec<u8>, Entry>>,
}

impl SharedResults {
    /// An empty map that keeps at most `max_bytes` of results (keys included).
    pub fn new(max_bytes: usize) -> Self {
        Self { cache: Mutex::new(BoundedCache::new(max_bytes)) }
    }

    fn lock(&self) -> MutexGuard<'_, BoundedCache<Vec<u8>, Entry>> {
        // NOTE: a panic while holding the lock cannot leave the map half-updated.
        self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn get_or_compute<T: Any + Send + Sync, E>(
        &self,
        key: &[u8],
        size: impl FnOnce(&T) -> usize,
        compute: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        if let Some(found) = self.lock().get(key) {
            if let Ok(found) = found.downcast::<T>() {
                return Ok(found);
            }
        }
        // NOTE: computed outside the lock (a computation may ask for other results); two
        // threads may both compute one, the last one stays.
        let computed = Arc::new(compute()?);
        let bytes = size(&computed) + key.len();
        self.lock().insert(key.to_vec(), computed.clone(), bytes);
        Ok(computed)
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn memory_bytes(&self) -> usize {
        self.lock().num_bytes()
    }

    pub fn clear(&self) {
        self.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn computes_once_per_key_and_type() {
        let shared = SharedResults::new(64 << 20);
        let mut calls = 0;
        for _ in 0..3 {
            let value: Result<Arc<u64>, ()> = shared.get_or_compute(
                b"a",
                |_| 8,
                || {
                    calls += 1;
                    Ok(7)
                },
            );
            assert_eq!(*value.unwrap(), 7);
        }
        assert_eq!(calls, 1);
        // The same key holding another type is recomputed (and replaces it).
        let other: Result<Arc<String>, ()> =
            shared.get_or_compute(b"a", |s: &String| s.len(), || Ok("x".into()));
        assert_eq!(other.unwrap().as_str(), "x");
        assert_eq!(shared.len(), 1);
        // Errors are not kept.
        let failed: Result<Arc<u64>, &str> = shared.get_or_compute(b"b", |_| 8, || Err("no"));
        assert!(failed.is_err());
        assert_eq!(shared.len(), 1);
        shared.clear();
        assert_eq!((shared.len(), shared.memory_bytes()), (0, 0));
    }
}
