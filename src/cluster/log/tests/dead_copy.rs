//! A copy whose replica died without a word (its mark left in Redis, nothing more said) holds
//! the owner back only until its mark lapses: a burst of forty logs still reaches a live copy's
//! steady subscriber whole, the owner is held for about [`PACE_TTL`] and no longer, and the
//! dead mark's keys are gone after. The dead copy's mark is written before the owner starts,
//! so the owner finds it by reading the marks' keys when it starts listening. Real
//! `redis-server`, real exporter and mirror.

use std::time::Duration;

use redis::AsyncCommands;

use crate::cluster::keys;
use crate::cluster::log::pace::{mark, PACE_TTL};
use crate::cluster::log::Mirrors;

use super::mirror_burst::{burst, link, owner, read_steadily, BURST, REPLAY};
use super::redis_server::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_copys_mark_lapses_and_stops_holding_the_owner_back() {
    let redis = RedisServer::start().await;
    let grace = Duration::from_secs(2);
    let key = keys::context_log("ctx-dead");
    // The dead replica's last word: it had read the first update.
    let dead = link(&redis, "dead").await;
    mark(&dead, &key, "dead", 1).await;
    drop(dead);

    let a = link(&redis, "a").await;
    let owner = owner(&a, "ctx-dead", grace).await;
    let mirrors = Mirrors::new(link(&redis, "b").await, REPLAY, 16, grace);
    let mirror = mirrors.open("ctx-dead").await.unwrap();
    let reader = tokio::spawn(read_steadily(mirror.subscribe(Some("1")).unwrap().cursor));

    let started = tokio::time::Instant::now();
    burst(&owner, grace).await;
    let took = started.elapsed();
    let got = reader.await.unwrap().unwrap();
    assert_eq!(got, (2..=BURST + 1).collect::<Vec<_>>());
    // Held for the dead mark until it lapsed (half the grace a write, the rest of the lapse
    // on the next), then not at all: far less than a wait per write.
    assert!(took >= PACE_TTL - Duration::from_millis(100), "{took:?}");
    assert!(took < PACE_TTL + Duration::from_secs(3), "{took:?}");

    let member = keys::pace_member(&key, "dead");
    let client = redis::Client::open(redis.url()).unwrap();
    let conn = client.get_multiplexed_async_connection().await.unwrap();
    super::wait::until_true("the dead mark's keys are removed", super::WAIT, || {
        let (mut conn, member) = (conn.clone(), member.clone());
        let key = key.clone();
        async move {
            let gone: bool = !conn
                .exists::<_, bool>(keys::pace_mark(&member))
                .await
                .unwrap();
            let named: bool = conn.sismember(keys::paces(&key), &member).await.unwrap();
            gone && !named
        }
    })
    .await;
}
