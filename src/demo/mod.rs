//! Stand-ins for the servers wiregate fronts, for `--demo`, the examples and the tests: a small
//! legacy agent server, its migrated JSON-RPC counterpart, and a fake `sid --raw`.

mod jsonrpc;
mod legacy;
pub mod sid;

pub use jsonrpc::{jsonrpc_upstream, Faults};
pub use legacy::legacy_upstream;
