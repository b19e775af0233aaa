//! Load limits of the HTTP transport: how many requests run at once (more are shed with
//! 503), how many body bytes are buffered at once (more wait, then are shed with 503),
//! how fast one tenant may call tools (a token bucket; more get 429), and how long a
//! plain request may take.
//!
//! The defaults suit one bridge per host. Environment variables tune them for operators
//! and tests (they are transport tuning, not part of the CLI contract):
//! `CYBEROS_HTTP_MAX_INFLIGHT` (default 1024), `CYBEROS_HTTP_BODY_BUDGET_MIB` (default
//! 64, at least 4: one largest body), `CYBEROS_HTTP_MAX_WAITS` (requests waiting for a
//! task, default 1024) and `CYBEROS_HTTP_MAX_WAITS_PER_TENANT` (default 16),
//! `CYBEROS_HTTP_CALL_RATE` (`RATE/BURST` `tools/call` and `tasks/*` per second per
//! tenant, default `50/100`, or `off`), and `CYBEROS_HTTP_REQUEST_TIMEOUT_MS` (default
//! 60000).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use super::body::Budget;
use super::waits::Waits;
use crate::app::config::{ConfigError, HttpLimitOptions};
use crate::domain::TenantId;

const MIB: usize = 1024 * 1024;

/// The limits of one listener.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Open connections; past it a new one is answered 503 and closed.
    pub max_connections: usize,
    /// Requests in flight across all clients (SSE streams included).
    pub max_inflight: usize,
    /// Body bytes buffered at once across all requests.
    pub body_budget: usize,
    /// Requests waiting for a task across all clients (they hold no in-flight slot).
    pub max_waits: usize,
    /// Requests waiting for a task per tenant.
    pub max_waits_per_tenant: usize,
    /// Per-tenant rate of the requests that do work or write (`tools/call`, `tasks/*`,
    /// `initialize`, `DELETE`, client responses, resumptions), `None` for unlimited.
    pub call_rate: Option<Rate>,
    /// Deadline of a plain request (not of SSE streams or waits for a task).
    pub request_timeout: Duration,
}

/// File descriptors kept for what is not a client connection: the store's pool, CUO
/// children's pipes, the JWKS and memory clients, logs, the listeners.
const FD_RESERVE: u64 = 256;

/// The connections the process's file-descriptor limit (`RLIMIT_NOFILE`, soft) allows
/// besides [`FD_RESERVE`]; at least 64.
pub fn default_max_connections() -> usize {
    let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1024, |(soft, _)| soft);
    usize::try_from(soft.saturating_sub(FD_RESERVE).max(64)).unwrap_or(usize::MAX)
}

/// A token-bucket rate: `per_second` refill, `burst` capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Tokens added per second.
    pub per_second: f64,
    /// Bucket size.
    pub burst: f64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: default_max_connections(),
            max_inflight: 1024,
            body_budget: 64 * MIB,
            max_waits: 1024,
            max_waits_per_tenant: 16,
            call_rate: Some(Rate {
                per_second: 50.0,
                burst: 100.0,
            }),
            request_timeout: Duration::from_secs(60),
        }
    }
}

impl Limits {
    /// The defaults, adjusted by the `--http-*` options (flags, `CYBEROS_HTTP_*`, TOML).
    ///
    /// # Errors
    /// A value out of its range.
    pub fn from_options(o: &HttpLimitOptions) -> Result<Limits, ConfigError> {
        let mut limits = Limits::default();
        let count = |n: Option<usize>, flag: &str| -> Result<Option<usize>, ConfigError> {
            n.map(|n| {
                (1..=1_000_000)
                    .contains(&n)
                    .then_some(n)
                    .ok_or_else(|| ConfigError(format!("{flag} {n}: use a number from 1")))
            })
            .transpose()
        };
        if let Some(n) = count(o.max_connections, "--http-max-connections")? {
            limits.max_connections = n;
        }
        if let Some(n) = count(o.max_inflight, "--http-max-inflight")? {
            limits.max_inflight = n;
        }
        if let Some(n) = count(o.max_waits, "--http-max-waits")? {
            limits.max_waits = n;
        }
        if let Some(n) = count(o.max_waits_per_tenant, "--http-max-waits-per-tenant")? {
            limits.max_waits_per_tenant = n;
        }
        if let Some(n) = o.body_budget_mib {
            if !(4..=64 * 1024).contains(&n) {
                return Err(ConfigError(format!(
                    "--http-body-budget-mib {n}: use a number of MiB from 4 to 65536"
                )));
            }
            limits.body_budget = n * MIB;
        }
        if let Some(v) = &o.call_rate {
            limits.call_rate = parse_rate(v.trim()).ok_or_else(|| {
                ConfigError(format!(
                    "--http-call-rate {v:?}: use RATE/BURST per second, e.g. 50/100, or off"
                ))
            })?;
        }
        if let Some(ms) = o.request_timeout_ms {
            if ms == 0 {
                return Err(ConfigError(
                    "--http-request-timeout-ms 0: use milliseconds above 0".into(),
                ));
            }
            limits.request_timeout = Duration::from_millis(ms);
        }
        Ok(limits)
    }
}

/// `off`, or `RATE/BURST` with both positive.
fn parse_rate(s: &str) -> Option<Option<Rate>> {
    if s.eq_ignore_ascii_case("off") {
        return Some(None);
    }
    let (rate, burst) = s.split_once('/')?;
    let per_second: f64 = rate.trim().parse().ok()?;
    let burst: f64 = burst.trim().parse().ok()?;
    (per_second > 0.0 && burst >= 1.0 && per_second.is_finite() && burst.is_finite())
        .then_some(Some(Rate { per_second, burst }))
}

/// Shared counters: the in-flight semaphore, the body budget and the tenants' buckets.
pub struct Gauges {
    /// Permits for requests in flight.
    pub inflight: Arc<Semaphore>,
    /// The bytes of bodies that may be buffered at once.
    pub body_budget: Budget,
    /// Requests waiting for a task.
    pub waits: Waits,
    calls: Option<Buckets<TenantId>>,
    /// The approval pages' requests, of every peer together: their ids cannot be
    /// guessed, so this only bounds what a flood of them costs.
    pages: Buckets<()>,
}

impl Gauges {
    /// Counters for `limits`.
    pub fn new(limits: &Limits) -> Gauges {
        Gauges {
            inflight: Arc::new(Semaphore::new(limits.max_inflight)),
            body_budget: Budget::new(limits.body_budget),
            waits: Waits::new(limits.max_waits, limits.max_waits_per_tenant),
            calls: limits.call_rate.map(Buckets::new),
            pages: Buckets::new(PAGE_RATE),
        }
    }

    /// Takes one approval-page request from the shared bucket, or says how long until one
    /// is available.
    pub fn take_page(&self) -> Result<(), Duration> {
        self.pages.take(&(), Instant::now())
    }

    /// Takes one `tools/call` or `tasks/*` from the tenant's bucket, or says how long until one is
    /// available.
    pub fn take_call(&self, tenant: &TenantId) -> Result<(), Duration> {
        match &self.calls {
            Some(b) => b.take(tenant, Instant::now()),
            None => Ok(()),
        }
    }
}

/// The approval pages' rate: far above what people clicking need.
const PAGE_RATE: Rate = Rate {
    per_second: 20.0,
    burst: 60.0,
};

/// One token bucket per key (a tenant). Buckets that have refilled completely are
/// forgotten when the map grows, so it stays bounded by the keys active in the last few
/// seconds.
struct Buckets<K> {
    rate: Rate,
    map: Mutex<HashMap<K, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

const PRUNE_AT: usize = 4096;

impl<K: std::hash::Hash + Eq + Copy> Buckets<K> {
    fn new(rate: Rate) -> Buckets<K> {
        Buckets {
            rate,
            map: Mutex::new(HashMap::new()),
        }
    }

    fn take(&self, key: &K, now: Instant) -> Result<(), Duration> {
        let Rate { per_second, burst } = self.rate;
        let refill = |b: &Bucket| {
            (b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * per_second).min(burst)
        };
        // Never held across an await; a poisoned map is still a valid map.
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= PRUNE_AT {
            map.retain(|_, b| refill(b) < burst);
        }
        let bucket = map.entry(*key).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let tokens = refill(bucket);
        if tokens >= 1.0 {
            *bucket = Bucket {
                tokens: tokens - 1.0,
                at: now,
            };
            Ok(())
        } else {
            *bucket = Bucket { tokens, at: now };
            Err(Duration::from_secs_f64((1.0 - tokens) / per_second))
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
    fn a_tenant_gets_its_burst_then_the_refill_rate() {
        let b = Buckets::new(Rate {
            per_second: 10.0,
            burst: 3.0,
        });
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(b.take(&tenant(1), t0).is_ok());
        }
        let wait = b.take(&tenant(1), t0).unwrap_err();
        assert!(
            wait > Duration::from_millis(90) && wait <= Duration::from_millis(100),
            "{wait:?}"
        );
        // Another tenant is not affected.
        assert!(b.take(&tenant(2), t0).is_ok());
        // One refill interval later, one token is back.
        assert!(b.take(&tenant(1), t0 + Duration::from_millis(101)).is_ok());
        assert!(b.take(&tenant(1), t0 + Duration::from_millis(101)).is_err());
    }

    #[test]
    fn rates_parse_or_are_refused() {
        assert_eq!(
            parse_rate("50/100"),
            Some(Some(Rate {
                per_second: 50.0,
                burst: 100.0
            }))
        );
        assert_eq!(parse_rate("OFF"), Some(None));
        for bad in ["", "50", "0/10", "5/0", "x/1", "inf/2"] {
            assert_eq!(parse_rate(bad), None, "{bad}");
        }
    }
}
