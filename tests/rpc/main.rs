//! `POST /rpc` over real sockets: translation both ways and to both upstream dialects
//! (`translation`), JSON-RPC 2.0 to the letter (`jsonrpc_spec`), pipelining to the upstream
//! (`pipeline`), failures and their errors (`failures`), the same answer however it is written
//! (`answer_parity`).

#[path = "../support/mod.rs"]
mod support;

mod answer_parity;
mod failures;
mod jsonrpc_spec;
mod pipeline;
mod translation;
