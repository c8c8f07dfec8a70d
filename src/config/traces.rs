//! `[tracing]`: OpenTelemetry spans of every hop, exported over OTLP.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Issues;

/// `[tracing]`: off until `otlp_endpoint` names a collector.
#[derive(Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Tracing {
    /// `http://collector:4318` or `https://collector:4318` (OTLP/HTTP, protobuf, to
    /// `/v1/traces`), `grpc://collector:4317` (OTLP/gRPC over cleartext HTTP/2) or
    /// `grpcs://collector:4317` (OTLP/gRPC over TLS, ALPN `h2`); empty: no spans. An `https://`
    /// or `grpcs://` collector is verified against `ca_file` or the platform's roots: the
    /// export's `headers` usually carry the collector's API key, which then travels encrypted.
    pub otlp_endpoint: String,
    /// PEM CAs an `https://` or `grpcs://` collector is verified against (a private CA's);
    /// empty: the platform's roots. There is no way to turn verification off.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ca_file: String,
    /// Headers sent with every export (a collector's token, say); never logged.
    pub headers: BTreeMap<String, String>,
    /// The share of the traces the gateway starts that are recorded, 0 to 1; a client's
    /// `traceparent` sampled flag is followed.
    pub sample_ratio: f64,
    /// The resource's `service.name`; `service.instance.id` is `[cluster].node_id`, or the host
    /// name and the process id.
    pub service_name: String,
    /// Spans waiting for export; beyond, new spans are dropped and counted
    /// (`wiregate_trace_spans_dropped_total`).
    pub queue_max: usize,
    /// How often the waiting spans are sent (sooner when 512 are waiting).
    pub export_interval_ms: u64,
}

impl Default for Tracing {
    fn default() -> Self {
        Tracing {
            otlp_endpoint: String::new(),
            ca_file: String::new(),
            headers: BTreeMap::new(),
            sample_ratio: 1.0,
            service_name: "wiregate".into(),
            queue_max: 4096,
            export_interval_ms: 1000,
        }
    }
}

/// The header values are credentials: they are never printed, nor the endpoint's user info
/// or query.
impl std::fmt::Debug for Tracing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracing")
            .field(
                "otlp_endpoint",
                &crate::util::redact::url(&self.otlp_endpoint).to_string(),
            )
            .field("ca_file", &self.ca_file)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("sample_ratio", &self.sample_ratio)
            .field("service_name", &self.service_name)
            .field("queue_max", &self.queue_max)
            .field("export_interval_ms", &self.export_interval_ms)
            .finish()
    }
}

/// How spans reach the collector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// OTLP/HTTP with protobuf bodies, POSTed to `/v1/traces`.
    Http,
    /// OTLP/gRPC, the `TraceService/Export` call over HTTP/2 (cleartext, or TLS with ALPN
    /// `h2`).
    Grpc,
}

impl Tracing {
    /// Whether spans are recorded and exported.
    pub fn enabled(&self) -> bool {
        !self.otlp_endpoint.is_empty()
    }

    /// The export's protocol and the URL it POSTs to, when `otlp_endpoint` is one (an
    /// `https://` URL for a collector reached over TLS).
    pub fn target(&self) -> Option<(OtlpProtocol, String)> {
        // User info means nothing to a collector (its credentials go in `headers`), and the
        // client would name its connections by it in its own log lines.
        let e = crate::util::redact::without_userinfo(self.otlp_endpoint.trim_end_matches('/'));
        let e = &*e;
        let grpc = match (e.strip_prefix("grpc://"), e.strip_prefix("grpcs://")) {
            (Some(rest), _) => Some(("http", rest)),
            (_, Some(rest)) => Some(("https", rest)),
            _ => None,
        };
        if let Some((scheme, rest)) = grpc {
            let uri: axum::http::Uri = format!("{scheme}://{rest}").parse().ok()?;
            uri.host()?;
            return Some((
                OtlpProtocol::Grpc,
                format!(
                    "{scheme}://{}/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                    uri.authority()?
                ),
            ));
        }
        let uri: axum::http::Uri = e.parse().ok()?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return None;
        }
        // An endpoint given with its path (`…/v1/traces`) is taken as it is; a base URL gets
        // the signal's path, as OTEL_EXPORTER_OTLP_ENDPOINT does.
        let url = match uri.path() {
            "" | "/" => format!("{e}/v1/traces"),
            _ => e.to_owned(),
        };
        Some((OtlpProtocol::Http, url))
    }

    /// The client TLS configuration for the collector: `None` for a cleartext endpoint (or
    /// none at all), else `ca_file`'s CAs or the platform's roots.
    pub fn tls(&self) -> Result<Option<Arc<rustls::ClientConfig>>, super::tls::TlsProblem> {
        let url = self.target().map(|(_, url)| url).unwrap_or_default();
        super::tls::client_config_for(&url, &self.ca_file, "", "")
    }

    pub(super) fn validate(&self, issues: &mut Issues) {
        match self.target() {
            None if self.enabled() => issues.add(
                "tracing.otlp_endpoint".into(),
                "must be http://host:port or https://host:port (OTLP/HTTP), or grpc://host:port \
                 or grpcs://host:port (OTLP/gRPC, grpcs over TLS)"
                    .into(),
            ),
            _ => {
                if let Err(e) = self.tls() {
                    let https = self
                        .target()
                        .is_some_and(|(_, url)| url.starts_with("https://"));
                    let message = match https {
                        true => e.message,
                        false => "applies to https:// and grpcs:// endpoints only".into(),
                    };
                    issues.add(format!("tracing.{}", e.key), message);
                }
            }
        }
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            issues.add(
                "tracing.sample_ratio".into(),
                "must be between 0 and 1".into(),
            );
        }
        if self.queue_max == 0 || self.queue_max > 1 << 20 {
            issues.add("tracing.queue_max".into(), "must be 1 to 1048576".into());
        }
        if !(10..=60_000).contains(&self.export_interval_ms) {
            issues.add(
                "tracing.export_interval_ms".into(),
                "must be 10 to 60000".into(),
            );
        }
        if self.service_name.trim().is_empty() {
            issues.add("tracing.service_name".into(), "must not be empty".into());
        }
        for (name, value) in &self.headers {
            let ok = axum::http::HeaderName::from_bytes(name.as_bytes()).is_ok()
                && axum::http::HeaderValue::from_str(value).is_ok();
            if !ok {
                issues.add(
                    format!("tracing.headers.{name}"),
                    "must be a valid header name and value".into(),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issues(t: &Tracing) -> Vec<String> {
        let mut i = Issues::default();
        t.validate(&mut i);
        i.0.into_iter().map(|i| i.to_string()).collect()
    }

    #[test]
    fn off_by_default() {
        let t = Tracing::default();
        assert!(!t.enabled());
        assert!(issues(&t).is_empty());
    }

    #[test]
    fn endpoints_name_their_protocol_and_path() {
        let with = |e: &str| {
            Tracing {
                otlp_endpoint: e.into(),
                ..Tracing::default()
            }
            .target()
        };
        assert_eq!(
            with("http://c:4318"),
            Some((OtlpProtocol::Http, "http://c:4318/v1/traces".into()))
        );
        assert_eq!(
            with("https://c/otlp/v1/traces"),
            Some((OtlpProtocol::Http, "https://c/otlp/v1/traces".into()))
        );
        assert_eq!(
            with("grpc://c:4317"),
            Some((
                OtlpProtocol::Grpc,
                "http://c:4317/opentelemetry.proto.collector.trace.v1.TraceService/Export".into()
            ))
        );
        assert_eq!(
            with("grpcs://c:4317/"),
            Some((
                OtlpProtocol::Grpc,
                "https://c:4317/opentelemetry.proto.collector.trace.v1.TraceService/Export".into()
            ))
        );
        assert_eq!(with("ftp://c"), None);
        assert_eq!(with("c:4318"), None);
    }

    #[test]
    fn bad_keys_are_named_and_header_values_never_printed() {
        let t = Tracing {
            otlp_endpoint: "udp://x".into(),
            sample_ratio: 1.5,
            queue_max: 0,
            export_interval_ms: 0,
            headers: [("bad name".to_owned(), "secret-token".to_owned())].into(),
            ..Tracing::default()
        };
        let found = issues(&t).join("\n");
        for key in [
            "tracing.otlp_endpoint",
            "tracing.sample_ratio",
            "tracing.queue_max",
            "tracing.export_interval_ms",
            "tracing.headers.bad name",
        ] {
            assert!(found.contains(key), "{key} in {found}");
        }
        assert!(!found.contains("secret-token"));
        assert!(!format!("{t:?}").contains("secret-token"));
    }
}
