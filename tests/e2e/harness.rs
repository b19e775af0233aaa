//! The harnesses' own checks: the schema copy rejects what the spec forbids, and the TCP
//! proxy forwards, cuts and restores. They live here, not in `support`, because
//! `support` is shared with the acceptance suite (`tests/acceptance`), which holds
//! criteria only.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::support::schema::{assert_valid, is_valid};
use crate::support::tcp_proxy::Proxy;
use crate::support::{wait_for, wait_until};

/// An echo server on loopback, on a thread of its own.
fn echo() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut conn = conn;
                let mut buf = [0u8; 64];
                while let Ok(n @ 1..) = conn.read(&mut buf) {
                    if conn.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

fn round_trip(conn: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    conn.write_all(b"ping")?;
    let mut buf = [0u8; 4];
    conn.read_exact(&mut buf)?;
    Ok(buf.to_vec())
}

#[test]
fn the_proxy_forwards_cuts_refuses_and_restores() {
    let proxy = Proxy::start(echo());
    let mut before = TcpStream::connect(proxy.addr()).unwrap();
    before
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(round_trip(&mut before).unwrap(), b"ping");
    proxy.cut();
    // The live connection ends, and new ones are refused.
    wait_until(Duration::from_secs(5), "still forwarding", || {
        round_trip(&mut before).is_err()
    });
    wait_until(Duration::from_secs(5), "still listening", || {
        TcpStream::connect(proxy.addr()).is_err()
    });
    proxy.restore();
    let mut after = wait_for(Duration::from_secs(5), || {
        TcpStream::connect(proxy.addr()).map_err(|e| format!("not restored: {e}"))
    });
    after
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(round_trip(&mut after).unwrap(), b"ping");
}

#[test]
fn the_schema_copy_rejects_what_the_spec_forbids() {
    // A null id is not allowed in an error response: the reason ids are omitted instead.
    let bad = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "x"}});
    assert!(!is_valid("JSONRPCMessage", &bad));
    let good = serde_json::json!({"jsonrpc": "2.0", "error": {"code": -32700, "message": "x"}});
    assert_valid("JSONRPCMessage", &good);
    let no_content = serde_json::json!({"structuredContent": {}});
    assert!(!is_valid("CallToolResult", &no_content));
}
