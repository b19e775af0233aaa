//! HTTP/1.1 by hand on a `std` socket, for what a client library hides: keep-alive,
//! pipelining, bodies sent late, the moment a connection is closed.

use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::json;

use super::http_server::rpc;

/// A `ping` request with JSON-RPC id `id`, kept alive.
pub fn ping_request(addr: &str, token: &str, id: i64) -> String {
    let body = rpc(id, "ping", json!({})).to_string();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json\r\nAuthorization: Bearer {token}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// One `ping` on `conn`; the response head and body.
pub fn ping_on(conn: &mut TcpStream, addr: &str, token: &str) -> String {
    conn.write_all(ping_request(addr, token, 1).as_bytes())
        .unwrap();
    read_response(conn, &mut Vec::new())
}

/// The next whole response on `conn` (head and a body of its Content-Length), starting
/// with what `carry` holds from an earlier read and leaving in it what came after; what
/// there is when the connection ends or fails.
pub fn read_response(conn: &mut TcpStream, carry: &mut Vec<u8>) -> String {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = response_end(carry) {
            let rest = carry.split_off(end);
            let whole = std::mem::replace(carry, rest);
            return String::from_utf8_lossy(&whole).into_owned();
        }
        match conn.read(&mut buf) {
            Ok(n) if n > 0 => carry.extend_from_slice(&buf[..n]),
            _ => return String::from_utf8_lossy(&std::mem::take(carry)).into_owned(),
        }
    }
}

/// Where the first whole response in `got` ends, if it is all there.
fn response_end(got: &[u8]) -> Option<usize> {
    let head_end = got.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&got[..head_end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse::<usize>().unwrap());
    (got.len() >= head_end + length).then_some(head_end + length)
}

/// Whether the server has closed `conn`: the read ends (or is reset) rather than times
/// out, with nothing more sent.
pub fn closed(conn: &mut TcpStream) -> Result<(), String> {
    let mut rest = Vec::new();
    match conn.read_to_end(&mut rest) {
        Ok(_) if rest.is_empty() => Ok(()),
        Ok(_) => Err(format!("more came: {}", String::from_utf8_lossy(&rest))),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(()),
        Err(e) => Err(format!("still open: {e}")),
    }
}
