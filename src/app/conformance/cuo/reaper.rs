//! Finding helpers that escaped a killed child's process group (Linux).
//!
//! The checker makes itself a child subreaper, so a process orphaned by the death of a
//! CUO child is re-parented to the checker instead of to init. Once the child's group has
//! been killed and the child reaped, any child of the checker outside that group is a
//! helper that moved to a group or session of its own: under the bridge it would run on
//! after the run ended. The checker kills and reaps it.

use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::{Pid, getpid};

/// How long reaping killed processes may take.
const REAP_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// A process re-parented to the checker.
#[derive(Debug, Clone)]
pub(super) struct Orphan {
    pub(super) pid: i32,
    pub(super) pgid: i32,
    pub(super) comm: String,
    /// Not a zombie (one that exited is no helper left running).
    pub(super) running: bool,
}

/// Makes orphans of the checker's children its own.
///
/// # Errors
/// When the kernel refuses.
pub(super) fn adopt_orphans() -> Result<(), String> {
    nix::sys::prctl::set_child_subreaper(true).map_err(|e| format!("cannot adopt orphans: {e}"))
}

/// The checker's children other than `except` (the CUO child itself).
pub(super) fn orphans(except: i32) -> Vec<Orphan> {
    let me = getpid().as_raw();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != except)
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (head, rest) = stat.rsplit_once(')')?;
            let comm = head.split_once('(')?.1.to_owned();
            let mut fields = rest.split_whitespace();
            let running = fields.next()? != "Z";
            let ppid: i32 = fields.next()?.parse().ok()?;
            let pgid: i32 = fields.next()?.parse().ok()?;
            (ppid == me).then_some(Orphan {
                pid,
                pgid,
                comm,
                running,
            })
        })
        .collect()
}

/// Kills `orphans` (with their groups when they lead one) and reaps them.
pub(super) async fn end(orphans: &[Orphan]) {
    for o in orphans {
        if o.pgid == o.pid {
            let _ = killpg(Pid::from_raw(o.pgid), Signal::SIGKILL);
        }
        let _ = kill(Pid::from_raw(o.pid), Signal::SIGKILL);
    }
    let until = std::time::Instant::now() + REAP_WITHIN;
    let mut left: Vec<i32> = orphans.iter().map(|o| o.pid).collect();
    while !left.is_empty() && std::time::Instant::now() < until {
        left.retain(|pid| {
            !matches!(
                waitpid(Pid::from_raw(*pid), Some(WaitPidFlag::WNOHANG)),
                Ok(nix::sys::wait::WaitStatus::Exited(..)
                    | nix::sys::wait::WaitStatus::Signaled(..))
                    | Err(_)
            )
        });
        if !left.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}
