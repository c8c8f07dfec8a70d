//! The gateway's one way out: every HTTP request it makes (a call to an upstream, a pipelined
//! lane, the pass-through, a push webhook, a JWKS fetch, the domain-event feed, a span export,
//! a call carried to another replica, the command line's admin requests) is dialled, secured
//! and exchanged here.
//!
//! One [`Pool`] per destination owns the rules a connection is made with: the URL's host
//! resolved when it connects, or, for a destination a caller chose, the addresses its
//! [`Policy`] checked and nothing else; TLS from one rule set ([`tls`]); the waits bounded by
//! [`Options`]. Its exchange is the hand-written HTTP/1.1 of [`h1`] (one buffer written, the
//! answer framed by RFC 9112), with [`pipeline`]'s lanes for upstreams that allow them, so the
//! proxied call's hot path wakes no other task. A request that is not the gateway's usual
//! `POST` of JSON ([`Pool::fetch`], [`Pool::open`]) goes over the same connections. OTLP over
//! gRPC alone needs HTTP/2: it uses hyper's client over [`tls::h2_connector`].

mod answer;
mod checked;
pub mod h1;
mod pipeline;
pub(crate) mod policy;
mod pool;
mod ranges;
mod request;
pub(crate) mod stream;
#[cfg(test)]
mod tests;
pub(crate) mod tls;

use std::sync::Arc;
use std::time::Duration;

pub(crate) use answer::{done, read_whole, reusable, send_on, stream_answer};
pub(crate) use checked::Checked;
pub(crate) use policy::Policy;
pub(crate) use pool::{authority_of, Pool};
pub(crate) use request::Request;

/// What one destination's requests are bounded by. Each use builds its own from its
/// configuration; the defaults below are for the uses the configuration gives no key to.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// Opening a connection: TCP and the TLS handshake.
    pub(crate) connect: Duration,
    /// Each wait for the answer's bytes once the request is written: its head, and each read
    /// of a body read whole.
    pub(crate) read: Duration,
    /// The whole exchange, connection included (a streamed answer's body excepted: its reader
    /// bounds it).
    pub(crate) total: Duration,
    /// The largest answer body read whole.
    pub(crate) max_answer: usize,
    /// The client configuration of an `https://` destination (`None`: the platform's roots).
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
}

impl Options {
    /// Every wait within `timeout` (connect, reads and the whole exchange alike), answers up to
    /// `max_answer` bytes: what an upstream's `timeout_ms` and the RPC path's body limit say.
    pub(crate) fn within(timeout: Duration, max_answer: usize) -> Self {
        Options {
            connect: timeout,
            read: timeout,
            total: timeout,
            max_answer,
            tls: None,
        }
    }

    /// With `tls` for an `https://` destination.
    pub(crate) fn with_tls(mut self, tls: Option<Arc<rustls::ClientConfig>>) -> Self {
        self.tls = tls;
        self
    }

    /// With connections opened within `connect`.
    pub(crate) fn connect_within(mut self, connect: Duration) -> Self {
        self.connect = connect;
        self
    }
}

/// How a request through the outbound client failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The exchange failed: no connection, a broken one, an answer that is not HTTP/1.1 or is
    /// larger than allowed.
    #[error(transparent)]
    Exchange(#[from] h1::Error),
    /// No connection, or no answer, in time; `sent` when the request may have reached the
    /// destination.
    #[error("no answer in time")]
    TimedOut {
        /// Whether any byte of the request was written.
        sent: bool,
    },
    /// A pipelined lane's task ended before it answered.
    #[error("the pipelined connection's task ended")]
    LaneGone,
    /// The URL is not one the client can dial.
    #[error("{0}")]
    Url(String),
    /// The destination policy refused where the URL leads.
    #[error("{0}")]
    Refused(crate::model::error::GatewayError),
}
