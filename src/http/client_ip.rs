//! Who the client is behind the load balancers an operator trusts: its address, and how it
//! reached the first of them. A proxy appends what it saw to one forwarding header, and passes
//! the client's own headers on untouched, so only the header the trusted proxies write is read
//! (`server.forwarded_header`): a client's `Forwarded` crossing a proxy that writes
//! `X-Forwarded-For` would otherwise name any address it likes.

use std::net::IpAddr;

use axum::http::{header, HeaderName};

use super::forwarded::{Trusted, Values};

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// Whether a request arrived over TLS (a request extension, for the forwarding headers and the
/// URLs a card names).
#[derive(Clone, Copy, Debug)]
pub struct OverTls;

/// The forwarding header the trusted proxies write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientHeader {
    /// `X-Forwarded-For` (with `X-Forwarded-Proto` and `X-Forwarded-Host`): what most load
    /// balancers append to.
    #[default]
    XForwardedFor,
    /// `Forwarded` (RFC 7239): `for=`, `proto=`, `host=`.
    Forwarded,
}

/// The peers whose forwarding header is believed, and which header that is.
#[derive(Clone, Debug, Default)]
pub struct Proxies {
    /// `server.trusted_proxies`.
    pub trusted: Trusted,
    /// `server.forwarded_header`.
    pub header: ClientHeader,
}

impl Proxies {
    /// The client's address: the TCP `peer`, unless that peer is a trusted proxy; then the
    /// right-most address of the trusted header that is not itself a trusted proxy, each proxy
    /// having appended the address it saw. Whoever sent the request can write anything to the
    /// left of the first trusted proxy's entry, so nothing further left is believed: an entry
    /// that is no address (`unknown`, an obfuscated node) ends the walk at the proxy that wrote
    /// it, and when every entry is a trusted proxy the left-most stands. No header is read
    /// unless the peer is trusted (with no trusted proxies, one empty scan).
    #[inline]
    pub fn client_ip(&self, peer: IpAddr, headers: &impl Values) -> IpAddr {
        // Most gateways trust no proxy: the call path pays one comparison for this.
        if self.trusted.is_empty() || !self.trusted.contains(peer) {
            return peer;
        }
        self.forwarded_client(peer, headers)
    }

    /// [`Proxies::client_ip`] for a trusted `peer`: the walk, kept out of line.
    #[inline(never)]
    fn forwarded_client(&self, peer: IpAddr, headers: &impl Values) -> IpAddr {
        let mut hops: Vec<Option<IpAddr>> = Vec::new();
        match self.header {
            ClientHeader::Forwarded => headers.each(&header::FORWARDED, &mut |value| {
                for element in value.split(|&b| b == b',') {
                    hops.push(param(element, b"for").and_then(node));
                }
            }),
            ClientHeader::XForwardedFor => headers.each(&X_FORWARDED_FOR, &mut |value| {
                for element in value.split(|&b| b == b',') {
                    hops.push(node(element));
                }
            }),
        }
        let mut client = peer;
        for hop in hops.iter().rev() {
            match hop {
                Some(ip) if self.trusted.contains(*ip) => client = *ip,
                Some(ip) => return *ip,
                None => return client,
            }
        }
        client
    }

    /// What the trusted header says of how the client reached the first proxy: its protocol
    /// and the host it asked for, from the header's last element (what the peer itself added:
    /// earlier ones came from hops nobody vouches for). Read only for a trusted `peer`.
    pub fn claimed(&self, peer: Option<IpAddr>, headers: &impl Values) -> Claims {
        if !peer.is_some_and(|p| self.trusted.contains(p)) {
            return Claims::default();
        }
        let last = |name: &HeaderName| {
            let mut kept = None;
            headers.each(name, &mut |v| {
                let element = v.rsplit(|&b| b == b',').next().unwrap_or_default();
                kept = std::str::from_utf8(element.trim_ascii())
                    .ok()
                    .map(str::to_owned);
            });
            kept.filter(|e| !e.is_empty())
        };
        match self.header {
            ClientHeader::Forwarded => {
                let Some(element) = last(&header::FORWARDED) else {
                    return Claims::default();
                };
                let text = |k: &[u8]| {
                    let v = param(element.as_bytes(), k)?;
                    let v = std::str::from_utf8(v).ok()?.trim_matches('"');
                    (!v.is_empty()).then(|| v.to_owned())
                };
                Claims {
                    proto: text(b"proto"),
                    host: text(b"host"),
                }
            }
            ClientHeader::XForwardedFor => Claims {
                proto: last(&X_FORWARDED_PROTO),
                host: last(&X_FORWARDED_HOST),
            },
        }
    }

    /// Whether the client came over TLS: to this listener (`tls`), or to the trusted proxy
    /// `peer` as it says.
    pub fn over_tls(&self, tls: bool, peer: Option<IpAddr>, headers: &impl Values) -> bool {
        self.claimed(peer, headers)
            .proto
            .map_or(tls, |p| p.eq_ignore_ascii_case("https"))
    }
}

/// What a trusted proxy says of how its client reached it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Claims {
    /// The protocol (`http`, `https`).
    pub proto: Option<String>,
    /// The host the client asked for.
    pub host: Option<String>,
}

/// The value of parameter `key` in one `Forwarded` element (`for=…;proto=…`), the key in any
/// case.
fn param<'a>(element: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    element.split(|&b| b == b';').find_map(|pair| {
        let pair = pair.trim_ascii();
        let eq = pair.iter().position(|&b| b == b'=')?;
        let (k, v) = pair.split_at(eq);
        k.trim_ascii()
            .eq_ignore_ascii_case(key)
            .then(|| v[1..].trim_ascii())
    })
}

/// The address of one `Forwarded` node or `X-Forwarded-For` entry: `192.0.2.1`,
/// `"192.0.2.1:4711"`, `"[2001:db8::1]:4711"`, `2001:db8::1`; `None` for `unknown`, an
/// obfuscated node or anything else.
fn node(raw: &[u8]) -> Option<IpAddr> {
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
mod tests {
    use super::*;
    use axum::http::{HeaderMap, HeaderName, HeaderValue};

    fn proxies(trusted: &[&str], header: ClientHeader) -> Proxies {
        let cidrs: Vec<String> = trusted.iter().map(|s| s.to_string()).collect();
        Proxies {
            trusted: Trusted::new(&cidrs),
            header,
        }
    }

    fn map(headers: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        map
    }

    fn client(peer: &str, p: &Proxies, headers: &[(&str, &str)]) -> String {
        let map = map(headers);
        p.client_ip(peer.parse().unwrap(), &map).to_string()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_says() {
        let said = [
            ("x-forwarded-for", "203.0.113.9"),
            ("forwarded", "for=203.0.113.8"),
        ];
        let none = proxies(&[], ClientHeader::XForwardedFor);
        assert_eq!(client("198.51.100.1", &none, &said), "198.51.100.1");
        let lb = proxies(&["10.0.0.0/8"], ClientHeader::Forwarded);
        assert_eq!(client("198.51.100.1", &lb, &said), "198.51.100.1");
    }

    #[test]
    fn behind_trusted_proxies_the_right_most_untrusted_address_is_the_client() {
        let lb = proxies(&["10.0.0.0/8"], ClientHeader::XForwardedFor);
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
    fn only_the_header_the_proxies_write_is_read() {
        // A proxy that appends to X-Forwarded-For passes a client's Forwarded on untouched.
        let xff_lb = proxies(&["10.0.0.0/8"], ClientHeader::XForwardedFor);
        let spoof = [
            ("forwarded", "for=192.0.2.66"),
            ("x-forwarded-for", "203.0.113.9"),
        ];
        assert_eq!(client("10.0.0.1", &xff_lb, &spoof), "203.0.113.9");
        // And the other way round.
        let fwd_lb = proxies(&["10.0.0.0/8", "::1"], ClientHeader::Forwarded);
        let both = [
            (
                "forwarded",
                r#"for=192.0.2.60;proto=https, For="[2001:db8::7]:4711""#,
            ),
            ("x-forwarded-for", "203.0.113.9"),
        ];
        assert_eq!(client("10.0.0.1", &fwd_lb, &both), "2001:db8::7");
        let v4 = [("forwarded", r#"for="192.0.2.43:47011";proto=http"#)];
        assert_eq!(client("::1", &fwd_lb, &v4), "192.0.2.43");
        let hidden = [("forwarded", "for=192.0.2.60, for=_hidden")];
        assert_eq!(client("10.0.0.1", &fwd_lb, &hidden), "10.0.0.1");
    }

    #[test]
    fn claims_are_read_from_a_trusted_peer_in_its_header_only() {
        let peer = Some("10.0.0.1".parse().unwrap());
        let headers = map(&[
            ("x-forwarded-proto", "http, https"),
            ("x-forwarded-host", "gw.example"),
            ("forwarded", "for=1.2.3.4;proto=http;host=evil.example"),
        ]);
        let xff_lb = proxies(&["10.0.0.0/8"], ClientHeader::XForwardedFor);
        let said = |p: &str, h: &str| Claims {
            proto: Some(p.into()),
            host: Some(h.into()),
        };
        assert_eq!(xff_lb.claimed(peer, &headers), said("https", "gw.example"));
        let fwd_lb = proxies(&["10.0.0.0/8"], ClientHeader::Forwarded);
        assert_eq!(fwd_lb.claimed(peer, &headers), said("http", "evil.example"));
        let stranger = Some("198.51.100.1".parse().unwrap());
        assert_eq!(xff_lb.claimed(stranger, &headers), Claims::default());
        assert!(xff_lb.over_tls(false, peer, &headers));
        assert!(
            !fwd_lb.over_tls(true, peer, &headers),
            "the proxy says http"
        );
        assert!(!xff_lb.over_tls(false, stranger, &headers));
    }
}
