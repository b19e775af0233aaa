//! Random bytes for secrets (task ids, session nonces, idempotency keys), straight from
//! the operating system's CSPRNG.

/// `N` random bytes from the OS. The OS generator only fails when the platform has none,
/// which the bridge cannot run without.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf)
        .expect("the operating system's random number generator is unavailable");
    buf
}
