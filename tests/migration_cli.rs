//! The migration story from the command line: `--demo`'s split and shadow lines, and
//! `wiregate migration` printing a running gateway's report as tables.
#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_wiregate");

/// Kills the child when dropped.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `wiregate --demo` on an ephemeral port: its base URL and everything it printed.
fn start_demo() -> (Guard, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .current_dir(dir.path())
        .args(["--demo", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut printed = String::new();
    while !printed.contains("# metrics") {
        assert!(
            out.read_line(&mut printed).unwrap() > 0,
            "demo output ended early:\n{printed}"
        );
    }
    let url = printed
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_owned();
    (Guard(child), url, printed)
}

fn migration_cli(args: &[&str]) -> (bool, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .current_dir(dir.path())
        .arg("migration")
        .args(args)
        .env_remove("WIREGATE_ADMIN_TOKEN")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_demo_shows_a_split_a_shadow_and_the_report() {
    let (_guard, url, printed) = start_demo();
    for line in [
        "Authorization: Bearer caller-$i",
        "/migration",
        "migration --url http://",
    ] {
        assert!(printed.contains(line), "{line:?} not printed:\n{printed}");
    }
    let http = reqwest::Client::new();
    // The printed loop: 20 callers, each with its token, twice.
    let mut new_side = 0;
    for i in 1..=20 {
        let mut phases = Vec::new();
        for _ in 0..2 {
            let a: Value = http
                .post(format!("{url}/rpc"))
                .header("content-type", "application/json")
                .header("authorization", format!("Bearer caller-{i}"))
                .body(json!({"jsonrpc":"2.0","id":1,"method":"_cleveragents/plan/status","params":{"plan_id":"P1"}}).to_string())
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            // The JSON-RPC server's answers are the ones with updated_at, as the demo says.
            phases.push((
                a["result"]["phase"].clone(),
                a["result"].get("updated_at").is_some(),
            ));
        }
        assert_eq!(phases[0].0, phases[1].0, "caller-{i} changed sides");
        if phases[0].1 {
            assert_eq!(phases[0].0, "applying");
            new_side += 1;
        }
    }
    assert!(
        (1..=5).contains(&new_side),
        "{new_side} of 20 demo callers on the 10 % side"
    );
    // The legacy side's answers were shadowed: their phase differs.
    let mut report = Value::Null;
    for _ in 0..100 {
        report = http
            .get(format!("{url}/migration"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if report["routes"][0]["shadow"]["diff"] == json!(2 * (20 - new_side)) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let plan = &report["routes"][0];
    assert_eq!(plan["name"], "plan-status");
    assert_eq!(plan["shadow"]["diff"], json!(2 * (20 - new_side)), "{plan}");
    assert_eq!(
        plan["shadow"]["last_diffs"][0]["pointers"],
        json!([{"pointer": "/result/phase", "primary": "\"apply\"", "shadow": "\"applying\""}])
    );
    assert_eq!(plan["sides"][1]["calls"], json!(2 * new_side));

    // The same report as tables.
    let (ok, out, err) = migration_cli(&["--url", &url]);
    assert!(ok, "{err}");
    for needle in [
        "Routes",
        "plan-status",
        "demo-modern",
        "Shadows",
        "Recent differences",
        "/result/phase",
        "Callers (by auth)",
        "auth:",
    ] {
        assert!(out.contains(needle), "{needle:?} not in:\n{out}");
    }
    assert!(!out.contains("caller-1"), "a token in the report:\n{out}");
}

#[tokio::test]
async fn the_migration_command_sends_the_configured_admin_token() {
    let token = "cli-admin-token-0123456789";
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin_tokens = [\"{token}\"]\n\
             [[upstreams]]\nname = \"old\"\nurl = \"http://127.0.0.1:9/a2a\"\ndialect = \"legacy\"\n\
             [[routes]]\nmethods = [\"*\"]\nupstream = \"old\"\n"
        ),
    )
    .unwrap();
    let mut cfg = wiregate::config::Config::load(&config, true).unwrap();
    cfg.server.listen = "127.0.0.1:0".parse().unwrap();
    let running = wiregate::server::serve(&cfg).await.unwrap();
    let url = format!("http://{}", running.addr);
    // Run off the test's runtime thread: the gateway serves on it meanwhile.
    let run = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            migration_cli(&args)
        })
    };
    let (ok, _, err) = run(vec!["--url".into(), url.clone()]).await.unwrap();
    assert!(!ok);
    assert!(err.contains("401"), "{err}");
    let path = config.to_string_lossy().into_owned();
    let (ok, out, err) = run(vec!["--config".into(), path, "--url".into(), url.clone()])
        .await
        .unwrap();
    assert!(ok, "{err}");
    assert!(out.contains("Routes") && out.contains("routes[0]"), "{out}");
    let (ok, out, err) = run(vec![
        "--url".into(),
        url,
        "--token".into(),
        token.into(),
        "--json".into(),
    ])
    .await
    .unwrap();
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["routes"][0]["sides"][0]["upstream"], "old");
}
