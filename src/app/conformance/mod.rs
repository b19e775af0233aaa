//! `check-cuo` and `check-memory`: conformance checks for an alternate upstream. Each runs
//! a checklist against the program or service itself, on the raw wire (not through the
//! bridge's adapters, which would absorb the very faults being looked for), and reports
//! one line per rule with what was sent and what was seen. The CLI prints the report.
//!
//! `cuo` judges a CUO command against `docs/cuo-protocol.md` §7; `memory` judges a
//! memory service against `docs/memory-openapi.yaml`. Every probe is bounded in time, and
//! every child and helper the checks start is killed before they return.

mod cuo;
mod memory;
mod report;

pub use cuo::{CuoCheckOptions, check_cuo};
pub use memory::{MemoryCheckOptions, check_memory};
pub use report::{Check, Report, Status};
