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

    /// Whether there are none (nobody's forwarding headers are believed).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
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
    for n in connection_named(headers) {
        headers.remove(n);
    }
    for n in HOP_BY_HOP {
        headers.remove(n);
    }
}

/// The standard hop-by-hop headers.
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    KEEP_ALIVE,
    PROXY_CONNECTION,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

fn is_hop_by_hop(name: &HeaderName) -> bool {
    is_hop_by_hop_name(name.as_str().as_bytes())
}

/// The same for a name as it came on the wire, in any case.
pub fn is_hop_by_hop_name(name: &[u8]) -> bool {
    // Names, not `HOP_BY_HOP`: a `const` of `HeaderName`s is built and dropped at every use.
    const NAMES: [&str; 9] = [
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    ];
    NAMES
        .iter()
        .any(|h| h.as_bytes().eq_ignore_ascii_case(name))
}

/// The names `Connection` lists: hop-by-hop headers of this connection only.
pub fn connection_named(headers: &impl Values) -> Vec<HeaderName> {
    let mut named = Vec::new();
    headers.each(&header::CONNECTION, &mut |v| {
        named.extend(
            v.split(|b| *b == b',')
                .filter_map(|t| HeaderName::from_bytes(t.trim_ascii()).ok()),
        )
    });
    named
}

/// A request's headers as this module reads them: a header map, or the HTTP/1 loop's head kept
/// as the client's bytes (see [`passthrough::raw`](crate::passthrough::raw)).
pub trait Values {
    /// Calls `f` with every value of `name`, in order.
    fn each(&self, name: &HeaderName, f: &mut dyn FnMut(&[u8]));

    /// Whether there is any value of `name`.
    fn has(&self, name: &HeaderName) -> bool {
        let mut any = false;
        self.each(name, &mut |_| any = true);
        any
    }
}

impl Values for HeaderMap {
    fn each(&self, name: &HeaderName, f: &mut dyn FnMut(&[u8])) {
        for v in self.get_all(name) {
            f(v.as_bytes());
        }
    }

    fn has(&self, name: &HeaderName) -> bool {
        self.contains_key(name)
    }
}

impl Values for super::headers::Headers<'_> {
    fn each(&self, name: &HeaderName, f: &mut dyn FnMut(&[u8])) {
        for v in self.get_all(name.as_str()) {
            f(v);
        }
    }
}

/// Whether a request's header goes upstream as the client sent it: not hop-by-hop (the
/// standard ones, and those in `named`, see [`connection_named`]), not one the upstream
/// request states itself (`Host`, the body's framing), and not one [`write_request_hop`]
/// writes for this hop.
pub fn copied(name: &HeaderName, named: &[HeaderName], hop: &Hop<'_>) -> bool {
    if is_hop_by_hop(name)
        || *name == header::HOST
        || *name == header::CONTENT_LENGTH
        || *name == X_FORWARDED_FOR
        || *name == header::FORWARDED
        || *name == header::VIA
        || named.contains(name)
    {
        return false;
    }
    // A trusted proxy's protocol and host claims stand; anyone else's are replaced.
    hop.trusted || (*name != X_FORWARDED_PROTO && *name != X_FORWARDED_HOST)
}

/// Writes this hop's forwarding header lines (`name: value\r\n`) of a request arriving with
/// `headers`: `X-Forwarded-For` and `Forwarded` extended (trusted peer) or replaced (anyone
/// else), `X-Forwarded-Proto` and `X-Forwarded-Host` written unless a trusted peer set them
/// (then [`copied`] passes them on), and `Via` extended.
pub fn write_request_hop(out: &mut Vec<u8>, headers: &impl Values, hop: &Hop<'_>) {
    let ip = hop.peer.ip();
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    out.extend_from_slice(b"x-forwarded-for: ");
    if hop.trusted && put_joined(out, headers, &X_FORWARDED_FOR) {
        out.extend_from_slice(b", ");
    }
    put_ip(out, ip);
    out.extend_from_slice(b"\r\nforwarded: ");
    if hop.trusted && put_joined(out, headers, &header::FORWARDED) {
        out.extend_from_slice(b", ");
    }
    match ip {
        IpAddr::V4(_) => {
            out.extend_from_slice(b"for=");
            put_ip(out, ip);
        }
        IpAddr::V6(_) => {
            out.extend_from_slice(b"for=\"[");
            put_ip(out, ip);
            out.extend_from_slice(b"]\"");
        }
    }
    out.extend_from_slice(b";proto=");
    out.extend_from_slice(hop.proto.as_bytes());
    if let Some(h) = hop.host.filter(|h| is_token_or_host(h)) {
        out.extend_from_slice(b";host=");
        if h.contains([':', '[', ']']) {
            out.push(b'"');
            out.extend_from_slice(h.as_bytes());
            out.push(b'"');
        } else {
            out.extend_from_slice(h.as_bytes());
        }
    }
    out.extend_from_slice(b"\r\n");
    if !(hop.trusted && headers.has(&X_FORWARDED_PROTO)) {
        out.extend_from_slice(b"x-forwarded-proto: ");
        out.extend_from_slice(hop.proto.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !(hop.trusted && headers.has(&X_FORWARDED_HOST)) {
        if let Some(h) = hop.host {
            out.extend_from_slice(b"x-forwarded-host: ");
            out.extend_from_slice(h.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"via: ");
    if put_joined(out, headers, &header::VIA) {
        out.extend_from_slice(b", ");
    }
    out.extend_from_slice(hop.version.as_bytes());
    out.extend_from_slice(b" wiregate\r\n");
}

/// Writes `ip` as text; an IPv4 address digit by digit (`fmt`'s machinery measured
/// dearer, on every passed-through call: docs/performance.md).
fn put_ip(out: &mut Vec<u8>, ip: IpAddr) {
    use std::io::Write as _;
    match ip {
        IpAddr::V4(v4) => {
            for (i, o) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                out.extend_from_slice(itoa::Buffer::new().format(o).as_bytes());
            }
        }
        IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

/// Writes every value of `name` joined with `, ` (a list header may arrive split over lines);
/// whether there was any.
fn put_joined(out: &mut Vec<u8>, headers: &impl Values, name: &HeaderName) -> bool {
    let mut any = false;
    headers.each(name, &mut |v| {
        if any {
            out.extend_from_slice(b", ");
        }
        out.extend_from_slice(v);
        any = true;
    });
    any
}

/// Appends `Via: <version> wiregate` (also on answers going back to the client).
pub fn add_via(headers: &mut HeaderMap, version: &str) {
    let mut via = Vec::with_capacity(32);
    if put_joined(&mut via, headers, &header::VIA) {
        via.extend_from_slice(b", ");
    }
    via.extend_from_slice(version.as_bytes());
    via.extend_from_slice(b" wiregate");
    if let Ok(v) = HeaderValue::from_bytes(&via) {
        headers.insert(header::VIA, v);
    }
}

/// A `Host` value safe to put in a `Forwarded` element (host, port, brackets only).
fn is_token_or_host(h: &str) -> bool {
    !h.is_empty()
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~:[]".contains(&b))
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

    /// The headers an upstream gets for a request with `h`: those copied, then this hop's.
    fn upstream_sees(h: &HeaderMap, hop: &Hop<'_>) -> HeaderMap {
        let named = connection_named(h);
        let mut out = HeaderMap::new();
        for (k, v) in h {
            if copied(k, &named, hop) {
                out.append(k.clone(), v.clone());
            }
        }
        let mut lines = Vec::new();
        write_request_hop(&mut lines, h, hop);
        for line in std::str::from_utf8(&lines)
            .unwrap()
            .split_terminator("\r\n")
        {
            let (k, v) = line.split_once(": ").unwrap();
            out.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        out
    }

    #[test]
    fn untrusted_claims_are_replaced() {
        let h = with(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("forwarded", "for=6.6.6.6"),
            ("x-forwarded-proto", "gopher"),
            ("x-forwarded-host", "evil.example"),
            ("x-end-to-end", "kept"),
        ]);
        let h = upstream_sees(&h, &hop("192.0.2.7:5000", false));
        assert_eq!(h["x-forwarded-for"], "192.0.2.7");
        assert_eq!(
            h["forwarded"],
            "for=192.0.2.7;proto=https;host=\"gw.example:8443\""
        );
        assert_eq!(h["x-forwarded-proto"], "https");
        assert_eq!(h["x-forwarded-host"], "gw.example:8443");
        assert_eq!(h["via"], "1.1 wiregate");
        assert_eq!(h["x-end-to-end"], "kept");
        for name in [
            "x-forwarded-for",
            "forwarded",
            "x-forwarded-proto",
            "x-forwarded-host",
        ] {
            assert_eq!(h.get_all(name).iter().count(), 1, "{name}");
        }
    }

    #[test]
    fn trusted_claims_are_extended() {
        let h = with(&[
            ("x-forwarded-for", "203.0.113.1"),
            ("x-forwarded-for", "198.51.100.2"),
            ("forwarded", "for=203.0.113.1"),
            ("x-forwarded-proto", "https"),
            ("via", "1.1 edge"),
        ]);
        let mut hp = hop("[::ffff:10.0.0.5]:5000", true);
        hp.proto = "http";
        let h = upstream_sees(&h, &hp);
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
        let h = upstream_sees(&HeaderMap::new(), &hop("[2001:db8::1]:5000", false));
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
        let named = connection_named(&h);
        let passed: Vec<&str> = h
            .keys()
            .filter(|k| copied(k, &named, &hop("192.0.2.7:5000", true)))
            .map(|k| k.as_str())
            .collect();
        assert_eq!(passed, ["x-end-to-end"]);
        strip_hop_by_hop(&mut h);
        let names: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["x-end-to-end"]);
    }

    #[test]
    fn hop_by_hop_names_are_the_standard_ones_in_any_case() {
        for n in HOP_BY_HOP {
            assert!(is_hop_by_hop_name(
                n.as_str().to_ascii_uppercase().as_bytes()
            ));
        }
        assert!(!is_hop_by_hop_name(b"content-type"));
        assert!(!is_hop_by_hop_name(b"t"));
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
