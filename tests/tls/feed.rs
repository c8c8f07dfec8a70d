//! The event feed from an `https://` source: verified against `events.ca_file`, the gateway's
//! `events.client_cert` presented when the source asks for one, events reaching a subscriber.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use wiregate::config::{Config, Events};

use crate::support::pki::{self, Pki};
use crate::support::{domain_record, feed_server_tls, gateway, FeedMode, TestGateway};

const T: Duration = Duration::from_secs(10);

async fn reading(f: impl FnOnce(&mut Events)) -> TestGateway {
    gateway()
        .with(|c| {
            c.events.reconnect_ms = 20;
            f(&mut c.events);
        })
        .start()
        .await
}

#[tokio::test]
async fn events_from_an_https_feed_with_mtls_reach_a_subscriber() {
    let pki = Pki::new("feed CA");
    let cert = pki.issue("feed", &["localhost"]);
    let records = vec![
        domain_record(1, "plan.created", "plan-1", json!({"n": 1})),
        domain_record(2, "checkpoint.created", "plan-1", json!({"n": 2})),
    ];
    let feed = feed_server_tls(
        records,
        FeedMode::Sse,
        pki::server_config(&cert, Some(&pki.ca_file())),
    )
    .await;
    assert!(feed.url().starts_with("https://localhost:"));
    let (client_cert, client_key) = pki.issue("gateway-client", &["gateway.test"]).paths();
    let gw = reading(|e| {
        e.source = feed.url();
        e.ca_file = pki.ca_file();
        e.client_cert = client_cert;
        e.client_key = client_key;
    })
    .await;
    let events = gw.sse_get("/events", None).await.take(2, T).await;
    let seen: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e.id.as_str(), e.event.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("1", "TaskStatusUpdateEvent"),
            ("2", "TaskArtifactUpdateEvent")
        ]
    );
    assert_eq!(feed.requests.lock().unwrap().len(), 1);
    assert_eq!(*feed.sni.lock().unwrap(), [Some("localhost".to_owned())]);
}

#[tokio::test]
async fn a_feed_that_wants_a_client_certificate_refuses_a_gateway_without_one() {
    let pki = Pki::new("feed CA");
    let cert = pki.issue("feed", &["localhost"]);
    let records = vec![domain_record(1, "plan.created", "plan-1", json!({}))];
    let config = pki::server_config(&cert, Some(&pki.ca_file()));
    let feed = feed_server_tls(records, FeedMode::Sse, config).await;
    let _gw = reading(|e| {
        e.source = feed.url();
        e.ca_file = pki.ca_file();
    })
    .await;
    // A second connection means the first ended (the feed keeps a served one open): its
    // handshake failed and no request was read.
    tokio::time::timeout(T, async {
        while feed.accepted.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the gateway redials the feed");
    assert!(feed.requests.lock().unwrap().is_empty());
}

#[test]
fn the_feeds_tls_settings_are_checked_with_their_key_paths() {
    let mut c = Config::default();
    c.events.source = "http://127.0.0.1:1/events".into();
    c.events.ca_file = "/tmp/ca.pem".into();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("events.ca_file: applies to https://"), "{e}");
    let mut c = Config::default();
    c.events.source = "https://127.0.0.1:1/events".into();
    c.events.client_cert = "/nonexistent/c.pem".into();
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("events.client_cert: client_cert and client_key are set together"),
        "{e}"
    );
    c.events.client_key = "/nonexistent/c.key".into();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("events.client_cert: /nonexistent/c.pem"), "{e}");
}
