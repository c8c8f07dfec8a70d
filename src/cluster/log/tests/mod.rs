//! The exporter and the mirrors together, over a real `redis-server` (the test's own, on a
//! free port): a burst read by slow subscribers on other replicas (`mirror_burst`), the owner
//! holding back for a mirror that lags (`mirror_pacing`), a copy that dies without a word
//! (`dead_copy`), and a quiet log costing Redis nothing (`quiet`).

use std::collections::BTreeMap;
use std::time::Duration;

// The integration tests' own helpers, shared rather than copied.
#[allow(unreachable_pub, dead_code)]
#[path = "../../../../tests/support/redis_server.rs"]
mod redis_server;
#[allow(unreachable_pub, dead_code)]
#[path = "../../../../tests/support/wait.rs"]
mod wait;

mod dead_copy;
mod mirror_burst;
mod mirror_pacing;
mod quiet;

/// How long any one condition may take to come true.
const WAIT: Duration = Duration::from_secs(10);

/// Redis's count of calls of each command so far (`INFO commandstats`), read on a connection
/// of the test's own.
async fn calls(redis: &redis_server::RedisServer) -> BTreeMap<String, u64> {
    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.trim().split_once(':')?;
            let cmd = name.strip_prefix("cmdstat_")?;
            let n = rest.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
            Some((cmd.to_owned(), n.parse().ok()?))
        })
        .collect()
}

/// The calls of each command between two [`calls`], those not made left out.
fn made(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(cmd, n)| (cmd.clone(), n - before.get(cmd).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}
