//! The legacy server's domain-event feed through the gateway: a real feed server, real SSE.
#![forbid(unsafe_code)]

mod support;

use std::time::Duration;

use serde_json::json;
use support::{domain_record, feed_server, gateway, FeedMode, SseEvent, TestGateway};
use wiregate::config::Unmapped;

const T: Duration = Duration::from_secs(10);

async fn fronting(source: &str, unmapped: Unmapped) -> TestGateway {
    let source = source.to_owned();
    gateway()
        .with(move |c| {
            c.events.source = source;
            c.events.reconnect_ms = 20;
            c.events.keepalive_ms = 200;
            c.events.unmapped = unmapped;
        })
        .start()
        .await
}

fn ids(events: &[SseEvent]) -> Vec<String> {
    events.iter().map(|e| e.id.clone()).collect()
}

/// The contract's map (docs/fronting.md), both spellings written out (not taken from the code's
/// tables, so a wrong row there fails): plan events are status updates, the others artifact
/// updates.
const DESIGN_MAP: [(&str, &str, &str); 10] = [
    ("plan.created", "PLAN_CREATED", "TaskStatusUpdateEvent"),
    (
        "plan.phase_changed",
        "PLAN_PHASE_CHANGED",
        "TaskStatusUpdateEvent",
    ),
    (
        "plan.state_changed",
        "PLAN_STATE_CHANGED",
        "TaskStatusUpdateEvent",
    ),
    ("plan.applied", "PLAN_APPLIED", "TaskStatusUpdateEvent"),
    ("plan.cancelled", "PLAN_CANCELLED", "TaskStatusUpdateEvent"),
    ("plan.errored", "PLAN_ERRORED", "TaskStatusUpdateEvent"),
    (
        "checkpoint.created",
        "CHECKPOINT_CREATED",
        "TaskArtifactUpdateEvent",
    ),
    (
        "checkpoint.restored",
        "CHECKPOINT_RESTORED",
        "TaskArtifactUpdateEvent",
    ),
    (
        "sandbox.committed",
        "SANDBOX_COMMITTED",
        "TaskArtifactUpdateEvent",
    ),
    (
        "resource.modified",
        "RESOURCE_MODIFIED",
        "TaskArtifactUpdateEvent",
    ),
];

#[tokio::test]
async fn every_row_of_the_map_in_both_spellings() {
    let mut records = Vec::new();
    let mut expected = Vec::new();
    for (value, name, kind) in DESIGN_MAP {
        for spelling in [value, name] {
            let id = records.len() as u64 + 1;
            records.push(domain_record(id, spelling, "plan-1", json!({"n": id})));
            expected.push(kind);
        }
    }
    let feed = feed_server(records, FeedMode::Ndjson, None, true).await;
    let gw = fronting(&feed.url(), Unmapped::Drop).await;
    let events = gw
        .sse_get("/events", None)
        .await
        .take(expected.len(), T)
        .await;
    let kinds: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, expected);
    for (i, e) in events.iter().enumerate() {
        let n = i as u64 + 1;
        assert_eq!(e.id, n.to_string(), "the SSE id is the upstream event_id");
        let method = if e.event == "TaskStatusUpdateEvent" {
            "task/statusUpdate"
        } else {
            "task/artifactUpdate"
        };
        assert_eq!(
            e.data,
            json!({"jsonrpc": "2.0", "method": method, "params": {"taskId": "plan-1", "n": n}})
        );
    }
}

#[tokio::test]
async fn unmapped_types_are_dropped_or_passed_as_status() {
    let records = vec![
        domain_record(1, "user.login", "plan-1", json!({})),
        domain_record(2, "plan.created", "plan-1", json!({})),
    ];
    let feed = feed_server(records.clone(), FeedMode::Ndjson, None, true).await;
    let drop = fronting(&feed.url(), Unmapped::Drop).await;
    let first = drop.sse_get("/events", None).await.take(1, T).await;
    assert_eq!(first[0].id, "2", "user.login was dropped");
    let feed = feed_server(records, FeedMode::Ndjson, None, true).await;
    let pass = fronting(&feed.url(), Unmapped::Status).await;
    let both = pass.sse_get("/events", None).await.take(2, T).await;
    assert_eq!(ids(&both), ["1", "2"]);
    assert_eq!(both[0].event, "TaskStatusUpdateEvent");
}

#[tokio::test]
async fn a_subscriber_filters_by_task() {
    let records = (1..=6)
        .map(|i| {
            domain_record(
                i,
                "plan.state_changed",
                &format!("plan-{}", i % 2),
                json!({"i": i}),
            )
        })
        .collect();
    let feed = feed_server(records, FeedMode::Ndjson, None, true).await;
    let gw = fronting(&feed.url(), Unmapped::Drop).await;
    let events = gw
        .sse_get("/events?taskId=plan-1", None)
        .await
        .take(3, T)
        .await;
    assert_eq!(ids(&events), ["1", "3", "5"]);
    assert!(events
        .iter()
        .all(|e| e.data["params"]["taskId"] == "plan-1"));
}

async fn drop_and_return(mode: FeedMode, honour_resume: bool) {
    let records: Vec<String> = (1..=10)
        .map(|i| domain_record(i, "plan.state_changed", "p", json!({"i": i})))
        .collect();
    let feed = feed_server(records, mode, Some(4), honour_resume).await;
    let gw = fronting(&feed.url(), Unmapped::Drop).await;
    let mut sse = gw.sse_get("/events", None).await;
    let events = sse.take(10, T).await;
    let expected: Vec<String> = (1..=10).map(|i| i.to_string()).collect();
    assert_eq!(ids(&events), expected, "no event lost or repeated");
    // Nothing more arrives (a repeat would show here).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let requests = feed.requests.lock().unwrap().clone();
    assert!(requests.len() >= 2, "the gateway reconnected: {requests:?}");
    assert_eq!(requests[1].0, "after=4", "resumed with ?after=");
    assert_eq!(requests[1].1.as_deref(), Some("4"), "and Last-Event-ID");
    let more = tokio::time::timeout(Duration::from_millis(300), sse.next(T)).await;
    assert!(more.is_err(), "nothing after the tenth event: {more:?}");
}

#[tokio::test]
async fn an_ndjson_feed_that_drops_mid_stream_loses_and_repeats_nothing() {
    drop_and_return(FeedMode::Ndjson, true).await;
}

#[tokio::test]
async fn an_sse_feed_that_drops_mid_stream_loses_and_repeats_nothing() {
    drop_and_return(FeedMode::Sse, true).await;
}

#[tokio::test]
async fn a_feed_that_ignores_the_resume_point_still_repeats_nothing() {
    drop_and_return(FeedMode::Ndjson, false).await;
}

#[tokio::test]
async fn a_malformed_record_between_two_good_ones_is_skipped() {
    let records = vec![
        domain_record(1, "plan.created", "p", json!({})),
        "{this is not json".to_owned(),
        json!({"event_id": 2, "plan_id": "p"}).to_string(),
        domain_record(3, "checkpoint.restored", "p", json!({"checkpoint": "c"})),
    ];
    let feed = feed_server(records, FeedMode::Ndjson, None, true).await;
    let gw = fronting(&feed.url(), Unmapped::Drop).await;
    let events = gw.sse_get("/events", None).await.take(2, T).await;
    assert_eq!(ids(&events), ["1", "3"]);
    assert_eq!(events[1].event, "TaskArtifactUpdateEvent");
    let metrics = gw.get("/metrics").await.text;
    let malformed: f64 = metrics
        .lines()
        .find(|l| l.starts_with("wiregate_events_malformed_total"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the malformed counter is exported");
    assert!(malformed >= 2.0, "{malformed}");
}

#[tokio::test]
async fn a_subscriber_resumes_with_last_event_id() {
    let records = (1..=6)
        .map(|i| domain_record(i, "plan.state_changed", "p", json!({})))
        .collect();
    let feed = feed_server(records, FeedMode::Ndjson, None, true).await;
    let gw = fronting(&feed.url(), Unmapped::Drop).await;
    let first = gw.sse_get("/events", None).await.take(3, T).await;
    let rest = gw
        .sse_get("/events", Some(&first[2].id))
        .await
        .take(3, T)
        .await;
    assert_eq!(ids(&rest), ["4", "5", "6"]);
}

#[tokio::test]
async fn events_without_ids_get_the_gateways_and_reserved_fields_never_leak() {
    let records = vec![
        json!({"event_type": "plan.created", "plan_id": "p", "data": {"event_id": "x", "timestamp": "t", "state": "s"}}).to_string(),
        json!({"event_type": "plan.created", "data": {}}).to_string(),
    ];
    let feed = feed_server(records, FeedMode::Ndjson, None, true).await;
    let gw = fronting(&feed.url(), Unmapped::Drop).await;
    let events = gw.sse_get("/events", None).await.take(2, T).await;
    assert_eq!(ids(&events), ["wg-1", "wg-2"], "the gateway's own sequence");
    assert_eq!(
        events[0].data["params"],
        json!({"taskId": "p", "state": "s"})
    );
    assert_eq!(events[1].data["params"], json!({}), "no plan id, no taskId");
}

#[tokio::test]
async fn without_a_source_events_is_not_found() {
    let gw = gateway().start().await;
    assert_eq!(gw.get("/events").await.status, 404);
}

#[tokio::test]
async fn events_subscribers_are_bounded() {
    let feed = feed_server(
        vec![domain_record(1, "plan.created", "p", json!({}))],
        FeedMode::Ndjson,
        None,
        true,
    )
    .await;
    let source = feed.url();
    let gw = gateway()
        .with(move |c| {
            c.events.source = source;
            c.events.max_subscribers = 1;
        })
        .start()
        .await;
    let mut first = gw.sse_get("/events", None).await;
    first.take(1, T).await;
    let second = gw.get("/events").await;
    assert_eq!(second.status, 503);
    assert_eq!(second.json()["error"]["code"], -32063);
}

/// A feed id that is no header value (a control character) cannot be sent back as
/// `Last-Event-ID`: the reconnect resumes by `?after=` alone instead of ending the reader.
#[tokio::test]
async fn an_id_that_is_no_header_value_does_not_end_the_feed() {
    let record = |id: &str, i: u64| {
        json!({"event_id": id, "event_type": "plan.state_changed", "plan_id": "p", "data": {"i": i}})
            .to_string()
    };
    let records = vec![
        record("e1", 1),
        record("a\u{1}", 2),
        record("e3", 3),
        record("e4", 4),
    ];
    let feed = feed_server(records, FeedMode::Ndjson, Some(2), true).await;
    let gw = fronting(&feed.url(), Unmapped::Drop).await;
    let events = gw.sse_get("/events", None).await.take(4, T).await;
    assert_eq!(ids(&events), ["e1", "a\u{1}", "e3", "e4"]);
    let requests = feed.requests.lock().unwrap().clone();
    assert!(requests.len() >= 2, "the gateway reconnected: {requests:?}");
    assert_eq!(requests[1].0, "after=a%01", "resumed with ?after=");
    assert_eq!(requests[1].1, None, "without the header it cannot send");
}

/// A record without an id gets the gateway's own (`wg-N`), which no numeric id of the feed's can
/// equal: `{no id}` then `{"event_id": 1}` must not both go out as `id: 1`.
#[tokio::test]
async fn an_id_less_record_never_shares_an_id_with_the_feeds_own() {
    let id_less =
        json!({"event_type": "plan.state_changed", "plan_id": "p", "data": {"i": 0}}).to_string();
    let records = vec![
        id_less,
        domain_record(1, "plan.state_changed", "p", json!({"i": 1})),
        domain_record(2, "plan.state_changed", "p", json!({"i": 2})),
    ];
    let feed = feed_server(records, FeedMode::Ndjson, None, true).await;
    let gw = fronting(&feed.url(), Unmapped::Drop).await;
    let events = gw.sse_get("/events", None).await.take(3, T).await;
    assert_eq!(ids(&events), ["wg-1", "1", "2"]);
    // Resuming after the id-less record replays exactly what followed it.
    let after = gw.sse_get("/events", Some("wg-1")).await.take(2, T).await;
    assert_eq!(ids(&after), ["1", "2"]);
}

/// A record of 10 MiB (no newline until its end) is over `events.max_line_bytes`' default
/// (4 MiB): skipped as it arrives and counted once, and the good event after it arrives.
#[tokio::test]
async fn a_record_over_the_cap_is_skipped_and_the_next_one_arrives() {
    // The counters are the process's: read through a gateway without a feed, before the feed's
    // gateway starts (no other test here skips a record).
    let probe = gateway().start().await;
    for mode in [FeedMode::Ndjson, FeedMode::Sse] {
        let before = probe
            .counter("wiregate_events_feed_lines_skipped_total")
            .await;
        let records = vec![
            "x".repeat((10 << 20) + 1),
            domain_record(1, "plan.created", "p", json!({})),
        ];
        let feed = feed_server(records, mode, None, true).await;
        let gw = fronting(&feed.url(), Unmapped::Drop).await;
        let events = gw.sse_get("/events", None).await.take(1, T).await;
        assert_eq!(ids(&events), ["1"], "{mode:?}");
        assert_eq!(events[0].event, "TaskStatusUpdateEvent", "{mode:?}");
        let after = gw.counter("wiregate_events_feed_lines_skipped_total").await;
        assert_eq!(after - before, 1, "{mode:?}: the long record counted once");
    }
}
