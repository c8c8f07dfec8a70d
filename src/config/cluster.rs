//! `[cluster]`: replicas that share the sid bridge's tasks and event logs through Redis.

use serde::{Deserialize, Serialize};

use super::Issues;

/// `[cluster]`: off (one process, in memory) until `redis` names a server.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Cluster {
    /// `redis://host:port/db` or `rediss://` (TLS); empty: no cluster, a single process.
    pub redis: String,
    /// This replica's name in leases and logs; empty: the host name and the process id.
    pub node_id: String,
    /// The URL other replicas reach this one at, when a context's calls are carried to its owner.
    pub advertise: String,
    /// How long a lease (a context's owner, the domain feed's reader) outlives its holder; it
    /// is renewed at a third of this.
    pub lease_ms: u64,
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster {
            redis: String::new(),
            node_id: String::new(),
            advertise: String::new(),
            lease_ms: 10_000,
        }
    }
}

/// This machine's host name (`wiregate` when it cannot be read): what names a replica, and
/// a span exporter's instance, when the configuration does not.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "wiregate".into())
}

/// Shortest lease: renewing at a third of it must outpace scheduling delays under load.
const MIN_LEASE_MS: u64 = 300;

impl Cluster {
    /// Whether the replicas share state through Redis.
    pub fn enabled(&self) -> bool {
        !self.redis.is_empty()
    }

    /// `node_id`, or the host name and process id when it is empty. Read once, at start.
    pub fn resolved_node_id(&self) -> String {
        if !self.node_id.is_empty() {
            return self.node_id.clone();
        }
        format!("{}-{}", host_name(), std::process::id())
    }

    /// `redis` as logs and metrics show it: without its password (or any user info), see
    /// [`redact::url`](crate::util::redact::url).
    pub fn masked_redis(&self) -> String {
        crate::util::redact::url(&self.redis).to_string()
    }

    pub(super) fn validate(&self, issues: &mut Issues) {
        if !self.enabled() {
            return;
        }
        let scheme_ok = self.redis.starts_with("redis://") || self.redis.starts_with("rediss://");
        if !scheme_ok {
            issues.add(
                "cluster.redis".into(),
                "must be redis://host:port/db or rediss://host:port/db".into(),
            );
        } else if let Err(e) = redis::Client::open(self.redis.as_str()) {
            issues.add("cluster.redis".into(), format!("not a Redis URL: {e}"));
        }
        let plain = |b: u8| b.is_ascii_alphanumeric() || b"-_.:".contains(&b);
        if !self.node_id.is_empty()
            && (self.node_id.len() > 128 || !self.node_id.bytes().all(plain))
        {
            issues.add(
                "cluster.node_id".into(),
                "must be 1 to 128 letters, digits or - _ . :".into(),
            );
        }
        if !self.advertise.is_empty() {
            let ok = self.advertise.parse::<axum::http::Uri>().is_ok_and(|u| {
                matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some()
            });
            if !ok {
                issues.add(
                    "cluster.advertise".into(),
                    "must be an http:// or https:// URL other replicas can reach".into(),
                );
            }
        }
        if self.lease_ms < MIN_LEASE_MS {
            issues.add(
                "cluster.lease_ms".into(),
                format!("must be at least {MIN_LEASE_MS}"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issues(c: &Cluster) -> Vec<String> {
        let mut i = Issues::default();
        c.validate(&mut i);
        i.0.into_iter().map(|i| i.to_string()).collect()
    }

    #[test]
    fn off_by_default_and_nothing_to_check() {
        let c = Cluster::default();
        assert!(!c.enabled());
        assert!(issues(&c).is_empty());
    }

    #[test]
    fn each_bad_key_is_reported_with_its_path() {
        let c = Cluster {
            redis: "http://localhost:6379".into(),
            node_id: "a b".into(),
            advertise: "localhost:8080".into(),
            lease_ms: 10,
        };
        assert_eq!(
            issues(&c),
            [
                "cluster.redis: must be redis://host:port/db or rediss://host:port/db",
                "cluster.node_id: must be 1 to 128 letters, digits or - _ . :",
                "cluster.advertise: must be an http:// or https:// URL other replicas can reach",
                "cluster.lease_ms: must be at least 300",
            ]
        );
        let good = Cluster {
            redis: "redis://127.0.0.1:6379/0".into(),
            node_id: "replica-a".into(),
            advertise: "http://10.0.0.5:8080".into(),
            lease_ms: 10_000,
        };
        assert!(issues(&good).is_empty(), "{:?}", issues(&good));
    }

    #[test]
    fn node_id_defaults_to_host_and_pid() {
        let id = Cluster::default().resolved_node_id();
        assert!(id.ends_with(&format!("-{}", std::process::id())), "{id}");
    }
}
