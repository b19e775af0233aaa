//! The key that seals HTTP session ids: 32 or more random bytes, hex in a file. Every
//! instance behind one balancer needs the same one (`--session-key-file`); without it the
//! bridge makes its own in the data dir, which suits one instance.

use std::path::Path;

use data_encoding::HEXLOWER_PERMISSIVE;

const FILE_NAME: &str = "session.key";
/// The shortest key accepted, in bytes.
pub const MIN_KEY_BYTES: usize = 32;

/// The key from `file`, or the data dir's own (created when missing).
///
/// # Errors
/// When the file cannot be read or created, or holds no hex key of 32 bytes or more.
pub fn load(file: Option<&Path>, data_dir: &Path) -> anyhow::Result<Vec<u8>> {
    let path = path(file, data_dir);
    if file.is_none() && !path.exists() {
        let mut key = [0u8; MIN_KEY_BYTES];
        getrandom::fill(&mut key).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
        let hex = format!("{}\n", HEXLOWER_PERMISSIVE.encode(&key));
        crate::support::private_file::publish(data_dir, FILE_NAME, hex.as_bytes())?;
    }
    read(&path)
}

/// Where the key is read from: `file`, else the data dir's own.
pub fn path(file: Option<&Path>, data_dir: &Path) -> std::path::PathBuf {
    file.map_or_else(|| data_dir.join(FILE_NAME), Path::to_path_buf)
}

/// The key from `file`, or the data dir's own; `None` when the data dir's own does not
/// exist yet (a start creates it). Creates nothing.
///
/// # Errors
/// When the file cannot be read or holds no hex key of 32 bytes or more.
pub fn load_existing(file: Option<&Path>, data_dir: &Path) -> anyhow::Result<Option<Vec<u8>>> {
    let path = path(file, data_dir);
    if file.is_none() && !path.exists() {
        return Ok(None);
    }
    read(&path).map(Some)
}

fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read the session key {}: {e}", path.display()))?;
    let key = HEXLOWER_PERMISSIVE
        .decode(text.trim().as_bytes())
        .map_err(|_| anyhow::anyhow!("the session key {} is not hex", path.display()))?;
    if key.len() < MIN_KEY_BYTES {
        return Err(anyhow::anyhow!(
            "the session key {} is {} bytes; use {MIN_KEY_BYTES} or more (e.g. `openssl rand -hex 32`)",
            path.display(),
            key.len()
        ));
    }
    Ok(key)
}
