//! Methods the gateway answers itself, before any routing.

use serde_json::json;

use crate::wire::jsonrpc::{ErrorObject, Id, Request, Response};

/// The health-check method every client may call.
pub(crate) const HEALTH_CHECK: &str = "_cleveragents/health/check";

/// The built-in method dispatcher.
#[derive(Debug, Clone, Default)]
pub struct Facade {
    version: &'static str,
}

impl Facade {
    /// A dispatcher reporting this crate's version.
    pub fn new() -> Self {
        Facade {
            version: env!("CARGO_PKG_VERSION"),
        }
    }

    /// Whether `method` is built in.
    pub fn handles(&self, method: &str) -> bool {
        method == HEALTH_CHECK
    }

    /// Answers a call under the caller's id; an unknown method gets -32601.
    pub fn dispatch(&self, req: &Request) -> Response {
        let id = req.id.clone().unwrap_or(Id::Null);
        match req.method.as_str() {
            HEALTH_CHECK => Response::result_value(
                id,
                &json!({"status": "ok", "service": "wiregate", "version": self.version}),
            ),
            other => Response::error(id, ErrorObject::method_not_found(other)),
        }
    }
}
