//! wiregate: a protocol gateway between a legacy agent envelope, JSON-RPC 2.0, and `sid --raw`.
//!
//! The pure translation is usable on its own:
//!
//! ```
//! use wiregate::wire::dialect::{parse, Inbound, Message};
//! use wiregate::wire::translate::request_to_legacy;
//!
//! let body = br#"{"jsonrpc":"2.0","id":7,"method":"plan.get","params":{"plan_id":"P1"}}"#;
//! let Ok(Inbound::JsonRpc(Message::Single(Ok(req)))) = parse(body) else { panic!() };
//! let legacy = request_to_legacy(req, "7".into(), None).unwrap();
//! assert_eq!(
//!     serde_json::to_value(&legacy).unwrap(),
//!     serde_json::json!({"a2a_version": "1.0", "request_id": "7", "operation": "plan.get",
//!                        "params": {"plan_id": "P1"}, "auth": null})
//! );
//!
//! // A legacy envelope on the same endpoint is told apart by its `operation` member.
//! let legacy_body = br#"{"a2a_version":"1.0","request_id":"r1","operation":"plan.get"}"#;
//! assert!(matches!(parse(legacy_body), Ok(Inbound::Legacy(Ok(_)))));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]

// In their layers' order: each uses only itself and those above it (`tests/layers.rs`). The
// public modules are the library's API: the pure wire layer and domain model, the
// configuration, the server and what the binary, the examples, the benches and the fuzz targets
// call; the rest is the gateway's own.
pub(crate) mod a2a;
pub mod auth;
pub(crate) mod cluster;
pub mod config;
pub(crate) mod console;
#[cfg(feature = "demo")]
pub mod demo;
pub mod events;
pub(crate) mod gateway;
pub mod http;
pub mod migration;
pub mod model;
pub mod outbound;
pub mod passthrough;
pub mod server;
pub(crate) mod sid;
pub mod telemetry;
pub mod upstream;
pub(crate) mod util;
pub mod wire;

/// The built-in methods (`_cleveragents/health/check` and the like), answered without an
/// upstream.
pub use gateway::facade::Facade;
