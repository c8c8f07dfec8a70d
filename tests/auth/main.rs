//! Caller identity, access rules and rate limits, over real sockets: JWTs from an identity
//! provider whose key set a test server serves over https (`jwt`), API keys from a file and
//! their reload (`keys`), client certificates over TLS (`mtls`), `allow` rules call by call
//! (`rules`), local rate limits and their headers (`limits`), the pass-through behind the gate
//! (`passthrough`), every carrier of a credential read and stripped (`carriers`), one caller's sid tasks hidden from another (`tenancy`), and the keys
//! `check-config` refuses (`check_config`). Keys and certificates are made in each test.
#![forbid(unsafe_code)]

#[path = "../support/mod.rs"]
mod support;

mod carriers;
mod check_config;
mod jwt;
mod keys;
mod limits;
mod mtls;
mod passthrough;
mod rules;
mod tenancy;

use base64::Engine as _;
use ring::signature::{EcdsaKeyPair, KeyPair as _, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

use support::pki::{self, Pki};

/// The issuer every test's tokens name.
pub const ISSUER: &str = "https://idp.test/";

/// An EC P-256 key made in the test, its JWK and tokens it signs.
pub struct SigningKey {
    pkcs8: Vec<u8>,
    pub kid: String,
    pub jwk: Value,
}

impl SigningKey {
    pub fn new(kid: &str) -> Self {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap()
            .as_ref()
            .to_vec();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng).unwrap();
        let public = pair.public_key().as_ref();
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let jwk = json!({"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
                         "x": b64(&public[1..33]), "y": b64(&public[33..65])});
        SigningKey {
            pkcs8,
            kid: kid.into(),
            jwk,
        }
    }

    /// A token of `claims` (merged over a valid set: this issuer, audience `wiregate`,
    /// subject `alice`, an hour to live).
    pub fn token(&self, claims: Value) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut all = json!({"iss": ISSUER, "aud": "wiregate", "sub": "alice",
                             "iat": now, "exp": now + 3600});
        for (k, v) in claims.as_object().unwrap() {
            all[k] = v.clone();
        }
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        let key = jsonwebtoken::EncodingKey::from_ec_der(&self.pkcs8);
        jsonwebtoken::encode(&header, &all, &key).unwrap()
    }
}

/// An identity provider's key set served over https by the test, changeable while it runs.
pub struct Jwks {
    pub pki: Pki,
    pub url: String,
    pub keys: Arc<Mutex<Vec<Value>>>,
    pub fetches: Arc<std::sync::atomic::AtomicUsize>,
    _serving: pki::TlsServing,
}

impl Jwks {
    pub async fn serve(keys: Vec<Value>) -> Self {
        let pki = Pki::new("idp-ca");
        let issued = pki.issue("idp", &["localhost"]);
        let keys = Arc::new(Mutex::new(keys));
        let fetches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (k, f) = (keys.clone(), fetches.clone());
        let app = axum::Router::new().route(
            "/jwks.json",
            axum::routing::get(move || {
                let (k, f) = (k.clone(), f.clone());
                async move {
                    f.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let set = json!({"keys": *k.lock().unwrap()});
                    axum::Json(set)
                }
            }),
        );
        let serving = pki::serve_tls(app, pki::server_config(&issued, None)).await;
        let url = format!("https://localhost:{}/jwks.json", serving.addr.port());
        Jwks {
            pki,
            url,
            keys,
            fetches,
            _serving: serving,
        }
    }

    /// `[[auth.jwt]]` for this provider.
    pub fn config(&self) -> wiregate::config::Jwt {
        wiregate::config::Jwt {
            issuer: ISSUER.into(),
            audiences: vec!["wiregate".into()],
            jwks_url: self.url.clone(),
            ca_file: self.pki.ca_file(),
            ..Default::default()
        }
    }
}

/// A JSON-RPC request.
pub fn call(id: Value, method: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}})
}
