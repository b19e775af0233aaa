//! The inet sockets a process holds, read from /proc: what criteria 20 (no port on stdio)
//! and 21 (a bound port) look at.

use std::collections::HashSet;

/// A socket a process holds.
pub struct InetSocket {
    pub table: &'static str,
    /// The local address as the kernel's table writes it (`0100007F:1F90`).
    pub local: String,
    pub listening: bool,
}

/// The sockets, one line each, for a failure message.
pub fn describe(sockets: &[InetSocket]) -> String {
    let list: Vec<String> = sockets
        .iter()
        .map(|s| format!("{} {} listening={}", s.table, s.local, s.listening))
        .collect();
    format!("[{}]", list.join(", "))
}

/// The TCP and UDP sockets (IPv4 and IPv6) process `pid` holds: its socket descriptors,
/// looked up by inode in the kernel's tables.
pub fn inet_sockets(pid: i32) -> Vec<InetSocket> {
    let inodes: HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc is readable")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().into_owned();
            Some(link.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let mut found = Vec::new();
    for table in ["tcp", "tcp6", "udp", "udp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            if cols.len() > 9 && inodes.contains(cols[9]) {
                found.push(InetSocket {
                    table,
                    local: cols[1].to_owned(),
                    listening: cols[3] == "0A",
                });
            }
        }
    }
    found
}
