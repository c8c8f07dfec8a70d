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

/// Writes `ip` as text; an IPv4 address digit by digit (`fmt`'s machinery costs about a
/// thousand instructions per address, on every passed-through call).
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

/// What the nearest proxy says the client asked for: the protocol and host of the last
/// `Forwarded` element, else the last `X-Forwarded-Proto` and `X-Forwarded-Host` values. The
/// last, because that is what the peer itself added (earlier ones came from hops before it,
/// which nobody vouches for). Believe it only from a [`Trusted`] peer.
pub fn claimed(headers: &HeaderMap) -> (Option<&str>, Option<&str>) {
    let last = |name: &HeaderName| {
        let v = headers.get_all(name).iter().next_back()?.to_str().ok()?;
        let element = v.rsplit(',').next()?.trim();
        (!element.is_empty()).then_some(element)
    };
    if let Some(element) = last(&header::FORWARDED) {
        let (mut proto, mut host) = (None, None);
        for pair in element.split(';') {
            let Some((k, v)) = pair.split_once('=') else {
                continue;
            };
            let v = v.trim().trim_matches('"');
            match k.trim().to_ascii_lowercase().as_str() {
                "proto" => proto = Some(v),
                "host" => host = Some(v),
                _ => {}
            }
        }
        if proto.is_some() || host.is_some() {
            return (proto, host);
        }
    }
    (last(&X_FORWARDED_PROTO), last(&X_FORWARDED_HOST))
}

/// A `Host` value safe to put in a `Forwarded` element (host, port, brackets only).
fn is_token_or_host(h: &str) -> bool {
    !h.is_empty()
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~:[]".contains(&b))
}

/// The client's address as operators expect it behind their load balancers: the TCP `peer`,
/// unless that peer is a trusted proxy; then the right-most address of `Forwarded`'s `for=`
/// (of `X-Forwarded-For` without a `Forwarded`) that is not itself a trusted proxy, each
/// proxy having appended the address it saw. Whoever sent the request can write anything to
/// the left of the first trusted proxy's entry, so nothing further left is believed: an entry
/// that is no address (`unknown`, an obfuscated name) ends the walk at the proxy that wrote
/// it, and when every entry is a trusted proxy the left-most stands.
pub fn client_ip(peer: IpAddr, trusted: &Trusted, headers: super::headers::Headers<'_>) -> IpAddr {
    if !trusted.contains(peer) {
        return peer;
    }
    let mut hops: Vec<Option<IpAddr>> = Vec::new();
    for value in headers.get_all("forwarded") {
        for element in value.split(|&b| b == b',') {
            let node = element.split(|&b| b == b';').find_map(|pair| {
                let pair = pair.trim_ascii();
                let (k, v) = pair.split_at_checked(4)?;
                k.eq_ignore_ascii_case(b"for=").then_some(v)
            });
            hops.push(node.and_then(forwarded_node));
        }
    }
    if hops.is_empty() {
        for value in headers.get_all("x-forwarded-for") {
            for element in value.split(|&b| b == b',') {
                hops.push(forwarded_node(element.trim_ascii()));
            }
        }
    }
    let mut client = peer;
    for hop in hops.iter().rev() {
        match hop {
            Some(ip) if trusted.contains(*ip) => client = *ip,
            Some(ip) => return *ip,
            None => return client,
        }
    }
    client
}

/// The address of one `Forwarded` node or `X-Forwarded-For` entry: `192.0.2.1`,
/// `"192.0.2.1:4711"`, `"[2001:db8::1]:4711"`, `2001:db8::1`; `None` for `unknown`, an
/// obfuscated node or anything else.
fn forwarded_node(raw: &[u8]) -> Option<IpAddr> {
    let raw = std::str::from_utf8(raw).ok()?.trim();
    let raw = raw
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .unwrap_or(raw);
    if let Ok(ip) = raw.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Some(rest) = raw.strip_prefix('[') {
        return rest.split_once(']')?.0.parse().ok();
    }
    let (host, _port) = raw.rsplit_once(':')?;
    host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

#[cfg(test)]
mod client_tests {
    use super::*;
    use axum::http::HeaderMap;

    fn client(peer: &str, trusted: &[&str], headers: &[(&str, &str)]) -> String {
        let trusted = Trusted::new(&trusted.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        client_ip(peer.parse().unwrap(), &trusted, (&map).into()).to_string()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_says() {
        let said = [("x-forwarded-for", "203.0.113.9")];
        assert_eq!(client("198.51.100.1", &[], &said), "198.51.100.1");
        assert_eq!(
            client("198.51.100.1", &["10.0.0.0/8"], &said),
            "198.51.100.1"
        );
    }

    #[test]
    fn behind_trusted_proxies_the_right_most_untrusted_address_is_the_client() {
        let lb = ["10.0.0.0/8"];
        let xff = |v| [("x-forwarded-for", v)];
        assert_eq!(client("10.0.0.1", &lb, &xff("203.0.113.9")), "203.0.113.9");
        // A client's own claim sits to the left of what the trusted proxy saw.
        assert_eq!(
            client("10.0.0.1", &lb, &xff("1.2.3.4, 203.0.113.9, 10.0.0.7")),
            "203.0.113.9"
        );
        assert_eq!(
            client("10.0.0.1", &lb, &xff("10.0.0.9, 10.0.0.7")),
            "10.0.0.9"
        );
        assert_eq!(client("10.0.0.1", &lb, &[]), "10.0.0.1");
        assert_eq!(
            client("10.0.0.1", &lb, &xff("203.0.113.9, unknown")),
            "10.0.0.1"
        );
        // Split over lines, as a list header may be.
        let two = [
            ("x-forwarded-for", "1.2.3.4"),
            ("x-forwarded-for", "203.0.113.9"),
        ];
        assert_eq!(client("10.0.0.1", &lb, &two), "203.0.113.9");
    }

    #[test]
    fn forwarded_is_read_before_x_forwarded_for() {
        let lb = ["10.0.0.0/8", "::1"];
        let both = [
            (
                "forwarded",
                r#"for=192.0.2.60;proto=https, For="[2001:db8::7]:4711""#,
            ),
            ("x-forwarded-for", "203.0.113.9"),
        ];
        assert_eq!(client("10.0.0.1", &lb, &both), "2001:db8::7");
        let v4 = [("forwarded", r#"for="192.0.2.43:47011";proto=http"#)];
        assert_eq!(client("::1", &lb, &v4), "192.0.2.43");
        let hidden = [("forwarded", "for=192.0.2.60, for=_hidden")];
        assert_eq!(client("10.0.0.1", &lb, &hidden), "10.0.0.1");
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
    fn the_nearest_proxys_claims_are_read() {
        let h = with(&[
            ("x-forwarded-proto", "http, https"),
            ("x-forwarded-host", "gw.example"),
        ]);
        assert_eq!(claimed(&h), (Some("https"), Some("gw.example")));
        let h = with(&[
            (
                "forwarded",
                "for=1.2.3.4;proto=http, for=10.0.0.1;proto=https;host=\"gw:8443\"",
            ),
            ("x-forwarded-proto", "http"),
        ]);
        assert_eq!(claimed(&h), (Some("https"), Some("gw:8443")));
        assert_eq!(
            claimed(&with(&[("forwarded", "for=1.2.3.4")])),
            (None, None)
        );
        assert_eq!(claimed(&HeaderMap::new()), (None, None));
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
