//! Replicas for the cluster tests: in-process gateways sharing one Redis, and the gateway
//! binary as a replica of its own.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::redis_server::RedisServer;
use crate::support::{self, gateway, text_message, until_true, SseEvent, TestGateway};

pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// Three replicas of one cluster, named a, b and c.
pub(crate) async fn replicas(redis: &RedisServer, tag: &str) -> [TestGateway; 3] {
    replicas_leasing(redis, tag, 1_000).await
}

/// [`replicas`] whose leases last `lease_ms`: for a test that holds Redis back for longer
/// than the usual second, without the others taking that for a lost replica.
pub(crate) async fn replicas_leasing(
    redis: &RedisServer,
    tag: &str,
    lease_ms: u64,
) -> [TestGateway; 3] {
    let start = |node: &'static str| {
        gateway()
            .sid(&format!("{tag}-{node}"))
            .cluster(&redis.url(), node)
            .with(move |c| c.cluster.lease_ms = lease_ms)
            .start()
    };
    let (a, b, c) = tokio::join!(start("a"), start("b"), start("c"));
    for g in [&a, &b, &c] {
        until_true("the replica sees Redis", WAIT, || async {
            g.get("/readyz").await.status == 200
        })
        .await;
    }
    [a, b, c]
}

/// A context started on `g`, and its first turn's events.
pub(crate) async fn context_on(g: &TestGateway) -> (String, Vec<SseEvent>) {
    let first = g.call("message/send", text_message("hello")).await;
    let ctx = first["result"]["contextId"].as_str().unwrap().to_owned();
    let events = g
        .sse_get(&format!("/contexts/{ctx}/events"), None)
        .await
        .until_final(WAIT)
        .await;
    (ctx, events)
}

pub(crate) fn with_context(text: &str, ctx: &str) -> Value {
    let mut m = text_message(text);
    m["message"]["contextId"] = json!(ctx);
    m
}

pub(crate) fn ids(events: &[SseEvent]) -> Vec<u64> {
    events.iter().map(|e| e.id.parse().unwrap()).collect()
}

/// A 1.0 message in a context.
pub(crate) fn spec_message(text: &str, ctx: &str) -> Value {
    json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
                       "contextId": ctx, "parts": [{"text": text}]}})
}

/// A free loopback port (bound, read, released).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An in-process replica on a port chosen first, so it can advertise its URL.
pub(crate) async fn advertised(redis: &RedisServer, tag: &str, node: &str) -> TestGateway {
    advertised_from(gateway(), redis, tag, node).await
}

/// [`advertised`], from a configuration already begun.
pub(crate) async fn advertised_from(
    builder: support::GatewayBuilder,
    redis: &RedisServer,
    tag: &str,
    node: &str,
) -> TestGateway {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    builder
        .sid(tag)
        .cluster(&redis.url(), node)
        .with(move |c| {
            c.server.listen = format!("127.0.0.1:{port}").parse().unwrap();
            c.cluster.advertise = url;
        })
        .start()
        .await
}

/// The gateway binary as a replica of its own, killed (SIGKILL) when dropped.
pub(crate) struct ProcessReplica {
    pub(crate) child: std::process::Child,
    pub(crate) base: String,
    pub(crate) http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl ProcessReplica {
    pub(crate) fn start(redis: &RedisServer, tag: &str, node: &str) -> Self {
        let sid = format!(
            "[sid]\nenabled = true\ncommand = [{:?}, \"--raw\", \"--tag\", {tag:?}]\n",
            support::fake_sid()
        );
        Self::with(redis, node, &sid)
    }

    /// A replica whose configuration has `sections` besides its `[cluster]`.
    pub(crate) fn with(redis: &RedisServer, node: &str, sections: &str) -> Self {
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.toml");
        let config = format!(
            "{sections}\n[cluster]\nredis = {:?}\nnode_id = {node:?}\nadvertise = {base:?}\n\
             lease_ms = 1000\n",
            redis.url(),
        );
        crate::support::schema::check_toml(&config);
        std::fs::write(&path, config).unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_wiregate"))
            .arg("--config")
            .arg(&path)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env_clear()
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        ProcessReplica {
            child,
            base,
            http: reqwest::Client::new(),
            _dir: dir,
        }
    }

    pub(crate) async fn call(&self, method: &str, params: Value) -> Value {
        self.http
            .post(format!("{}/rpc", self.base))
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ProcessReplica {
    fn drop(&mut self) {
        self.kill();
    }
}
