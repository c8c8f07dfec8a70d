//! `[auth.mtls]`: a client certificate the TLS handshake verified names the caller, over
//! HTTP/2 and HTTP/1.1 alike. The access rule admits one name and refuses another 403; the
//! upstream hears who called in the identity header.

use serde_json::json;
use wiregate::config::{AuthMode, Dialect, MtlsIdentity, ServerTls};

use crate::call;
use crate::support::pki::{self, Pki};
use crate::support::{self, jsonrpc_echo};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_certificate_names_the_caller_over_both_http_versions() {
    let pki = Pki::new("mtls CA");
    let server = pki.issue("gateway", &["localhost"]);
    let billing = pki.issue("billing", &["billing.internal"]);
    let reports = pki.issue("reports", &["reports.internal"]);
    let up = jsonrpc_echo().run().await;
    let (cert, key) = server.paths();
    let tls = ServerTls {
        cert,
        key,
        client_ca: pki.ca_file(),
    };
    let gw = support::routing_all_to(&up.url(), Dialect::Jsonrpc)
        .with(move |c| {
            c.server.tls = tls;
            c.auth.mode = AuthMode::Required;
            c.auth.mtls.identity = MtlsIdentity::SanDns;
            c.auth.identity_header = "x-caller-id".into();
            c.routes[0].allow = vec!["sub:billing.internal".into()];
        })
        .start()
        .await;
    let url = format!("https://localhost:{}/rpc", gw.addr.port());
    let post = |client: reqwest::Client, id: u64| {
        let url = url.clone();
        async move {
            let resp = client
                .post(url)
                .header("content-type", "application/json")
                .body(call(json!(id), "m").to_string())
                .send()
                .await
                .unwrap();
            let version = resp.version();
            (resp.status().as_u16(), version, resp.text().await.unwrap())
        }
    };

    let (status, version, text) = post(pki::client(&pki, Some(&billing)), 1).await;
    assert_eq!((status, version), (200, reqwest::Version::HTTP_2), "{text}");
    assert_eq!(
        up.seen().last().unwrap().headers["x-caller-id"],
        "billing.internal"
    );
    let h1 = pki::client_builder(&pki, Some(&billing))
        .http1_only()
        .build()
        .unwrap();
    let (status, version, text) = post(h1, 2).await;
    assert_eq!(
        (status, version),
        (200, reqwest::Version::HTTP_11),
        "{text}"
    );

    let seen = up.seen().len();
    let (status, _, text) = post(pki::client(&pki, Some(&reports)), 3).await;
    assert_eq!(status, 403, "{text}");
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["code"], -32071);
    assert_eq!(
        up.seen().len(),
        seen,
        "a refused call never reaches the upstream"
    );
}
