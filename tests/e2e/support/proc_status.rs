//! A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`, …): shared by the tests and
//! the benches, which include this file by path.

/// `field` of process `pid`, in KiB; `None` when the process or the field is gone.
pub fn kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
