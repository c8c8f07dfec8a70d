//! Errors as A2A 1.0 writes them: `error.data` is an array holding a `google.rpc.ErrorInfo`
//! (spec §9.5). A2A's own errors carry the spec's reason in domain `a2a-protocol.org`; the
//! gateway's (sid busy, unavailable, …) carry their kind in domain `wiregate`. A 0.3 call and
//! the seed dialect carry `data` as an object, as those dialects define it. Pure.

use serde_json::{json, Map, Value};

use super::Version;
use crate::model::error::GatewayError;
use crate::wire::jsonrpc::ErrorObject;

/// The `@type` of an ErrorInfo detail.
pub(crate) const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
/// The domain of A2A's own errors.
pub(crate) const A2A_DOMAIN: &str = "a2a-protocol.org";
/// The domain of the gateway's own errors.
pub(crate) const GATEWAY_DOMAIN: &str = "wiregate";

/// The A2A error type (UPPER_SNAKE_CASE, no `Error` suffix) a failure is, when it is one.
fn a2a_reason(e: &GatewayError) -> Option<&'static str> {
    Some(match e {
        GatewayError::TaskNotFound(_) => "TASK_NOT_FOUND",
        GatewayError::TaskNotCancelable { .. } => "TASK_NOT_CANCELABLE",
        GatewayError::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
        GatewayError::UnsupportedOperation(_) => "UNSUPPORTED_OPERATION",
        GatewayError::ContentTypeNotSupported(_) => "CONTENT_TYPE_NOT_SUPPORTED",
        GatewayError::ExtendedCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        GatewayError::VersionNotSupported(_) => "VERSION_NOT_SUPPORTED",
        _ => return None,
    })
}

/// The ErrorInfo of a failure. Its `metadata` is a string map (as google.rpc.ErrorInfo's is).
pub(crate) fn error_info(e: &GatewayError) -> Value {
    let (reason, domain) = match a2a_reason(e) {
        Some(r) => (r.to_owned(), A2A_DOMAIN),
        None => (e.kind().to_ascii_uppercase(), GATEWAY_DOMAIN),
    };
    let mut metadata = Map::new();
    metadata.insert("kind".into(), Value::from(e.kind()));
    match e {
        GatewayError::TaskNotFound(id) | GatewayError::TaskNotCancelable { id, .. } => {
            metadata.insert("taskId".into(), Value::from(id.as_str()));
        }
        GatewayError::VersionNotSupported(v) => {
            metadata.insert("requestedVersion".into(), Value::from(v.as_str()));
            metadata.insert("supportedVersions".into(), Value::from("1.0,0.3"));
        }
        GatewayError::SidFailed {
            code: Some(code), ..
        } => {
            metadata.insert("sidCode".into(), Value::from(code.as_str()));
        }
        _ => {}
    }
    json!({"@type": ERROR_INFO_TYPE, "reason": reason, "domain": domain, "metadata": metadata})
}

/// The JSON-RPC error of a failure answered in `version` (`None`: the seed dialect's).
pub(crate) fn wire_error(e: &GatewayError, version: Option<Version>) -> ErrorObject {
    match version {
        Some(Version::V1_0) => {
            ErrorObject::new(e.jsonrpc_code(), e.to_string()).with_data(json!([error_info(e)]))
        }
        Some(Version::V0_3) | None => e.to_jsonrpc(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_1_0_error_carries_an_error_info_and_0_3_keeps_its_object() {
        let e = GatewayError::TaskNotFound("t9".into());
        let one = wire_error(&e, Some(Version::V1_0));
        assert_eq!(one.code, -32001);
        let data = one.data.unwrap();
        assert_eq!(data[0]["@type"], ERROR_INFO_TYPE);
        assert_eq!(data[0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(data[0]["domain"], A2A_DOMAIN);
        assert_eq!(data[0]["metadata"]["taskId"], "t9");
        let old = wire_error(&e, Some(Version::V0_3));
        assert_eq!(old.data.unwrap(), json!({"kind": "task_not_found"}));
        let busy = wire_error(&GatewayError::SidBusy("x".into()), Some(Version::V1_0));
        let d = busy.data.unwrap();
        assert_eq!(d[0]["reason"], "SID_BUSY");
        assert_eq!(d[0]["domain"], GATEWAY_DOMAIN);
        assert!(d[0]["metadata"]
            .as_object()
            .unwrap()
            .values()
            .all(Value::is_string));
    }
}
