//! A JWKS endpoint for the identity tests, on 127.0.0.1:0. Its answer can be swapped while
//! the bridge runs (a key set, 503, garbage, an oversized body), it can announce
//! `Cache-Control: max-age`, it counts the fetches it answers, and for an oversized body
//! it records how much the client took before the connection went away.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::Response;
use serde_json::Value;

/// What the endpoint answers.
#[derive(Clone)]
pub enum Reply {
    /// 200 with this JSON.
    Keys(Value),
    /// 503.
    Down,
    /// 200 with a body that is not JSON.
    Garbage,
    /// 200 with `total` bytes, streamed, with or without a `Content-Length`.
    Oversized { total: usize, declare_length: bool },
}

#[derive(Default)]
struct State {
    fetches: usize,
    /// Bytes of oversized bodies handed to the connection, and whether each body was
    /// dropped before its end.
    closed: Vec<(usize, bool)>,
}

struct Shared {
    reply: Mutex<(Reply, Option<u64>)>,
    state: Mutex<State>,
    changed: Condvar,
}

/// A JWKS endpoint whose answer can be swapped, on 127.0.0.1:0.
pub struct JwksServer {
    pub url: String,
    shared: Arc<Shared>,
}

impl JwksServer {
    pub fn start(initial: Value) -> JwksServer {
        JwksServer::serving(Reply::Keys(initial))
    }

    pub fn serving(initial: Reply) -> JwksServer {
        let shared = Arc::new(Shared {
            reply: Mutex::new((initial, None)),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let handler_state = Arc::clone(&shared);
        let app = axum::Router::new().route(
            "/jwks",
            axum::routing::get(move || {
                let shared = Arc::clone(&handler_state);
                async move { answer(&shared) }
            }),
        );
        JwksServer {
            url: format!("http://{}/jwks", crate::support::serve_http(app)),
            shared,
        }
    }

    /// Serves `keys`, or 503 for `Value::Null`.
    pub fn set(&self, keys: Value) {
        self.reply(if keys.is_null() {
            Reply::Down
        } else {
            Reply::Keys(keys)
        });
    }

    pub fn reply(&self, reply: Reply) {
        self.shared.reply.lock().unwrap().0 = reply;
    }

    /// Announces `Cache-Control: max-age=secs` from now on.
    pub fn set_max_age(&self, secs: u64) {
        self.shared.reply.lock().unwrap().1 = Some(secs);
    }

    /// Fetches answered so far.
    pub fn fetches(&self) -> usize {
        self.shared.state.lock().unwrap().fetches
    }

    /// Waits until at least `n` fetches were answered; false after `within`.
    pub fn wait_fetches(&self, n: usize, within: Duration) -> bool {
        self.wait(within, |s| s.fetches >= n)
    }

    /// Waits until an oversized body is dropped (finished or cut off); returns the bytes
    /// handed to the connection and whether the client went away before the end.
    pub fn wait_oversized_closed(&self, within: Duration) -> Option<(usize, bool)> {
        if !self.wait(within, |s| !s.closed.is_empty()) {
            return None;
        }
        Some(self.shared.state.lock().unwrap().closed[0])
    }

    fn wait(&self, within: Duration, done: impl Fn(&State) -> bool) -> bool {
        let deadline = Instant::now() + within;
        let mut s = self.shared.state.lock().unwrap();
        while !done(&s) {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            s = self.shared.changed.wait_timeout(s, left).unwrap().0;
        }
        true
    }
}

fn answer(shared: &Arc<Shared>) -> Response {
    let (reply, max_age) = shared.reply.lock().unwrap().clone();
    let mut builder = Response::builder().header(header::CONTENT_TYPE, "application/json");
    if let Some(secs) = max_age {
        builder = builder.header(header::CACHE_CONTROL, format!("public, max-age={secs}"));
    }
    let response = match reply {
        Reply::Keys(v) => builder.body(Body::from(v.to_string())),
        Reply::Down => builder
            .status(StatusCode::SERVICE_UNAVAILABLE)
            .body(Body::from("{}")),
        Reply::Garbage => builder.body(Body::from("<html>maintenance</html>")),
        Reply::Oversized {
            total,
            declare_length,
        } => {
            if declare_length {
                builder = builder.header(header::CONTENT_LENGTH, total);
            }
            builder.body(Body::from_stream(oversized(total, Arc::clone(shared))))
        }
    };
    let mut s = shared.state.lock().unwrap();
    s.fetches += 1;
    shared.changed.notify_all();
    response.unwrap()
}

/// Records, when dropped, how many bytes were taken and whether the body was cut off.
struct Tally {
    sent: usize,
    left: usize,
    shared: Arc<Shared>,
}

impl Drop for Tally {
    fn drop(&mut self) {
        let mut s = self.shared.state.lock().unwrap();
        s.closed.push((self.sent, self.left > 0));
        self.shared.changed.notify_all();
    }
}

fn oversized(
    total: usize,
    shared: Arc<Shared>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let tally = Tally {
        sent: 0,
        left: total,
        shared,
    };
    futures::stream::unfold(tally, |mut t| async move {
        if t.left == 0 {
            return None;
        }
        let n = t.left.min(64 * 1024);
        t.left -= n;
        t.sent += n;
        Some((Ok(Bytes::from(vec![b' '; n])), t))
    })
}
