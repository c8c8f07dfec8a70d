//! The destination policy of a URL a caller chose (a push-notification webhook): which URLs it
//! may have, and which addresses it must not reach unless private destinations are allowed
//! (`a2a.push_allow_private`), against server-side request forgery.
//!
//! A request resolves the host once, checks every address the answer holds against
//! [`ranges`](super::ranges), and dials exactly the addresses it checked
//! ([`Checked`](super::Checked)): a name that answers a public address to the check and a
//! private one to a second lookup (DNS rebinding) never gets the second lookup. The resolver is
//! held by the [`Policy`] so tests can answer each lookup differently.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use axum::http::Uri;

use crate::model::error::GatewayError;

pub(crate) use super::ranges::is_blocked;

/// A lookup of a host and port: the addresses it answers.
pub(crate) type Lookup = Pin<Box<dyn Future<Output = std::io::Result<Vec<SocketAddr>>> + Send>>;

/// Looks a host name up; production's is tokio's `lookup_host` (the system resolver).
pub(crate) type Resolver = Arc<dyn Fn(String, u16) -> Lookup + Send + Sync>;

/// The system resolver.
fn system_resolver() -> Resolver {
    Arc::new(|host: String, port: u16| -> Lookup {
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host.as_str(), port))
                .await?
                .collect())
        })
    })
}

/// What a caller-chosen destination may reach, and how its host is looked up.
#[derive(Clone)]
pub(crate) struct Policy {
    allow_private: bool,
    resolver: Resolver,
    /// Which addresses are refused: [`is_blocked`], but for tests that must allow one loopback
    /// address to have something to connect to.
    blocked: fn(IpAddr) -> bool,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("allow_private", &self.allow_private)
            .finish_non_exhaustive()
    }
}

impl Policy {
    /// The policy of `a2a.push_allow_private`, looking names up with the system resolver.
    pub(crate) fn new(allow_private: bool) -> Self {
        Policy {
            allow_private,
            resolver: system_resolver(),
            blocked: is_blocked,
        }
    }

    /// A policy with its own resolver and block list (tests).
    #[cfg(test)]
    pub(crate) fn with(
        allow_private: bool,
        resolver: Resolver,
        blocked: fn(IpAddr) -> bool,
    ) -> Self {
        Policy {
            allow_private,
            resolver,
            blocked,
        }
    }

    /// Whether a webhook configuration may have `url`: its shape always; where it leads unless
    /// private destinations are allowed (a name that does not resolve is then accepted, as a
    /// delivery resolves it again).
    pub(crate) async fn admit(&self, url: &str) -> Result<(), GatewayError> {
        if self.allow_private {
            return check_url(url).map(drop);
        }
        self.resolve(url).await.map(drop)
    }

    /// Resolves `url`'s host once and checks every address it answers: the addresses to dial,
    /// none of them refused (unless private destinations are allowed).
    pub(crate) async fn resolve(&self, url: &str) -> Result<Vec<SocketAddr>, GatewayError> {
        let (host, port) = check_url(url)?;
        let refuse = |what: String| {
            GatewayError::InvalidParams(format!(
                "webhook url {url:?} {what}: loopback, private, link-local and other \
                 special-purpose addresses are refused (a2a.push_allow_private allows them)"
            ))
        };
        let lower = host.to_ascii_lowercase();
        if !self.allow_private && (lower == "localhost" || lower.ends_with(".localhost")) {
            return Err(refuse("names localhost".into()));
        }
        let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => (self.resolver)(host.clone(), port).await.map_err(|e| {
                GatewayError::InvalidParams(format!("webhook host {host:?} does not resolve: {e}"))
            })?,
        };
        if addrs.is_empty() {
            return Err(refuse("resolves to nothing".into()));
        }
        if self.allow_private {
            return Ok(addrs);
        }
        match addrs.iter().find(|a| (self.blocked)(a.ip())) {
            Some(a) => Err(refuse(format!("reaches {}", a.ip()))),
            None => Ok(addrs),
        }
    }
}

/// A webhook URL checked for shape: `http://host[:port]/path`, no user info. Returns the host
/// and port to resolve.
pub(crate) fn check_url(url: &str) -> Result<(String, u16), GatewayError> {
    let bad = |m: &str| GatewayError::InvalidParams(format!("webhook url {url:?}: {m}"));
    let uri: Uri = url.parse().map_err(|_| bad("not a URL"))?;
    let default_port = match uri.scheme_str() {
        Some("http") => 80,
        Some("https") => 443,
        _ => return Err(bad("must be an http:// or https:// URL")),
    };
    let authority = uri.authority().ok_or_else(|| bad("has no host"))?;
    if authority.as_str().contains('@') {
        return Err(bad("must not carry user info"));
    }
    let host = authority.host().trim_matches(['[', ']']).to_owned();
    if host.is_empty() {
        return Err(bad("has no host"));
    }
    // A DNS name or an IP literal, as TLS names a server: not `134744072` or `0x7f.1`, which a
    // resolver reads as an address in a form no certificate names (and the connect refuses).
    if rustls::pki_types::ServerName::try_from(host.as_str()).is_err() {
        return Err(bad("host must be a DNS name or an IP address"));
    }
    Ok((host, authority.port_u16().unwrap_or(default_port)))
}

/// A resolver that answers each lookup with the next of `answers` (the last one again when
/// they run out).
#[cfg(test)]
pub(crate) fn answering(answers: Vec<Vec<IpAddr>>) -> Resolver {
    let next = Arc::new(std::sync::Mutex::new(
        answers.into_iter().collect::<Vec<_>>(),
    ));
    Arc::new(move |_host, port| -> Lookup {
        let mut left = next.lock().unwrap();
        let ips = if left.len() > 1 {
            left.remove(0)
        } else {
            left.first().cloned().unwrap_or_default()
        };
        let addrs = ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect();
        Box::pin(async move { Ok(addrs) })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(r: Result<impl std::fmt::Debug, GatewayError>) -> bool {
        matches!(r, Err(GatewayError::InvalidParams(_)))
    }

    #[tokio::test]
    async fn webhook_urls_are_checked_before_use() {
        let strict = Policy::new(false);
        let lax = Policy::new(true);
        for (url, guard) in [
            ("http://127.0.0.1:9/hook", &strict),
            ("http://localhost/hook", &strict),
            ("http://[::1]:8080/", &strict),
            ("http://169.254.169.254/latest", &strict),
            ("ftp://example.com/", &lax),
            ("http://user:pw@example.com/", &lax),
            ("not a url", &lax),
        ] {
            assert!(refused(guard.admit(url).await), "{url}");
        }
        assert!(lax.admit("http://127.0.0.1:9/hook").await.is_ok());
        assert!(strict.admit("http://93.184.216.34/hook").await.is_ok());
        assert_eq!(
            strict.resolve("https://[2606:4700::1111]/h").await.unwrap(),
            vec!["[2606:4700::1111]:443".parse().unwrap()]
        );
    }

    #[tokio::test]
    async fn special_purpose_literals_are_refused() {
        let strict = Policy::new(false);
        for url in [
            "http://[64:ff9b::7f00:1]/hook",
            "http://[64:ff9b::10.0.0.1]/hook",
            "http://[64:ff9b:1::1]/hook",
            "http://[2002:7f00:1::1]/hook",
            "http://[2002:808:808::1]/hook",
            "http://[::ffff:127.0.0.1]/hook",
            "http://198.18.0.1/hook",
            "http://198.19.255.255/hook",
            "http://240.0.0.1/hook",
            "http://255.255.255.255/hook",
        ] {
            assert!(refused(strict.admit(url).await), "{url}");
        }
    }

    #[tokio::test]
    async fn a_host_in_a_form_no_certificate_names_is_refused() {
        // A resolver may read these as 8.8.8.8 or 127.0.0.1; TLS cannot name them.
        let open = Policy::new(true);
        for url in [
            "https://134744072/hook",
            "http://134744072/hook",
            "https://0x7f.1/hook",
            "https://*.wild.example/hook",
        ] {
            assert!(refused(open.admit(url).await), "{url}");
        }
        assert!(!refused(open.admit("https://hook.example/x?t=1").await));
    }

    #[tokio::test]
    async fn a_name_is_refused_when_any_of_its_addresses_is() {
        let ips = |s: &[&str]| {
            s.iter()
                .map(|i| i.parse().unwrap())
                .collect::<Vec<IpAddr>>()
        };
        let guard = Policy::with(
            false,
            answering(vec![ips(&["93.184.216.34", "10.0.0.1"])]),
            is_blocked,
        );
        assert!(refused(guard.resolve("http://hook.example/").await));
        let guard = Policy::with(false, answering(vec![vec![]]), is_blocked);
        assert!(refused(guard.resolve("http://hook.example/").await));
        // One lookup per check: the second check sees the second answer.
        let guard = Policy::with(
            false,
            answering(vec![ips(&["93.184.216.34"]), ips(&["127.0.0.1"])]),
            is_blocked,
        );
        assert_eq!(
            guard.resolve("http://hook.example:8080/").await.unwrap(),
            vec!["93.184.216.34:8080".parse().unwrap()]
        );
        assert!(refused(guard.resolve("http://hook.example:8080/").await));
    }
}
