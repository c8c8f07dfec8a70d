//! Test builders over real sockets: programmable upstreams and a running gateway, all on
//! 127.0.0.1 ephemeral ports. Each part lives in the module that owns it; the names tests use
//! are re-exported here, so `support::gateway()` reads the same wherever a part lives.
// Each test binary compiles all of this and uses a part of it.
#![allow(dead_code, unused_imports)]

mod feed;
mod gateway;
pub mod keys;
pub mod migration;
pub mod otlp;
pub mod pki;
pub mod raw_h1;
pub mod redis_server;
pub mod schema;
mod sid;
mod sse;
mod upstream;
mod wait;

pub use feed::{domain_record, feed_server, feed_server_tls, FeedMode, FeedRequests, FeedServer};
pub use gateway::{
    check_config_in, fronting, gateway, routing_all_to, spawn_post, Answer, GatewayBuilder,
    GatewayProcess, TestGateway, BIN,
};
pub use sid::{fake_sid, processes_tagged, text_message};
pub use sse::{SseEvent, SseReader};
pub use upstream::{
    black_hole, dead_url, jsonrpc_echo, legacy_echo, named, upstream, Handler, Listening, Seen,
    UpstreamBuilder,
};
pub use wait::{until, until_true};
