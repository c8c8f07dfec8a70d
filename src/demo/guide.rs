//! What `--demo` serves and prints: its two upstreams, the routes that split and shadow between
//! them, the event feed and the fake sid; then the commands to try against it.

use std::net::SocketAddr;

use crate::config::{Config, Dialect, Route, SplitSide, Upstream};

/// The demo's upstreams (legacy and its migrated JSON-RPC counterpart), routes, event feed and sid.
pub async fn configure(config: &mut Config) -> std::io::Result<()> {
    let (addr, _task) = super::legacy_upstream(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    config.upstreams = vec![Upstream::new(
        "demo-legacy",
        &format!("http://{addr}/a2a"),
        Dialect::Legacy,
        1000,
    )];
    // Its migrated counterpart: plan status split 90/10 by caller token (and shadowed, to
    // show a difference), echo and session.create shadowed; the rest stays on legacy.
    let (modern, _task) = super::jsonrpc_upstream(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        super::Faults::default(),
    )
    .await?;
    config.upstreams.push(Upstream::new(
        "demo-modern",
        &format!("http://{modern}/rpc"),
        Dialect::Jsonrpc,
        1000,
    ));
    let side = |upstream: &str, weight| SplitSide {
        upstream: upstream.into(),
        weight,
    };
    config.routes = vec![
        Route {
            name: "plan-status".into(),
            split: vec![side("demo-legacy", 90), side("demo-modern", 10)],
            shadow: "demo-modern".into(),
            shadow_ignore: vec!["/result/updated_at".into()],
            rollback: Some(Default::default()),
            ..Route::to(&["_cleveragents/plan/*"], "")
        },
        Route {
            name: "echo-and-sessions".into(),
            shadow: "demo-modern".into(),
            shadow_ignore: vec!["/result/session_id".into()],
            ..Route::to(&["echo", "session.*"], "demo-legacy")
        },
        Route {
            name: "everything-else".into(),
            ..Route::to(&["*"], "demo-legacy")
        },
    ];
    // The demo server's domain-event feed, served as SSE on /events.
    config.events.source = format!("http://{addr}/events");
    // The sid bridge, over the fake sid this very binary carries.
    config.sid.enabled = true;
    config.sid.command = vec![
        own_path()?.to_string_lossy().into_owned(),
        "demo-sid".into(),
        "--raw".into(),
    ];
    Ok(())
}

/// Prints what to try against the demo listening on `addr`, the sid examples in `context`.
pub fn print_guide(addr: SocketAddr, context: &str) {
    let h = "-H 'Content-Type: application/json'";
    println!(
        "wiregate demo listening on http://{addr}  (a demo legacy server answers behind it)\n"
    );
    println!(
        "# the web console (overview, agents, events), in a browser:\n#   http://{addr}{}\n",
        crate::http::routes::CONSOLE
    );
    println!("# a JSON-RPC 2.0 call, translated to the legacy envelope and back:");
    println!(
        "curl -s {h} http://{addr}/rpc -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"_cleveragents/plan/status\",\"params\":{{\"plan_id\":\"P1\"}}}}'\n"
    );
    println!("# a legacy NOT_FOUND error as JSON-RPC -32001:");
    println!(
        "curl -s {h} http://{addr}/rpc -d '{{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":\"_cleveragents/plan/status\",\"params\":{{\"plan_id\":\"nope\"}}}}'\n"
    );
    println!("# a batch with a notification, and a legacy client on the same endpoint:");
    println!(
        "curl -s {h} http://{addr}/rpc -d '[{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":{{\"hi\":1}}}},{{\"jsonrpc\":\"2.0\",\"method\":\"echo\"}},{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session.create\"}}]'"
    );
    println!(
        "curl -s {h} http://{addr}/rpc -d '{{\"a2a_version\":\"1.0\",\"request_id\":\"r1\",\"operation\":\"_cleveragents/health/check\",\"auth\":null}}'\n"
    );
    println!("# sid: a turn streamed as SSE task updates, in the context the demo started:");
    println!(
        "curl -sN {h} http://{addr}/rpc -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"message/stream\",\"params\":{{\"message\":{{\"role\":\"user\",\"parts\":[{{\"kind\":\"text\",\"text\":\"hi there\"}}]}},\"contextId\":\"{context}\"}}}}'"
    );
    println!("# ...and everything that context did so far (Ctrl-C to stop watching):");
    println!("curl -sN http://{addr}/contexts/{context}/events\n");
    println!(
        "# A2A 1.0 (any official A2A client works from the card): the card, then a streamed turn"
    );
    println!("curl -s http://{addr}{}", crate::http::routes::AGENT_CARD);
    println!(
        "curl -sN {h} -H 'A2A-Version: 1.0' http://{addr}/rpc -d '{{\"jsonrpc\":\"2.0\",\"id\":\"a1\",\"method\":\"SendStreamingMessage\",\"params\":{{\"message\":{{\"messageId\":\"m1\",\"role\":\"ROLE_USER\",\"parts\":[{{\"text\":\"hi there\"}}]}}}}}}'\n"
    );
    println!("# the legacy server's domain events as SSE task updates, one plan's life cycle:");
    println!("curl -sN 'http://{addr}/events?taskId=plan-1'\n");
    println!("# migrating: plan status goes 90 % to the legacy server, 10 % to the JSON-RPC one,");
    println!("# each caller (by token) always to the same side; answers with updated_at are the new one's:");
    println!(
        "for i in $(seq 1 20); do curl -s {h} -H \"Authorization: Bearer caller-$i\" http://{addr}/rpc -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"_cleveragents/plan/status\",\"params\":{{\"plan_id\":\"P1\"}}}}'; echo; done"
    );
    println!("# ...the legacy side's answers are shadowed to the JSON-RPC server and compared (its phase differs);");
    println!("# echo and session.create are shadowed too (session_id ignored), and match:");
    println!(
        "curl -s {h} http://{addr}/rpc -d '{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"echo\",\"params\":{{\"hi\":1}}}}'"
    );
    println!(
        "curl -s {h} http://{addr}/rpc -d '{{\"a2a_version\":\"1.0\",\"request_id\":\"r2\",\"operation\":\"session.create\",\"auth\":{{\"scheme\":\"bearer\",\"token\":\"old-client\"}}}}'"
    );
    println!("# the migration report: calls per side, rollback state, shadow counts and differences, callers:");
    println!("curl -s http://{addr}/migration");
    let exe =
        std::env::current_exe().map_or_else(|_| "wiregate".into(), |p| p.display().to_string());
    println!("{exe} migration --url http://{addr}\n");
    println!("# metrics:  curl -s http://{addr}/metrics | grep wiregate_");
}

/// This binary's path, for the fake sid it runs as a child: from `/proc`, or, in a root without
/// one (a container image's filesystem run under `chroot`), the absolute path it was started by.
fn own_path() -> std::io::Result<std::path::PathBuf> {
    std::env::current_exe().or_else(|e| {
        std::env::args_os()
            .next()
            .map(std::path::PathBuf::from)
            .filter(|p| p.is_absolute())
            .ok_or(e)
    })
}
