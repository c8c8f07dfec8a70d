//! The Gherkin features in `features/`, run as real cucumber steps under `cargo test`.
//! Undefined or skipped steps fail the run.
#![forbid(unsafe_code)]

#[path = "../support/mod.rs"]
mod support;

mod a2a_steps;
mod events_steps;
mod migrating_safely_steps;
mod migration_steps;
mod raw_steps;
mod sid_steps;
mod sse_steps;
mod wire_steps;

use std::sync::Arc;

use cucumber::World as _;
use serde_json::Value;
use wiregate::events::ReplayLog;
use wiregate::model::event::A2aEvent;
use wiregate::wire::jsonrpc::{Request, Response};
use wiregate::wire::raw::ServerMessage;
use wiregate::wire::ValidationError;
use wiregate::Facade;

/// Everything a scenario may hold between its steps.
#[derive(Debug, Default, cucumber::World)]
pub struct World {
    request: Option<Request>,
    response: Option<Response>,
    dict: Option<Value>,
    /// The bytes a "deserialise" step handed the parser.
    body: Option<Vec<u8>>,
    validation: Option<Result<(), ValidationError>>,
    facade: Option<Facade>,
    event: Option<A2aEvent>,
    sse: Option<String>,
    keepalive: Option<String>,
    queue: Option<Arc<ReplayLog>>,
    bus: Option<sse_steps::Bus>,
    data_json: Option<Value>,
    raw_line: Option<String>,
    server_message: Option<ServerMessage>,
    reserialised: Option<Value>,
    marker: Option<Option<String>>,
    transcript: Option<String>,
    upstreams: Vec<(String, support::Listening, wiregate::config::Dialect)>,
    gateway: Option<support::TestGateway>,
    answer: Option<support::Answer>,
    sse_events: Vec<support::SseEvent>,
    resumed: Vec<support::SseEvent>,
    task: Option<Value>,
    resume_from: Option<String>,
    seen_count: usize,
    feed_url: Option<String>,
    sse_reader: Option<support::SseReader>,
    safely: migrating_safely_steps::Story,
}

#[tokio::main]
async fn main() {
    World::cucumber()
        .fail_on_skipped()
        .run_and_exit("features")
        .await;
}
