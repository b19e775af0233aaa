//! The CUO children a bridge starts, seen from outside: a `--cuo-command` that records
//! each child's pid before it becomes the bundled runner, and waits on those processes
//! with deadlines (never a fixed sleep).

use std::path::Path;
use std::time::Duration;

use crate::support::binary::binary;
use crate::support::{alive, wait_for};

/// A `--cuo-command` for the bundled runner pacing each workflow step by `pace_ms`, which
/// first appends its pid to `pids` (one line per child; `exec` keeps the pid, so the line
/// names the runner itself).
pub fn recording_runner(pace_ms: u64, pids: &Path) -> String {
    format!(
        "sh -c 'echo $$ >> \"$0\" && exec \"$@\"' '{}' '{}' cuo-runner --pace-ms {pace_ms}",
        pids.display(),
        binary()
    )
}

/// The pids `recording_runner` children wrote to `pids` so far, in start order.
pub fn child_pids(pids: &Path) -> Vec<i32> {
    let text = std::fs::read_to_string(pids).unwrap_or_default();
    // Only whole lines: a line is written in one `write`, but read it only once complete.
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .map(|p| p.trim().parse().expect("a pid per line"))
        .collect()
}

/// Waits until `pids` names exactly `n` children and returns them.
pub fn wait_children(pids: &Path, n: usize, within: Duration) -> Vec<i32> {
    wait_for(within, || {
        let found = child_pids(pids);
        assert!(
            found.len() <= n,
            "more CUO children than expected: {found:?}"
        );
        if found.len() == n {
            return Ok(found);
        }
        Err(format!("only {} of {n} CUO children started", found.len()))
    })
}

/// Asserts every process in `pids` is gone (or a zombie) within `within`.
pub fn wait_gone(pids: &[i32], within: Duration) {
    wait_for(within, || {
        let left: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("still running: {left:?}"))
        }
    });
}
