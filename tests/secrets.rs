//! No credential leaves the gateway in text: not in its log at `RUST_LOG=trace` (JSON lines and
//! access lines on), not on stdout, not in the spans it exports, not on `/metrics`, not in what
//! `check-config` prints. Every credential-bearing setting and header carries a marker:
//! API keys, JWTs, admin tokens, sid bearer tokens, a webhook's query token and credentials,
//! the event feed's password and query token, upstream and advertised URLs' user info, the
//! Redis password, the span collector's user info and header. The gateway binary runs three
//! times (caller identity and upstreams; sid, webhooks and the feed; the cluster), each
//! call path is driven authorised and refused, the failing ones (an unreachable webhook, a
//! feed with nothing behind it, a Redis that goes away) until they have logged, and then the
//! marker is looked for everywhere.
#![forbid(unsafe_code)]

mod support;

use std::io::Read;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use ring::signature::{EcdsaKeyPair, KeyPair as _, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use support::otlp::{Collector, Mode};
use support::{dead_url, fake_sid, jsonrpc_echo, until, BIN};

/// What every secret of these tests contains.
const MARKER: &str = "S3CR3T-MARKER";

/// The gateway binary at `RUST_LOG=trace`, stdout and stderr gathered; killed when dropped.
struct Gateway {
    child: Child,
    out: Arc<Mutex<String>>,
    addr: String,
}

impl Gateway {
    /// Runs `toml` (written to `dir`) with `--listen 127.0.0.1:0` and waits for its address.
    async fn run(dir: &std::path::Path, name: &str, toml: &str) -> Gateway {
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, toml).unwrap();
        let mut child = Command::new(BIN)
            .current_dir(dir)
            .env("RUST_LOG", "trace")
            .arg("--config")
            .arg(&path)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = Arc::new(Mutex::new(String::new()));
        for mut pipe in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let out = out.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 64 * 1024];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    out.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            });
        }
        let seen = out.clone();
        let addr = until("the listening line", Duration::from_secs(15), async || {
            let text = seen.lock().unwrap().clone();
            text.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v.to_string().contains("wiregate listening"))
                .map(|v| {
                    v["fields"]["addr"]
                        .as_str()
                        .or(v["addr"].as_str())
                        .unwrap()
                        .to_owned()
                })
        })
        .await;
        Gateway { child, out, addr }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Waits until its output has a line containing `what`.
    async fn logged(&self, what: &str) {
        let out = self.out.clone();
        until(what, Duration::from_secs(20), async || {
            out.lock().unwrap().contains(what).then_some(())
        })
        .await;
    }

    fn output(&self) -> String {
        self.out.lock().unwrap().clone()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Fails naming each place `text` (from `whence`) shows a secret: the marker, or one of
/// `others` (a JWT, which carries no marker of its own).
fn assert_clean(whence: &str, text: &str, others: &[&str]) {
    let found: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(MARKER) || others.iter().any(|o| l.contains(o)))
        .collect();
    assert!(
        found.is_empty(),
        "{whence} shows a secret in {} line(s):\n{}",
        found.len(),
        found.join("\n")
    );
}

/// `wiregate check-config` on `toml`: what it printed, stdout and stderr.
fn check_config(dir: &std::path::Path, toml: &str) -> String {
    let path = dir.join("checked.toml");
    std::fs::write(&path, toml).unwrap();
    let out = Command::new(BIN)
        .current_dir(dir)
        .env("RUST_LOG", "trace")
        .arg("check-config")
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout + &String::from_utf8_lossy(&out.stderr)
}

/// An EC P-256 key made in the test: its key set (as a file's JSON) and a token it signs.
struct SigningKey {
    pkcs8: Vec<u8>,
    jwk: Value,
}

impl SigningKey {
    fn new() -> Self {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap()
            .as_ref()
            .to_vec();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng).unwrap();
        let public = pair.public_key().as_ref();
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let jwk = json!({"kty": "EC", "crv": "P-256", "kid": "k1", "alg": "ES256", "use": "sig",
                         "x": b64(&public[1..33]), "y": b64(&public[33..65])});
        SigningKey { pkcs8, jwk }
    }

    fn token(&self, sub: &str) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let claims = json!({"iss": "https://idp.test/", "aud": "wiregate", "sub": sub,
                            "iat": now, "exp": now + 3600});
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some("k1".into());
        let key = jsonwebtoken::EncodingKey::from_ec_der(&self.pkcs8);
        jsonwebtoken::encode(&header, &claims, &key).unwrap()
    }
}

/// A stand-in for Redis on loopback: `PONG` to `PING`, `OK` to anything else, until stopped
/// (then nothing listens there). Enough for the gateway to find Redis up, then lose it.
struct FakeRedis {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl FakeRedis {
    async fn start() -> FakeRedis {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                conns.spawn(async move {
                    let (r, mut w) = tcp.into_split();
                    let mut lines = BufReader::new(r).lines();
                    // A command is `*N` then N bulk strings (`$len`, the bytes).
                    while let Ok(Some(head)) = lines.next_line().await {
                        let Some(n) = head.strip_prefix('*').and_then(|n| n.parse::<usize>().ok())
                        else {
                            continue;
                        };
                        let mut args = Vec::new();
                        for _ in 0..n {
                            let _len = lines.next_line().await;
                            if let Ok(Some(a)) = lines.next_line().await {
                                args.push(a);
                            }
                        }
                        let answer: &[u8] = match args.first().map(|a| a.to_ascii_uppercase()) {
                            Some(c) if c == "PING" => b"+PONG\r\n",
                            _ => b"+OK\r\n",
                        };
                        if w.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        FakeRedis { addr, task }
    }
}

impl Drop for FakeRedis {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The port of a loopback address nothing listens on.
async fn dead_port() -> u16 {
    dead_url()
        .await
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/rpc")
        .parse()
        .unwrap()
}

const LOG: &str = "[log]\nformat = \"json\"\naccess = true\n";

/// Caller identity and an upstream: API keys, JWTs and admin tokens, authorised and refused;
/// an upstream URL with user info; spans to a collector whose endpoint has user info and
/// whose header holds a key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_credentials_stay_out_of_logs_spans_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let key = SigningKey::new();
    std::fs::write(
        dir.path().join("jwks.json"),
        json!({"keys": [key.jwk]}).to_string(),
    )
    .unwrap();
    let keys = support::keys::write_api_keys(
        &dir.path().join("keys.toml"),
        &[("ci", "S3CR3T-MARKER-apikey")],
        &[],
    );
    let collector = Collector::start(Mode::Accept).await;
    let up = jsonrpc_echo().run().await;
    let up_url = up
        .url()
        .replacen("http://", "http://svc:S3CR3T-MARKER-uppw@", 1);
    let toml = format!(
        "[server]\nadmin_tokens = [\"S3CR3T-MARKER-admin\"]\n\
         [[upstreams]]\nname = \"up\"\nurl = \"{up_url}\"\ndialect = \"jsonrpc\"\n\
         [[routes]]\nmethods = [\"*\"]\nupstream = \"up\"\n\
         [auth]\nmode = \"optional\"\n[auth.api_keys]\nfile = \"{keys}\"\n\
         [[auth.jwt]]\nissuer = \"https://idp.test/\"\naudiences = [\"wiregate\"]\n\
         jwks_file = \"jwks.json\"\n\
         [tracing]\notlp_endpoint = \"http://otlp:S3CR3T-MARKER-otlppw@{}\"\n\
         export_interval_ms = 20\nheaders = {{ authorization = \"Bearer S3CR3T-MARKER-otlp\" }}\n\
         {LOG}",
        collector.addr
    );
    let checked = check_config(dir.path(), &toml);
    assert!(checked.contains("[tracing.headers]"), "{checked}");
    let gw = Gateway::run(dir.path(), "callers", &toml).await;
    let jwt = key.token("alice");
    let forged = format!("{}x", &jwt[..jwt.len() - 1]);
    let http = reqwest::Client::new();
    let call = |headers: Vec<(&'static str, String)>, path: &'static str| {
        let mut req = http
            .post(gw.url(path))
            .header("content-type", "application/json")
            .body(json!({"jsonrpc": "2.0", "id": 1, "method": "m"}).to_string());
        for (k, v) in headers {
            req = req.header(k, v);
        }
        async move { req.send().await.unwrap().status().as_u16() }
    };
    for (headers, path, status) in [
        (
            vec![("x-api-key", "S3CR3T-MARKER-apikey".into())],
            "/rpc",
            200,
        ),
        (
            vec![("authorization", "ApiKey S3CR3T-MARKER-apikey".into())],
            "/rpc?api_key=S3CR3T-MARKER-query",
            200,
        ),
        (
            vec![("x-api-key", "S3CR3T-MARKER-wrongkey".into())],
            "/rpc",
            401,
        ),
        (
            vec![("authorization", format!("Bearer {jwt}"))],
            "/rpc",
            200,
        ),
        (
            vec![("authorization", format!("Bearer {forged}"))],
            "/rpc",
            401,
        ),
        (
            vec![("authorization", "Bearer S3CR3T-MARKER-notajwt".into())],
            "/rpc",
            401,
        ),
        (
            vec![("authorization", "Bearer S3CR3T-MARKER-admin".into())],
            "/admin/reload",
            200,
        ),
        (
            vec![("authorization", "Bearer S3CR3T-MARKER-wrongadmin".into())],
            "/admin/reload",
            401,
        ),
    ] {
        let got = call(headers.clone(), path).await;
        assert!(
            got == status || (path == "/admin/reload" && got / 100 == 4),
            "{headers:?} {path}: {got}"
        );
    }
    let spans = collector.until("the calls' spans", |s| s.len() >= 4).await;
    gw.logged("\"access\"").await;
    let metrics = http
        .get(gw.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // Every export so far was taken: the collector's credentials did not break it.
    assert!(
        !gw.output().contains("span export failed"),
        "{}",
        gw.output()
    );
    let others = [jwt.as_str(), forged.as_str()];
    assert_clean("check-config", &checked, &others);
    assert_clean("the log", &gw.output(), &others);
    assert_clean("/metrics", &metrics, &others);
    // The spans and their resource; not the export's headers, where the collector's key
    // belongs.
    let exported: Vec<String> = spans
        .iter()
        .map(|e| format!("{:?} {:?}", e.span, e.resource))
        .collect();
    assert_clean("the spans", &exported.join("\n"), &others);
}

/// sid's bearer tokens, a webhook that is unreachable (its query token and credentials), the
/// event feed with nothing behind it (its password and query token), a stream opened with a
/// token in its query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_feed_and_sid_credentials_stay_out_of_logs_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let (feed_port, hook_port) = (dead_port().await, dead_port().await);
    let toml = format!(
        "[sid]\nenabled = true\ncommand = [\"{}\", \"--raw\", \"--tag\", \"secrets-sid\"]\n\
         bearer_tokens = [\"S3CR3T-MARKER-sid\"]\n\
         [a2a]\npush_allow_private = true\n\
         [events]\nsource = \"http://feed:S3CR3T-MARKER-feedpw@127.0.0.1:{feed_port}/feed?token=S3CR3T-MARKER-feedq\"\n\
         reconnect_ms = 20\n{LOG}",
        fake_sid()
    );
    let checked = check_config(dir.path(), &toml);
    assert!(checked.contains("127.0.0.1"), "{checked}");
    let gw = Gateway::run(dir.path(), "sid", &toml).await;
    gw.logged("cannot reach the event feed").await;
    let http = reqwest::Client::new();
    let a2a = |method: &str, params: Value, bearer: &str| {
        http.post(gw.url("/rpc"))
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {bearer}"))
            .body(
                json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string(),
            )
            .send()
    };
    let msg = |text: &str, task: Option<&str>| {
        let mut m = json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(),
                                       "role": "ROLE_USER", "parts": [{"text": text}]}});
        if let Some(t) = task {
            m["message"]["taskId"] = json!(t);
        }
        m
    };
    let refused = a2a("SendMessage", msg("hi", None), "S3CR3T-MARKER-wrongsid")
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let r: Value = a2a("SendMessage", msg("hold this", None), "S3CR3T-MARKER-sid")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let task = r["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned();
    let hook = format!("http://127.0.0.1:{hook_port}/down?token=S3CR3T-MARKER-hookq");
    let made: Value = a2a(
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "id": "hook-1", "url": hook, "token": "S3CR3T-MARKER-hooktoken",
               "authentication": {"scheme": "Bearer", "credentials": "S3CR3T-MARKER-hookcred"}}),
        "S3CR3T-MARKER-sid",
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(made["result"]["id"], "hook-1", "{made}");
    // A webhook with user info is refused when it is configured (the caller is told).
    let with_user: Value = a2a(
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "id": "hook-2",
               "url": format!("http://hook:S3CR3T-MARKER-hookpw@127.0.0.1:{hook_port}/down")}),
        "S3CR3T-MARKER-sid",
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert!(with_user.get("error").is_some(), "{with_user}");
    a2a("SendMessage", msg("done", Some(&task)), "S3CR3T-MARKER-sid")
        .await
        .unwrap();
    gw.logged("webhook unreachable").await;
    // A stream opened with a token in its query: the access line has the path alone.
    let stream = http
        .get(gw.url("/events?token=S3CR3T-MARKER-streamq"))
        .send()
        .await
        .unwrap();
    drop(stream);
    gw.logged("\"path\":\"/events\"").await;
    let metrics = http
        .get(gw.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let out = gw.output();
    assert!(
        out.contains(&format!("http://127.0.0.1:{hook_port}/down?…")),
        "the webhook is named, redacted: {out}"
    );
    assert!(
        out.contains(&format!("http://127.0.0.1:{feed_port}/feed?…")),
        "the feed is named, redacted"
    );
    assert_clean("check-config", &checked, &[]);
    assert_clean("the log", &out, &[]);
    assert_clean("/metrics", &metrics, &[]);
}

/// The cluster's Redis URL (its password) and the advertised URL (its user info), while Redis
/// answers and after it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_password_stays_out_of_logs_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let redis = FakeRedis::start().await;
    let toml = format!(
        "[cluster]\nredis = \"redis://:S3CR3T-MARKER-redis@{}/0\"\n\
         advertise = \"http://adv:S3CR3T-MARKER-adv@127.0.0.1:1/\"\nlease_ms = 1000\n{LOG}",
        redis.addr
    );
    let checked = check_config(dir.path(), &toml);
    assert!(checked.contains(":***@"), "{checked}");
    let gw = Gateway::run(dir.path(), "cluster", &toml).await;
    gw.logged("Redis answers").await;
    drop(redis);
    gw.logged("Redis does not answer").await;
    let metrics = reqwest::get(gw.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let out = gw.output();
    assert_clean("check-config", &checked, &[]);
    assert_clean("the log", &out, &[]);
    assert_clean("/metrics", &metrics, &[]);
}
