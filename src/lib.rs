//! wiregate: a protocol gateway between a legacy agent envelope, JSON-RPC 2.0, and `sid --raw`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bridge;
pub mod config;
pub mod demo;
pub mod error;
pub mod events;
pub mod facade;
pub mod feed;
pub mod proxy;
pub mod router;
pub mod rpc;
pub mod server;
pub mod stream;
pub mod telemetry;
pub mod wire;
