//! Requests that wait for a task (`tasks/result`, a `tools/call` under
//! `--long-running wait`) have their own pool instead of an in-flight slot, and each
//! tenant may hold only a few of them: one tenant's waits can neither take every slot
//! from the others nor fill the pool alone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::domain::TenantId;

/// Why a wait was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The tenant already holds its share of waits (429).
    Tenant,
    /// Every wait of the listener is taken (503).
    Full,
}

/// The waits of one listener.
pub struct Waits {
    pool: Arc<Semaphore>,
    per_tenant: usize,
    held: Arc<Mutex<HashMap<TenantId, usize>>>,
}

/// What a running request holds: an in-flight slot, or, once it is known to wait for a
/// task, a wait (its slot given back).
/// Nothing reads it: it is given back when the request ends.
pub enum Hold {
    /// An in-flight slot.
    Slot {
        /// The slot.
        _permit: OwnedSemaphorePermit,
    },
    /// A wait.
    Wait {
        /// The wait.
        _wait: Wait,
    },
}

/// One tenant's wait; given back when dropped.
pub struct Wait {
    _pool: OwnedSemaphorePermit,
    tenant: TenantId,
    held: Arc<Mutex<HashMap<TenantId, usize>>>,
}

impl Waits {
    /// `total` waits for the listener, `per_tenant` for each tenant.
    pub fn new(total: usize, per_tenant: usize) -> Waits {
        Waits {
            pool: Arc::new(Semaphore::new(total)),
            per_tenant,
            held: Arc::default(),
        }
    }

    /// A wait for `tenant`, if it has one left and the pool has room.
    pub fn enter(&self, tenant: &TenantId) -> Result<Wait, Refused> {
        // Never held across an await; a poisoned map is still a valid map.
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let mine = held.get(tenant).copied().unwrap_or(0);
        if mine >= self.per_tenant {
            return Err(Refused::Tenant);
        }
        let pool = Arc::clone(&self.pool)
            .try_acquire_owned()
            .map_err(|_| Refused::Full)?;
        held.insert(*tenant, mine + 1);
        Ok(Wait {
            _pool: pool,
            tenant: *tenant,
            held: Arc::clone(&self.held),
        })
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        // Tenants without waits are forgotten, so the map stays as small as the waits.
        if let Some(n) = held.get_mut(&self.tenant) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.tenant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(n: u8) -> TenantId {
        TenantId::parse(&format!("00000000-0000-4000-8000-0000000000{n:02x}")).unwrap()
    }

    #[test]
    fn a_tenant_gets_its_share_and_the_pool_bounds_all() {
        let waits = Waits::new(3, 2);
        let a1 = waits.enter(&tenant(1)).unwrap();
        let _a2 = waits.enter(&tenant(1)).unwrap();
        assert_eq!(waits.enter(&tenant(1)).err(), Some(Refused::Tenant));
        let _b1 = waits.enter(&tenant(2)).unwrap();
        assert_eq!(waits.enter(&tenant(2)).err(), Some(Refused::Full));
        drop(a1);
        assert!(waits.enter(&tenant(1)).is_ok());
        assert_eq!(waits.held.lock().unwrap().len(), 2);
    }
}
