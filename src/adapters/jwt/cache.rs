//! Verified bearer tokens, remembered the way Envoy's `jwt_authn` does (CONTRACT §5):
//! keyed by a keyed hash of the token's exact bytes, holding the principal and the token's
//! `exp`/`nbf`, which are checked against the clock on every use, bounded in entries, and
//! emptied whenever a key set changes. A hit skips the signature check and every decode.
//!
//! A key the IdP revokes therefore stops working at the next key refresh (which empties
//! the cache), not at the next request; the refresh timer bounds that (`jwks.rs`).
//! Confirmation tokens are single use and never come here.

use std::hash::{BuildHasher, Hasher};
use std::sync::{Mutex, RwLock};

use quick_cache::sync::Cache;
use siphasher::sip128::{Hasher128, SipHasher24};

use super::times::{NumericDate, in_force};
use crate::domain::{Principal, Timestamp};

/// Verified tokens remembered at most: one principal and two instants each, so a full
/// cache is a few MiB at most.
pub(super) const CAPACITY: usize = 10_000;

/// What a verified token proved, and when it stops proving it.
#[derive(Clone)]
pub(super) struct Verified {
    pub(super) principal: Principal,
    /// `exp`, Unix seconds.
    pub(super) exp: u64,
    /// `nbf`, Unix seconds, when the token has one.
    pub(super) nbf: Option<u64>,
}

impl Verified {
    /// The same rule the verified decode applies: `exp` and `nbf` with `leeway_s`.
    fn valid_at(&self, now: Timestamp, leeway_s: u64) -> bool {
        let nbf = self.nbf.map_or(NumericDate::Absent, NumericDate::Secs);
        in_force(NumericDate::Secs(self.exp), nbf, now, leeway_s).is_ok()
    }
}

/// The cache key of a token: SipHash-2-4-128 of its bytes under the cache's secret key
/// (the token itself is not kept, but for the last stdio token, which the process holds
/// anyway). A PRF: without the key nobody can make two tokens share an entry, and 128
/// bits make an accidental collision out of reach.
pub(super) type TokenKey = u128;

/// Remembered verified tokens.
pub(super) struct VerifiedTokens {
    entries: Cache<TokenKey, Verified>,
    /// The hash key, random per process.
    secret: (u64, u64),
    /// Bumped, and the entries cleared, whenever a key set changes. A verification that
    /// began under an older generation (with keys since replaced) is not remembered.
    generation: RwLock<u64>,
    leeway_s: u64,
    /// The last recurring token (the stdio token) and its key: that caller presents the
    /// same bytes on every request, and comparing them costs a tenth of hashing them.
    recurring: Mutex<Option<(Box<str>, TokenKey)>>,
}

impl VerifiedTokens {
    pub(super) fn new(capacity: usize, leeway_s: u64) -> VerifiedTokens {
        // `RandomState` is seeded from the OS's randomness and never fails; two of them
        // give the two secret words.
        let word = |n: u8| std::collections::hash_map::RandomState::new().hash_one(n);
        VerifiedTokens {
            entries: Cache::new(capacity),
            secret: (word(0), word(1)),
            generation: RwLock::new(0),
            leeway_s,
            recurring: Mutex::new(None),
        }
    }

    pub(super) fn key(&self, token: &str) -> TokenKey {
        let mut h = SipHasher24::new_with_keys(self.secret.0, self.secret.1);
        h.write(token.as_bytes());
        h.finish128().as_u128()
    }

    /// [`VerifiedTokens::key`] of a token one caller presents on every request: the last
    /// such token's key when the bytes are the same.
    pub(super) fn recurring_key(&self, token: &str) -> TokenKey {
        // Never held across an await; a poisoned memo is still a valid memo.
        let mut last = self.recurring.lock().unwrap_or_else(|e| e.into_inner());
        match &*last {
            Some((bytes, key)) if **bytes == *token => *key,
            _ => {
                let key = self.key(token);
                *last = Some((token.into(), key));
                key
            }
        }
    }

    /// The current generation, read before the keys a verification uses.
    pub(super) fn generation(&self) -> u64 {
        *self.generation.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The principal of a remembered token still valid at `now`; an expired one is
    /// forgotten, so the caller verifies it afresh and gets the precise refusal.
    pub(super) fn get(&self, key: &TokenKey, now: Timestamp) -> Option<Principal> {
        let hit = self.entries.get(key)?;
        if hit.valid_at(now, self.leeway_s) {
            Some(hit.principal)
        } else {
            self.entries.remove(key);
            None
        }
    }

    /// Remembers a token verified with the keys of `generation`, unless the key set has
    /// changed since.
    pub(super) fn insert(&self, key: TokenKey, generation: u64, verified: Verified) {
        let current = self.generation.read().unwrap_or_else(|e| e.into_inner());
        if *current == generation {
            self.entries.insert(key, verified);
        }
    }

    /// A key set changed: forget every token verified so far.
    pub(super) fn key_set_changed(&self) {
        let mut generation = self.generation.write().unwrap_or_else(|e| e.into_inner());
        *generation += 1;
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::TenantId;

    fn verified(exp: u64, nbf: Option<u64>) -> Verified {
        Verified {
            principal: Principal::new(
                TenantId::parse("00000000-0000-4000-8000-000000000001").unwrap(),
                "a",
                &[],
            ),
            exp,
            nbf,
        }
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_unix_millis(s * 1000)
    }

    #[test]
    fn keys_differ_per_token_and_per_cache() {
        let (a, b) = (VerifiedTokens::new(8, 0), VerifiedTokens::new(8, 0));
        assert_eq!(a.key("token"), a.key("token"));
        assert_ne!(a.key("token"), a.key("token."));
        assert_ne!(a.key("token"), b.key("token"), "the hash key is per cache");
    }

    #[test]
    fn a_recurring_token_keeps_its_key_and_a_new_one_gets_its_own() {
        let cache = VerifiedTokens::new(8, 0);
        assert_eq!(cache.recurring_key("token"), cache.key("token"));
        assert_eq!(cache.recurring_key("token"), cache.key("token"));
        // A rotated token file: the memo follows the bytes, not the last key.
        assert_eq!(cache.recurring_key("token2"), cache.key("token2"));
        assert_eq!(cache.recurring_key("token"), cache.key("token"));
    }

    #[test]
    fn exp_and_nbf_hold_with_the_leeway_and_not_a_second_past_it() {
        let v = verified(1_000, Some(900));
        assert!(v.valid_at(at(1_030), 30));
        assert!(!v.valid_at(at(1_031), 30));
        assert!(v.valid_at(at(870), 30));
        assert!(!v.valid_at(at(869), 30));
        assert!(verified(u64::MAX, None).valid_at(at(i64::MAX / 1000), 30));
    }

    #[test]
    fn an_expired_hit_is_forgotten_and_a_stale_generation_is_not_remembered() {
        let cache = VerifiedTokens::new(8, 0);
        let key = cache.key("t");
        let g = cache.generation();
        cache.insert(key, g, verified(100, None));
        assert!(cache.get(&key, at(100)).is_some());
        assert!(cache.get(&key, at(101)).is_none());
        // Forgotten: even the earlier instant misses now.
        assert!(cache.get(&key, at(50)).is_none());

        cache.insert(key, g, verified(100, None));
        cache.key_set_changed();
        assert!(cache.get(&key, at(50)).is_none());
        cache.insert(key, g, verified(100, None));
        assert!(cache.get(&key, at(50)).is_none(), "verified under old keys");
        cache.insert(key, cache.generation(), verified(100, None));
        assert!(cache.get(&key, at(50)).is_some());
    }
}
