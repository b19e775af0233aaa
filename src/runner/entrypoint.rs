//! Runs a skill's entrypoint program: directly (no shell), in the skill folder, with a
//! scrubbed environment, the inputs as JSON on stdin, stdout captured up to a cap and
//! stderr logged. It stays in the runner's process group: the bridge runs each skill in a
//! child of its own and kills that child's whole group when the run ends, is cancelled or
//! times out, so the entrypoint and anything it started go with it. Past the deadline the
//! runner kills the entrypoint itself and answers at once.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use super::protocol::{ENTRYPOINT_FAILED, RpcError};

/// Captured stdout is cut here; the rest is read and dropped so the program never blocks.
pub const MAX_STDOUT: usize = 1024 * 1024;
/// The only variables the program inherits: enough to find tools and temp space, nothing
/// that carries the bridge's secrets.
const KEPT_ENV: [&str; 5] = ["PATH", "HOME", "LANG", "TZ", "TMPDIR"];
/// Longest stderr line logged; longer ones are cut.
const MAX_LOG_LINE: usize = 2048;

/// Runs `program` and returns its stdout.
///
/// # Errors
/// -32001 when the deadline passes (the program is killed), -32000 when it cannot start
/// or exits unsuccessfully.
pub async fn run(
    program: &Path,
    folder: &Path,
    stdin_bytes: &[u8],
    deadline: Instant,
    skill: &str,
) -> Result<Vec<u8>, RpcError> {
    if Instant::now() >= deadline {
        return Err(RpcError::deadline());
    }
    let mut child = spawn(program, folder).await?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let feed = async move {
        if let Some(mut stdin) = stdin {
            // A program that ignores its input closes the pipe early; that is its right.
            let _ = stdin.write_all(stdin_bytes).await;
            let _ = stdin.shutdown().await;
        }
    };
    let work = async {
        let ((), captured, (), status) = tokio::join!(
            feed,
            capture(stdout),
            log_lines(stderr, skill),
            child.wait()
        );
        (captured, status)
    };
    let outcome = tokio::time::timeout_at(deadline, work).await;
    let (captured, status) = match outcome {
        Ok(done) => done,
        Err(_) => {
            tracing::warn!(skill, "entrypoint passed its deadline; killing it");
            let _ = child.start_kill();
            // Reap it so no zombie is left, without hanging on it; what it started dies
            // with the run's process group.
            let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
            kill_group_but_self();
            return Err(RpcError::deadline());
        }
    };
    let status = status.map_err(|e| {
        tracing::error!(skill, error = %e, "cannot wait for the entrypoint");
        RpcError::new(ENTRYPOINT_FAILED, "skill entrypoint failed with status -1")
    })?;
    if !status.success() {
        let code = status_code(status);
        tracing::warn!(skill, code, "entrypoint failed");
        return Err(RpcError::new(
            ENTRYPOINT_FAILED,
            format!("skill entrypoint failed with status {code}"),
        ));
    }
    Ok(captured)
}

/// Starts the program. Retries briefly on "text file busy", which a script hits when
/// another thread of whoever wrote it forked while the file was still open for writing.
async fn spawn(program: &Path, folder: &Path) -> Result<Child, RpcError> {
    let mut command = Command::new(program);
    command
        .current_dir(folder)
        .env_clear()
        .envs(
            KEPT_ENV
                .iter()
                .filter_map(|k| std::env::var_os(k).map(|v| (k, v))),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Killed by the kernel if the runner dies (it starts entrypoints from its main thread).
    crate::support::children::die_with_parent(&mut command);
    let mut attempts = 0;
    loop {
        match command.spawn() {
            Ok(child) => return Ok(child),
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && attempts < 5 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => {
                let program = program.display();
                tracing::warn!(%program, error = %e, "cannot start the entrypoint");
                return Err(RpcError::new(
                    ENTRYPOINT_FAILED,
                    format!("skill entrypoint could not be started: {}", e.kind()),
                ));
            }
        }
    }
}

/// Kills every other process of this process group: what a killed entrypoint left running
/// in the background. (The bridge gives each skill run a child, and so a group, of its
/// own, so nothing else lives here.)
fn kill_group_but_self() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::{Pid, getpgrp, getpid};
    let (group, me) = (getpgrp().as_raw(), getpid().as_raw());
    // Only a group we lead is ours to clean: started by anything else (a test harness, a
    // shell), the group holds our parent and its siblings.
    if group != me {
        return;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name: state, ppid, pgrp, ...
        let pgrp = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().nth(2))
            .and_then(|p| p.parse::<i32>().ok());
        if pgrp == Some(group) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// The exit code, or 128 + the signal number for a killed process (the shell convention).
fn status_code(status: ExitStatus) -> i32 {
    if let Some(code) = status.code() {
        return code;
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return 128 + signal;
        }
    }
    -1
}

/// Reads a stream to its end, keeping the first [`MAX_STDOUT`] bytes.
async fn capture(stream: Option<impl AsyncRead + Unpin>) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut stream) = stream else {
        return kept;
    };
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = MAX_STDOUT - kept.len();
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
}

/// Logs a stream line by line at `info`, cutting long lines, until its end.
async fn log_lines(stream: Option<impl AsyncRead + Unpin>, skill: &str) {
    let Some(mut stream) = stream else {
        return;
    };
    let mut line: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 8 * 1024];
    let emit = |line: &mut Vec<u8>| {
        let text = String::from_utf8_lossy(line);
        tracing::info!(skill, "entrypoint stderr: {}", text.trim_end());
        line.clear();
    };
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &byte in &chunk[..n] {
            if byte == b'\n' {
                emit(&mut line);
            } else if line.len() < MAX_LOG_LINE {
                line.push(byte);
            }
        }
    }
    if !line.is_empty() {
        emit(&mut line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn capture_keeps_only_the_first_mebibyte() {
        let big = vec![b'a'; MAX_STDOUT + 10];
        assert_eq!(capture(Some(big.as_slice())).await.len(), MAX_STDOUT);
        assert_eq!(capture(Some(&b"hi"[..])).await, b"hi");
        assert!(capture(None::<&[u8]>).await.is_empty());
    }

    #[tokio::test]
    async fn a_program_that_is_not_there_fails_to_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let far = Instant::now() + Duration::from_secs(5);
        let err = run(&dir.path().join("nope"), dir.path(), b"{}", far, "s").await;
        assert_eq!(err.err().map(|e| e.code), Some(ENTRYPOINT_FAILED));
    }

    #[tokio::test]
    async fn a_past_deadline_runs_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = run(Path::new("/bin/true"), dir.path(), b"", Instant::now(), "s").await;
        assert_eq!(
            err.err().map(|e| e.message),
            Some("deadline exceeded".into())
        );
    }
}
