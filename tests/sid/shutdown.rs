//! Shutdown stops every sid child: no orphans, no zombies. (Its own test binary, so no other
//! test's children are around to confuse the process table.)

use crate::support;

use std::time::Duration;

use support::{gateway, text_message};

const T: Duration = Duration::from_secs(10);

#[tokio::test]
async fn shutdown_stops_every_child_even_a_hung_one_and_ends_the_streams() {
    let tag = format!("shutdown-{}", uuid::Uuid::new_v4());
    let mut gw = gateway().sid(&tag).start().await;
    let idle = gw.call("message/send", text_message("hello")).await;
    let waiting = gw.call("message/send", text_message("use a tool")).await;
    assert_eq!(waiting["result"]["status"]["state"], "input-required");
    let mut hung = gw.stream_message(text_message("hang")).await;
    hung.next(T).await.expect("the hung turn started");
    assert_eq!(
        support::processes_tagged(&tag).len(),
        3,
        "three contexts, three children"
    );
    let ctx = idle["result"]["contextId"].as_str().unwrap().to_owned();
    let mut events = gw.sse_get(&format!("/contexts/{ctx}/events"), None).await;
    events.until_final(T).await;

    gw.running
        .take()
        .unwrap()
        .shutdown(Duration::from_secs(5))
        .await;
    assert!(events.next(T).await.is_none(), "the context stream ended");
    // The hung turn's stream ends too (collect panics if it does not within T).
    hung.collect(T).await;
    let mut left = support::processes_tagged(&tag);
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = support::processes_tagged(&tag);
    }
    assert!(
        left.is_empty(),
        "children left behind (pid, state): {left:?}"
    );
}
