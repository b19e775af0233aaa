//! Unit tests of the runner's serve loop.

use super::*;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

/// Feeds `input` to a bundled-catalogue runner and returns every frame it wrote.
async fn session(input: &[u8], pace_ms: u64) -> (i32, Vec<Value>) {
    let catalog = Catalog::bundled();
    let runner = Runner::new(catalog, Duration::from_millis(pace_ms));
    let (mut client, server_in) = tokio::io::duplex(1024);
    let input = input.to_vec();
    let writer = tokio::spawn(async move {
        let _ = client.write_all(&input).await;
    });
    let mut output = Vec::new();
    let code = serve(&runner, server_in, &mut output).await;
    let _ = writer.await;
    let frames = String::from_utf8_lossy(&output)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every frame is json"))
        .collect();
    (code, frames)
}

#[tokio::test]
async fn every_line_received_before_eof_is_answered_in_order() {
    let ctx = json!({"tenant_id": "t", "actor_id": "a", "traceparent": "p"});
    let mut input = String::new();
    for (id, method) in [(1, "personas.list"), (2, "nope"), (3, "route")] {
        let params = json!({"ctx": ctx, "query": "architect a new system"});
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        input.push_str(&format!("{req}\n"));
    }
    input.push_str("\n{oops\n");
    let (code, frames) = session(input.as_bytes(), 0).await;
    assert_eq!(code, 0);
    assert_eq!(frames.len(), 4);
    assert_eq!(frames[0]["id"], 1);
    assert_eq!(frames[1]["error"]["code"], -32601);
    assert_eq!(frames[2]["result"]["workflow"], "architect-new-system");
    assert_eq!(frames[3]["error"]["code"], -32700);
    assert!(frames[3].get("id").is_none());
}

#[tokio::test]
async fn odd_inputs_never_crash_the_loop() {
    let odd: &[&[u8]] = &[
        b"\xff\xfe\n",
        b"null\n",
        b"\"x\"\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"route\"}\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"route\",\"params\":[]}\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"workflow.execute\",\"params\":{\"ctx\":1}}\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":-9223372036854775808,\"method\":\"x\"}\n",
    ];
    let (code, frames) = session(&odd.concat(), 0).await;
    assert_eq!(code, 0);
    assert_eq!(frames.len(), odd.len());
    assert!(frames.iter().all(|f| f["error"]["code"].is_i64()));
}

#[tokio::test]
async fn random_requests_always_get_exactly_one_well_formed_answer() {
    // Requests assembled from random valid and invalid members with a fixed-seed
    // xorshift, a few of them cut short: no panics, every request answered once.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut pick = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        usize::try_from(state % n as u64).unwrap_or(0)
    };
    let choices: [(&str, Vec<Value>); 9] = [
        (
            "ctx",
            vec![
                json!({"tenant_id": "t", "actor_id": "a", "traceparent": "p"}),
                json!(1),
            ],
        ),
        (
            "query",
            vec![
                json!("architect a system"),
                json!("{{x}} \u{0} é"),
                json!(5),
            ],
        ),
        (
            "limit",
            vec![json!(0), json!(3), json!(10), json!("2"), json!(1e300)],
        ),
        (
            "persona",
            vec![json!("chief-technology-officer"), json!(""), json!(null)],
        ),
        (
            "workflow",
            vec![json!("adr-quick-capture"), json!("architect-new-system")],
        ),
        (
            "inputs",
            vec![
                json!({"title": "t"}),
                json!({"title": []}),
                json!([]),
                json!({}),
            ],
        ),
        (
            "deadline",
            vec![json!("2999-01-01T00:00:00Z"), json!("2000-01-01T00:00:00Z")],
        ),
        (
            "skill",
            vec![json!({"name": "", "path": "/"}), json!({"name": 1})],
        ),
        ("other", vec![json!({"deep": [[[]]]})]),
    ];
    let methods = [
        "personas.list",
        "workflows.list",
        "route",
        "workflow.execute",
        "skill.invoke",
        "x",
    ];
    let (mut input, mut expected) = (String::new(), 0);
    for id in 0..300 {
        let mut params = serde_json::Map::new();
        for (name, values) in &choices {
            if pick(3) > 0 {
                params.insert((*name).to_owned(), values[pick(values.len())].clone());
            }
        }
        let method = methods[pick(methods.len())];
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut line = line.to_string();
        if pick(10) == 0 {
            line.truncate(pick(line.len()));
        }
        // A cut line is a parse error unless nothing is left (a blank line).
        expected += usize::from(!line.is_empty());
        input.push_str(&line);
        input.push('\n');
    }
    let (code, frames) = session(input.as_bytes(), 0).await;
    assert_eq!(code, 0);
    let answers: Vec<&Value> = frames
        .iter()
        .filter(|f| f.get("method").is_none())
        .collect();
    assert_eq!(answers.len(), expected);
    assert!(
        answers
            .iter()
            .all(|f| f["result"].is_object() ^ f["error"]["code"].is_i64())
    );
    assert!(answers.iter().any(|f| f["result"].is_object()));
    assert!(!answers.iter().any(|f| f["error"]["code"] == -32603));
}
