//! Admission of runs on this instance: at most `per_tenant` runs of one tenant, and at
//! most `children` runs in all (each run is one CUO child), whatever the tenant.
//!
//! A slot is taken in one step under the lock, before the caller awaits anything (the
//! store insert comes after), so concurrent calls cannot all see room for one more. It
//! is given back when its [`Slot`] is dropped: when the run ends, when the start fails
//! after the reservation, or when a panic unwinds through the run.
//!
//! The caps are per instance: instances on one store do not count each other's runs
//! (ARCHITECTURE.md, "Tasks").

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::domain::TenantId;

/// Why no slot was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The tenant runs `per_tenant` tasks here already.
    Tenant(usize),
    /// This instance runs `children` CUO children for tasks already.
    Instance(usize),
}

#[derive(Default)]
struct Counts {
    by_tenant: HashMap<TenantId, usize>,
    total: usize,
}

/// The run slots of one instance.
pub struct Slots {
    counts: Arc<Mutex<Counts>>,
    per_tenant: usize,
    children: usize,
}

/// One reserved run slot, given back on drop.
pub struct Slot {
    counts: Arc<Mutex<Counts>>,
    tenant: TenantId,
}

fn lock(counts: &Mutex<Counts>) -> MutexGuard<'_, Counts> {
    counts.lock().unwrap_or_else(|e| e.into_inner())
}

impl Slots {
    /// Room for `per_tenant` runs of each tenant and `children` runs in all.
    pub fn new(per_tenant: usize, children: usize) -> Slots {
        Slots {
            counts: Arc::default(),
            per_tenant,
            children,
        }
    }

    /// Takes a slot for a run of `tenant`, if both caps allow it.
    ///
    /// # Errors
    /// Which cap is reached.
    pub fn reserve(&self, tenant: TenantId) -> Result<Slot, Full> {
        let mut counts = lock(&self.counts);
        if counts.total >= self.children {
            return Err(Full::Instance(self.children));
        }
        let mine = counts.by_tenant.entry(tenant).or_insert(0);
        if *mine >= self.per_tenant {
            return Err(Full::Tenant(self.per_tenant));
        }
        *mine += 1;
        counts.total += 1;
        Ok(Slot {
            counts: Arc::clone(&self.counts),
            tenant,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = lock(&self.counts);
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.by_tenant.get_mut(&self.tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.by_tenant.remove(&self.tenant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Slots {
        /// Runs holding a slot now.
        fn in_use(&self) -> usize {
            lock(&self.counts).total
        }
    }

    fn tenant(n: u8) -> TenantId {
        TenantId::parse(&format!("00000000-0000-4000-8000-0000000000{n:02x}")).unwrap()
    }

    #[test]
    fn each_cap_refuses_the_run_past_it_and_a_dropped_slot_makes_room() {
        let slots = Slots::new(2, 3);
        let (a, b) = (tenant(1), tenant(2));
        let a1 = slots.reserve(a).unwrap();
        let _a2 = slots.reserve(a).unwrap();
        assert_eq!(slots.reserve(a).err(), Some(Full::Tenant(2)));
        let _b1 = slots.reserve(b).unwrap();
        assert_eq!(slots.reserve(b).err(), Some(Full::Instance(3)));
        drop(a1);
        assert_eq!(slots.in_use(), 2);
        let _b2 = slots.reserve(b).unwrap();
        assert_eq!(slots.reserve(a).err(), Some(Full::Instance(3)));
    }

    #[test]
    fn a_slot_held_by_a_panicking_thread_is_given_back() {
        let slots = Arc::new(Slots::new(1, 1));
        let held = Arc::clone(&slots);
        let joined = std::thread::spawn(move || {
            let _slot = held.reserve(tenant(1)).unwrap();
            panic!("the run panics");
        })
        .join();
        assert!(joined.is_err());
        assert_eq!(slots.in_use(), 0);
        assert!(slots.reserve(tenant(1)).is_ok());
    }

    #[test]
    fn concurrent_reservations_never_pass_the_caps() {
        let slots = Arc::new(Slots::new(4, 6));
        let barrier = Arc::new(std::sync::Barrier::new(40));
        let threads: Vec<_> = (0..40)
            .map(|i| {
                let (slots, barrier) = (Arc::clone(&slots), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    slots.reserve(tenant(i % 2))
                })
            })
            .collect();
        let kept: Vec<Slot> = threads
            .into_iter()
            .filter_map(|t| t.join().unwrap().ok())
            .collect();
        assert_eq!(kept.len(), 6);
        for t in [tenant(0), tenant(1)] {
            assert!(kept.iter().filter(|s| s.tenant == t).count() <= 4);
        }
        assert_eq!(slots.in_use(), 6);
    }
}
