//! Secrets the bridge creates for itself in the data dir (the dev signing key, the session
//! key): written once, mode 0600, atomically, so two processes racing to create one end up
//! with the same content.

use std::io::Write;
use std::path::Path;

/// Creates `dir/name` holding `content` unless it exists: the content goes to a private
/// temporary file first, then is published with a hard link, which fails if another
/// process published first; either way one content wins.
///
/// # Errors
/// When the directory or the file cannot be created.
pub fn publish(dir: &Path, name: &str, content: &[u8]) -> Result<(), String> {
    let path = dir.join(name);
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut suffix = [0u8; 8];
    getrandom::fill(&mut suffix).map_err(|e| format!("no randomness: {e}"))?;
    let tmp = dir.join(format!(".{name}.{}", u64::from_le_bytes(suffix)));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options
        .open(&tmp)
        .and_then(|mut f| f.write_all(content).and_then(|()| f.sync_all()))
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()));
    let published = written.and_then(|()| match std::fs::hard_link(&tmp, &path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("cannot create {}: {e}", path.display())),
    });
    let _ = std::fs::remove_file(&tmp);
    published
}
