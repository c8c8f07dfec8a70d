//! Replicas over Redis: the sid bridge's event logs and task state, shared so that any replica
//! serves and resumes any stream (`[cluster]`).
//!
//! Off unless `cluster.redis` is set; the in-memory path then never touches this module. When
//! on, the pieces are:
//! - [`Link`]: the one shared, reconnecting connection (redis-rs' `ConnectionManager`), and
//!   whether Redis answers (for `/readyz` and for refusing sid calls while it does not);
//! - [`log`]: a context's events written to its stream by the replica that runs it, and read
//!   back into a local [`ReplayLog`](crate::events::ReplayLog) by every other replica (one
//!   reader per context per replica, whatever the number of subscribers);
//! - [`tasks`]: task snapshots and the task index, readable by every replica.
//!
//! redis-rs rather than fred: it is the most used client, its `ConnectionManager` reconnects by
//! itself and is a cheap clone over one multiplexed connection, its stream commands are typed,
//! and its TLS goes through the rustls (with ring) the gateway already builds.

pub(crate) mod feed;
pub(crate) mod keys;
pub(crate) mod lease;
pub(crate) mod log;
pub(crate) mod tasks;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};

use crate::config::Cluster as ClusterConfig;
use crate::model::error::GatewayError;

/// How often the link checks that Redis answers.
const PING_EVERY: Duration = Duration::from_millis(500);
/// A command (other than a blocking read) that takes longer failed.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
/// Connecting that takes longer failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// The replica's connection to Redis. See the module docs.
pub(crate) struct Link {
    /// This replica's name (leases, logs).
    pub(crate) node_id: String,
    /// `cluster.lease_ms`.
    pub(crate) lease: Duration,
    /// `cluster.advertise`.
    pub(crate) advertise: String,
    client: redis::Client,
    conn: ConnectionManager,
    up: AtomicBool,
    /// The password-masked URL, for messages.
    shown: String,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("node_id", &self.node_id)
            .field("redis", &self.shown)
            .field("up", &self.is_up())
            .finish()
    }
}

impl Link {
    /// Opens the link (lazily: a Redis that is down at start is reached when it comes up) and
    /// starts its health check. Needs a Tokio runtime.
    pub(crate) fn start(cfg: &ClusterConfig) -> Result<Arc<Link>, String> {
        let client =
            redis::Client::open(cfg.redis.as_str()).map_err(|e| format!("cluster.redis: {e}"))?;
        let manager_cfg = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_secs(1))
            .set_number_of_retries(2);
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), manager_cfg)
            .map_err(|e| format!("cluster.redis: {e}"))?;
        let link = Arc::new(Link {
            node_id: cfg.resolved_node_id(),
            lease: Duration::from_millis(cfg.lease_ms),
            advertise: cfg.advertise.clone(),
            client,
            conn,
            up: AtomicBool::new(false),
            shown: cfg.masked_redis(),
        });
        let weak = Arc::downgrade(&link);
        crate::util::background::spawn(async move {
            loop {
                let Some(link) = weak.upgrade() else { return };
                link.check().await;
                drop(link);
                tokio::time::sleep(PING_EVERY).await;
            }
        });
        Ok(link)
    }

    /// Pings Redis and records whether it answered.
    async fn check(&self) {
        let mut conn = self.conn.clone();
        let pong = tokio::time::timeout(
            RESPONSE_TIMEOUT,
            redis::cmd("PING").query_async::<String>(&mut conn),
        )
        .await;
        let ok = matches!(pong, Ok(Ok(_)));
        if self.up.swap(ok, Ordering::AcqRel) != ok {
            match ok {
                true => tracing::info!(redis = %self.shown, "Redis answers"),
                false => tracing::warn!(redis = %self.shown, "Redis does not answer"),
            }
        }
        metrics::gauge!("wiregate_cluster_redis_up").set(if ok { 1.0 } else { 0.0 });
    }

    /// Whether Redis answered the last check.
    pub(crate) fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// Marks Redis down after a failed command, so calls are refused until the next check.
    pub(crate) fn failed(&self, e: &redis::RedisError) -> GatewayError {
        if self.up.swap(false, Ordering::AcqRel) {
            tracing::warn!(redis = %self.shown, error = %e, "a Redis command failed");
        }
        self.unavailable()
    }

    /// The error a sid call gets while Redis is down.
    pub(crate) fn unavailable(&self) -> GatewayError {
        GatewayError::ClusterUnavailable(format!("Redis at {} does not answer", self.shown))
    }

    /// The shared connection, or [`GatewayError::ClusterUnavailable`] while Redis is down.
    pub(crate) fn conn(&self) -> Result<ConnectionManager, GatewayError> {
        match self.is_up() {
            true => Ok(self.conn.clone()),
            false => Err(self.unavailable()),
        }
    }

    /// The shared connection whatever the last check said (background writers retry on it).
    pub(crate) fn conn_anyway(&self) -> ConnectionManager {
        self.conn.clone()
    }

    /// A connection of its own, for a blocking read (`XREAD BLOCK` would hold up every command
    /// queued behind it on the shared one).
    pub(crate) async fn dedicated(&self) -> redis::RedisResult<MultiplexedConnection> {
        let cfg = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(None);
        self.client
            .get_multiplexed_async_connection_with_config(&cfg)
            .await
    }

    /// A connection of its own in subscriber mode, for an owner's writer to hear the pace
    /// marks the copies of its log push (see `log::pace`).
    pub(crate) async fn pubsub(&self) -> redis::RedisResult<redis::aio::PubSub> {
        self.client.get_async_pubsub().await
    }

    /// What `/readyz` says of Redis.
    pub(crate) fn readiness(&self) -> serde_json::Value {
        serde_json::json!({
            "redis": if self.is_up() { "reachable" } else { "unreachable" },
            "node": self.node_id,
        })
    }
}
