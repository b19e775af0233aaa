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
