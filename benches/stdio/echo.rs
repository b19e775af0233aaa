//! The floors of the stdio benchmark: a bare serde_json echo server, the same echo
//! served the way the bridge serves stdio, and that server answering with a call's result.

use std::io::{BufRead, BufReader, BufWriter, Write};

use serde_json::{Value, json};

/// The reference point: read a line, parse it, answer `{"result":{}}` with its id.
pub fn serve() {
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut line = String::new();
    let mut input = BufReader::with_capacity(64 * 1024, std::io::stdin().lock());
    loop {
        line.clear();
        if input.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        let v: Value = serde_json::from_str(&line).unwrap();
        serde_json::to_writer(&mut out, &answer(&v)).unwrap();
        out.write_all(b"\n").unwrap();
        if input.buffer().is_empty() {
            out.flush().unwrap();
        }
    }
}

/// The same echo on the bridge's stdio plumbing: a current-thread Tokio runtime with
/// stdin and stdout as pipes on its reactor (`app::cli`). It waits in `epoll_wait` and
/// then reads, where the bare echo blocks in `read`: what an async stdio server pays per
/// message before it does any work of its own.
pub fn serve_async() {
    serve_on_tokio(|request, frame| serde_json::to_writer(frame, &answer(request)).unwrap());
}

/// [`serve_async`] answering every request with `result` (JSON text, read from the file
/// at `path`), copied behind its envelope as the bridge copies a result it has serialized:
/// the least a server on these pipes can do to answer with the bytes a call answers with.
pub fn serve_answer(path: &str) {
    let result = std::fs::read_to_string(path).unwrap();
    serve_on_tokio(|request, frame| {
        frame.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        serde_json::to_writer(&mut *frame, &request["id"]).unwrap();
        frame.extend_from_slice(br#","result":"#);
        frame.extend_from_slice(result.as_bytes());
        frame.push(b'}');
    });
}

/// Reads a line, parses it, and writes what `answer` puts in the frame for it.
fn serve_on_tokio(answer: impl Fn(&Value, &mut Vec<u8>)) {
    use std::os::fd::AsFd;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    use tokio::net::unix::pipe;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let stdin = std::io::stdin().as_fd().try_clone_to_owned().unwrap();
        let stdout = std::io::stdout().as_fd().try_clone_to_owned().unwrap();
        let mut input = tokio::io::BufReader::with_capacity(
            64 * 1024,
            pipe::Receiver::from_owned_fd(stdin).expect("stdin is a pipe"),
        );
        let mut out = tokio::io::BufWriter::with_capacity(
            64 * 1024,
            pipe::Sender::from_owned_fd(stdout).expect("stdout is a pipe"),
        );
        let mut line = String::new();
        // One frame buffer for the run: a floor allocates no more than it must.
        let mut frame = Vec::new();
        loop {
            line.clear();
            if input.read_line(&mut line).await.unwrap_or(0) == 0 {
                break;
            }
            let v: Value = serde_json::from_str(&line).unwrap();
            frame.clear();
            answer(&v, &mut frame);
            out.write_all(&frame).await.unwrap();
            out.write_all(b"\n").await.unwrap();
            if input.buffer().is_empty() {
                out.flush().await.unwrap();
            }
        }
    });
}

fn answer(request: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": request["id"], "result": {}})
}
