//! HTTP work apart from sockets: header handling, the forwarding headers, the answer a call
//! gets, the gateway's own paths, what one request carries (its trace, its notes), and the SSE
//! socket writer's framing.

pub mod date;
pub mod forwarded;
pub mod headers;
pub mod reply;
pub mod routes;
pub mod scope;
pub mod sse_conn;
pub mod trace;
