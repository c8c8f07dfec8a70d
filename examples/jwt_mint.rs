//! Mints what a benchmark of `[[auth.jwt]]` needs: an EC P-256 key made on the spot, its
//! JSON Web Key Set and a token it signs (issuer `https://bench.invalid/`, audience `wiregate`,
//! subject `bench`, valid for a day), and the gateway configuration that requires it.
//!
//!   cargo run --release --example jwt_mint -- DIR    # writes DIR/jwks.json, DIR/token and
//!                                                    # DIR/auth.toml (`[auth]` requiring the
//!                                                    # token, credentials stripped, and its
//!                                                    # `[[auth.jwt]]` issuer)
#![forbid(unsafe_code)]

use base64::Engine as _;
use ring::signature::{EcdsaKeyPair, KeyPair as _, ECDSA_P256_SHA256_FIXED_SIGNING};

fn main() {
    let dir = std::env::args().nth(1).expect("usage: jwt_mint DIR");
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 =
        EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("a P-256 key");
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .expect("the key just made");
    // The uncompressed point: 0x04, then x and y.
    let point = pair.public_key().as_ref();
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let jwks = serde_json::json!({"keys": [{
        "kty": "EC", "crv": "P-256", "kid": "bench", "alg": "ES256", "use": "sig",
        "x": b64(&point[1..33]), "y": b64(&point[33..65]),
    }]});
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs();
    let claims = serde_json::json!({
        "iss": "https://bench.invalid/", "aud": "wiregate", "sub": "bench",
        "iat": now, "exp": now + 86_400,
    });
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some("bench".into());
    let token = jsonwebtoken::encode(
        &header,
        &claims,
        &jsonwebtoken::EncodingKey::from_ec_der(pkcs8.as_ref()),
    )
    .expect("a signed token");
    let dir = std::path::Path::new(&dir);
    std::fs::write(dir.join("jwks.json"), jwks.to_string()).expect("DIR/jwks.json written");
    std::fs::write(dir.join("token"), token).expect("DIR/token written");
    let jwks_file = dir.join("jwks.json");
    let auth = format!(
        "[auth]\nmode = \"required\"\nstrip_credentials = true\n[[auth.jwt]]\n\
         issuer = \"https://bench.invalid/\"\naudiences = [\"wiregate\"]\n\
         jwks_file = {:?}\nalgorithms = [\"ES256\"]\n",
        jwks_file.display().to_string()
    );
    std::fs::write(dir.join("auth.toml"), auth).expect("DIR/auth.toml written");
}
