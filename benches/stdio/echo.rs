//! The floor of the stdio benchmark: a bare serde_json echo server.

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
        serde_json::to_writer(
            &mut out,
            &json!({"jsonrpc": "2.0", "id": v["id"], "result": {}}),
        )
        .unwrap();
        out.write_all(b"\n").unwrap();
        if input.buffer().is_empty() {
            out.flush().unwrap();
        }
    }
}
