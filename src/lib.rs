//! wiregate: a protocol gateway between a legacy agent envelope, JSON-RPC 2.0, and `sid --raw`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod events;
pub mod facade;
pub mod wire;
