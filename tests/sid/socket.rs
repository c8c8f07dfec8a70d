//! The bridge attached to `sid --listen` (the fake sid on a unix socket): replay on connect,
//! de-duplication by `sequence`, reconnection after the socket drops, mid-turn interrupts.

use crate::support;

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use support::{gateway, text_message, SseEvent, TestGateway};

const T: Duration = Duration::from_secs(10);

struct Sid {
    child: Child,
    path: String,
    _dir: tempfile::TempDir,
}

impl Drop for Sid {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn listening_sid() -> Sid {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sid.sock").to_string_lossy().into_owned();
    let child = Command::new(support::fake_sid())
        .args(["--listen", &format!("unix://{path}")])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..200 {
        if std::path::Path::new(&path).exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Sid {
        child,
        path,
        _dir: dir,
    }
}

async fn attached(sid: &Sid) -> TestGateway {
    let spec = format!("unix://{}", sid.path);
    gateway()
        .with(move |c| {
            c.sid.enabled = true;
            c.sid.connect = spec;
            c.sid.keepalive_ms = 200;
        })
        .start()
        .await
}

/// Sends until sid is reachable again (the gateway reconnects with backoff).
async fn send_when_up(gw: &TestGateway, params: Value) -> Value {
    for _ in 0..100 {
        let r = gw.call("message/send", params.clone()).await;
        if r["error"]["code"] != -32064 {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("sid never came back");
}

/// Connects a second client, which makes sid drop the gateway's connection; waits (within
/// `T`) for the replay to end, then leaves. The socket is read on a blocking thread: the test's
/// runtime also runs the gateway's background tasks (its side of sid's socket among them), and
/// must go on meanwhile.
async fn steal_the_socket(sid: &Sid) {
    let path = sid.path.clone();
    let stolen = tokio::task::spawn_blocking(move || {
        let s = UnixStream::connect(&path).unwrap();
        s.set_read_timeout(Some(T)).unwrap();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                r.read_line(&mut line).unwrap() > 0,
                "sid replays, then says replay_complete"
            );
            if line.contains("replay_complete") {
                break;
            }
        }
    });
    stolen.await.unwrap();
}

fn finals(events: &[SseEvent]) -> usize {
    events
        .iter()
        .filter(|e| e.data["params"]["final"] == true)
        .count()
}

#[tokio::test]
async fn a_dropped_socket_comes_back_without_duplicates() {
    let sid = listening_sid();
    let gw = attached(&sid).await;
    let first = send_when_up(&gw, text_message("hello")).await;
    assert_eq!(first["result"]["status"]["state"], "completed", "{first}");
    let ctx = first["result"]["contextId"].as_str().unwrap().to_owned();

    steal_the_socket(&sid).await;
    let second = send_when_up(&gw, text_message("hello again")).await;
    assert_eq!(second["result"]["status"]["state"], "completed", "{second}");
    assert_eq!(second["result"]["contextId"], ctx.as_str());

    let mut all = gw.sse_get(&format!("/contexts/{ctx}/events"), None).await;
    let mut events = all.until_final(T).await;
    events.extend(all.until_final(T).await);
    let ids: Vec<u64> = events.iter().map(|e| e.id.parse().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(
        finals(&events),
        2,
        "each turn ends once; the replay added nothing"
    );
    let text: String = events
        .iter()
        .filter(|e| {
            e.data["params"]["taskId"] == first["result"]["id"]
                && e.data["params"]["artifact"] == "response"
        })
        .map(|e| e.data["params"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Hello from the mock model.");
}

#[tokio::test]
async fn a_turn_survives_the_socket_dropping_mid_stream() {
    let sid = listening_sid();
    let gw = attached(&sid).await;
    send_when_up(&gw, text_message("hello")).await;
    let mut sse = gw.stream_message(text_message("slow")).await;
    let mut events = Vec::new();
    while events.len() < 6 {
        events.push(sse.next(T).await.unwrap());
    }
    steal_the_socket(&sid).await;
    events.extend(sse.collect(T).await);
    let chunks: Vec<&str> = events
        .iter()
        .filter(|e| e.data["params"]["artifact"] == "response")
        .map(|e| e.data["params"]["text"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (0..40).map(|i| format!("chunk {i} ")).collect();
    assert_eq!(
        chunks, expected,
        "every chunk exactly once across the reconnect"
    );
    assert_eq!(events.last().unwrap().data["params"]["state"], "completed");
}

#[tokio::test]
async fn cancel_over_the_socket_interrupts_mid_turn() {
    let sid = listening_sid();
    let gw = attached(&sid).await;
    send_when_up(&gw, text_message("hello")).await;
    let mut sse = gw.stream_message(text_message("slow")).await;
    let first = sse.next(T).await.unwrap();
    let task_id = first.data["params"]["taskId"].as_str().unwrap().to_owned();
    let c = gw.call("tasks/cancel", json!({"id": task_id})).await;
    assert_eq!(c["result"]["status"]["state"], "canceled", "{c}");
    assert!(c["result"]["metadata"].get("cancelNote").is_none());
    let rest = sse.collect(T).await;
    let last = rest.last().unwrap();
    assert_eq!(last.data["params"]["state"], "canceled");
    assert_eq!(last.data["params"]["final"], true);
    let chunks = rest
        .iter()
        .filter(|e| e.data["params"]["artifact"] == "response")
        .count();
    assert!(chunks < 40, "the turn stopped early ({chunks} chunks)");
}

#[tokio::test]
async fn a_restarted_sid_fails_the_open_task_and_serves_the_next() {
    let mut sid = listening_sid();
    let gw = attached(&sid).await;
    send_when_up(&gw, text_message("hello")).await;
    let (task_id, _) = {
        let r = gw.call("message/send", text_message("use a tool")).await;
        assert_eq!(r["result"]["status"]["state"], "input-required");
        (r["result"]["id"].as_str().unwrap().to_owned(), r)
    };
    // sid dies and a new one listens on the same path: a new session, sequence from 1.
    let _ = sid.child.kill();
    let _ = sid.child.wait();
    let fresh = Command::new(support::fake_sid())
        .args(["--listen", &format!("unix://{}", sid.path)])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    sid.child = fresh;
    // The gateway sees the socket close on its own time (a call in between finds the task
    // still open: sid_busy); the open task fails then, whatever calls arrive meanwhile.
    support::until_true("the open task fails", T, async || {
        let old = gw.call("tasks/get", json!({"id": task_id})).await;
        old["result"]["status"]["state"] == "failed"
    })
    .await;
    let next = send_when_up(&gw, text_message("hello")).await;
    assert_eq!(next["result"]["status"]["state"], "completed", "{next}");
}

#[tokio::test]
async fn an_open_task_fails_once_the_socket_stays_down_past_the_reconnect_grace() {
    let mut sid = listening_sid();
    let spec = format!("unix://{}", sid.path);
    let gw = gateway()
        .with(move |c| {
            c.sid.enabled = true;
            c.sid.connect = spec;
            c.sid.keepalive_ms = 200;
            c.sid.reconnect_grace_ms = 700;
        })
        .start()
        .await;
    send_when_up(&gw, text_message("hello")).await;
    let r = gw.call("message/send", text_message("use a tool")).await;
    assert_eq!(r["result"]["status"]["state"], "input-required", "{r}");
    let task_id = r["result"]["id"].as_str().unwrap().to_owned();
    let mut stream = gw.sse_get(&format!("/tasks/{task_id}/events"), None).await;
    // sid goes away and does not come back.
    let _ = sid.child.kill();
    let _ = sid.child.wait();
    let down = std::time::Instant::now();
    let state = |r: &Value| r["result"]["status"]["state"].as_str().unwrap().to_owned();
    // Within the grace the task waits for sid to come back.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let waiting = gw.call("tasks/get", json!({"id": task_id})).await;
    assert_eq!(state(&waiting), "input-required", "{waiting}");
    // Past it, the task fails, and its stream ends with that final update.
    let events = stream.until_final(T).await;
    let failed_after = down.elapsed();
    let last = events.last().unwrap();
    assert_eq!(last.data["params"]["state"], "failed", "{last:?}");
    assert_eq!(last.data["params"]["final"], true);
    assert!(
        failed_after >= Duration::from_millis(700),
        "failed after {failed_after:?}, inside the grace"
    );
    assert!(failed_after < Duration::from_secs(5), "{failed_after:?}");
    let got = gw.call("tasks/get", json!({"id": task_id})).await;
    assert_eq!(state(&got), "failed", "{got}");
    assert_eq!(
        got["result"]["metadata"]["error"],
        json!({"code": "sid_gone", "message": "the sid socket dropped and did not come back in time"})
    );
    // And a call meanwhile is told sid is unreachable.
    let call = gw.call("message/send", text_message("hello")).await;
    assert_eq!(call["error"]["code"], -32064, "{call}");
}
