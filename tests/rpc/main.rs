//! `POST /rpc` over real sockets: translation both ways and to both upstream dialects
//! (`translation`), JSON-RPC 2.0 to the letter (`jsonrpc_spec`), pipelining to the upstream
//! (`pipeline`), failures and their errors (`errors`), the same answer however it is written
//! (`answer_parity`), the RPC paths (`paths`), W3C trace context (`tracing`), every bound
//! on what a client may send or hold (`limits`), a hostile client's numbers (`hostile`), and
//! the per-core workers (`workers`).
#![forbid(unsafe_code)]

#[path = "../support/mod.rs"]
mod support;

mod answer_parity;
mod errors;
mod hostile;
mod jsonrpc_spec;
mod limits;
mod paths;
mod pipeline;
mod tracing;
mod translation;
mod workers;
