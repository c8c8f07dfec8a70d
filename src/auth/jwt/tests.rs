//! The verifier against keys made here (RSA by `openssl`, EC P-256 and Ed25519 by ring), key
//! sets in files and on a small https server of this test's own CA.

use std::sync::atomic::AtomicUsize;
use std::sync::{Mutex, OnceLock};

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use jsonwebtoken::{EncodingKey, Header};
use ring::rand::SystemRandom;
use ring::signature::{self, KeyPair};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

const ISS: &str = "https://idp.test";
const AUD: &str = "gateway";

/// A signing key made for the test, and its public key as a JWK.
struct TestKey {
    alg: Algorithm,
    kid: String,
    encoding: EncodingKey,
    jwk: Value,
    /// The public key's DER (RSA: PKCS#1), for the HMAC confusion test.
    public: Vec<u8>,
}

impl TestKey {
    fn sign(&self, claims: &Value) -> String {
        self.sign_as(self.alg, Some(&self.kid), claims)
    }

    fn sign_as(&self, alg: Algorithm, kid: Option<&str>, claims: &Value) -> String {
        let mut header = Header::new(alg);
        header.kid = kid.map(str::to_owned);
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

/// A 2048-bit RSA private key (PKCS#1 DER) per slot, made once per test run.
fn rsa_der(slot: usize) -> &'static [u8] {
    static KEYS: [OnceLock<Vec<u8>>; 2] = [const { OnceLock::new() }; 2];
    KEYS[slot].get_or_init(|| {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 | openssl rsa -traditional -outform DER")
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "openssl: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    })
}

fn rsa(slot: usize, kid: &str) -> TestKey {
    let der = rsa_der(slot);
    let pair = signature::RsaKeyPair::from_der(der).unwrap();
    let public = signature::RsaPublicKeyComponents::<Vec<u8>>::from(pair.public());
    TestKey {
        alg: Algorithm::RS256,
        kid: kid.into(),
        encoding: EncodingKey::from_rsa_der(der),
        jwk: json!({"kty": "RSA", "kid": kid, "n": B64.encode(&public.n), "e": B64.encode(&public.e)}),
        public: pair.public().as_ref().to_vec(),
    }
}

fn ec(kid: &str) -> TestKey {
    let rng = SystemRandom::new();
    let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let pkcs8 = signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
    let pair = signature::EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
    let point = pair.public_key().as_ref(); // 0x04 || x || y
    TestKey {
        alg: Algorithm::ES256,
        kid: kid.into(),
        encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
        jwk: json!({"kty": "EC", "crv": "P-256", "kid": kid,
            "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..])}),
        public: point.to_vec(),
    }
}

fn ed(kid: &str) -> TestKey {
    let pkcs8 = signature::Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
    let pair = signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let x = pair.public_key().as_ref();
    TestKey {
        alg: Algorithm::EdDSA,
        kid: kid.into(),
        encoding: EncodingKey::from_ed_der(pkcs8.as_ref()),
        jwk: json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": B64.encode(x)}),
        public: x.to_vec(),
    }
}

fn now_s() -> u64 {
    unix_ms() / 1000
}

/// Good claims for [`ISS`], with `patch`'s keys set over them (a `null` removes one).
fn claims(patch: Value) -> Value {
    let mut c = json!({
        "iss": ISS, "aud": AUD, "sub": "alice", "exp": now_s() + 600,
        "scope": "read write", "scp": ["admin", "read"],
    });
    for (k, v) in patch.as_object().unwrap() {
        match v {
            Value::Null => c.as_object_mut().unwrap().remove(k),
            v => c.as_object_mut().unwrap().insert(k.clone(), v.clone()),
        };
    }
    c
}

fn jwks(keys: &[&TestKey]) -> String {
    json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()}).to_string()
}

/// A key set file in `dir`.
fn jwks_file(dir: &tempfile::TempDir, name: &str, keys: &[&TestKey]) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, jwks(keys)).unwrap();
    path.to_string_lossy().into_owned()
}

fn issuer(iss: &str, jwks_file: String) -> Jwt {
    Jwt {
        issuer: iss.into(),
        audiences: vec![AUD.into()],
        jwks_file,
        ..Jwt::default()
    }
}

/// A verifier of [`ISS`] with `keys` in a file.
fn verifier(keys: &[&TestKey]) -> (Verifier, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = jwks_file(&dir, "jwks.json", keys);
    (Verifier::new(&[issuer(ISS, file)], None).unwrap(), dir)
}

#[tokio::test]
async fn valid_tokens_of_each_algorithm_are_accepted() {
    let keys = [rsa(0, "r1"), ec("e1"), ed("d1")];
    let (v, _dir) = verifier(&keys.iter().collect::<Vec<_>>());
    assert!(!v.is_empty());
    for key in &keys {
        let caller = v.verify(&key.sign(&claims(json!({})))).await;
        let caller = caller.unwrap_or_else(|e| panic!("{:?}: {e}", key.alg));
        assert_eq!(caller.kind, Kind::Jwt);
        assert_eq!(&*caller.id, "alice");
        let scopes: Vec<&str> = caller.scopes.iter().map(|s| &**s).collect();
        assert_eq!(scopes, ["read", "write", "admin"]);
    }
    // Without a kid, the issuer's only key of the type.
    let token = keys[1].sign_as(Algorithm::ES256, None, &claims(json!({"sub": "bob"})));
    assert_eq!(&*v.verify(&token).await.unwrap().id, "bob");
}

#[tokio::test]
async fn without_a_kid_each_key_of_the_type_is_tried() {
    let (e1, e2, r1) = (ec("e1"), ec("e2"), rsa(0, "r1"));
    let (v, _dir) = verifier(&[&e1, &e2, &r1]);
    let token = e2.sign_as(Algorithm::ES256, None, &claims(json!({})));
    assert!(v.verify(&token).await.is_ok());
    let stranger = ec("e3").sign_as(Algorithm::ES256, None, &claims(json!({})));
    assert_eq!(v.verify(&stranger).await, Err(JwtError::Signature));
}

#[tokio::test]
async fn exp_and_nbf_are_checked_with_the_leeway() {
    let key = ed("d1");
    let dir = tempfile::tempdir().unwrap();
    let file = jwks_file(&dir, "jwks.json", &[&key]);
    let strict = Jwt {
        leeway_ms: 0,
        ..issuer("https://strict.test", file.clone())
    };
    let v = Verifier::new(&[issuer(ISS, file), strict], None).unwrap();
    let now = now_s();
    let at = |patch: Value| key.sign(&claims(patch));

    assert_eq!(
        v.verify(&at(json!({"exp": now - 120}))).await,
        Err(JwtError::Expired)
    );
    assert_eq!(
        v.verify(&at(json!({"nbf": now + 120}))).await,
        Err(JwtError::NotYetValid)
    );
    // Within the default 30 s leeway.
    assert!(v.verify(&at(json!({"exp": now - 10}))).await.is_ok());
    assert!(v.verify(&at(json!({"nbf": now + 10}))).await.is_ok());
    assert!(v.verify(&at(json!({"nbf": now - 10}))).await.is_ok());
    // Without leeway.
    let strict = |patch: Value| at(json!({"iss": "https://strict.test"}).merge(patch));
    assert_eq!(
        v.verify(&strict(json!({"exp": now - 10}))).await,
        Err(JwtError::Expired)
    );
    assert_eq!(
        v.verify(&strict(json!({"nbf": now + 10}))).await,
        Err(JwtError::NotYetValid)
    );
    assert!(v.verify(&strict(json!({}))).await.is_ok());
    // exp is required.
    assert_eq!(
        v.verify(&at(json!({"exp": null}))).await,
        Err(JwtError::Claim("exp".into()))
    );
}

/// Merging JSON objects, for claims built in steps.
trait Merge {
    fn merge(self, other: Value) -> Value;
}

impl Merge for Value {
    fn merge(mut self, other: Value) -> Value {
        for (k, v) in other.as_object().unwrap() {
            self.as_object_mut().unwrap().insert(k.clone(), v.clone());
        }
        self
    }
}

#[tokio::test]
async fn issuer_audience_and_subject_are_checked() {
    let key = ec("e1");
    let (v, _dir) = verifier(&[&key]);
    let at = |patch: Value| key.sign(&claims(patch));
    assert_eq!(
        v.verify(&at(json!({"iss": "https://other.test"}))).await,
        Err(JwtError::UnknownIssuer)
    );
    assert_eq!(
        v.verify(&at(json!({"iss": null}))).await,
        Err(JwtError::Claim("iss".into()))
    );
    assert_eq!(
        v.verify(&at(json!({"aud": "someone-else"}))).await,
        Err(JwtError::Audience)
    );
    assert_eq!(
        v.verify(&at(json!({"aud": null}))).await,
        Err(JwtError::Claim("aud".into()))
    );
    assert!(v.verify(&at(json!({"aud": ["other", AUD]}))).await.is_ok());
    assert_eq!(
        v.verify(&at(json!({"sub": null}))).await,
        Err(JwtError::Claim("sub".into()))
    );
    assert_eq!(
        v.verify(&at(json!({"sub": 7}))).await,
        Err(JwtError::Claim("sub".into()))
    );
    assert_eq!(v.verify("not a token").await, Err(JwtError::Malformed));
}

#[tokio::test]
async fn alg_none_and_hmac_with_the_public_key_are_refused() {
    let key = rsa(0, "r1");
    let (v, _dir) = verifier(&[&key]);
    let body = B64.encode(claims(json!({})).to_string());
    let none = format!("{}.{body}.", B64.encode(r#"{"alg":"none","typ":"JWT"}"#));
    assert_eq!(v.verify(&none).await, Err(JwtError::Malformed));
    let none = format!("{}.{body}.", B64.encode(r#"{"alg":"none","kid":"r1"}"#));
    assert_eq!(v.verify(&none).await, Err(JwtError::Malformed));

    // HS256 "signed" with the RSA public key as the secret, with and without the key's kid.
    let hmac = TestKey {
        encoding: EncodingKey::from_secret(&key.public),
        ..rsa(0, "r1")
    };
    for kid in [Some("r1"), None] {
        let token = hmac.sign_as(Algorithm::HS256, kid, &claims(json!({})));
        assert_eq!(v.verify(&token).await, Err(JwtError::Algorithm));
    }
    let n = B64.encode(key.jwk["n"].as_str().unwrap());
    let hmac = TestKey {
        encoding: EncodingKey::from_secret(n.as_bytes()),
        ..rsa(0, "r1")
    };
    let token = hmac.sign_as(Algorithm::HS256, Some("r1"), &claims(json!({})));
    assert_eq!(v.verify(&token).await, Err(JwtError::Algorithm));
}

#[tokio::test]
async fn a_bad_signature_is_refused() {
    let key = ec("e1");
    let (v, _dir) = verifier(&[&key]);
    let token = key.sign(&claims(json!({})));
    let (signed, signature) = token.rsplit_once('.').unwrap();
    let mut forged = signature.as_bytes().to_vec();
    forged[10] = if forged[10] == b'A' { b'B' } else { b'A' };
    let forged = format!("{signed}.{}", std::str::from_utf8(&forged).unwrap());
    assert_eq!(v.verify(&forged).await, Err(JwtError::Signature));
    // Other claims under the first token's signature.
    let other = key.sign(&claims(json!({"sub": "mallory"})));
    let (other_signed, _) = other.rsplit_once('.').unwrap();
    let spliced = format!("{other_signed}.{signature}");
    assert_eq!(v.verify(&spliced).await, Err(JwtError::Signature));
}

#[tokio::test]
async fn a_key_of_another_issuer_does_not_verify() {
    let (a, b) = (rsa(0, "ra"), rsa(1, "rb"));
    let dir = tempfile::tempdir().unwrap();
    let v = Verifier::new(
        &[
            issuer(ISS, jwks_file(&dir, "a.json", &[&a])),
            issuer("https://b.test", jwks_file(&dir, "b.json", &[&b])),
        ],
        None,
    )
    .unwrap();
    let for_b = claims(json!({"iss": "https://b.test"}));
    assert!(v.verify(&b.sign(&for_b)).await.is_ok());
    // B's key, claiming to be A.
    let as_a = claims(json!({}));
    assert_eq!(v.verify(&b.sign(&as_a)).await, Err(JwtError::UnknownKey));
    assert_eq!(
        v.verify(&b.sign_as(Algorithm::RS256, Some("ra"), &as_a))
            .await,
        Err(JwtError::Signature)
    );
    assert_eq!(
        v.verify(&b.sign_as(Algorithm::RS256, None, &as_a)).await,
        Err(JwtError::Signature)
    );
}

#[tokio::test]
async fn an_algorithm_the_issuer_or_key_does_not_take_is_refused() {
    let (r, e) = (rsa(0, "r1"), ec("e1"));
    let dir = tempfile::tempdir().unwrap();
    let only_es256 = Jwt {
        algorithms: vec!["ES256".into()],
        ..issuer(ISS, jwks_file(&dir, "jwks.json", &[&r, &e]))
    };
    let v = Verifier::new(&[only_es256], None).unwrap();
    assert_eq!(
        v.verify(&r.sign(&claims(json!({})))).await,
        Err(JwtError::Algorithm)
    );
    assert!(v.verify(&e.sign(&claims(json!({})))).await.is_ok());
    // An EC signature naming the RSA key.
    let token = e.sign_as(Algorithm::ES256, Some("r1"), &claims(json!({})));
    assert_eq!(v.verify(&token).await, Err(JwtError::Algorithm));

    let dir2 = tempfile::tempdir().unwrap();
    for bad in ["HS256", "none", "ES512"] {
        let cfg = Jwt {
            algorithms: vec!["RS256".into(), bad.into()],
            ..issuer(ISS, jwks_file(&dir2, "jwks.json", &[&r]))
        };
        let err = Verifier::new(&[cfg], None).err().unwrap();
        assert!(err.starts_with("auth.jwt[0].algorithms: "), "{err}");
    }
}

#[tokio::test]
async fn a_reload_takes_a_rotated_jwks_file() {
    let (old, new) = (rsa(0, "2024"), ed("2025"));
    let dir = tempfile::tempdir().unwrap();
    let cfg = [issuer(ISS, jwks_file(&dir, "jwks.json", &[&old]))];
    let v1 = Verifier::new(&cfg, None).unwrap();
    let old_token = old.sign(&claims(json!({})));
    assert!(v1.verify(&old_token).await.is_ok());

    jwks_file(&dir, "jwks.json", &[&new]);
    let v2 = Verifier::new(&cfg, Some(&v1)).unwrap();
    assert!(v2.verify(&new.sign(&claims(json!({})))).await.is_ok());
    assert_eq!(v2.verify(&old_token).await, Err(JwtError::UnknownKey));
}

#[test]
fn config_errors_name_their_key() {
    let key = ec("e1");
    let dir = tempfile::tempdir().unwrap();
    let good = issuer(ISS, jwks_file(&dir, "good.json", &[&key]));
    let missing = issuer(
        "https://b.test",
        dir.path().join("nope.json").to_string_lossy().into(),
    );
    let err = Verifier::new(&[good.clone(), missing], None).err().unwrap();
    assert!(err.starts_with("auth.jwt[1].jwks_file: "), "{err}");

    let path = dir.path().join("hmac.json");
    std::fs::write(&path, r#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#).unwrap();
    let hmac_only = issuer("https://b.test", path.to_string_lossy().into());
    let err = Verifier::new(&[hmac_only], None).err().unwrap();
    assert!(err.starts_with("auth.jwt[0].jwks_file: "), "{err}");

    let err = Verifier::new(&[good.clone(), good.clone()], None)
        .err()
        .unwrap();
    assert!(err.starts_with("auth.jwt[1].issuer: "), "{err}");

    let plain = Jwt {
        jwks_url: "http://idp.test/jwks".into(),
        jwks_file: String::new(),
        ..good
    };
    let err = Verifier::new(&[plain], None).err().unwrap();
    assert!(err.starts_with("auth.jwt[0].jwks_url: "), "{err}");
    assert!(Verifier::new(&[], None).unwrap().is_empty());
}

#[tokio::test]
async fn a_cached_token_skips_the_check_until_its_exp() {
    let key = ed("d1");
    let dir = tempfile::tempdir().unwrap();
    let cfg = Jwt {
        leeway_ms: 0,
        ..issuer(ISS, jwks_file(&dir, "jwks.json", &[&key]))
    };
    let v = Verifier::new(&[cfg], None).unwrap();
    let token = key.sign(&claims(json!({})));
    let first = v.verify(&token).await.unwrap();
    let again = v.verify(&token).await.unwrap();
    assert_eq!(first, again);
    assert!(Arc::ptr_eq(&first.id, &again.id), "the cached caller");
    assert_eq!(v.cache.len(), 1);

    let exp = now_s() + 1;
    let short = key.sign(&claims(json!({"exp": exp, "sub": "brief"})));
    assert!(v.verify(&short).await.is_ok());
    assert!(v.verify(&short).await.is_ok());
    while unix_ms() < exp * 1000 + 20 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(v.verify(&short).await, Err(JwtError::Expired));
}

/// A key set served over https by a CA made here; what it serves can change.
struct JwksServer {
    url: String,
    ca_file: String,
    body: Arc<Mutex<String>>,
    served: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl JwksServer {
    async fn start(body: String) -> JwksServer {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "jwks test CA");
        let ca = ca.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, text: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path.to_string_lossy().into_owned()
        };
        let ca_file = file("ca.pem", ca.pem());
        let tls = crate::config::ServerTls {
            cert: file("server.pem", leaf.pem()),
            key: file("server.key", key.serialize_pem()),
            client_ca: String::new(),
        };
        let acceptor =
            tokio_rustls::TlsAcceptor::from(crate::config::tls::server_config(&tls).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}/jwks.json", listener.local_addr().unwrap());
        let body = Arc::new(Mutex::new(body));
        let served = Arc::new(AtomicUsize::new(0));
        let (b, s) = (body.clone(), served.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(serve(acceptor.clone(), tcp, b.clone(), s.clone()));
            }
        });
        JwksServer {
            url,
            ca_file,
            body,
            served,
            task,
            _dir: dir,
        }
    }

    fn serve_keys(&self, keys: &[&TestKey]) {
        *self.body.lock().unwrap() = jwks(keys);
    }

    fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }

    /// Closes the listener; its CA file stays.
    async fn stop(&mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }

    fn issuer(&self) -> Jwt {
        Jwt {
            issuer: ISS.into(),
            audiences: vec![AUD.into()],
            jwks_url: self.url.clone(),
            ca_file: self.ca_file.clone(),
            ..Jwt::default()
        }
    }
}

/// One request on one connection: the key set, then close.
async fn serve(
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: tokio::net::TcpStream,
    body: Arc<Mutex<String>>,
    served: Arc<AtomicUsize>,
) {
    let Ok(mut tls) = acceptor.accept(tcp).await else {
        return;
    };
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match tls.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    served.fetch_add(1, Ordering::SeqCst);
    let body = body.lock().unwrap().clone();
    let answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tls.write_all(answer.as_bytes()).await;
    let _ = tls.shutdown().await;
}

/// Waits (5 s at most) for the first fetch of `v`'s first issuer to be taken.
async fn first_fetch(v: &Verifier) {
    for _ in 0..500 {
        if v.issuers[0].keys.load().len() > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the key set was not fetched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_url_is_fetched_again_for_an_unknown_kid_and_kept_when_down() {
    let (k1, k2, k3) = (ec("u1"), ed("u2"), rsa(0, "u3"));
    let mut server = JwksServer::start(jwks(&[&k1])).await;
    let cfg = [server.issuer()];
    let v = Arc::new(Verifier::new(&cfg, None).unwrap());
    v.start();
    v.start();
    first_fetch(&v).await;
    assert_eq!(server.served(), 1);
    assert!(v.verify(&k1.sign(&claims(json!({})))).await.is_ok());
    assert_eq!(server.served(), 1);

    // A rotation: the new kid is fetched at once.
    server.serve_keys(&[&k1, &k2]);
    assert!(v.verify(&k2.sign(&claims(json!({})))).await.is_ok());
    assert_eq!(server.served(), 2);
    // Another unknown kid within 10 s is not.
    server.serve_keys(&[&k1, &k2, &k3]);
    let third = k3.sign(&claims(json!({})));
    assert_eq!(v.verify(&third).await, Err(JwtError::UnknownKey));
    assert_eq!(server.served(), 2);

    // The server gone: a failed refresh keeps the keys.
    server.stop().await;
    v.issuers[0].refresh().await;
    for key in [&k1, &k2] {
        let fresh = key.sign(&claims(json!({"sub": "bob"})));
        assert_eq!(&*v.verify(&fresh).await.unwrap().id, "bob");
    }
    // A reload keeps the fetched keys of an unchanged jwks_url.
    let reloaded = Verifier::new(&cfg, Some(&v)).unwrap();
    let token = k2.sign(&claims(json!({"sub": "carol"})));
    assert_eq!(&*reloaded.verify(&token).await.unwrap().id, "carol");
    let elsewhere = Jwt {
        jwks_url: "https://127.0.0.1:1/other.json".into(),
        ..cfg[0].clone()
    };
    let moved = Verifier::new(&[elsewhere], Some(&v)).unwrap();
    assert_eq!(moved.issuers[0].keys.load().len(), 0);

    // The refresh task holds the verifier weakly.
    let weak = Arc::downgrade(&v);
    drop(v);
    assert!(weak.upgrade().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_of_one_unknown_kid_share_a_fetch_and_a_dropped_key_leaves_the_cache() {
    let (k1, k2) = (ec("c1"), ec("c2"));
    let mut server = JwksServer::start(jwks(&[&k1])).await;
    let v = Arc::new(Verifier::new(&[server.issuer()], None).unwrap());
    v.start();
    first_fetch(&v).await;
    let old = k1.sign(&claims(json!({})));
    assert!(v.verify(&old).await.is_ok());

    server.serve_keys(&[&k2]);
    let tokens: Vec<String> = (0..8)
        .map(|i| k2.sign(&claims(json!({"sub": format!("user{i}")}))))
        .collect();
    let all = futures::future::join_all(tokens.iter().map(|t| v.verify(t))).await;
    assert!(all.iter().all(Result::is_ok), "{all:?}");
    assert_eq!(server.served(), 2, "one fetch for all of them");
    // k1 left the set: its token, cached before, is checked again and refused.
    assert_eq!(v.verify(&old).await, Err(JwtError::UnknownKey));
    server.stop().await;
}
