//! HTTP/1.1 keep-alive on raw sockets: pipelined requests answered in order on one
//! connection, which stays usable after a pause; a connection closed, never reused, when
//! the request asked for that or its body was left unread (so those bytes cannot pass
//! for a request); an idle connection that does not hold up a stop.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::LOCAL;
use crate::support::http_server::Server;
use crate::support::raw_http::{closed, ping_on, ping_request, read_response};

fn connect(s: &Server) -> (TcpStream, String) {
    let addr = s.base.trim_start_matches("http://").to_owned();
    let conn = TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    (conn, addr)
}

fn body_of(answer: &str) -> serde_json::Value {
    let (_, body) = answer.split_once("\r\n\r\n").expect(answer);
    serde_json::from_str(body).expect(answer)
}

#[tokio::test]
async fn pipelined_requests_and_ones_after_a_pause_share_a_connection() {
    let s = Server::start(&[]);
    let t = s.token(LOCAL, None);
    let (mut conn, addr) = connect(&s);
    tokio::task::spawn_blocking(move || {
        let two = ping_request(&addr, &t, 1) + &ping_request(&addr, &t, 2);
        conn.write_all(two.as_bytes()).unwrap();
        let mut carry = Vec::new();
        for id in [1, 2] {
            let answer = read_response(&mut conn, &mut carry);
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            assert!(!answer.contains("connection: close"), "{answer}");
            assert_eq!(body_of(&answer)["id"], id, "{answer}");
        }
        assert!(carry.is_empty());
        // Idle for a while, then the same connection again.
        std::thread::sleep(Duration::from_millis(300));
        conn.write_all(ping_request(&addr, &t, 3).as_bytes())
            .unwrap();
        let answer = read_response(&mut conn, &mut carry);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert_eq!(body_of(&answer)["id"], 3, "{answer}");
        // A request, and the start of the next one sent with it: the rest comes later,
        // once the connection has gone idle in between.
        let next = ping_request(&addr, &t, 5);
        let (start, rest) = next.split_at(12);
        conn.write_all((ping_request(&addr, &t, 4) + start).as_bytes())
            .unwrap();
        let answer = read_response(&mut conn, &mut carry);
        assert_eq!(body_of(&answer)["id"], 4, "{answer}");
        std::thread::sleep(Duration::from_millis(300));
        conn.write_all(rest.as_bytes()).unwrap();
        let answer = read_response(&mut conn, &mut carry);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert_eq!(body_of(&answer)["id"], 5, "{answer}");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_request_that_asks_to_close_or_is_http_1_0_is_closed_after_its_answer() {
    let s = Server::start(&[]);
    let t = s.token(LOCAL, None);
    for (from, to) in [
        ("Content-Type:", "Connection: close\r\nContent-Type:"),
        ("HTTP/1.1\r\n", "HTTP/1.0\r\n"),
    ] {
        let (mut conn, addr) = connect(&s);
        let t = t.clone();
        tokio::task::spawn_blocking(move || {
            let request = ping_request(&addr, &t, 1).replacen(from, to, 1);
            conn.write_all(request.as_bytes()).unwrap();
            let answer = read_response(&mut conn, &mut Vec::new());
            assert!(answer.contains(" 200 OK"), "{answer}");
            closed(&mut conn).unwrap_or_else(|e| panic!("{to:?}: {e}"));
        })
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn a_body_left_unread_ends_the_connection_and_is_never_taken_for_a_request() {
    let s = Server::start(&[]);
    let (mut conn, addr) = connect(&s);
    tokio::task::spawn_blocking(move || {
        // A body that is itself a request, sent only once the answer is in.
        let smuggled = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        write!(
            conn,
            "POST /nowhere HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n\r\n",
            smuggled.len()
        )
        .unwrap();
        let answer = read_response(&mut conn, &mut Vec::new());
        assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
        std::thread::sleep(Duration::from_millis(200));
        // The server may already have closed: a failed write is the point.
        let _ = conn.write_all(smuggled.as_bytes());
        closed(&mut conn).unwrap();
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn an_idle_kept_alive_connection_does_not_hold_up_a_stop() {
    let mut s = Server::start(&[]);
    let t = s.token(LOCAL, None);
    let (mut conn, addr) = connect(&s);
    let mut conn = tokio::task::spawn_blocking(move || {
        let answer = ping_on(&mut conn, &addr, &t);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        conn
    })
    .await
    .unwrap();
    let stopping = Instant::now();
    s.sigterm();
    assert!(s.wait_exit().success(), "{}", s.log());
    // Well inside the 10 s an idle connection may otherwise stay open for.
    let took = stopping.elapsed();
    assert!(took < Duration::from_secs(5), "stopped after {took:?}");
    closed(&mut conn).unwrap();
}
