//! Stand-ins for the servers wiregate fronts, for `--demo`, the examples and the tests: a small
//! legacy agent server, and a fake `sid --raw`.

mod legacy;
pub mod sid;

pub use legacy::legacy_upstream;
