//! The exporter and the mirrors together, over a real `redis-server` (the test's own, on a
//! free port): a burst read by slow subscribers on other replicas (`mirror_burst`), and the
//! owner holding back for a mirror that lags (`mirror_pacing`).

use std::time::Duration;

// The integration tests' own helpers, shared rather than copied.
#[allow(unreachable_pub, dead_code)]
#[path = "../../../../tests/support/redis_server.rs"]
mod redis_server;
#[allow(unreachable_pub, dead_code)]
#[path = "../../../../tests/support/wait.rs"]
mod wait;

mod mirror_burst;
mod mirror_pacing;

/// How long any one condition may take to come true.
const WAIT: Duration = Duration::from_secs(10);
