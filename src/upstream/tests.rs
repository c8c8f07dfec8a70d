//! The fleet's bookkeeping across endpoints: ejections under concurrent failures, names,
//! what a reload keeps.

use std::sync::Arc;

use super::*;
use crate::config::{Outlier, Upstream};

fn upstream(urls: &[&str]) -> Upstream {
    let mut u = Upstream::new("u", "", Dialect::Jsonrpc, 1000);
    u.endpoints = urls.iter().map(|s| s.to_string()).collect();
    u
}

#[test]
fn failures_that_land_together_eject_within_the_cap_and_once_each() {
    let mut u = upstream(&["http://127.0.0.1:1/", "http://127.0.0.1:2/"]);
    u.outlier = Outlier {
        consecutive_failures: 1,
        base_ejection_ms: 60_000,
        max_ejected_percent: 50,
    };
    let client = UpstreamClient::new(u, 1024);
    let barrier = Arc::new(std::sync::Barrier::new(16));
    let threads: Vec<_> = (0..16)
        .map(|i| {
            let (client, barrier) = (client.clone(), barrier.clone());
            std::thread::spawn(move || {
                let e = client.fleet.endpoints[i % 2].clone();
                barrier.wait();
                for _ in 0..100 {
                    client.record(&e, Outcome::Refused);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let now = crate::util::clock::now_ms();
    let ejected: Vec<u32> = client
        .fleet
        .endpoints
        .iter()
        .filter(|e| e.state.is_ejected(now))
        .map(|e| e.state.ejections())
        .collect();
    assert_eq!(
        ejected,
        [1],
        "one of two endpoints out (50 %), ejected once"
    );
}

#[test]
fn an_endpoint_is_named_by_its_host_and_port_without_credentials() {
    let client = UpstreamClient::new(upstream(&["http://user:secret@127.0.0.1:9/rpc"]), 1024);
    assert_eq!(client.fleet.endpoints[0].label(), "127.0.0.1:9");
}

#[test]
fn a_reload_keeps_a_plain_endpoints_pool_and_rebuilds_a_tls_ones_keeping_its_health() {
    let before = UpstreamClient::new(
        upstream(&["http://127.0.0.1:1/", "https://localhost:2/"]),
        1024,
    );
    let after = UpstreamClient::build(
        upstream(&["http://127.0.0.1:1/", "https://localhost:2/"]),
        0,
        1024,
        Some(&before),
    );
    let (b, a) = (&before.fleet.endpoints, &after.fleet.endpoints);
    assert!(
        Arc::ptr_eq(&b[0], &a[0]),
        "the plain endpoint is kept whole"
    );
    assert!(
        !Arc::ptr_eq(&b[1], &a[1]),
        "the TLS endpoint gets a client read from its files again"
    );
    assert!(Arc::ptr_eq(&b[1].state, &a[1].state), "its health is kept");
}
