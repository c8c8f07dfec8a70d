//! What a reverse proxy says about the hop it adds (RFC 9110 §7.6, RFC 7239): hop-by-hop
//! headers removed, `Via`, `X-Forwarded-*` and `Forwarded` added. A client's own forwarding
//! headers are believed only from `server.trusted_proxies`; anyone else could claim any address.
//!
//! Pure header work, apart from the I/O of [`passthrough`](crate::passthrough).

use std::net::{IpAddr, SocketAddr};

use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use ipnet::IpNet;

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
const PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");

/// `10.0.0.0/8`, `::1/128`, or a bare address (one host).
pub fn parse_cidr(s: &str) -> Option<IpNet> {
    s.parse::<IpNet>()
        .ok()
        .or_else(|| s.parse::<IpAddr>().ok().map(IpNet::from))
}

/// The peers whose forwarding headers are believed.
#[derive(Clone, Debug, Default)]
pub struct Trusted(Vec<IpNet>);

impl Trusted {
    /// From validated `server.trusted_proxies`.
    pub fn new(cidrs: &[String]) -> Self {
        Trusted(cidrs.iter().filter_map(|c| parse_cidr(c)).collect())
    }

    /// Whether `ip` is one of them (an IPv4 address mapped into IPv6 counts as itself).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.0.iter().any(|n| n.contains(&ip))
    }
}

/// The hop being added: who connected, over what, asking for which host.
#[derive(Debug, Clone)]
pub struct Hop<'a> {
    /// The client's address.
    pub peer: SocketAddr,
    /// `"http"` or `"https"`: how the client reached us.
    pub proto: &'static str,
    /// The HTTP version the client spoke, as `Via` writes it (`"1.1"`, `"2"`).
    pub version: &'static str,
    /// Whether `peer` is a trusted proxy.
    pub trusted: bool,
    /// The `Host` the client asked for (HTTP/2's `:authority`), if any.
    pub host: Option<&'a str>,
}

/// Removes the hop-by-hop headers (RFC 9110 §7.6.1): those named by `Connection`, and the
/// standard ones. `TE: trailers` and an upgrade being tunnelled are the caller's to put back.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for n in named {
        headers.remove(n);
    }
    for n in [
        header::CONNECTION,
        KEEP_ALIVE,
        PROXY_CONNECTION,
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(n);
    }
}

/// Adds this hop to a request's forwarding headers: `X-Forwarded-For` and `Forwarded` extended
/// (trusted peer) or replaced (anyone else), `X-Forwarded-Proto` and `X-Forwarded-Host` set
/// unless a trusted peer set them, and `Via`.
pub fn add_request_hop(headers: &mut HeaderMap, hop: &Hop<'_>) {
    let ip = hop.peer.ip();
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    let prior_xff = hop
        .trusted
        .then(|| joined(headers, &X_FORWARDED_FOR))
        .flatten();
    let xff = match prior_xff {
        Some(p) => format!("{p}, {ip}"),
        None => ip.to_string(),
    };
    set(headers, X_FORWARDED_FOR, &xff);
    let node = match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("\"[{v6}]\""),
    };
    let mut element = format!("for={node};proto={}", hop.proto);
    if let Some(h) = hop.host.filter(|h| is_token_or_host(h)) {
        element.push_str(";host=");
        element.push_str(&quote_if_needed(h));
    }
    let prior_fwd = hop
        .trusted
        .then(|| joined(headers, &header::FORWARDED))
        .flatten();
    let forwarded = match prior_fwd {
        Some(p) => format!("{p}, {element}"),
        None => element,
    };
    set(headers, header::FORWARDED, &forwarded);
    if !(hop.trusted && headers.contains_key(&X_FORWARDED_PROTO)) {
        set(headers, X_FORWARDED_PROTO, hop.proto);
    }
    if !(hop.trusted && headers.contains_key(&X_FORWARDED_HOST)) {
        match hop.host {
            Some(h) => set(headers, X_FORWARDED_HOST, h),
            None => {
                headers.remove(&X_FORWARDED_HOST);
            }
        }
    }
    add_via(headers, hop.version);
}

/// Appends `Via: <version> wiregate` (also on answers going back to the client).
pub fn add_via(headers: &mut HeaderMap, version: &str) {
    let ours = format!("{version} wiregate");
    let via = match joined(headers, &header::VIA) {
        Some(p) => format!("{p}, {ours}"),
        None => ours,
    };
    set(headers, header::VIA, &via);
}

/// Every value of `name`, joined with `, ` (a list header may arrive split over lines).
fn joined(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    let parts: Vec<&str> = headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

fn set(headers: &mut HeaderMap, name: HeaderName, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        headers.insert(name, v);
    } else {
        headers.remove(name);
    }
}

/// A `Host` value safe to put in a `Forwarded` element (host, port, brackets only).
fn is_token_or_host(h: &str) -> bool {
    !h.is_empty()
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~:[]".contains(&b))
}

fn quote_if_needed(h: &str) -> String {
    if h.contains([':', '[', ']']) {
        format!("\"{h}\"")
    } else {
        h.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(peer: &str, trusted: bool) -> Hop<'static> {
        Hop {
            peer: peer.parse().unwrap(),
            proto: "https",
            version: "1.1",
            trusted,
            host: Some("gw.example:8443"),
        }
    }

    fn with(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn untrusted_claims_are_replaced() {
        let mut h = with(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("forwarded", "for=6.6.6.6"),
            ("x-forwarded-proto", "gopher"),
        ]);
        add_request_hop(&mut h, &hop("192.0.2.7:5000", false));
        assert_eq!(h["x-forwarded-for"], "192.0.2.7");
        assert_eq!(
            h["forwarded"],
            "for=192.0.2.7;proto=https;host=\"gw.example:8443\""
        );
        assert_eq!(h["x-forwarded-proto"], "https");
        assert_eq!(h["x-forwarded-host"], "gw.example:8443");
        assert_eq!(h["via"], "1.1 wiregate");
    }

    #[test]
    fn trusted_claims_are_extended() {
        let mut h = with(&[
            ("x-forwarded-for", "203.0.113.1"),
            ("x-forwarded-for", "198.51.100.2"),
            ("forwarded", "for=203.0.113.1"),
            ("x-forwarded-proto", "https"),
            ("via", "1.1 edge"),
        ]);
        let mut hp = hop("[::ffff:10.0.0.5]:5000", true);
        hp.proto = "http";
        add_request_hop(&mut h, &hp);
        assert_eq!(h["x-forwarded-for"], "203.0.113.1, 198.51.100.2, 10.0.0.5");
        assert!(h["forwarded"]
            .to_str()
            .unwrap()
            .starts_with("for=203.0.113.1, for=10.0.0.5;proto=http"));
        assert_eq!(h["x-forwarded-proto"], "https");
        assert_eq!(h["via"], "1.1 edge, 1.1 wiregate");
    }

    #[test]
    fn ipv6_peers_are_quoted() {
        let mut h = HeaderMap::new();
        add_request_hop(&mut h, &hop("[2001:db8::1]:5000", false));
        assert!(h["forwarded"]
            .to_str()
            .unwrap()
            .starts_with("for=\"[2001:db8::1]\";"));
    }

    #[test]
    fn hop_by_hop_headers_go() {
        let mut h = with(&[
            ("connection", "keep-alive, x-secret-hop"),
            ("x-secret-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("proxy-authorization", "Basic Zm9v"),
            ("x-end-to-end", "kept"),
        ]);
        strip_hop_by_hop(&mut h);
        let names: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["x-end-to-end"]);
    }

    #[test]
    fn trusted_cidrs() {
        let t = Trusted::new(&["10.0.0.0/8".into(), "::1".into()]);
        assert!(t.contains("10.2.3.4".parse().unwrap()));
        assert!(t.contains("::ffff:10.2.3.4".parse().unwrap()));
        assert!(t.contains("::1".parse().unwrap()));
        assert!(!t.contains("127.0.0.1".parse().unwrap()));
        assert!(parse_cidr("10.0.0.0/33").is_none());
    }
}
