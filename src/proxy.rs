//! Upstream clients: one keep-alive connection pool per upstream, timeouts and size limits.
//!
//! This module owns the sockets to upstreams and nothing else; what goes into a request body and
//! what comes out of an answer is decided in `wire::translate`.

use std::time::Duration;

use axum::http::{header, HeaderValue, Method, Request as HttpRequest, StatusCode, Uri};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::config::{Dialect, Upstream};
use crate::error::GatewayError;

/// A pooled HTTP/1.1 client for one upstream.
#[derive(Debug, Clone)]
pub struct UpstreamClient {
    /// The upstream's configuration.
    pub config: Upstream,
    uri: Uri,
    client: Client<HttpConnector, Full<Bytes>>,
    max_body: usize,
}

/// What an upstream answered.
#[derive(Debug)]
pub struct Answer {
    /// Its HTTP status.
    pub status: StatusCode,
    /// Its body, read whole (bounded).
    pub body: Bytes,
}

impl UpstreamClient {
    /// A client for a validated upstream.
    pub fn new(config: Upstream, max_body: usize) -> Self {
        let uri: Uri = config
            .url
            .parse()
            .expect("upstream URLs are validated at start");
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(config.timeout()));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(256)
            .build(connector);
        UpstreamClient {
            config,
            uri,
            client,
            max_body,
        }
    }

    /// The upstream's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The upstream's dialect.
    pub fn dialect(&self) -> Dialect {
        self.config.dialect
    }

    /// POSTs a JSON body, within the upstream's timeout, and reads the whole answer.
    pub async fn post(
        &self,
        body: Bytes,
        authorization: Option<&str>,
    ) -> Result<Answer, GatewayError> {
        let mut req = HttpRequest::builder()
            .method(Method::POST)
            .uri(self.uri.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json");
        if let Some(a) = authorization.and_then(|a| HeaderValue::from_str(a).ok()) {
            let mut a = a;
            a.set_sensitive(true);
            req = req.header(header::AUTHORIZATION, a);
        }
        let req = req.body(Full::new(body)).map_err(|e| self.unreachable(e))?;
        let exchange = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| self.unreachable(e))?;
            let status = resp.status();
            let body = Limited::new(resp.into_body(), self.max_body)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        self.bad_envelope(status, format!("answer exceeds {} bytes", self.max_body))
                    } else {
                        self.unreachable(e)
                    }
                })?
                .to_bytes();
            Ok(Answer { status, body })
        };
        match tokio::time::timeout(self.config.timeout(), exchange).await {
            Ok(r) => r,
            Err(_) => Err(GatewayError::UpstreamTimeout {
                upstream: self.config.name.clone(),
                timeout_ms: self.config.timeout_ms,
            }),
        }
    }

    /// Whether a TCP connection to the upstream can be opened now.
    pub async fn reachable(&self) -> bool {
        let host = self
            .uri
            .host()
            .unwrap_or("127.0.0.1")
            .trim_matches(['[', ']']);
        let port = self.uri.port_u16().unwrap_or(80);
        matches!(
            tokio::time::timeout(
                Duration::from_secs(1),
                tokio::net::TcpStream::connect((host, port))
            )
            .await,
            Ok(Ok(_))
        )
    }

    fn unreachable(&self, e: impl std::fmt::Display + std::fmt::Debug) -> GatewayError {
        // hyper's Display is terse ("client error (Connect)"); Debug names the cause.
        let detail = format!("{e}; {e:?}");
        GatewayError::UpstreamUnreachable {
            upstream: self.config.name.clone(),
            detail: detail.chars().take(300).collect(),
        }
    }

    /// The error for an answer that is not a valid envelope of this upstream's dialect.
    pub fn bad_envelope(&self, status: StatusCode, detail: impl Into<String>) -> GatewayError {
        GatewayError::UpstreamBadEnvelope {
            upstream: self.config.name.clone(),
            dialect: self.config.dialect.as_str(),
            status: status.as_u16(),
            detail: detail.into(),
        }
    }
}
