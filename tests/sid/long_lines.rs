//! A line of sid's longer than `sid.max_line_bytes`: skipped as it arrives, counted, and the
//! lines after it read.

use crate::support;

use serde_json::json;
use support::{gateway, text_message};

#[tokio::test]
async fn a_sid_line_over_the_cap_is_skipped_and_the_turn_goes_on() {
    let gw = gateway().sid("overlong").start().await;
    let before = gw.counter("wiregate_sid_lines_skipped_total").await;
    // The fake prints 12 MiB without a newline (the default cap is 4 MiB), then its answer.
    let r = gw.call("message/send", text_message("overlong")).await;
    assert_eq!(r["result"]["status"]["state"], "completed", "{r}");
    assert_eq!(
        r["result"]["artifacts"],
        json!([{"name": "response", "parts": [{"kind": "text", "text": "Hello from the mock model."}]}]),
    );
    let after = gw.counter("wiregate_sid_lines_skipped_total").await;
    assert_eq!(after - before, 1, "the long line counted once");
    // The context goes on.
    let ctx = r["result"]["contextId"].clone();
    let again = gw
        .call(
            "message/send",
            json!({"message": {"parts": [{"text": "hello"}]}, "contextId": ctx}),
        )
        .await;
    assert_eq!(again["result"]["status"]["state"], "completed", "{again}");
}
