//! What the gateway says of each endpoint: `/readyz`'s and the console overview's endpoint
//! objects, and the access line's `endpoints` (each try's `host:port`), the latter from the
//! real binary serving a TOML file.

use std::time::Duration;

use serde_json::{json, Value};
use wiregate::config::{Balance, Dialect};

use crate::support::{dead_url, jsonrpc_echo, spawn_post, GatewayProcess};
use crate::{authority, call, fleet, until, TestGatewayExt, WAIT};

#[tokio::test]
async fn readyz_and_the_console_list_each_endpoint_with_its_state_and_load() {
    const UP: &str = "observe-listed";
    let slow = jsonrpc_echo().delay(Duration::from_millis(600)).run().await;
    let dead = dead_url().await;
    let (live_at, dead_at) = (authority(&slow.url()), authority(&dead));
    let gw = fleet(UP, &[slow.url(), dead.clone()], Dialect::Jsonrpc, |u| {
        u.balance = Balance::RoundRobin;
    })
    .start()
    .await;

    // The first call (turn 0) is in flight on the live endpoint.
    let pending = spawn_post(
        &gw.http,
        format!("{}/rpc", gw.base()),
        call(json!(1), "m", json!({})),
    );
    let live = until("a call in flight on the live endpoint", WAIT, || async {
        let e = gw.endpoint(UP, &live_at).await;
        (e["in_flight"] == 1).then_some(e)
    })
    .await;
    assert_eq!(
        live,
        json!({"endpoint": live_at, "state": "healthy", "in_flight": 1, "errors": 0})
    );
    let (status, body) = gw.readyz().await;
    assert_eq!(status, 200, "one endpoint takes calls: {body}");
    assert_eq!(body["ready"], true);
    assert_eq!(body["upstreams"][UP], "reachable");
    assert_eq!(
        body["endpoints"][UP][1],
        json!({"endpoint": dead_at, "state": "unreachable", "in_flight": 0, "errors": 0}),
        "no checks: a refused TCP connect says unreachable"
    );
    assert_eq!(pending.await.unwrap()["id"], 1);

    // The second call (turn 1) tries the dead one first: one error counted on it.
    let a = gw.rpc(&call(json!(2), "m", json!({}))).await;
    assert_eq!(a.status, 200, "{}", a.text);
    let e = gw.endpoint(UP, &dead_at).await;
    assert_eq!(e["errors"], 1, "{e}");
    assert_eq!(gw.endpoint(UP, &live_at).await["in_flight"], 0);

    // The console's overview lists the same objects.
    let overview = gw.get("/console/api/overview").await;
    assert_eq!(overview.status, 200, "{}", overview.text);
    let overview = overview.json();
    let listed = overview["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == UP)
        .unwrap_or_else(|| panic!("{UP} not in {overview}"))
        .clone();
    assert_eq!(listed["reachable"], true, "{listed}");
    assert_eq!(
        listed["endpoints"],
        json!([
            {"endpoint": live_at, "state": "healthy", "in_flight": 0, "errors": 0},
            {"endpoint": dead_at, "state": "unreachable", "in_flight": 0, "errors": 1},
        ]),
        "{listed}"
    );
}

#[tokio::test]
async fn the_access_line_names_each_tries_endpoint_in_order() {
    let live = jsonrpc_echo().run().await;
    let dead = dead_url().await;
    let toml = format!(
        r#"
[[upstreams]]
name = "observe-access"
dialect = "jsonrpc"
endpoints = ["{dead}", "{live}"]
balance = "round_robin"

[[routes]]
methods = ["*"]
upstream = "observe-access"

[log]
format = "json"
access = true
"#,
        live = live.url()
    );
    crate::support::schema::check_toml(&toml);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, &toml).unwrap();
    let gateway = GatewayProcess::spawn(|c| {
        c.current_dir(dir.path())
            .arg("--config")
            .arg(&path)
            .args(["--listen", "127.0.0.1:0"])
    });
    // The first JSON log line `f` accepts, once there is one.
    let find = |what: &'static str, f: fn(&Value) -> bool| {
        let log = gateway.log.clone();
        async move {
            until(what, WAIT, || async {
                log.lock()
                    .unwrap()
                    .iter()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                    .find(f)
            })
            .await
        }
    };
    let addr = gateway.listening_addr().await;
    let http = reqwest::Client::new();
    let r = http
        .post(format!("http://{addr}/rpc"))
        .header("content-type", "application/json")
        .body(call(json!("acc-1"), "m", json!({})).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let access = find("the call's access line", |v| {
        let msg = v["message"]
            .as_str()
            .or_else(|| v["fields"]["message"].as_str());
        msg == Some("access") && v.to_string().contains("/rpc")
    })
    .await;
    let field = |k: &str| {
        access
            .get(k)
            .or_else(|| access["fields"].get(k))
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(
        field("endpoints"),
        json!(format!("{},{}", authority(&dead), authority(&live.url()))),
        "{access}"
    );
    assert_eq!(field("upstream"), "observe-access", "{access}");
    assert_eq!(field("status"), 200, "{access}");
}
