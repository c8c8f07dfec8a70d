//! After a reload, whoever asks the running server for its gateway gets the one serving
//! requests now, not the first configuration's.

use serde_json::json;
use wiregate::config::Dialect;

use crate::support;
use crate::support::named;

#[tokio::test]
async fn running_gateway_reads_the_reloaded_upstreams() {
    let (a, b) = (named("a").run().await, named("b").run().await);
    let gw = support::routing_all_to(&a.url(), Dialect::Jsonrpc)
        .start()
        .await;
    let running = gw.running.as_ref().expect("running");
    let urls = |r: &wiregate::server::Running| -> Vec<(String, String)> {
        r.gateway()
            .upstreams()
            .iter()
            .map(|u| (u.name().to_owned(), u.config().url.clone()))
            .collect()
    };
    assert_eq!(urls(running), vec![("up".to_owned(), a.url())]);

    let second = support::gateway()
        .upstream("next", &b.url(), Dialect::Jsonrpc, 2000)
        .route(&["*"], "next")
        .into_config();
    let applied = running.reload(&second);
    assert!(applied.reloaded, "{applied:?}");

    assert_eq!(urls(running), vec![("next".to_owned(), b.url())]);
    let answer = gw.call("anything", json!({})).await;
    assert_eq!(answer["result"]["via"], "b", "{answer}");
    // The migration figures are the live gateway's too: the call above is counted there.
    let report = running.gateway().migration().report();
    assert!(report.to_string().contains("next"), "{report}");
}
