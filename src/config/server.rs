//! `[server]`: the listening side.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::Issues;

/// Why `path` cannot be an RPC path: it must be an absolute path of plain segments that no
/// built-in route uses.
fn rpc_path_problem(path: &str) -> Result<(), &'static str> {
    let trimmed = path.trim_end_matches('/');
    if !path.starts_with('/') || trimmed.is_empty() {
        return Err("must be an absolute path below /, like \"/rpc\" or \"/a2a\"");
    }
    if !trimmed[1..].split('/').all(|seg| {
        !seg.is_empty()
            && seg
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
    }) {
        return Err("segments may hold only letters, digits and - . _ ~");
    }
    if crate::http::routes::is_own_route(path) {
        return Err("is a route of the gateway's own");
    }
    Ok(())
}

/// `[server]`.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Server {
    /// Address to listen on; loopback by default.
    pub listen: SocketAddr,
    /// Paths that take JSON-RPC and legacy calls (`POST`), each with or without one trailing
    /// slash: a legacy server's own URL keeps working for its clients. The agent card names the
    /// first.
    pub rpc_paths: Vec<String>,
    /// Largest request body accepted (HTTP 413 beyond).
    pub max_body_bytes: usize,
    /// Largest upstream answer read (-32052 beyond).
    pub max_upstream_body_bytes: usize,
    /// Most calls of one batch forwarded at the same time.
    pub max_batch_concurrency: usize,
    /// Most members of one batch (-32600 beyond).
    pub max_batch_len: usize,
    /// How long in-flight calls get to finish on SIGINT/SIGTERM.
    pub shutdown_grace_ms: u64,
    /// On SIGINT/SIGTERM, how long the gateway goes on serving (and accepting) with `/readyz`
    /// answering 503 before shutdown begins: a load balancer or Kubernetes' endpoints controller
    /// sees the readiness fail and stops sending new clients, with no `preStop` hook. 0: shut
    /// down at once.
    pub drain_ms: u64,
    /// Reload whenever the configuration file, or the directory holding it, changes (an edit,
    /// a rename over it, the symlink swap of a Kubernetes ConfigMap update), as SIGHUP does: a
    /// file with errors is refused, each error logged, and the running configuration kept.
    pub watch_config: bool,
    /// Runtime worker threads; 0 means one per core.
    pub worker_threads: usize,
    /// How connections are spread over the `worker_threads`: `"per_core"` (each worker a
    /// thread with its own runtime, listening socket (`SO_REUSEPORT`) and upstream
    /// connections, the sid bridge, the cluster link and the exporters on the main thread) or
    /// `"work_stealing"` (one runtime whose workers share every task, and the tasks of a worker
    /// the kernel holds off the CPU run on another: the steadier tail when other processes
    /// compete for the cores).
    pub runtime: Runtime,
    /// Most client connections open at once; beyond, clients wait in the accept backlog.
    pub max_connections: usize,
    /// How long a client gets to send a request's head (a new connection's first bytes, or the
    /// next request on a kept-alive one, so also how long a kept-alive HTTP/1 or HTTP/2
    /// connection may idle with no request in flight) before its connection is closed: slow or
    /// silent clients cannot hold connection slots. HTTP/2 peers are also sent a PING this
    /// often and dropped when one goes unanswered this long.
    pub header_read_timeout_ms: u64,
    /// How long a client gets to send a request's whole body once its head is in (HTTP 408
    /// beyond): a client that declares a length and stalls cannot hold its slot.
    pub body_read_timeout_ms: u64,
    /// Bearer tokens for the admin routes (`/migration`, `/console`); empty: those routes
    /// answer loopback clients only.
    pub admin_tokens: Vec<String>,
    /// Peers (CIDRs) whose own `X-Forwarded-For` / `Forwarded` headers are kept and extended on
    /// pass-through; from anyone else they are replaced.
    pub trusted_proxies: Vec<String>,
    /// The forwarding header `trusted_proxies` write, and the only one read from them for the
    /// client's address, protocol and host: `"x-forwarded-for"` (with `X-Forwarded-Proto` and
    /// `-Host`; what most load balancers append to) or `"forwarded"` (RFC 7239). A proxy passes
    /// the other header on as the client sent it, so it is never believed.
    pub forwarded_header: ForwardedHeader,
    /// TLS on the listener.
    pub tls: ServerTls,
    /// Cross-origin access for browser pages.
    pub cors: Cors,
}

/// `server.forwarded_header`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For`, `X-Forwarded-Proto`, `X-Forwarded-Host`.
    #[default]
    #[serde(rename = "x-forwarded-for")]
    XForwardedFor,
    /// `Forwarded` (RFC 7239).
    #[serde(rename = "forwarded")]
    Forwarded,
}

impl Server {
    /// Whose word on the client is taken, and in which header.
    pub fn proxies(&self) -> crate::http::client_ip::Proxies {
        use crate::http::client_ip::{ClientHeader, Proxies};
        Proxies {
            trusted: crate::http::forwarded::Trusted::new(&self.trusted_proxies),
            header: match self.forwarded_header {
                ForwardedHeader::XForwardedFor => ClientHeader::XForwardedFor,
                ForwardedHeader::Forwarded => ClientHeader::Forwarded,
            },
        }
    }
}

/// `server.runtime`: how connections are spread over the worker threads.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Runtime {
    /// A thread per worker, each with its own runtime, listener and upstream connections: a
    /// connection's calls never leave the thread that accepted it (docs/performance.md, "The
    /// worker model": the shorter tail at 32 connections, as much throughput at 256).
    #[default]
    PerCore,
    /// One multi-threaded runtime whose workers steal one another's tasks.
    WorkStealing,
}

/// `[server.tls]`: when `cert` and `key` are both set, the listener speaks TLS 1.2 and 1.3
/// (ALPN `h2`, `http/1.1`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ServerTls {
    /// PEM certificate chain, leaf first.
    pub cert: String,
    /// PEM private key of the leaf.
    pub key: String,
    /// PEM CAs; when set, clients must present a certificate signed by one of them (mTLS).
    pub client_ca: String,
}

impl ServerTls {
    /// Whether TLS is on.
    pub fn enabled(&self) -> bool {
        !self.cert.is_empty() && !self.key.is_empty()
    }
}

/// `[server.cors]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Cors {
    /// Exact origins (`https://app.example`) or `["*"]`; empty: no CORS headers at all.
    pub allow_origins: Vec<String>,
}

impl Default for Server {
    fn default() -> Self {
        Server {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            rpc_paths: vec!["/rpc".into()],
            max_body_bytes: 1 << 20,
            max_upstream_body_bytes: 16 << 20,
            max_batch_concurrency: 32,
            max_batch_len: 1000,
            shutdown_grace_ms: 10_000,
            drain_ms: 0,
            watch_config: false,
            worker_threads: 0,
            runtime: Runtime::default(),
            max_connections: 16_384,
            header_read_timeout_ms: 30_000,
            body_read_timeout_ms: 30_000,
            admin_tokens: Vec::new(),
            trusted_proxies: Vec::new(),
            forwarded_header: ForwardedHeader::default(),
            tls: ServerTls::default(),
            cors: Cors::default(),
        }
    }
}

impl Server {
    pub(super) fn validate(&self, issues: &mut Issues) {
        if self.rpc_paths.is_empty() {
            issues.add(
                "server.rpc_paths".into(),
                "must name at least one path".into(),
            );
        }
        for (i, p) in self.rpc_paths.iter().enumerate() {
            if let Err(why) = rpc_path_problem(p) {
                issues.add(format!("server.rpc_paths[{i}]"), format!("{p:?}: {why}"));
            }
        }
        for (i, t) in self.admin_tokens.iter().enumerate() {
            if t.len() < 16 || !t.bytes().all(|b| b.is_ascii_graphic()) {
                issues.add(
                    format!("server.admin_tokens[{i}]"),
                    "must be at least 16 visible ASCII characters".into(),
                );
            }
        }
        for (i, c) in self.trusted_proxies.iter().enumerate() {
            if crate::http::forwarded::parse_cidr(c).is_none() {
                issues.add(
                    format!("server.trusted_proxies[{i}]"),
                    format!("{c:?} is not an address or CIDR (\"10.0.0.0/8\", \"::1\")"),
                );
            }
        }
        if self.tls.cert.is_empty() != self.tls.key.is_empty() {
            issues.add(
                "server.tls".into(),
                "cert and key are set together, or neither".into(),
            );
        } else if self.tls.enabled() {
            if let Err(e) = crate::config::tls::server_config(&self.tls) {
                issues.add(format!("server.tls.{}", e.key), e.message);
            }
        } else if !self.tls.client_ca.is_empty() {
            issues.add(
                "server.tls.client_ca".into(),
                "needs server.tls.cert and server.tls.key".into(),
            );
        }
        let wildcard = self.cors.allow_origins.iter().any(|o| o == "*");
        for (i, o) in self.cors.allow_origins.iter().enumerate() {
            let valid = o == "*"
                || (axum::http::HeaderValue::from_str(o).is_ok()
                    && matches!(o.parse::<axum::http::Uri>(), Ok(u)
                        if u.scheme().is_some() && u.host().is_some()
                            && u.path_and_query().is_none_or(|p| p.as_str() == "/")
                            && !o.ends_with('/')));
            if !valid {
                issues.add(
                    format!("server.cors.allow_origins[{i}]"),
                    format!("{o:?} is not an origin (scheme://host[:port]) or \"*\""),
                );
            }
        }
        if wildcard && self.cors.allow_origins.len() > 1 {
            issues.add(
                "server.cors.allow_origins".into(),
                "\"*\" stands alone".into(),
            );
        }
        for (key, v) in [
            ("server.max_body_bytes", self.max_body_bytes as u64),
            ("server.max_batch_len", self.max_batch_len as u64),
            ("server.max_connections", self.max_connections as u64),
            (
                "server.max_batch_concurrency",
                self.max_batch_concurrency as u64,
            ),
            ("server.header_read_timeout_ms", self.header_read_timeout_ms),
            ("server.body_read_timeout_ms", self.body_read_timeout_ms),
        ] {
            if v == 0 {
                issues.add(key.into(), "must be positive".into());
            }
        }
    }
}
