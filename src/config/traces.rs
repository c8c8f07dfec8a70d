//! `[tracing]`: OpenTelemetry spans of every hop, exported over OTLP.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Issues;

/// `[tracing]`: off until `otlp_endpoint` names a collector.
#[derive(Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Tracing {
    /// `http://collector:4318` (OTLP/HTTP, protobuf, to `/v1/traces`; `https://` verified as any
    /// upstream) or `grpc://collector:4317` (OTLP/gRPC over cleartext HTTP/2); empty: no spans.
    pub otlp_endpoint: String,
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
            headers: BTreeMap::new(),
            sample_ratio: 1.0,
            service_name: "wiregate".into(),
            queue_max: 4096,
            export_interval_ms: 1000,
        }
    }
}

/// The header values are credentials: they are never printed.
impl std::fmt::Debug for Tracing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracing")
            .field("otlp_endpoint", &self.otlp_endpoint)
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
    /// OTLP/gRPC, the `TraceService/Export` call over cleartext HTTP/2.
    Grpc,
}

impl Tracing {
    /// Whether spans are recorded and exported.
    pub fn enabled(&self) -> bool {
        !self.otlp_endpoint.is_empty()
    }

    /// The export's protocol and the URL it POSTs to, when `otlp_endpoint` is one.
    pub fn target(&self) -> Option<(OtlpProtocol, String)> {
        let e = self.otlp_endpoint.trim_end_matches('/');
        if let Some(rest) = e.strip_prefix("grpc://") {
            let uri: axum::http::Uri = format!("http://{rest}").parse().ok()?;
            uri.host()?;
            return Some((
                OtlpProtocol::Grpc,
                format!(
                    "http://{}/opentelemetry.proto.collector.trace.v1.TraceService/Export",
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

    pub(super) fn validate(&self, issues: &mut Issues) {
        if self.enabled() && self.target().is_none() {
            issues.add(
                "tracing.otlp_endpoint".into(),
                "must be http://host:port or https://host:port (OTLP/HTTP) or grpc://host:port \
                 (OTLP/gRPC)"
                    .into(),
            );
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
