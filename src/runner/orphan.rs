//! When the bridge dies, everything this runner started dies with it (Linux).
//!
//! The bridge asks the kernel to SIGKILL the runner at its death (`PR_SET_PDEATHSIG`), but
//! a SIGKILLed runner could not take its skill entrypoints along, nor what they left in
//! the background: they would be reparented to init and run on. So the runner swaps that
//! signal for SIGTERM, which it handles by killing its whole process group (the bridge
//! starts it as a group leader; entrypoints and their children stay in the group), itself
//! included. A SIGTERM from anyone else means the same. Entrypoints also die with the
//! runner by themselves (`crate::children`).

use nix::sys::prctl::{get_pdeathsig, set_pdeathsig};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::{getpgrp, getpid, getppid};
use tokio::signal::unix::{SignalKind, signal};

/// Installs the SIGTERM handler, then asks for SIGTERM at the parent's death if the parent
/// asked for a death signal at all. Call it on the runtime, before any entrypoint starts.
pub fn die_with_parent() {
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            tracing::warn!(error = %e, "cannot handle SIGTERM; entrypoints may outlive the bridge");
            return;
        }
    };
    tokio::spawn(async move {
        if term.recv().await.is_some() {
            tracing::info!(
                "SIGTERM (the bridge is gone, or was asked to stop): ending this runner's process group"
            );
            end_group();
        }
    });
    if !matches!(get_pdeathsig(), Ok(Some(_))) {
        return;
    }
    let parent = getppid();
    if let Err(e) = set_pdeathsig(Signal::SIGTERM) {
        tracing::warn!(error = %e, "cannot ask for SIGTERM at the bridge's death");
        return;
    }
    // Until the swap the bridge's SIGKILL was in force, so a parent that died before it
    // killed us already; this covers one that died during it.
    if getppid() != parent {
        end_group();
    }
}

/// SIGKILLs this runner's process group, the runner with it, when it leads the group
/// (the bridge's children do); otherwise exits, and the entrypoints die with it.
fn end_group() -> ! {
    let group = getpgrp();
    if group == getpid() {
        let _ = killpg(group, Signal::SIGKILL);
    }
    std::process::exit(128 + Signal::SIGTERM as i32);
}
