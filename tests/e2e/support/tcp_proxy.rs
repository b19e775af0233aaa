//! A loopback TCP proxy that can be cut: it forwards every connection on 127.0.0.1 to one
//! upstream address, until [`Proxy::cut`] drops every forwarded connection and closes
//! the listening socket (new connections are refused, as by a stopped server);
//! [`Proxy::restore`] listens on the same port again. It puts an outage between a bridge
//! and a shared server (Postgres) without stopping the server for everyone else.
//! Runs on a thread and runtime of its own, so synchronous tests can use it.

use std::net::SocketAddr;
use std::sync::mpsc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// A running proxy; stops when dropped.
pub struct Proxy {
    addr: SocketAddr,
    up: watch::Sender<bool>,
    stop: CancellationToken,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub fn start(upstream: SocketAddr) -> Proxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let (up, up_rx) = watch::channel(true);
        let stop = CancellationToken::new();
        let (ready_tx, ready) = mpsc::channel();
        let serve_stop = stop.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let first = TcpListener::from_std(listener).unwrap();
                ready_tx.send(()).unwrap();
                tokio::select! {
                    () = serve(first, addr, upstream, up_rx) => {}
                    () = serve_stop.cancelled() => {}
                }
            });
        });
        ready.recv().unwrap();
        Proxy { addr, up, stop }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Drops every forwarded connection and refuses new ones until [`Proxy::restore`].
    pub fn cut(&self) {
        self.up.send_replace(false);
    }

    /// Accepts and forwards connections again, on the same port.
    pub fn restore(&self) {
        self.up.send_replace(true);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Alternates between serving (listening, forwarding) while `up` is true and being down
/// (no listening socket, no connection) while it is false.
async fn serve(
    mut listener: TcpListener,
    addr: SocketAddr,
    upstream: SocketAddr,
    mut up: watch::Receiver<bool>,
) {
    loop {
        // Up: every connection of this period ends when the period does.
        let period = CancellationToken::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((client, _)) = accepted else { continue };
                    tokio::spawn(forward(client, upstream, period.child_token()));
                }
                changed = up.wait_for(|up| !*up) => {
                    if changed.is_err() {
                        return;
                    }
                    break;
                }
            }
        }
        period.cancel();
        drop(listener);
        // Down: nothing listens, so connecting is refused.
        if up.wait_for(|up| *up).await.is_err() {
            return;
        }
        // The port may linger for a moment; it is ours to take back.
        listener = crate::support::wait_for_async(std::time::Duration::from_secs(5), async || {
            TcpListener::bind(addr)
                .await
                .map_err(|e| format!("rebinding {addr}: {e}"))
        })
        .await;
    }
}

async fn forward(mut client: TcpStream, upstream: SocketAddr, cut: CancellationToken) {
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        () = cut.cancelled() => {}
    }
    // Dropping both sockets closes them: the client sees its connection end.
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    use super::Proxy;
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
}
