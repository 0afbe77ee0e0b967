//! Counters kept per tenant when an operator asks for a `tenant` label on `/metrics`, or once
//! for the whole process otherwise. In memory only: a read lock and a map lookup per record.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::ids::TenantId;

/// One `T` per tenant when `split`, else one `T` for everything (under no tenant).
#[derive(Debug)]
pub struct PerTenant<T> {
    split: bool,
    all: Arc<T>,
    tenants: RwLock<HashMap<TenantId, Arc<T>>>,
}

impl<T: Default> PerTenant<T> {
    pub fn new(split: bool) -> Self {
        PerTenant {
            split,
            all: Arc::default(),
            tenants: RwLock::default(),
        }
    }

    /// Whether values are kept per tenant.
    pub fn is_split(&self) -> bool {
        self.split
    }

    /// Runs `f` on the value that counts `tenant`'s events.
    pub fn with<R>(&self, tenant: TenantId, f: impl FnOnce(&T) -> R) -> R {
        if !self.split {
            return f(&self.all);
        }
        // A poisoned lock only means a panic elsewhere while inserting; the map is still whole.
        let found = self
            .tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&tenant)
            .cloned();
        let value = match found {
            Some(v) => v,
            None => self
                .tenants
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .entry(tenant)
                .or_default()
                .clone(),
        };
        f(&value)
    }

    /// Every value with its tenant (`None` when not split), tenants in sorted order.
    pub fn each(&self) -> Vec<(Option<TenantId>, Arc<T>)> {
        if !self.split {
            return vec![(None, self.all.clone())];
        }
        let mut all: Vec<_> = self
            .tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (Some(*k), v.clone()))
            .collect();
        all.sort_by_key(|a| a.0);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn unsplit_counts_every_tenant_together() {
        let p: PerTenant<AtomicU64> = PerTenant::new(false);
        p.with(TenantId::new(), |n| n.fetch_add(1, Ordering::Relaxed));
        p.with(TenantId::new(), |n| n.fetch_add(2, Ordering::Relaxed));
        let each = p.each();
        assert_eq!(each.len(), 1);
        assert_eq!(each[0].0, None);
        assert_eq!(each[0].1.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn split_keeps_tenants_apart_in_sorted_order() {
        let p: PerTenant<AtomicU64> = PerTenant::new(true);
        assert!(p.each().is_empty());
        let (a, b) = (TenantId::new(), TenantId::new());
        p.with(b, |n| n.fetch_add(2, Ordering::Relaxed));
        p.with(a, |n| n.fetch_add(1, Ordering::Relaxed));
        p.with(b, |n| n.fetch_add(5, Ordering::Relaxed));
        let each: Vec<_> = p
            .each()
            .into_iter()
            .map(|(t, n)| (t.unwrap(), n.load(Ordering::Relaxed)))
            .collect();
        assert_eq!(each, vec![(a, 1), (b, 7)]);
    }
}
