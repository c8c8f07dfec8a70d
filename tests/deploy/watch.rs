//! `server.watch_config = true` on the real binary, with its configuration mounted the way the
//! kubelet mounts a ConfigMap: `gateway.toml -> ..data/gateway.toml`, `..data -> ..<timestamp>`,
//! and an update that writes a new timestamped directory and renames a new `..data` link over
//! the old one. The new route serves without a signal; a broken file swapped in the same way is
//! refused, the log saying why, and the last good configuration goes on serving. A plain file
//! edited in place, or replaced by a rename as editors save, reloads the same way.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{self, GatewayProcess};

/// How long a change may take to be seen (the watcher waits for the directory to go quiet).
const WAIT: Duration = Duration::from_secs(15);

/// A configuration routing every method to `url`, with the file watched.
fn routing_to(url: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nwatch_config = true\n\n[log]\nformat = \"json\"\n\n\
         [[upstreams]]\nname = \"u\"\nurl = \"{url}\"\ndialect = \"jsonrpc\"\n\n\
         [[routes]]\nmethods = [\"*\"]\nupstream = \"u\"\n"
    )
}

/// What the kubelet does on a ConfigMap update: the data in a new directory, a new `..data`
/// link to it renamed over the old one (atomic), the old directory removed.
fn kubelet_update(dir: &Path, generation: u32, text: &str) {
    let data = format!("..2026_12_07_00_00_0{generation}.000000001");
    std::fs::create_dir(dir.join(&data)).unwrap();
    std::fs::write(dir.join(&data).join("gateway.toml"), text).unwrap();
    let old = std::fs::read_link(dir.join("..data")).ok();
    std::os::unix::fs::symlink(&data, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    if let Some(old) = old {
        std::fs::remove_dir_all(dir.join(old)).unwrap();
    }
}

async fn via(http: &reqwest::Client, url: &str) -> String {
    let v: Value = http
        .post(format!("{url}/rpc"))
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "m"}).to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["result"]["via"].as_str().unwrap_or("?").to_owned()
}

#[tokio::test]
async fn a_configmap_swap_reloads_and_a_broken_one_keeps_the_last_good() {
    let (a, b) = (
        support::named("A").run().await,
        support::named("B").run().await,
    );
    let mount = tempfile::tempdir().unwrap();
    let dir = mount.path();
    kubelet_update(dir, 1, &routing_to(&a.url()));
    std::os::unix::fs::symlink("..data/gateway.toml", dir.join("gateway.toml")).unwrap();
    let process = GatewayProcess::spawn(|c| c.arg("--config").arg(dir.join("gateway.toml")));
    let url = format!("http://{}", process.listening_addr().await);
    let http = reqwest::Client::new();
    assert_eq!(via(&http, &url).await, "A");

    kubelet_update(dir, 2, &routing_to(&b.url()));
    support::until_true("the swapped configuration to serve", WAIT, async || {
        via(&http, &url).await == "B"
    })
    .await;
    let log_has = |needle: &str| {
        process
            .log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(needle))
    };
    assert!(log_has("the configuration file changed"));
    assert!(log_has("configuration reloaded"));

    // A file with an error: refused with its key path, B still served.
    let broken = routing_to(&b.url()).replace("dialect = \"jsonrpc\"", "dialect = \"smoke\"");
    kubelet_update(dir, 3, &broken);
    support::until_true("the refusal in the log", WAIT, async || {
        log_has("reload refused")
    })
    .await;
    let refusal = process
        .log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.to_string().contains("reload refused"))
        .unwrap();
    let key = refusal["key"]
        .as_str()
        .or(refusal["fields"]["key"].as_str());
    assert_eq!(key, Some("upstreams[0].dialect"), "{refusal}");
    let error = refusal["error"]
        .as_str()
        .or(refusal["fields"]["error"].as_str());
    assert!(error.is_some_and(|e| e.contains("smoke")), "{refusal}");
    assert_eq!(via(&http, &url).await, "B");

    // A touch that changes nothing reloads nothing.
    let reloads = || {
        process
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("reloading the configuration"))
            .count()
    };
    let before = reloads();
    kubelet_update(dir, 4, &broken);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(reloads(), before, "the same content twice is one reload");
}

/// A plain file edited in place, then replaced by a rename (as editors save), reloads too.
#[tokio::test]
async fn an_edited_or_renamed_over_file_reloads() {
    let (a, b) = (
        support::named("A").run().await,
        support::named("B").run().await,
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, routing_to(&a.url())).unwrap();
    let process = GatewayProcess::spawn(|c| c.arg("--config").arg(&path));
    let url = format!("http://{}", process.listening_addr().await);
    let http = reqwest::Client::new();
    assert_eq!(via(&http, &url).await, "A");

    std::fs::write(&path, routing_to(&b.url())).unwrap();
    support::until_true("the edited file to serve", WAIT, async || {
        via(&http, &url).await == "B"
    })
    .await;

    let saved = dir.path().join(".gateway.toml.swp");
    std::fs::write(&saved, routing_to(&a.url())).unwrap();
    std::fs::rename(&saved, &path).unwrap();
    support::until_true("the renamed-over file to serve", WAIT, async || {
        via(&http, &url).await == "A"
    })
    .await;
}
