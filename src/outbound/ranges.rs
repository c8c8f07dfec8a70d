//! The addresses a destination a caller chose (a push webhook) must not be: every block of the
//! IANA IPv4 and IPv6 Special-Purpose Address Registries, multicast, and the deprecated IPv6
//! site-local and IPv4-compatible blocks. A block is in the list whether or not the registry
//! calls it globally reachable: none of them is a web server's address, and several (6to4,
//! Teredo, NAT64, the AS112 and AMT anycasts) forward to addresses the gateway cannot see.
//!
//! Two IPv6 forms carry an IPv4 address and are judged by it: IPv4-mapped (`::ffff:a.b.c.d`,
//! which the socket layer dials as the IPv4 address) and the NAT64 well-known prefix
//! (`64:ff9b::a.b.c.d`, RFC 6052), which a translator forwards to the embedded IPv4 address, so
//! it is as safe as that address is and no safer. The local-use NAT64 prefix
//! (`64:ff9b:1::/48`, RFC 8215) is blocked whole: where its translator forwards is the
//! network's own choice. 6to4 (`2002::/16`) is blocked whole as well.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IPv4 blocks, as (first address, prefix length).
const V4: &[([u8; 4], u8)] = &[
    ([0, 0, 0, 0], 8),          // "this network" (RFC 791)
    ([10, 0, 0, 0], 8),         // private use (RFC 1918)
    ([100, 64, 0, 0], 10),      // shared address space, CGNAT (RFC 6598)
    ([127, 0, 0, 0], 8),        // loopback
    ([169, 254, 0, 0], 16),     // link-local, cloud metadata
    ([172, 16, 0, 0], 12),      // private use
    ([192, 0, 0, 0], 24),       // IETF protocol assignments (PCP, TURN anycasts, DS-Lite)
    ([192, 0, 2, 0], 24),       // documentation TEST-NET-1
    ([192, 31, 196, 0], 24),    // AS112-v4
    ([192, 52, 193, 0], 24),    // AMT
    ([192, 88, 99, 0], 24),     // deprecated 6to4 relay anycast
    ([192, 168, 0, 0], 16),     // private use
    ([192, 175, 48, 0], 24),    // direct delegation AS112 service
    ([198, 18, 0, 0], 15),      // benchmarking (RFC 2544)
    ([198, 51, 100, 0], 24),    // documentation TEST-NET-2
    ([203, 0, 113, 0], 24),     // documentation TEST-NET-3
    ([224, 0, 0, 0], 4),        // multicast
    ([240, 0, 0, 0], 4),        // reserved
    ([255, 255, 255, 255], 32), // limited broadcast (inside 240/4; listed as the registry does)
];

/// IPv6 blocks, as (first address, prefix length). `::ffff:0:0/96` and `64:ff9b::/96` are
/// judged by their embedded IPv4 address instead ([`is_blocked`]).
const V6: &[(u128, u8)] = &[
    (0, 96),                           // ::/96: unspecified, loopback, IPv4-compatible
    (0x0064_ff9b_0001 << 80, 48),      // 64:ff9b:1::/48 local-use NAT64
    (0x0100 << 112, 64),               // 100::/64 discard-only
    (0x0100_0000_0000_0001 << 64, 64), // 100:0:0:1::/64 dummy prefix
    (0x2001 << 112, 23),               // 2001::/23 IETF protocol assignments, Teredo
    (0x2001_0db8 << 96, 32),           // 2001:db8::/32 documentation
    (0x2002 << 112, 16),               // 2002::/16 6to4
    (0x2620_004f_8000 << 80, 48),      // 2620:4f:8000::/48 direct delegation AS112 service
    (0x3fff << 112, 20),               // 3fff::/20 documentation
    (0x5f00 << 112, 16),               // 5f00::/16 SRv6 SIDs
    (0xfc00 << 112, 7),                // fc00::/7 unique local
    (0xfe80 << 112, 10),               // fe80::/10 link-local
    (0xfec0 << 112, 10),               // fec0::/10 deprecated site-local
    (0xff00 << 112, 8),                // ff00::/8 multicast
];

/// The IPv4-mapped prefix `::ffff:0:0/96`.
const MAPPED: u128 = 0xffff << 32;
/// The NAT64 well-known prefix `64:ff9b::/96`.
const NAT64: u128 = 0x0064_ff9b << 96;

/// Whether a caller-chosen destination must not be `ip`.
pub(crate) fn is_blocked(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => blocked_v6(v6),
    }
}

fn blocked_v4(ip: Ipv4Addr) -> bool {
    let bits = u32::from(ip);
    V4.iter().any(|&(net, len)| {
        let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
        bits & mask == u32::from_be_bytes(net) & mask
    })
}

fn blocked_v6(ip: Ipv6Addr) -> bool {
    let bits = u128::from(ip);
    let low96 = u128::MAX.checked_shl(32).unwrap_or(0);
    if bits & low96 == MAPPED || bits & low96 == NAT64 {
        // The embedded IPv4 address is where the connection ends up.
        return blocked_v4(Ipv4Addr::from(bits as u32));
    }
    V6.iter().any(|&(net, len)| {
        let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        bits & mask == net & mask
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(ip: &str) -> bool {
        is_blocked(ip.parse().unwrap())
    }

    /// Each registry block: its first address, one inside, its last, and the neighbours just
    /// outside that are ordinary addresses.
    #[test]
    fn every_ipv4_special_purpose_block_is_refused() {
        for (inside, outside) in [
            (
                &["0.0.0.0", "0.1.2.3", "0.255.255.255"][..],
                &["1.0.0.0"][..],
            ),
            (
                &["10.0.0.0", "10.255.255.255"],
                &["11.0.0.0", "9.255.255.255"],
            ),
            (
                &["100.64.0.0", "100.127.255.255"],
                &["100.63.255.255", "100.128.0.0"],
            ),
            (
                &["127.0.0.1", "127.255.255.255"],
                &["128.0.0.0", "126.255.255.255"],
            ),
            (
                &["169.254.0.0", "169.254.169.254"],
                &["169.253.255.255", "169.255.0.0"],
            ),
            (
                &["172.16.0.0", "172.31.255.255"],
                &["172.15.255.255", "172.32.0.0"],
            ),
            (
                &["192.0.0.0", "192.0.0.9", "192.0.0.170", "192.0.0.255"],
                &["192.0.1.0"],
            ),
            (&["192.0.2.0", "192.0.2.255"], &["192.0.3.0"]),
            (
                &["192.31.196.0", "192.31.196.255"],
                &["192.31.195.255", "192.31.197.0"],
            ),
            (
                &["192.52.193.0", "192.52.193.255"],
                &["192.52.192.255", "192.52.194.0"],
            ),
            (
                &["192.88.99.0", "192.88.99.255"],
                &["192.88.98.255", "192.88.100.0"],
            ),
            (
                &["192.168.0.0", "192.168.255.255"],
                &["192.167.255.255", "192.169.0.0"],
            ),
            (
                &["192.175.48.0", "192.175.48.255"],
                &["192.175.47.255", "192.175.49.0"],
            ),
            (
                &["198.18.0.0", "198.19.255.255"],
                &["198.17.255.255", "198.20.0.0"],
            ),
            (
                &["198.51.100.0", "198.51.100.255"],
                &["198.51.99.255", "198.51.101.0"],
            ),
            (
                &["203.0.113.0", "203.0.113.255"],
                &["203.0.112.255", "203.0.114.0"],
            ),
            (&["224.0.0.1", "239.255.255.255"], &["223.255.255.255"]),
            (
                &[
                    "240.0.0.0",
                    "250.1.2.3",
                    "255.255.255.254",
                    "255.255.255.255",
                ],
                &[],
            ),
        ] {
            for ip in inside {
                assert!(blocked(ip), "{ip} is refused");
            }
            for ip in outside {
                assert!(!blocked(ip), "{ip} is allowed");
            }
        }
        for ip in ["8.8.8.8", "93.184.216.34", "1.1.1.1", "223.255.255.255"] {
            assert!(!blocked(ip), "{ip} is allowed");
        }
    }

    #[test]
    fn every_ipv6_special_purpose_block_is_refused() {
        for ip in [
            "::",
            "::1",
            "::7f00:1",    // IPv4-compatible 127.0.0.1
            "::808:808",   // IPv4-compatible, deprecated whatever it embeds
            "64:ff9b:1::", // local-use NAT64
            "64:ff9b:1:ffff:ffff:ffff:ffff:ffff",
            "100::",
            "100::ffff:ffff:ffff:ffff",
            "100:0:0:1::1",
            "2001::",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2", // Teredo
            "2001:1::1",
            "2001:2::1",
            "2001:1ff:ffff::1",
            "2001:db8::1",
            "2620:4f:8000::1",
            "2620:4f:8000:ffff::1",
            "2001:db8:ffff::1",
            "2002::",
            "2002:7f00:1::1",  // 6to4 of 127.0.0.1
            "2002:808:808::1", // 6to4 of a public address: blocked whole
            "3fff::",
            "3fff:fff:ffff::1",
            "5f00::1",
            "fc00::",
            "fd12:3456::1",
            "fe80::1",
            "febf:ffff::1",
            "fec0::1",
            "feff::1",
            "ff02::1",
            "ff0e::1",
        ] {
            assert!(blocked(ip), "{ip} is refused");
        }
        for ip in [
            "2001:4860:4860::8888",
            "2001:200::1", // just past 2001::/23
            "2003::1",
            "2606:4700::1111",
            "3fff:1000::1", // just past 3fff::/20
            "64:ff9b:2::1",
            "101::1",
            "100:0:0:2::1",
        ] {
            assert!(!blocked(ip), "{ip} is allowed");
        }
    }

    #[test]
    fn ipv4_mapped_addresses_are_judged_by_their_ipv4_address() {
        for ip in [
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:198.18.0.1",
            "::ffff:240.0.0.1",
            "::ffff:0.0.0.0",
        ] {
            assert!(blocked(ip), "{ip} is refused");
        }
        assert!(!blocked("::ffff:8.8.8.8"));
        assert!(!blocked("::ffff:93.184.216.34"));
    }

    #[test]
    fn nat64_addresses_are_judged_by_their_ipv4_address() {
        for ip in [
            "64:ff9b::127.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b::10.1.2.3",
            "64:ff9b::169.254.169.254",
            "64:ff9b::192.168.0.1",
            "64:ff9b::198.18.0.1",
            "64:ff9b::240.0.0.1",
            "64:ff9b::",
        ] {
            assert!(blocked(ip), "{ip} is refused");
        }
        assert!(!blocked("64:ff9b::8.8.8.8"));
        assert!(!blocked("64:ff9b::93.184.216.34"));
    }
}
