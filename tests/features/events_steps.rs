//! Steps for `features/domain_events.feature`: a real feed server and a real gateway.

use std::time::Duration;

use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use serde_json::Value;

use crate::support::{domain_record, feed_server, gateway, FeedMode};
use crate::World;

fn rows(step: &Step) -> Vec<Vec<String>> {
    let table = step.table.as_ref().expect("a table");
    table.rows.iter().skip(1).cloned().collect()
}

#[given("the legacy server's event feed publishes this plan's life")]
async fn feed(w: &mut World, step: &Step) {
    let records = rows(step)
        .into_iter()
        .map(|r| {
            let data: Value = serde_json::from_str(&r[3]).expect("data is JSON");
            domain_record(r[0].parse().unwrap(), &r[1], &r[2], data)
        })
        .collect();
    let server = feed_server(records, FeedMode::Ndjson, None, true).await;
    w.feed_url = Some(server.url());
}

#[given("a gateway reading that feed")]
async fn reading(w: &mut World) {
    let source = w.feed_url.clone().unwrap();
    w.gateway = Some(
        gateway()
            .with(move |c| c.events.source = source)
            .start()
            .await,
    );
}

#[when(expr = "the client follows task {string} on GET \\/events")]
async fn follows(w: &mut World, task: String) {
    let gw = w.gateway.as_ref().unwrap();
    let sse = gw.sse_get(&format!("/events?taskId={task}"), None).await;
    w.sse_reader = Some(sse);
}

#[then("it receives these updates")]
async fn receives(w: &mut World, step: &Step) {
    let expected = rows(step);
    let got = w
        .sse_reader
        .as_mut()
        .unwrap()
        .take(expected.len(), Duration::from_secs(10))
        .await;
    for (row, e) in expected.iter().zip(&got) {
        assert_eq!(e.id, row[0]);
        assert_eq!(e.event, row[1]);
        let params: Value = serde_json::from_str(&row[2]).unwrap();
        assert_eq!(e.data["params"], params);
        assert_eq!(e.data["jsonrpc"], "2.0");
    }
}
