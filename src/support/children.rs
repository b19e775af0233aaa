//! Child processes that die with the process that started them. The bridge starts CUO
//! children (`adapters::cuo_process`), `check-cuo` starts the CUO it judges
//! (`app::conformance`) and the bundled runner starts skill entrypoints
//! (`runner::entrypoint`); all ask for this, so a `kill -9` of any leaves nothing of
//! theirs running. Also the environment a CUO child gets (`cuo_env`). A leaf shared by
//! the bridge and the runner: it imports nothing of the crate.

use std::ffi::OsString;

/// Variables a CUO child inherits, besides `LC_*` and the `--cuo-env` names
/// (`docs/cuo-protocol.md` §2).
const CUO_INHERITED_ENV: [&str; 5] = ["PATH", "HOME", "LANG", "TZ", "TMPDIR"];

/// The whole environment of a CUO child: of this process's variables, only
/// [`CUO_INHERITED_ENV`], every `LC_*` and the names in `pass`.
pub fn cuo_env(pass: &[String]) -> Vec<(OsString, OsString)> {
    std::env::vars_os()
        .filter(|(k, _)| {
            let k = k.to_string_lossy();
            CUO_INHERITED_ENV.contains(&k.as_ref())
                || k.starts_with("LC_")
                || pass.iter().any(|p| *p == k)
        })
        .collect()
}

/// Asks the kernel to SIGKILL the child when the thread that started it ends, and fails
/// the spawn if this process is already gone by the time the child is set up (the signal
/// would then never come).
///
/// `PR_SET_PDEATHSIG` fires when the parent *thread* exits, not only the process, so
/// children must be started from threads that live as long as the process. They are: the
/// bridge starts CUO children on the CUO adapter's spawning thread
/// (`adapters::cuo_process::spawner`), which lives as long as the adapter; the runner
/// starts skill entrypoints from the main thread of its current-thread runtime.
///
/// Only the child itself is covered (the setting is not inherited by its own children):
/// what a child starts is reached through its process group (the bridge kills a run's
/// group; the runner kills its own group when the bridge dies, `runner::orphan`).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn die_with_parent(command: &mut tokio::process::Command) {
    use nix::errno::Errno;
    use nix::sys::prctl::set_pdeathsig;
    use nix::sys::signal::Signal;
    use nix::unistd::{getpid, getppid};
    let parent = getpid();
    // SAFETY: the closure runs in the forked child before exec and makes only the
    // async-signal-safe prctl(2) and getppid(2) system calls; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            if getppid() != parent {
                return Err(std::io::Error::from(Errno::ESRCH));
            }
            Ok(())
        });
    }
}

/// Elsewhere children are left to the process group kills.
#[cfg(not(target_os = "linux"))]
pub fn die_with_parent(_: &mut tokio::process::Command) {}
