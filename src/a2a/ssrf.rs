//! The server-side request forgery guard of push-notification webhooks: which URLs a webhook
//! may have, and which addresses it must not reach unless `a2a.push_allow_private`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use axum::http::Uri;

use crate::model::error::GatewayError;

/// Whether an address is one a webhook must not reach by default.
pub(crate) fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => private_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => private_v4(v4),
            None => {
                let s = v6.segments();
                v6.is_loopback()
                    || v6.is_unspecified()
                    || v6.is_multicast()
                    || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
                    || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
                    || v6 == Ipv6Addr::from([0, 0, 0, 0, 0, 0, 0, 1])
            }
        },
    }
}

fn private_v4(v4: Ipv4Addr) -> bool {
    let o = v4.octets();
    v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_multicast()
        || o[0] == 0
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // CGNAT 100.64.0.0/10
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
    Ok((host, authority.port_u16().unwrap_or(default_port)))
}

/// Resolves a webhook's host and refuses it when any address it names is private (unless
/// `allow_private`).
pub(crate) async fn check_target(url: &str, allow_private: bool) -> Result<(), GatewayError> {
    let (host, port) = check_url(url)?;
    if allow_private {
        return Ok(());
    }
    let refuse = |what: String| {
        GatewayError::InvalidParams(format!(
            "webhook url {url:?} {what}: loopback, private and link-local webhooks are refused \
             (a2a.push_allow_private allows them)"
        ))
    };
    let lower = host.to_ascii_lowercase();
    if lower == "localhost" || lower.ends_with(".localhost") {
        return Err(refuse("names localhost".into()));
    }
    let addrs: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| {
                GatewayError::InvalidParams(format!("webhook host {host:?} does not resolve: {e}"))
            })?
            .map(|a| a.ip())
            .collect(),
    };
    match addrs.iter().find(|ip| is_private(**ip)) {
        Some(ip) => Err(refuse(format!("reaches {ip}"))),
        None if addrs.is_empty() => Err(refuse("resolves to nothing".into())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_ranges_are_recognised() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "172.32.0.1", "100.128.0.1", "2001:4860::8888"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn webhook_urls_are_checked_before_use() {
        for (url, allow) in [
            ("http://127.0.0.1:9/hook", false),
            ("http://localhost/hook", false),
            ("http://[::1]:8080/", false),
            ("http://169.254.169.254/latest", false),
            ("ftp://example.com/", true),
            ("http://user:pw@example.com/", true),
            ("not a url", true),
        ] {
            assert!(
                matches!(
                    check_target(url, allow).await,
                    Err(GatewayError::InvalidParams(_))
                ),
                "{url}"
            );
        }
        assert!(check_target("http://127.0.0.1:9/hook", true).await.is_ok());
        assert!(check_target("http://93.184.216.34/hook", false)
            .await
            .is_ok());
    }
}
