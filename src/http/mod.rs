//! HTTP work apart from sockets: header handling, the forwarding headers, the answer a call
//! gets, the gateway's own paths, what one request carries (its trace, its notes), and the SSE
//! socket writer's framing.

pub mod client_ip;
pub(crate) mod date;
pub mod forwarded;
pub(crate) mod headers;
pub(crate) mod reply;
pub mod request_head;
pub mod routes;
pub(crate) mod scope;
pub(crate) mod span;
pub(crate) mod sse_conn;
pub(crate) mod trace;
