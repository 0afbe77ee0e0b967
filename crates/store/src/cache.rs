//! Short-lived copies of the two lookups every API request makes: the tenant behind an API key
//! and the application a message is sent to (decisions 26).
//!
//! Each was a query per request (on SQLite, a hand-over to a pool thread and, because the
//! message writer had just written, a re-read of the pages). An entry lives for [`TTL`]; a
//! change made through this process (revoking a key, changing or deleting an application)
//! empties the map at once, and a generation number stops a lookup that read the old row
//! before that change from putting it back. Another process's change (PostgreSQL, several
//! nodes) is seen within [`TTL`]. Unknown keys are never cached, so a flood of bad tokens
//! cannot fill memory, and each map is emptied when it reaches [`MAX_ENTRIES`].

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a copy is trusted.
pub(crate) const TTL: Duration = Duration::from_secs(1);
const MAX_ENTRIES: usize = 4096;

#[derive(Debug)]
pub(crate) struct ReadCache<K, V> {
    inner: Mutex<Inner<K, V>>,
}

#[derive(Debug)]
struct Inner<K, V> {
    generation: u64,
    entries: HashMap<K, (Instant, V)>,
}

impl<K: Eq + Hash, V: Clone> Default for ReadCache<K, V> {
    fn default() -> Self {
        ReadCache {
            inner: Mutex::new(Inner {
                generation: 0,
                entries: HashMap::new(),
            }),
        }
    }
}

impl<K: Eq + Hash, V: Clone> ReadCache<K, V> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<K, V>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A fresh copy, or the generation to pass to [`ReadCache::put`] after reading the row.
    pub(crate) fn get(&self, key: &K) -> Result<V, u64> {
        let inner = self.lock();
        match inner.entries.get(key) {
            Some((at, v)) if at.elapsed() < TTL => Ok(v.clone()),
            _ => Err(inner.generation),
        }
    }

    /// Keeps `value`, unless the map was emptied since `generation` was handed out.
    pub(crate) fn put(&self, key: K, value: V, generation: u64) {
        let mut inner = self.lock();
        if inner.generation != generation {
            return;
        }
        if inner.entries.len() >= MAX_ENTRIES {
            inner.entries.clear();
        }
        inner.entries.insert(key, (Instant::now(), value));
    }

    /// A fresh copy, or what `load` reads, kept unless it is `None` or the map was emptied
    /// while it read.
    pub(crate) async fn get_or_load<E>(
        &self,
        key: K,
        load: impl Future<Output = Result<Option<V>, E>>,
    ) -> Result<Option<V>, E> {
        let generation = match self.get(&key) {
            Ok(v) => return Ok(Some(v)),
            Err(generation) => generation,
        };
        let found = load.await?;
        if let Some(v) = &found {
            self.put(key, v.clone(), generation);
        }
        Ok(found)
    }

    /// The generation to pass to [`ReadCache::put`] for rows read after this call.
    pub(crate) fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Forgets everything; lookups already under way will not put their rows back.
    pub(crate) fn clear(&self) {
        let mut inner = self.lock();
        inner.generation += 1;
        inner.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lookup_that_started_before_a_change_does_not_put_the_old_row_back() {
        let cache: ReadCache<&str, i32> = ReadCache::default();
        let generation = cache.get(&"k").unwrap_err();
        cache.clear();
        cache.put("k", 1, generation);
        let generation = cache.get(&"k").unwrap_err();
        cache.put("k", 2, generation);
        assert_eq!(cache.get(&"k"), Ok(2));
    }

    #[test]
    fn entries_expire_and_the_map_stays_bounded() {
        let cache: ReadCache<usize, usize> = ReadCache::default();
        for k in 0..MAX_ENTRIES + 10 {
            let g = cache.get(&k).unwrap_err();
            cache.put(k, k, g);
        }
        assert!(cache.lock().entries.len() <= MAX_ENTRIES);
        std::thread::sleep(TTL + Duration::from_millis(50));
        assert!(cache.get(&(MAX_ENTRIES + 9)).is_err());
    }
}
