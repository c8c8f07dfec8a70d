//! Who may do what: the admin routes' callers; callers proven by a JWT ([`jwt`]), an API key
//! ([`keys`]) or a client certificate ([`mtls`]); the rules of who may call what; and how much
//! they may call ([`limits`], shared across replicas by [`shared`]).

pub mod admin;
mod bucket;
pub(crate) mod caller;
pub(crate) mod gate;
pub(crate) mod jwks;
pub(crate) mod jwt;
pub(crate) mod keys;
pub(crate) mod limits;
pub(crate) mod mtls;
pub(crate) mod refusal;
pub(crate) mod shared;

pub(crate) use caller::{Caller, Kind};
