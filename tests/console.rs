//! The web console in a real browser: Debian's Chromium, driven through chromedriver, against
//! a gateway on a loopback port fronting a legacy upstream, a domain-event feed and the fake
//! sid. Screenshots of each view go to `target/console-screenshots/`.
//!
//! Every wait polls a condition with a generous deadline (a slow 2-core machine runs a build
//! beside this); nothing is asserted on elapsed time.
#![forbid(unsafe_code)]

#[path = "console/migration.rs"]
mod migration;
#[path = "console/page.rs"]
mod page;
#[path = "console/relay.rs"]
mod relay;
mod support;
#[path = "console/webdriver.rs"]
mod webdriver;

use std::time::Duration;

use page::*;
use serde_json::{json, Value};
use support::{domain_record, feed_server, gateway, legacy_echo, FeedMode};
use webdriver::{wait_for, Browser};
use wiregate::config::Dialect;

/// How long any one condition may take to come true.
pub const WAIT: Duration = Duration::from_secs(60);

/// One browser at a time: two Chromiums on two cores beside a build slow each other down.
static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_in_chromium_against_the_fake_sid() {
    let _one = ONE_BROWSER.lock().await;
    let upstream = legacy_echo().run().await;
    let records = vec![
        domain_record(1, "plan.created", "plan-1", json!({"title": "first"})),
        domain_record(2, "plan.phase_changed", "plan-1", json!({"phase": "apply"})),
        domain_record(3, "plan.created", "plan-2", json!({"title": "second"})),
        domain_record(
            4,
            "checkpoint.created",
            "plan-2",
            json!({"checkpoint": "c1"}),
        ),
        domain_record(5, "plan.applied", "plan-1", json!({})),
    ];
    let feed = feed_server(records, FeedMode::Ndjson, None, true).await;
    let feed_url = feed.url();
    let gw = gateway()
        .upstream("legacy-upstream", &upstream.url(), Dialect::Legacy, 2000)
        .route(&["*"], "legacy-upstream")
        .sid("console-browser")
        .with(move |c| c.events.source = feed_url)
        .start()
        .await;
    // The browser reaches the gateway through a relay that can cut a stream mid-turn.
    let relay = relay::Relay::start(gw.addr).await;
    let base = format!("http://{}", relay.addr);
    let b = Browser::start(1280, 900).await;

    // 1. The console loads (Overview), reads its data, and logs no error.
    b.goto(&format!("{base}/console")).await;
    wait_for("the upstream's readiness on the Overview", WAIT, || async {
        let t = b
            .text("#upstreams li[data-upstream=\"legacy-upstream\"]")
            .await?;
        t.contains("reachable").then_some(())
    })
    .await;
    assert_eq!(
        b.attr("body", "data-access").await.as_deref(),
        Some("granted")
    );
    assert_no_console_errors(&b, "loading the console").await;

    // 2. The Overview's charts show the calls this test makes (legacy calls: only this test
    // makes them, and the counters are the process's).
    for i in 0..7 {
        let a = gw
            .rpc(&json!({"a2a_version": "1.0", "request_id": format!("c{i}"),
                         "operation": "plan.get", "params": {"plan_id": "P1"}, "auth": null}))
            .await;
        assert_eq!(a.json()["status"], "success", "{}", a.text);
    }
    let series = "#rate-chart path[data-series=\"legacy · ok\"]";
    wait_for(
        "7 legacy calls in the Overview's legend and chart",
        WAIT,
        || async {
            let total = b
                .attr(
                    "#rate-legend li[data-dialect=\"legacy\"][data-outcome=\"ok\"]",
                    "data-total",
                )
                .await?;
            let sum = b.attr(series, "data-sum").await?;
            (total == "7" && sum == "7").then_some(())
        },
    )
    .await;
    let peak: f64 = b.attr(series, "data-max").await.unwrap().parse().unwrap();
    assert!(peak >= 1.0, "the rate line rises for the calls: {peak}");
    let p50 = b.text("#p50").await.unwrap();
    assert!(p50.ends_with("ms"), "p50 shown: {p50}");
    let legend = b.text("#rate-legend").await.unwrap();
    assert!(legend.contains("legacy · ok 7 calls"), "{legend}");
    b.screenshot(&shots().join("overview.png")).await;
    assert_no_console_errors(&b, "the Overview").await;

    // 3. A message sent from the page (a new context) shows its text deltas as they come, in
    // order, and completes.
    b.click("#tab-agents").await;
    wait_for("the Agents view", WAIT, || async {
        b.find("#view-agents:not([hidden]) #send-form").await
    })
    .await;
    observe_deltas(&b).await;
    send_from_page(&b, "slow please", None).await;
    let seen = watch_task(&b, "completed").await;
    let expected = slow_text();
    assert_eq!(seen.last().unwrap(), &expected, "the whole answer, once");
    for s in &seen {
        assert!(
            expected.starts_with(s.as_str()),
            "every text shown is a prefix of the answer, deltas in order: {s:?}"
        );
    }
    assert_eq!(
        observed_deltas(&b).await,
        slow_deltas(),
        "each delta added to the page as it came, in order"
    );
    assert_eq!(
        b.attr("#task-panel", "data-repeats").await.as_deref(),
        Some("0")
    );
    let context = b.attr("#task-panel", "data-context").await.unwrap();
    let first_task = b.attr("#task-panel", "data-task").await.unwrap();
    assert!(!context.is_empty() && !first_task.is_empty());
    assert_no_console_errors(&b, "streaming a message").await;

    // 4. In the same context, a tool call asks for confirmation: the choices are buttons; a
    // click answers and the task completes.
    send_from_page(&b, "run a tool please", Some(&context)).await;
    wait_for("the prompt's choices as buttons", WAIT, || async {
        let yes = b.find("#prompt-choices button[data-choice=\"yes\"]").await;
        let no = b.find("#prompt-choices button[data-choice=\"no\"]").await;
        (yes.is_some() && no.is_some() && state_is(&b, "input-required").await).then_some(())
    })
    .await;
    let prompt = b.text("#prompt-message").await.unwrap();
    assert!(prompt.contains("Allow this call?"), "{prompt}");
    let tool_task = b.attr("#task-panel", "data-task").await.unwrap();
    assert_ne!(tool_task, first_task);
    b.screenshot(&shots().join("agents-prompt.png")).await;
    b.click("#prompt-choices button[data-choice=\"yes\"]").await;
    watch_task(&b, "completed").await;
    assert!(
        b.find("#task-prompt[hidden]").await.is_some(),
        "the prompt is gone"
    );
    let text = b.text("#task-text").await.unwrap();
    assert!(text.starts_with("Let me run a command."), "{text}");
    let task = gw.call("tasks/get", json!({"id": tool_task})).await;
    assert_eq!(task["result"]["status"]["state"], "completed", "{task}");
    assert_eq!(task["result"]["contextId"], json!(context));
    assert_no_console_errors(&b, "answering a prompt").await;

    // 5. The stream is cut by the server side mid-turn (after 5 of 40 deltas): the page
    // resumes with Last-Event-ID and shows the whole text once.
    relay.cut_after(5);
    observe_deltas(&b).await;
    send_from_page(&b, "slow again", Some(&context)).await;
    let seen = watch_task(&b, "completed").await;
    assert_eq!(relay.cuts(), 1, "the stream was cut");
    assert_eq!(
        seen.last().unwrap(),
        &expected,
        "nothing repeated, nothing lost"
    );
    assert!(seen.iter().all(|s| expected.starts_with(s.as_str())));
    assert_eq!(
        observed_deltas(&b).await,
        slow_deltas(),
        "across the cut, each delta added once, in order"
    );
    let cut_task = b.attr("#task-panel", "data-task").await.unwrap();
    let resumes: u32 = b
        .attr("#task-panel", "data-resumes")
        .await
        .unwrap()
        .parse()
        .unwrap();
    assert!(resumes >= 1, "the page reconnected");
    assert_eq!(
        b.attr("#task-panel", "data-repeats").await.as_deref(),
        Some("0"),
        "the gateway resent nothing the page already had"
    );
    let resumed: Vec<String> = relay
        .heads()
        .into_iter()
        .filter(|h| h.starts_with(&format!("get /console/api/tasks/{cut_task}/events")))
        .collect();
    let with_id: Vec<u64> = resumed
        .iter()
        .filter_map(|h| {
            h.lines()
                .find_map(|l| l.strip_prefix("last-event-id: "))
                .and_then(|v| v.trim().parse().ok())
        })
        .collect();
    assert!(
        !with_id.is_empty(),
        "the resume carried Last-Event-ID: {resumed:#?}"
    );
    // The only errors allowed: the browser reporting the connection the relay cut.
    let logs = b.logs().await;
    let bad = unexpected(&logs, |e| {
        e.message.contains("/console/api/") && e.message.contains("net::ERR_")
    });
    assert!(bad.is_empty(), "console errors during the cut: {bad:#?}");
    let log = b.text("#task-log").await.unwrap();
    assert!(
        log.contains("stream dropped; resuming after event"),
        "{log}"
    );
    b.screenshot(&shots().join("agents.png")).await;

    // 5b. Cancel: the gateway's answer is shown (over stdio, sid reads the interrupt only when
    // the turn ends, and the answer says so).
    send_from_page(&b, "slow, to be canceled", Some(&context)).await;
    wait_for("the cancel button while the task streams", WAIT, || async {
        b.find("#cancel-button:not([hidden])").await
    })
    .await;
    b.click("#cancel-button").await;
    wait_for("the cancel's answer in the task's log", WAIT, || async {
        let log = b.text("#task-log").await?;
        // The gateway's own note, from its answer to tasks/cancel.
        log.contains("cancel asked: sid over stdio reads the interrupt only when")
            .then_some(())
    })
    .await;
    watch_task(&b, "completed").await;
    assert_no_console_errors(&b, "canceling a task").await;

    // 5c. Keyboard and labels: every field has a label, every button a name, and a view is
    // reached from the keyboard (Enter on its tab).
    let unlabelled = b
        .eval(
            "return [...document.querySelectorAll('input, select, textarea')].filter(e => !e.labels.length).map(e => e.id)\
             .concat([...document.querySelectorAll('button')].filter(b => !b.textContent.trim() && !b.getAttribute('aria-label')).map(b => b.outerHTML))",
            json!([]),
        )
        .await;
    assert_eq!(
        unlabelled,
        json!([]),
        "fields without a label, buttons without a name"
    );
    b.type_into("#tab-overview", "\u{E007}").await;
    wait_for("the Overview from the keyboard", WAIT, || async {
        b.find("#view-overview:not([hidden])").await
    })
    .await;
    let focused = b.eval("return document.activeElement.id", json!([])).await;
    assert_eq!(
        focused, "h-overview",
        "the focus moves to the view's heading"
    );
    b.click("#tab-agents").await;

    // 6. The domain events, live, and filtered by task id.
    b.click("#tab-events").await;
    let rows =
        |filter: &'static str| {
            let b = &b;
            async move {
                b.eval(
                "return [...document.querySelectorAll('#events-rows tr')].map(r => r.dataset.task)",
                json!([]),
            )
            .await
            .as_array()
            .map(|a| a.iter().map(|v| v.as_str().unwrap_or("").to_owned()).collect::<Vec<_>>())
            .filter(|tasks| {
                tasks.len() == if filter.is_empty() { 5 } else { 2 }
                    && (filter.is_empty() || tasks.iter().all(|t| t == filter))
            })
            }
        };
    wait_for("the five domain events", WAIT, || rows("")).await;
    b.type_into("#events-task", "plan-2").await;
    b.click("#events-filter button").await;
    wait_for("plan-2's two events alone", WAIT, || rows("plan-2")).await;
    b.screenshot(&shots().join("events.png")).await;
    assert_no_console_errors(&b, "the Events view").await;

    // 7. Migration: this gateway's one catch-all route, plain (no split, no shadow).
    b.click("#tab-migration").await;
    wait_for("the Migration view", WAIT, || async {
        b.find("#migration-body[data-state=\"shown\"] tr[data-route=\"routes[0]\"]")
            .await
    })
    .await;
    let text = b.text("#migration-body").await.unwrap();
    assert!(text.contains("No route has a split or a shadow"), "{text}");
    assert_no_console_errors(&b, "the Migration view").await;
    b.screenshot(&shots().join("migration-plain.png")).await;

    // 8. A phone's width: one column, nothing wider than the screen.
    b.resize(390, 844).await;
    for view in ["overview", "agents", "events"] {
        b.click(&format!("#tab-{view}")).await;
        let fits = wait_for(&format!("the {view} view at 390 px"), WAIT, || async {
            let v: Value = b
                .eval(
                    "return [document.documentElement.scrollWidth, window.innerWidth]",
                    json!([]),
                )
                .await;
            let (scroll, width) = (v[0].as_u64()?, v[1].as_u64()?);
            (width <= 420).then_some(scroll <= width)
        })
        .await;
        assert!(fits, "the {view} view is wider than a 390 px screen");
        b.screenshot(&shots().join(format!("{view}-390.png"))).await;
    }
    assert_no_console_errors(&b, "the narrow layout").await;

    // 9. Dark, by the system setting.
    b.resize(1280, 900).await;
    b.cdp(
        "Emulation.setEmulatedMedia",
        json!({"features": [{"name": "prefers-color-scheme", "value": "dark"}]}),
    )
    .await;
    b.click("#tab-agents").await;
    let background = wait_for("the dark colours", WAIT, || async {
        let bg = b
            .eval(
                "return getComputedStyle(document.body).backgroundColor",
                json!([]),
            )
            .await;
        bg.as_str()
            .filter(|c| *c == "rgb(18, 18, 21)")
            .map(str::to_owned)
    })
    .await;
    assert_eq!(background, "rgb(18, 18, 21)");
    b.screenshot(&shots().join("agents-dark.png")).await;
    assert_no_console_errors(&b, "the dark scheme").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_admin_tokens_the_data_is_refused_until_a_token_is_typed() {
    let _one = ONE_BROWSER.lock().await;
    let gw = gateway()
        .sid("console-token")
        .with(|c| c.server.admin_tokens = vec!["console-secret-token".into()])
        .start()
        .await;

    // The data routes themselves, without a browser.
    for path in ["/console/api/stats", "/console/api/migration"] {
        let refused = gw.get(path).await;
        assert_eq!(refused.status, 401, "{path}: {}", refused.text);
    }
    let ok = gw
        .http
        .get(format!("{}/console/api/stats", gw.base()))
        .bearer_auth("console-secret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let rpc = gw
        .post_to(
            "/console/api/rpc",
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}}),
        )
        .await;
    assert_eq!(
        rpc.status, 401,
        "the console's RPC route is behind the rule too"
    );
    assert_eq!(
        gw.get("/console").await.status,
        200,
        "the page itself loads"
    );

    let b = Browser::start(1280, 900).await;
    b.goto(&format!("{}/console", gw.base())).await;
    wait_for("the refusal banner", WAIT, || async {
        let visible = b.find("#access:not([hidden])").await.is_some();
        let msg = b.text("#access-message").await?;
        (visible && msg.contains("Refused (401)") && msg.contains("admin token")).then_some(())
    })
    .await;
    assert_eq!(
        b.attr("body", "data-access").await.as_deref(),
        Some("refused")
    );
    assert!(
        b.text("#upstreams").await.unwrap().contains("loading"),
        "no data was shown"
    );
    b.screenshot(&shots().join("access-refused.png")).await;
    // Chromium reports each refused call; those are the only errors.
    let logs = b.logs().await;
    assert!(
        logs.iter().any(|e| e.message.contains("401")),
        "the refused calls were made: {logs:#?}"
    );
    let bad = unexpected(&logs, |e| {
        e.message.contains("/console/api/") && e.message.contains("401 (Unauthorized)")
    });
    assert!(bad.is_empty(), "other console errors: {bad:#?}");

    // A wrong token is refused and said so; the right one lets the data in.
    b.type_into("#token-input", "wrong").await;
    b.click("#token-form button").await;
    wait_for("the wrong token refused", WAIT, || async {
        let msg = b.text("#access-message").await?;
        msg.contains("not accepted").then_some(())
    })
    .await;
    b.type_into("#token-input", "console-secret-token").await;
    b.click("#token-form button").await;
    wait_for("the Overview's data with the token", WAIT, || async {
        let state = b.text("#bridge-state").await?;
        let hidden = b.find("#access[hidden]").await.is_some();
        (hidden && state.contains("sid bridge healthy")).then_some(())
    })
    .await;
    assert_eq!(
        b.attr("body", "data-access").await.as_deref(),
        Some("granted")
    );
    let stored = b
        .eval(
            "return [sessionStorage.getItem('wiregate.adminToken'), localStorage.length, document.cookie]",
            json!([]),
        )
        .await;
    assert_eq!(
        stored,
        json!(["console-secret-token", 0, ""]),
        "the token, in session storage only"
    );
    let page = b
        .eval("return document.documentElement.outerHTML", json!([]))
        .await;
    assert!(
        !page.as_str().unwrap().contains("console-secret-token"),
        "the token is not written into the page"
    );
    let _ = b.logs().await;
    b.click("#tab-agents").await;
    wait_for("the Agents view with the token", WAIT, || async {
        let t = b.text("#contexts").await?;
        t.contains("No contexts yet").then_some(())
    })
    .await;
    assert_no_console_errors(&b, "using the console with a token").await;
}

/// Kills the demo when the test ends, however it ends.
struct Demo(std::process::Child);

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_prints_the_console_url_and_every_view_works_against_it() {
    use std::io::BufRead;
    let _one = ONE_BROWSER.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_wiregate"))
        .current_dir(dir.path())
        .args(["--demo", "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _demo = Demo(child);
    let url = tokio::task::spawn_blocking(move || {
        let mut out = std::io::BufReader::new(stdout);
        let mut printed = String::new();
        while !printed.contains("# metrics") {
            assert!(
                out.read_line(&mut printed).unwrap() > 0,
                "demo output ended early:\n{printed}"
            );
        }
        printed
            .split_whitespace()
            .find(|w| w.starts_with("http://") && w.ends_with("/console"))
            .unwrap_or_else(|| panic!("no console URL in {printed:?}"))
            .to_owned()
    })
    .await
    .unwrap();

    let b = Browser::start(1280, 900).await;
    b.goto(&url).await;
    wait_for(
        "the demo's upstream, bridge and feed on the Overview",
        WAIT,
        || async {
            let up = b
                .text("#upstreams li[data-upstream=\"demo-legacy\"]")
                .await?;
            let state = b.text("#bridge-state").await?;
            (up.contains("reachable")
                && state.contains("1 contexts")
                && state.contains("event feed connected"))
            .then_some(())
        },
    )
    .await;
    // A call to the demo shows on the chart.
    let answer = reqwest::Client::new()
        .post(url.replace("/console", "/rpc"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"hi": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    wait_for("the call on the chart", WAIT, || async {
        let total = b
            .attr(
                "#rate-legend li[data-dialect=\"jsonrpc\"][data-outcome=\"ok\"]",
                "data-total",
            )
            .await?;
        (total == "1").then_some(())
    })
    .await;
    assert_no_console_errors(&b, "the demo's Overview").await;

    b.click("#tab-agents").await;
    wait_for(
        "the demo's context and its completed task",
        WAIT,
        || async {
            let t = b.text("#contexts").await?;
            (t.contains("context ") && t.contains("completed")).then_some(())
        },
    )
    .await;
    b.click("#contexts button[data-task]").await;
    wait_for(
        "the demo's first answer, opened from the list",
        WAIT,
        || async {
            let text = b.text("#task-text").await?;
            (text == "Hello from the mock model." && state_is(&b, "completed").await).then_some(())
        },
    )
    .await;
    assert_no_console_errors(&b, "the demo's Agents view").await;

    b.click("#tab-events").await;
    wait_for("the demo feed's events", WAIT, || async {
        let n = b
            .eval(
                "return document.querySelectorAll('#events-rows tr').length",
                json!([]),
            )
            .await
            .as_u64()?;
        (n >= 1).then_some(())
    })
    .await;
    assert_no_console_errors(&b, "the demo's Events view").await;

    b.click("#tab-migration").await;
    wait_for(
        "the demo's split and its shadows in the Migration view",
        WAIT,
        || async {
            let split = b
                .find("[data-route=\"plan-status\"] tr[data-upstream=\"demo-modern\"]")
                .await;
            // The echo call above was shadowed: it is counted under one outcome or another.
            let counted: u64 = b
                .eval(
                    "return [...document.querySelectorAll('[data-route=\"echo-and-sessions\"] .counts strong')]\
                     .reduce((a, s) => a + Number(s.textContent.replace(/\\D/g, '')), 0)",
                    json!([]),
                )
                .await
                .as_u64()?;
            (split.is_some() && counted >= 1).then_some(())
        },
    )
    .await;
    assert_no_console_errors(&b, "the demo's Migration view").await;
}

#[tokio::test]
async fn the_data_routes_answer_loopback_with_the_bridge_and_calls() {
    let gw = gateway().sid("console-data").start().await;
    let sent = gw
        .call("message/send", support::text_message("hello there"))
        .await;
    let task = sent["result"]["id"].as_str().unwrap().to_owned();
    let context = sent["result"]["contextId"].as_str().unwrap().to_owned();

    let agents = gw.get("/console/api/agents").await;
    assert_eq!(agents.status, 200, "{}", agents.text);
    assert_eq!(agents.header("cache-control").as_deref(), Some("no-store"));
    let agents = agents.json();
    assert_eq!(agents["enabled"], true);
    let ctx = &agents["contexts"][0];
    assert_eq!(ctx["id"], json!(context));
    assert_eq!(ctx["transport"], "child");
    assert_eq!(ctx["running"], true);
    assert_eq!(ctx["tasks"], json!([{"id": task, "state": "completed"}]));

    let overview = gw.get("/console/api/overview").await.json();
    assert_eq!(overview["sid"]["contexts"], 1, "{overview}");
    assert_eq!(overview["upstreams"], json!([]));
    assert_eq!(overview["events"], Value::Null, "no feed configured");

    // The call above is in this second's sample (the counters are the process's: at least it).
    let stats = gw.get("/console/api/stats").await.json();
    let i = stats["series"]
        .as_array()
        .unwrap()
        .iter()
        .position(|s| s["dialect"] == "jsonrpc" && s["outcome"] == "ok")
        .expect("a jsonrpc/ok series");
    assert!(
        stats["series"][i]["total"].as_u64().unwrap() >= 1,
        "{stats}"
    );
    assert_eq!(stats["window_secs"], 900);
    // Routed calls by the serving upstream's dialect (the Migration view's legacy share).
    assert_eq!(stats["served"][0]["dialect"], "legacy", "{stats}");
    assert_eq!(stats["served"][1]["dialect"], "jsonrpc", "{stats}");

    // The migration report, as `/migration` serves it.
    let migration = gw.get("/console/api/migration").await;
    assert_eq!(migration.status, 200, "{}", migration.text);
    assert_eq!(
        migration.header("cache-control").as_deref(),
        Some("no-store")
    );
    assert_eq!(migration.json(), gw.get("/migration").await.json());

    let page = gw.get("/console").await;
    assert_eq!(page.status, 200);
    assert!(page.text.contains("/console/assets/app.js"));
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("connect-src 'self'"),
        "{csp}"
    );
    assert_eq!(
        page.header("x-content-type-options").as_deref(),
        Some("nosniff")
    );
    let js = gw.get("/console/assets/agents.js").await;
    assert_eq!(js.status, 200);
    assert!(js
        .header("content-type")
        .unwrap()
        .starts_with("text/javascript"));
    assert_eq!(gw.get("/console/assets/nope.js").await.status, 404);
}

#[tokio::test]
async fn a_foreign_host_or_a_cross_site_page_gets_no_console_data() {
    let gw = gateway().sid("console-rebind").start().await;
    let get = |headers: &'static [(&'static str, &'static str)]| {
        let gw = &gw;
        async move {
            let mut req = gw.http.get(format!("{}/console/api/agents", gw.base()));
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            req.send().await.unwrap().status().as_u16()
        }
    };
    assert_eq!(get(&[]).await, 200);
    assert_eq!(get(&[("host", "localhost:1")]).await, 200);
    assert_eq!(get(&[("sec-fetch-site", "same-origin")]).await, 200);
    // A name resolving to 127.0.0.1 (DNS rebinding) is not loopback to the console.
    assert_eq!(get(&[("host", "rebound.example:8080")]).await, 403);
    // A page of another site, as the browser says.
    assert_eq!(get(&[("sec-fetch-site", "cross-site")]).await, 403);
    assert_eq!(get(&[("sec-fetch-site", "same-site")]).await, 403);

    // With admin tokens the token decides, whatever the Host; another site's page still not.
    let gw = gateway()
        .with(|c| c.server.admin_tokens = vec!["console-secret-token".into()])
        .start()
        .await;
    let with_token = |headers: &'static [(&'static str, &'static str)]| {
        let gw = &gw;
        async move {
            let mut req = gw
                .http
                .get(format!("{}/console/api/stats", gw.base()))
                .bearer_auth("console-secret-token");
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            req.send().await.unwrap().status().as_u16()
        }
    };
    assert_eq!(with_token(&[("host", "console.example.com")]).await, 200);
    assert_eq!(with_token(&[("sec-fetch-site", "cross-site")]).await, 403);
}
