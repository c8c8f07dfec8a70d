//! The active health checks of `[upstreams.health]`: a `GET` on a fresh connection to each
//! endpoint every `interval_ms`, its outcome kept in the endpoint's [`State`](super::health::State).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::endpoint::Endpoint;
use super::health::next_generation;
use crate::config::Health;

/// Starts the active checks of `endpoints` (of upstream `name`) as `health` says, on the
/// current runtime. The task stops when none of the endpoints is left, or when a newer checker
/// takes them over (a reload).
pub(crate) fn spawn_checks(name: &str, endpoints: &[Arc<Endpoint>], health: &Health) {
    let Some(runtime) = crate::util::background::handle() else {
        return;
    };
    let generation = next_generation();
    for e in endpoints {
        e.state.checker.store(generation, Ordering::Relaxed);
    }
    let watched: Vec<Weak<Endpoint>> = endpoints.iter().map(Arc::downgrade).collect();
    let health = health.clone();
    let name = name.to_owned();
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(health.interval_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let live: Vec<Arc<Endpoint>> = watched
                .iter()
                .filter_map(Weak::upgrade)
                .filter(|e| e.state.checker.load(Ordering::Relaxed) == generation)
                .collect();
            if live.is_empty() {
                return;
            }
            let checks = live.iter().map(|e| check(e, &health));
            let results = futures_util::future::join_all(checks).await;
            for (e, result) in live.iter().zip(results) {
                let good = result.is_ok();
                if e.state.checked(good, &health) {
                    match result {
                        Ok(()) => tracing::info!(upstream = %name, endpoint = e.label(), "endpoint passes its health checks again"),
                        Err(why) => tracing::warn!(upstream = %name, endpoint = e.label(), reason = %why, "endpoint fails its health checks: taken out"),
                    }
                }
            }
        }
    });
}

/// One active check: `GET path` on a fresh connection, passed by a 2xx within the timeout.
async fn check(e: &Endpoint, health: &Health) -> Result<(), String> {
    let run = async {
        let mut conn = e.pool.connect().await.map_err(|e| e.to_string())?;
        let request = format!(
            "GET {} HTTP/1.1\r\nhost: {}\r\nuser-agent: wiregate-health\r\nconnection: close\r\n\r\n",
            health.path,
            e.label()
        );
        conn.send(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let head = conn
            .read_head(false, None)
            .await
            .map_err(|e| e.to_string())?;
        match head.status.is_success() {
            true => Ok(()),
            false => Err(format!("answered {}", head.status.as_u16())),
        }
    };
    match tokio::time::timeout(Duration::from_millis(health.timeout_ms), run).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer within {} ms", health.timeout_ms)),
    }
}
