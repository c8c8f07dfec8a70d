//! One of three endpoints killed (SIGKILL) while calls run: real child processes of
//! `examples/legacy_upstream`, whose `slow` operation keeps each call in flight a while. With
//! the method in `retry.methods` no call fails; without it only the calls in flight on the
//! killed one do, and none once it is ejected.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{json, Value};
use wiregate::config::{Balance, Dialect};

use crate::{authority, call, fleet, until, TestGatewayExt, WAIT};

/// `target/debug/examples/legacy_upstream` as a child process on an ephemeral port; killed
/// when dropped.
struct LegacyChild {
    child: Child,
    url: String,
}

impl LegacyChild {
    fn start() -> LegacyChild {
        let bin = std::path::Path::new(env!("CARGO_BIN_EXE_wiregate"));
        let path = bin
            .parent()
            .unwrap()
            .join("examples")
            .join("legacy_upstream");
        assert!(
            path.exists(),
            "{} is missing: run `cargo build --examples` (or `cargo test`, which builds them)",
            path.display()
        );
        let mut child = Command::new(&path)
            .arg("127.0.0.1:0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_owned();
        // Keep reading its stdout so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in out.lines().map_while(Result::ok) {});
        LegacyChild { child, url }
    }

    /// SIGKILL, and waits until the process is gone (its sockets closed).
    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for LegacyChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One call as the client saw it.
#[derive(Debug, Clone)]
struct Done {
    started: Instant,
    ended: Instant,
    answer: Value,
    status: u16,
}

impl Done {
    fn ok(&self) -> bool {
        self.status == 200 && self.answer["result"]["slept_ms"] == 20
    }
}

/// Runs `workers` clients calling `slow` (20 ms) back to back until `stop`; each call's record.
fn load(
    http: &reqwest::Client,
    url: String,
    workers: usize,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> (Arc<Mutex<Vec<Done>>>, Vec<tokio::task::JoinHandle<()>>) {
    let done = Arc::new(Mutex::new(Vec::new()));
    let record = done.clone();
    let tasks = crate::workers(
        http,
        &url,
        workers,
        move |w, i| {
            (!stop.load(std::sync::atomic::Ordering::SeqCst))
                .then(|| call(json!(format!("w{w}-{}", i + 1)), "slow", json!({"ms": 20})))
        },
        move |started, r| {
            let done = record.clone();
            async move {
                let status = r.status().as_u16();
                let answer: Value = r.json().await.expect("a JSON answer");
                done.lock().unwrap().push(Done {
                    started,
                    ended: Instant::now(),
                    answer,
                    status,
                });
            }
        },
    );
    (done, tasks)
}

struct Run {
    calls: Vec<Done>,
    /// Just before the SIGKILL, and once the process was gone.
    kill_began: Instant,
    kill_done: Instant,
    /// When `/readyz` first showed the killed endpoint ejected.
    ejected: Instant,
    killed: String,
    others: Vec<String>,
    gw: crate::support::TestGateway,
    upstream: &'static str,
    /// The children, alive (but the killed one) until the run is dropped.
    _children: Vec<LegacyChild>,
}

impl Run {
    /// Tries sent to `endpoint` that broke (reset, closed) before an answer.
    async fn failed_tries(&self, endpoint: &str) -> f64 {
        self.gw
            .metric(
                "wiregate_upstream_endpoint_requests_total",
                &[
                    ("upstream", self.upstream),
                    ("endpoint", endpoint),
                    ("outcome", "failed"),
                ],
            )
            .await
    }
}

/// Three children behind one upstream under load; the first is killed once calls flow, and
/// the load goes on until well after its ejection.
async fn kill_one_under_load(upstream: &'static str, methods: Vec<String>) -> Run {
    let mut children: Vec<LegacyChild> = (0..3).map(|_| LegacyChild::start()).collect();
    let urls: Vec<String> = children.iter().map(|c| c.url.clone()).collect();
    let gw = fleet(upstream, &urls, Dialect::Legacy, |u| {
        u.balance = Balance::LeastRequest;
        u.retry.methods = methods;
        u.outlier.consecutive_failures = 3;
        u.outlier.base_ejection_ms = 30_000;
    })
    .start()
    .await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (done, tasks) = load(&gw.http, format!("{}/rpc", gw.base()), 9, stop.clone());
    until("calls to flow", WAIT, || async {
        (done.lock().unwrap().len() >= 60).then_some(())
    })
    .await;
    let kill_began = Instant::now();
    children[0].kill();
    let kill_done = Instant::now();
    let killed = authority(&urls[0]);
    until("the killed endpoint's ejection", WAIT, || async {
        (gw.state(upstream, &killed).await == "ejected").then_some(())
    })
    .await;
    let ejected = Instant::now();
    // Calls go on after the ejection.
    let after = done.lock().unwrap().len() + 60;
    until("60 more calls after the ejection", WAIT, || async {
        (done.lock().unwrap().len() >= after).then_some(())
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for t in tasks {
        t.await.unwrap();
    }
    let calls = done.lock().unwrap().clone();
    Run {
        calls,
        kill_began,
        kill_done,
        ejected,
        killed,
        others: urls[1..].iter().map(|u| authority(u)).collect(),
        gw,
        upstream,
        _children: children,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_endpoint_fails_no_call_when_the_method_may_be_retried() {
    let run = kill_one_under_load("kill-retried", vec!["slow".into()]).await;
    let failed: Vec<&Done> = run.calls.iter().filter(|d| !d.ok()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} calls failed: {:?}",
        failed.len(),
        run.calls.len(),
        failed.iter().map(|d| &d.answer).collect::<Vec<_>>()
    );
    assert_eq!(run.gw.state(run.upstream, &run.killed).await, "ejected");
    for other in &run.others {
        assert_eq!(run.gw.state(run.upstream, other).await, "healthy");
    }
    // The calls in flight on it when it died were sent again (reason "failed"), one retry
    // each; the tries it refused before its ejection were retried as never sent.
    let retried = |reason| {
        let gw = &run.gw;
        async move {
            gw.metric(
                "wiregate_upstream_retries_total",
                &[("upstream", run.upstream), ("reason", reason)],
            )
            .await
        }
    };
    let broken = run.failed_tries(&run.killed).await;
    assert_eq!(retried("failed").await, broken);
    let refused = run
        .gw
        .metric(
            "wiregate_upstream_endpoint_requests_total",
            &[
                ("upstream", run.upstream),
                ("endpoint", &run.killed),
                ("outcome", "refused"),
            ],
        )
        .await;
    assert_eq!(retried("not_sent").await, refused);
    assert!(
        broken + refused >= 3.0,
        "ejected after 3 failed tries: {broken} broken, {refused} refused"
    );
    assert_eq!(
        run.gw
            .metric(
                "wiregate_upstream_ejections_total",
                &[("upstream", run.upstream), ("endpoint", &run.killed)]
            )
            .await,
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_endpoint_fails_only_the_calls_in_flight_on_it() {
    let run = kill_one_under_load("kill-once", Vec::new()).await;
    let in_flight_at_kill = run
        .calls
        .iter()
        .filter(|d| d.started < run.kill_done && d.ended > run.kill_began)
        .count();
    let failed: Vec<&Done> = run.calls.iter().filter(|d| !d.ok()).collect();
    assert!(
        failed.len() <= in_flight_at_kill,
        "{} failed, {in_flight_at_kill} were in flight at the kill",
        failed.len()
    );
    let killed_url_part = run.killed.clone();
    for d in &failed {
        assert!(
            d.started < run.kill_done,
            "a call that began after the kill failed: {}",
            d.answer
        );
        let e = &d.answer["error"];
        assert_eq!(e["code"], -32050, "{}", d.answer);
        assert_eq!(e["data"]["kind"], "upstream_unreachable", "{}", d.answer);
        assert_eq!(d.status, 502, "{}", d.answer);
        let text = d.answer.to_string();
        assert!(!text.contains(&killed_url_part), "{text}");
    }
    let after: Vec<&Done> = run
        .calls
        .iter()
        .filter(|d| d.started > run.ejected)
        .collect();
    assert!(
        after.len() >= 30,
        "{} calls after the ejection",
        after.len()
    );
    assert!(
        after.iter().all(|d| d.ok()),
        "a call after the ejection failed: {:?}",
        after.iter().find(|d| !d.ok())
    );
    // Each failed call is a try sent to the killed endpoint that broke; no other endpoint's.
    assert_eq!(
        failed.len() as f64,
        run.failed_tries(&run.killed).await,
        "failed calls vs tries broken on the killed endpoint"
    );
    for other in &run.others {
        assert_eq!(run.failed_tries(other).await, 0.0, "{other}");
    }
    assert_eq!(
        run.gw
            .metric(
                "wiregate_upstream_retries_total",
                &[("upstream", run.upstream), ("reason", "failed")]
            )
            .await,
        0.0,
        "a method not in retry.methods was sent twice"
    );
    let (status, body) = run.gw.readyz().await;
    assert_eq!(status, 200, "{body}");
    let state = run.gw.state(run.upstream, &run.killed).await;
    assert!(
        state == "ejected" || state == "unreachable",
        "the killed endpoint is {state}"
    );
}
