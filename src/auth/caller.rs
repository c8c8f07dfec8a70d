//! A verified caller: what the access rules, the rate limits, the upstream's identity header and
//! the migration's figures know of who calls. Nothing of the credential is in it.

use std::sync::Arc;

/// How a caller proved who it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A JWT of a configured issuer (`[[auth.jwt]]`).
    Jwt,
    /// An API key of `auth.api_keys.file`.
    ApiKey,
    /// A verified client certificate (`auth.mtls.identity`).
    Mtls,
}

impl Kind {
    /// How metrics and logs name it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Jwt => "jwt",
            Kind::ApiKey => "api_key",
            Kind::Mtls => "mtls",
        }
    }
}

/// A verified caller. Cheap to clone (shared).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Caller {
    pub(crate) kind: Kind,
    /// The JWT's subject claim, the API key's `id`, or the certificate's name.
    pub(crate) id: Arc<str>,
    /// The JWT's `scope` (space-separated) and `scp` claims, or the API key's `scopes`.
    pub(crate) scopes: Arc<[Box<str>]>,
    /// `kind:id`: what the caller's contexts and tasks are owned by (tenancy), one name per
    /// caller however it proved itself.
    pub(crate) tenant: Arc<str>,
}

impl Caller {
    pub(crate) fn new(kind: Kind, id: &str, scopes: impl IntoIterator<Item = String>) -> Self {
        Caller {
            kind,
            tenant: format!("{}:{id}", kind.as_str()).into(),
            id: id.into(),
            scopes: scopes.into_iter().map(String::into_boxed_str).collect(),
        }
    }

    /// Whether it holds `scope`.
    pub(crate) fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| &**s == scope)
    }
}
