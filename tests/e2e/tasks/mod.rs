//! Long-running tools as tasks through the built binary, on SQLite and (when
//! `DATABASE_URL` is set) on Postgres, beyond the seed's criteria (4-8 and 17 are in
//! `tests/acceptance`): the spec's task door, progress (`lifecycle`), cancellation and process-group kills (`cancel`), no
//! process outliving a killed bridge (`crash`), tenancy (`tenants`), the run caps under
//! pipelined and parallel calls (`caps`), concurrent calls on one task (`races`), tasks
//! that end whatever befalls the store or the run (`ending`), two bridge instances on one
//! store (`instances`), and down upstreams (`upstreams`).

mod auto;
mod cancel;
mod caps;
mod crash;
mod ending;
mod instances;
mod lifecycle;
mod limits;
mod races;
mod shutdown;
mod tenants;
mod upstreams;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::binary::{Bridge, binary};
use crate::support::wait_for;

pub(crate) const LOCAL: &str = "00000000-0000-4000-8000-000000000001";

/// The stores every scenario runs on: the default SQLite file, and Postgres (the run's
/// database, as its app login role) when `support::pg::admin_url` says the Postgres
/// tests run.
pub(crate) fn stores() -> Vec<Vec<String>> {
    let mut stores = vec![Vec::new()];
    if let Some(url) = crate::support::pg::database_url() {
        stores.push(vec!["--database-url".into(), url]);
    }
    stores
}

/// Flags for `Bridge::initialized` (which adds `--dev` itself).
pub(crate) fn args<'a>(store: &'a [String], extra: &[&'a str]) -> Vec<&'a str> {
    let mut v: Vec<&str> = store.iter().map(String::as_str).collect();
    v.extend_from_slice(extra);
    v
}

/// Flags for `Bridge::spawn_at`, which takes them as they are.
pub(crate) fn dev_args<'a>(store: &'a [String], extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--dev"];
    v.extend(args(store, extra));
    v
}

pub(crate) const ADR: fn() -> Value = || json!({"persona": "chief-technology-officer", "workflow": "adr-quick-capture", "inputs": {"title": "test"}});

pub(crate) fn start(b: &mut Bridge, arguments: Value) -> String {
    let resp = b.call("cyberos.cuo.execute_workflow", arguments);
    let result = &resp["result"];
    let handle: Value = serde_json::from_str(
        result["content"][0]["text"]
            .as_str()
            .expect("a text handle"),
    )
    .unwrap();
    assert_eq!(handle["status"], "running", "{resp}");
    assert_eq!(result["structuredContent"], handle);
    handle["task_id"].as_str().unwrap().to_owned()
}

pub(crate) fn get_seed(b: &mut Bridge, id: &str) -> Value {
    b.request("tasks/get", json!({"id": id}))
}

pub(crate) fn wait_status(b: &mut Bridge, id: &str, want: &str, within: Duration) -> Value {
    wait_for(within, || {
        let resp = get_seed(b, id);
        if resp["result"]["status"] == want {
            return Ok(resp["result"].clone());
        }
        Err(format!("task {id} never became {want}: {resp}"))
    })
}

pub(crate) fn dev_token(data_dir: &Path, tenant: &str) -> String {
    let out = std::process::Command::new(binary())
        .arg("--data-dir")
        .arg(data_dir)
        .args(["dev-token", "--tenant", tenant])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}
