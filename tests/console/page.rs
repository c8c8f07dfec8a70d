//! Steps of the console tests that read or drive the page: the task panel, the send form,
//! the browser's console log, screenshots.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use super::webdriver::{wait_for, Browser, LogEntry};
use super::WAIT;

pub fn shots() -> PathBuf {
    // target/<profile>/wiregate → target/console-screenshots
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_wiregate"));
    bin.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("console-screenshots")
}

/// The text the fake sid's `slow` script streams: forty deltas, 50 ms apart.
pub fn slow_text() -> String {
    slow_deltas().concat()
}

/// Console entries that are errors or warnings, except those `allowed` says are expected.
pub fn unexpected(logs: &[LogEntry], allowed: impl Fn(&LogEntry) -> bool) -> Vec<LogEntry> {
    logs.iter()
        .filter(|e| e.level == "SEVERE" || e.level == "WARNING")
        .filter(|e| !allowed(e))
        .cloned()
        .collect()
}

pub async fn assert_no_console_errors(b: &Browser, step: &str) {
    let bad = unexpected(&b.logs().await, |_| false);
    assert!(bad.is_empty(), "console errors during {step}: {bad:#?}");
}

pub async fn state_is(b: &Browser, state: &str) -> bool {
    b.attr("#task-state", "data-state").await.as_deref() == Some(state)
}

/// Sends `text` from the Agents view's form, in `context` (a new one when `None`).
pub async fn send_from_page(b: &Browser, text: &str, context: Option<&str>) {
    if let Some(ctx) = context {
        let option = format!("#send-context option[value=\"{ctx}\"]");
        wait_for("the context in the form's list", WAIT, || async {
            b.find(&option).await
        })
        .await;
        b.click("#send-context").await;
        b.click(&option).await;
        assert_eq!(
            b.eval(
                "return document.getElementById('send-context').value",
                json!([])
            )
            .await,
            json!(ctx)
        );
    }
    b.type_into("#send-text", text).await;
    b.click("#send-button").await;
}

/// Records, in the page, each piece of text added to the task's text as it is added (a
/// MutationObserver sees every append, however fast they come).
pub async fn observe_deltas(b: &Browser) {
    b.eval(
        "window.__deltas = []; if (window.__obs) window.__obs.disconnect(); \
         window.__obs = new MutationObserver(rs => { for (const r of rs) for (const n of r.addedNodes) \
           if (n.nodeType === Node.TEXT_NODE) window.__deltas.push(n.data); }); \
         window.__obs.observe(document.getElementById('task-text'), {childList: true});",
        json!([]),
    )
    .await;
}

/// The pieces of text [`observe_deltas`] saw added, in order.
pub async fn observed_deltas(b: &Browser) -> Vec<String> {
    serde_json::from_value(b.eval("return window.__deltas", json!([])).await).unwrap()
}

/// The deltas of the fake sid's `slow` script.
pub fn slow_deltas() -> Vec<String> {
    (0..40).map(|i| format!("chunk {i} ")).collect()
}

/// Polls the open task's text until it reaches `state`, returning every text seen on the way.
pub async fn watch_task(b: &Browser, state: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let done = state_is(b, state).await;
        let text = b.text("#task-text").await.unwrap_or_default();
        if seen.last() != Some(&text) {
            seen.push(text);
        }
        if done {
            return seen;
        }
        if std::time::Instant::now() >= deadline {
            let page = b
                .eval(
                    "return {status: document.getElementById('send-status').textContent, \
                     log: document.getElementById('task-log').textContent, \
                     panel: {...document.getElementById('task-panel').dataset}}",
                    json!([]),
                )
                .await;
            panic!(
                "timed out waiting for the task to be {state}; texts seen: {seen:#?}; page: \
                 {page}; console: {:#?}",
                b.logs().await
            );
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}
