//! What a call writes on its span (the request's SERVER span, or a batch call's INTERNAL one)
//! when its request records spans: the JSON-RPC conventions' `rpc.*` and the gateway's
//! `wiregate.*`. Called only for a traced request; nothing here runs otherwise.

use crate::config::{Config, Dialect};
use crate::model::error::GatewayError;
use crate::upstream::call::Done;
use crate::wire::jsonrpc::{Outcome, Request, Response};

/// A dispatched call: its method, the client's dialect, the upstream that served it (and that
/// upstream's dialect), the route and split side it took, and how it ended.
pub(super) fn dispatched(
    method: &str,
    client_dialect: &'static str,
    (upstream, served): (&str, Option<Dialect>),
    route: Option<(&str, Option<&str>)>,
    result: &Result<Done, GatewayError>,
) {
    crate::http::scope::annotate(|s| {
        s.set("rpc.system", "jsonrpc");
        s.set("rpc.method", method);
        s.set("wiregate.client_dialect", client_dialect);
        s.set("wiregate.upstream", upstream);
        if let Some(d) = served {
            s.set("wiregate.upstream_dialect", d.as_str());
        }
        if let Some((name, side)) = route {
            s.set("wiregate.route", name);
            if let Some(side) = side {
                s.set("wiregate.split_side", side);
            }
        }
        match result {
            Err(e) => {
                s.set("rpc.jsonrpc.error_code", e.jsonrpc_code());
                s.fail(e.kind());
            }
            Ok(Done {
                outcome: Outcome::Error(e),
                ..
            }) => {
                s.set("rpc.jsonrpc.error_code", e.code);
                s.fail("jsonrpc_error");
            }
            Ok(_) => {}
        }
    });
}

/// A streaming call, opened on sid without `dispatch`.
pub(super) fn stream(req: &Request, client_dialect: &'static str) {
    crate::http::scope::annotate(|s| {
        s.set("rpc.system", "jsonrpc");
        s.set("rpc.method", &*req.method);
        s.set("wiregate.upstream", "sid");
        s.set("wiregate.client_dialect", client_dialect);
        if let Some(id) = &req.id {
            id.with_text(|text| s.set("rpc.jsonrpc.request_id", text));
        }
    });
}

/// A batch call's answer: the error code the client sees (a refusal before dispatch
/// included), unless the call's dispatch wrote one.
pub(super) fn answered(resp: &Response) {
    if let Outcome::Error(e) = &resp.outcome {
        crate::http::scope::annotate(|s| {
            if !s.has("rpc.jsonrpc.error_code") {
                s.set("rpc.jsonrpc.error_code", e.code);
                s.fail("jsonrpc_error");
            }
        });
    }
}

/// The spans' `service.instance.id`: the cluster's node id, else the host name and the
/// process id.
pub(super) fn instance_id(config: &Config) -> String {
    if config.cluster.enabled() {
        return config.cluster.resolved_node_id();
    }
    format!("{}:{}", crate::config::host_name(), std::process::id())
}
