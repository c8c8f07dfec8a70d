//! sid's error answers and the requests a context could not make, as the gateway's errors.

use super::context::SendError;
use crate::model::error::GatewayError;
use crate::wire::raw::ServerError;

/// sid's error answer as the gateway's error.
pub(crate) fn sid_error(e: Option<&ServerError>) -> GatewayError {
    let message = e.map_or_else(
        || "sid reported a failure".to_owned(),
        |e| e.message.clone(),
    );
    match e.and_then(|e| e.code.as_deref()) {
        Some("busy") => GatewayError::SidBusy(message),
        Some("stale_prompt") => GatewayError::SidStalePrompt(message),
        Some("invalid_request" | "invalid_request_json" | "unsupported_protocol_version") => {
            GatewayError::SidRejected(message)
        }
        code => GatewayError::SidFailed {
            code: code.map(str::to_owned),
            message,
        },
    }
}

pub(super) fn gone(e: SendError) -> GatewayError {
    match e {
        SendError::Gone(reason) => GatewayError::SidUnavailable(reason),
        SendError::Busy(reason) => GatewayError::SidBusy(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sid_error_codes_map_to_distinct_jsonrpc_errors() {
        let code = |c: Option<&str>| {
            sid_error(Some(&ServerError {
                code: c.map(str::to_owned),
                message: "m".into(),
            }))
            .to_jsonrpc()
            .code
        };
        let codes = [
            code(Some("busy")),
            code(Some("stale_prompt")),
            code(Some("invalid_request")),
            code(None),
        ];
        assert_eq!(codes, [-32060, -32061, -32602, -32062]);
    }
}
