//! A running gateway on 127.0.0.1:0: its configuration builder, and the client calls a test
//! makes to it (whole answers; the SSE streams are in [`super::sse`]); and the gateway binary
//! run as a process of its own, its log gathered.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use wiregate::config::{Config, Dialect, Legacy, Passthrough, Route, Upstream};
use wiregate::server::{self, Running};

use super::sid::fake_sid;
use super::upstream::Listening;

/// A gateway routing every method to `up`, which speaks `dialect` (2 s timeout).
pub async fn fronting(up: &Listening, dialect: Dialect) -> TestGateway {
    routing_all_to(&up.url(), dialect).start().await
}

/// A gateway configuration routing every method to the upstream at `url` (2 s timeout).
pub fn routing_all_to(url: &str, dialect: Dialect) -> GatewayBuilder {
    gateway()
        .upstream("up", url, dialect, 2000)
        .route(&["*"], "up")
}

/// Builds a gateway configuration and runs it.
#[derive(Default)]
pub struct GatewayBuilder {
    config: Config,
}

/// A gateway on 127.0.0.1:0 with no upstreams yet.
pub fn gateway() -> GatewayBuilder {
    let mut config = Config::default();
    config.server.listen = "127.0.0.1:0".parse().unwrap();
    GatewayBuilder { config }
}

impl GatewayBuilder {
    /// Adds an upstream.
    pub fn upstream(mut self, name: &str, url: &str, dialect: Dialect, timeout_ms: u64) -> Self {
        self.config
            .upstreams
            .push(Upstream::new(name, url, dialect, timeout_ms));
        self
    }

    /// Routes method globs to an upstream.
    pub fn route(mut self, methods: &[&str], upstream: &str) -> Self {
        self.config.routes.push(Route::to(methods, upstream));
        self
    }

    /// Sets the `[legacy]` section.
    pub fn legacy(mut self, legacy: Legacy) -> Self {
        self.config.legacy = legacy;
        self
    }

    /// Passes the paths under each `(prefix, upstream)` through to that upstream
    /// (`[[passthrough]]`).
    pub fn passthrough(mut self, prefixes: &[(&str, &str)]) -> Self {
        self.config.passthrough = prefixes
            .iter()
            .map(|(prefix, upstream)| Passthrough {
                prefix: (*prefix).into(),
                upstream: (*upstream).into(),
                auth: None,
                allow: Vec::new(),
            })
            .collect();
        self
    }

    /// Changes the configuration directly.
    pub fn with(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(&mut self.config);
        self
    }

    /// The configuration built so far (to reload a running gateway with).
    pub fn into_config(self) -> Config {
        self.config
    }

    /// Validates and starts it.
    pub async fn start(self) -> TestGateway {
        self.config.validate().expect("a valid test configuration");
        super::schema::check(&serde_json::to_value(&self.config).expect("as JSON"));
        let running = server::serve(&self.config).await.unwrap();
        TestGateway {
            addr: running.addr,
            running: Some(running),
            http: reqwest::Client::new(),
        }
    }

    /// Joins the replicas sharing `redis` (`[cluster]`) as `node`.
    pub fn cluster(self, redis: &str, node: &str) -> Self {
        let (redis, node) = (redis.to_owned(), node.to_owned());
        self.with(move |c| {
            c.cluster.redis = redis;
            c.cluster.node_id = node;
            c.cluster.lease_ms = 1_000;
        })
    }

    /// Enables the sid bridge over the fake sid on stdio; `tag` marks its children's command
    /// line so a test can find them.
    pub fn sid(self, tag: &str) -> Self {
        let tag = tag.to_owned();
        self.with(move |c| {
            c.sid.enabled = true;
            c.sid.command = vec![fake_sid(), "--raw".into(), "--tag".into(), tag];
            c.sid.keepalive_ms = 200;
        })
    }
}

/// A running gateway and an HTTP client for it.
#[derive(Debug)]
pub struct TestGateway {
    /// Bound address.
    pub addr: SocketAddr,
    /// The server handle, for shutdown tests.
    pub running: Option<Running>,
    /// A plain HTTP/1.1 client.
    pub http: reqwest::Client,
}

/// An HTTP answer, read whole.
#[derive(Debug)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: reqwest::header::HeaderMap,
    /// Body text.
    pub text: String,
}

impl Answer {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    }
}

impl TestGateway {
    /// Stops the gateway as a signal would ([`Running::shutdown`] within `grace`).
    pub async fn stop(&mut self, grace: std::time::Duration) {
        self.running
            .take()
            .expect("a running gateway")
            .shutdown(grace)
            .await;
    }

    /// A counter's value on `/metrics` (0 while it was never incremented).
    pub async fn counter(&self, name: &str) -> u64 {
        let text = self.get("/metrics").await.text;
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or(0)
    }

    /// `http://addr`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// POSTs a JSON value to `/rpc`.
    pub async fn rpc(&self, body: &Value) -> Answer {
        self.post("application/json", body.to_string().into_bytes(), &[])
            .await
    }

    /// POSTs a JSON value with extra headers.
    pub async fn rpc_with(&self, body: &Value, headers: &[(&str, &str)]) -> Answer {
        self.post("application/json", body.to_string().into_bytes(), headers)
            .await
    }

    /// POSTs a JSON value to `path`.
    pub async fn post_to(&self, path: &str, body: &Value) -> Answer {
        self.post_to_with(path, body, &[]).await
    }

    /// POSTs a JSON value to `path` with extra headers.
    pub async fn post_to_with(&self, path: &str, body: &Value, headers: &[(&str, &str)]) -> Answer {
        let mut req = self
            .http
            .post(format!("{}{path}", self.base()))
            .header("content-type", "application/json")
            .body(body.to_string());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        read(req.send().await.expect("the gateway answers")).await
    }

    /// POSTs raw bytes with a content type.
    pub async fn post(
        &self,
        content_type: &str,
        body: Vec<u8>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let mut req = self
            .http
            .post(format!("{}/rpc", self.base()))
            .header("content-type", content_type)
            .body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        read(req.send().await.expect("the gateway answers")).await
    }

    /// GETs a path.
    pub async fn get(&self, path: &str) -> Answer {
        read(
            self.http
                .get(format!("{}{path}", self.base()))
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    /// Calls a JSON-RPC method and returns the whole answer.
    pub async fn call(&self, method: &str, params: Value) -> Value {
        self.rpc(
            &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
        )
        .await
        .json()
    }

    /// Calls a method with `A2A-Version` when given; the whole answer and its HTTP status.
    pub async fn a2a_call(
        &self,
        method: &str,
        params: Value,
        version: Option<&str>,
    ) -> (u16, Value) {
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": "a-1", "method": method, "params": params});
        let headers: Vec<(&str, &str)> = version.map(|v| ("a2a-version", v)).into_iter().collect();
        let a = self.rpc_with(&body, &headers).await;
        (a.status, a.json())
    }
}

async fn read(resp: reqwest::Response) -> Answer {
    Answer {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        text: resp.text().await.unwrap(),
    }
}

/// POSTs a JSON body to `url` on a task of its own, for calls that must be in flight while the
/// test does something else; the handle yields the JSON answer.
pub fn spawn_post(
    http: &reqwest::Client,
    url: String,
    body: Value,
) -> tokio::task::JoinHandle<Value> {
    let http = http.clone();
    tokio::spawn(async move {
        http.post(url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("the gateway answers")
            .json::<Value>()
            .await
            .expect("a JSON answer")
    })
}

/// The gateway binary cargo built for the tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_wiregate");

/// Runs `wiregate check-config` on `text` in a directory of its own beside `files` (name,
/// content), with no environment: whether it passed, and what it wrote to stderr.
pub fn check_config_in(text: &str, files: &[(&str, &str)]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in files {
        std::fs::write(dir.path().join(name), content).unwrap();
    }
    let path = dir.path().join("custom.toml");
    std::fs::write(&path, text).unwrap();
    let out = Command::new(BIN)
        .current_dir(dir.path())
        .env_clear()
        .arg("check-config")
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`BIN`] as a child process, each line it writes to stderr gathered by a thread of its own;
/// killed (and waited for) when dropped, however the test ends.
#[derive(Debug)]
pub struct GatewayProcess {
    child: Child,
    /// The lines of its stderr (its log) so far.
    pub log: Arc<Mutex<Vec<String>>>,
}

impl GatewayProcess {
    /// Runs [`BIN`] with what `edit` adds (arguments, a working directory), `RUST_LOG` unset
    /// and stdout discarded.
    pub fn spawn(edit: impl FnOnce(&mut Command) -> &mut Command) -> GatewayProcess {
        let mut command = Command::new(BIN);
        edit(&mut command);
        let mut child = command
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        GatewayProcess { child, log }
    }

    /// Runs [`BIN`] with the configuration `toml` (checked against the schema first) written to
    /// a file in a directory of its own, on a free port; with the address it listens on, once
    /// it says so (`toml` sets `[log] format = "json"`), and the directory, kept while it runs.
    pub async fn with_config(toml: &str) -> (GatewayProcess, String, tempfile::TempDir) {
        super::schema::check_toml(toml);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.toml");
        std::fs::write(&path, toml).unwrap();
        let gw = GatewayProcess::spawn(|c| {
            c.current_dir(dir.path())
                .arg("--config")
                .arg(&path)
                .args(["--listen", "127.0.0.1:0"])
        });
        let addr = gw.listening_addr().await;
        (gw, addr, dir)
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The address its `wiregate listening` line names, once it is written (the log in JSON,
    /// `[log] format = "json"`), within 10 s.
    pub async fn listening_addr(&self) -> String {
        let log = self.log.clone();
        super::until(
            "the listening line",
            std::time::Duration::from_secs(10),
            async || {
                log.lock()
                    .unwrap()
                    .iter()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                    .find(|v| v.to_string().contains("wiregate listening"))
                    .map(|v| {
                        v["addr"]
                            .as_str()
                            .or_else(|| v["fields"]["addr"].as_str())
                            .unwrap_or_else(|| panic!("no addr in {v}"))
                            .to_owned()
                    })
            },
        )
        .await
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
