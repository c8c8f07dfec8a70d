//! JSON Web Key Sets for [`jwt`](super::jwt): which keys of a published set the gateway
//! verifies with, and fetching a set over https.
//!
//! Only asymmetric signature keys are kept (RSA, EC P-256 and P-384, Ed25519): a symmetric
//! (`oct`) key in a set would let anyone who can read the set sign tokens, and an encryption
//! key is not meant for signatures. Keys of other types are skipped rather than failing the
//! set, so an identity provider that adds a new kind of key does not lock every caller out.

use std::time::Duration;

use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, KeyOperations, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey};

/// How long one fetch (connection, answer and body) may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest key set read: a real one is a few KiB.
const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// What a key is; the algorithms it verifies follow from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyKind {
    Rsa,
    P256,
    P384,
    Ed25519,
}

impl KeyKind {
    /// Whether a signature by `alg` is checked with a key of this kind. This is what keeps an
    /// RSA key from being used as an HMAC secret, or a P-256 key for ES384.
    pub(crate) fn takes(self, alg: Algorithm) -> bool {
        use Algorithm::{EdDSA, ES256, ES384, PS256, PS384, PS512, RS256, RS384, RS512};
        match self {
            KeyKind::Rsa => matches!(alg, RS256 | RS384 | RS512 | PS256 | PS384 | PS512),
            KeyKind::P256 => alg == ES256,
            KeyKind::P384 => alg == ES384,
            KeyKind::Ed25519 => alg == EdDSA,
        }
    }
}

/// One usable key of a set.
pub(crate) struct Key {
    /// Its `kid`, which tokens name it by.
    pub(crate) kid: Option<Box<str>>,
    kind: KeyKind,
    /// The JWK's own `alg`, when it names one: then tokens of that algorithm only.
    alg: Option<Algorithm>,
    pub(crate) decoding: DecodingKey,
    /// As published: a refreshed set is compared by it.
    jwk: Jwk,
}

impl Key {
    /// Whether a token signed by `alg` may be checked with this key.
    pub(crate) fn takes(&self, alg: Algorithm) -> bool {
        self.kind.takes(alg) && self.alg.is_none_or(|a| a == alg)
    }

    /// The key a JWK describes, when the gateway can verify signatures with it.
    fn from_jwk(jwk: Jwk) -> Option<Key> {
        if jwk
            .common
            .public_key_use
            .as_ref()
            .is_some_and(|u| *u != PublicKeyUse::Signature)
        {
            return None;
        }
        if jwk
            .common
            .key_operations
            .as_ref()
            .is_some_and(|ops| !ops.contains(&KeyOperations::Verify))
        {
            return None;
        }
        let alg = match jwk.common.key_algorithm {
            None => None,
            Some(a) => Some(signature_algorithm(a)?),
        };
        let kind = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => KeyKind::Rsa,
            AlgorithmParameters::EllipticCurve(p) => match p.curve {
                EllipticCurve::P256 => KeyKind::P256,
                EllipticCurve::P384 => KeyKind::P384,
                _ => return None,
            },
            AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
                KeyKind::Ed25519
            }
            _ => return None,
        };
        if alg.is_some_and(|a| !kind.takes(a)) {
            return None;
        }
        let decoding = DecodingKey::from_jwk(&jwk).ok()?;
        Some(Key {
            kid: jwk.common.key_id.as_deref().map(Into::into),
            kind,
            alg,
            decoding,
            jwk,
        })
    }
}

/// A JWK `alg` the gateway verifies signatures of; `None` for HMAC and encryption ones.
fn signature_algorithm(a: KeyAlgorithm) -> Option<Algorithm> {
    Some(match a {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    })
}

/// The usable keys of one set. Never changed: a refresh replaces it whole.
#[derive(Default)]
pub(crate) struct KeySet {
    keys: Vec<Key>,
}

impl KeySet {
    /// Reads a JSON Web Key Set, skipping the keys it cannot use; an error when none is left.
    pub(crate) fn parse(json: &[u8]) -> Result<KeySet, String> {
        #[derive(serde::Deserialize)]
        struct Raw {
            keys: Vec<serde_json::Value>,
        }
        let raw: Raw =
            serde_json::from_slice(json).map_err(|e| format!("not a JSON Web Key Set: {e}"))?;
        let listed = raw.keys.len();
        let keys: Vec<Key> = raw
            .keys
            .into_iter()
            .filter_map(|v| serde_json::from_value::<Jwk>(v).ok())
            .filter_map(Key::from_jwk)
            .collect();
        if keys.is_empty() {
            return Err(format!(
                "none of its {listed} keys is an RSA, EC P-256/P-384 or Ed25519 signature key"
            ));
        }
        Ok(KeySet { keys })
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// The keys a token with header `kid` may be signed by: those with that `kid`, or every
    /// key when the token names none.
    pub(crate) fn named<'a>(&'a self, kid: Option<&'a str>) -> impl Iterator<Item = &'a Key> {
        self.keys
            .iter()
            .filter(move |k| kid.is_none_or(|kid| k.kid.as_deref() == Some(kid)))
    }

    /// Whether every key of this set is also in `newer`: when one is gone, tokens it verified
    /// must not be taken from the cache any more.
    pub(crate) fn kept_in(&self, newer: &KeySet) -> bool {
        self.keys
            .iter()
            .all(|k| newer.keys.iter().any(|n| n.jwk == k.jwk))
    }
}

/// Fetches one `jwks_url`.
pub(crate) struct Fetcher {
    pool: crate::outbound::Pool,
}

impl Fetcher {
    /// A fetcher of `url` (https only), verifying the server against `ca_file` (empty: the
    /// platform's roots) as any upstream is. An error names the offending key: `jwks_url` or
    /// `ca_file`.
    pub(crate) fn new(url: &str, ca_file: &str) -> Result<Fetcher, (&'static str, String)> {
        if !url.starts_with("https://") {
            let shown = crate::util::redact::url(url);
            return Err(("jwks_url", format!("{shown} is not an https:// URL")));
        }
        let tls = crate::config::tls::client_config_for(url, ca_file, "", "")
            .map_err(|p| ("ca_file", p.message))?;
        let opts = crate::outbound::Options::within(FETCH_TIMEOUT, MAX_JWKS_BYTES).with_tls(tls);
        // User info is never sent (nor kept where a log could print it).
        let pool =
            crate::outbound::Pool::new(&crate::util::redact::without_userinfo(url), &opts, 0)
                .map_err(|e| ("jwks_url", e.to_string()))?;
        Ok(Fetcher { pool })
    }

    /// The set served now, within [`FETCH_TIMEOUT`] and [`MAX_JWKS_BYTES`].
    pub(crate) async fn fetch(&self) -> Result<KeySet, String> {
        let headers = [
            ("accept", "application/json"),
            ("user-agent", "wiregate-jwks"),
        ];
        let answer = match self
            .pool
            .fetch(&crate::outbound::Request::get(&headers))
            .await
        {
            Ok(answer) => answer,
            Err(crate::outbound::Error::TimedOut { .. }) => {
                return Err(format!("no answer within {} s", FETCH_TIMEOUT.as_secs()))
            }
            Err(crate::outbound::Error::Exchange(crate::outbound::h1::Error::TooLarge {
                ..
            })) => return Err(format!("its key set is larger than {MAX_JWKS_BYTES} bytes")),
            Err(e) => return Err(e.to_string()),
        };
        if !answer.status.is_success() {
            return Err(format!("answered {}", answer.status.as_u16()));
        }
        KeySet::parse(&answer.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P256: &str = r#"{"kty":"EC","crv":"P-256","kid":"ec",
        "x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
        "y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}"#;

    #[test]
    fn keys_it_cannot_use_are_skipped() {
        let set = format!(
            r#"{{"keys":[
                {{"kty":"oct","k":"c2VjcmV0","kid":"hmac"}},
                {{"kty":"EC","crv":"P-521","x":"AA","y":"AA","kid":"p521"}},
                {{"kty":"XYZ","kid":"future"}},
                {{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","use":"enc"}},
                {{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","alg":"HS256"}},
                {P256}
            ]}}"#
        );
        let set = KeySet::parse(set.as_bytes()).unwrap();
        assert_eq!(set.len(), 1);
        let key = set.named(Some("ec")).next().unwrap();
        assert!(key.takes(Algorithm::ES256));
        assert!(!key.takes(Algorithm::ES384));
        assert!(!key.takes(Algorithm::RS256));
        assert_eq!(set.named(Some("hmac")).count(), 0);
        assert_eq!(set.named(None).count(), 1);
    }

    #[test]
    fn a_set_without_a_usable_key_is_an_error() {
        assert!(KeySet::parse(br#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#).is_err());
        assert!(KeySet::parse(br#"{"keys":[]}"#).is_err());
        assert!(KeySet::parse(b"not json").is_err());
    }

    #[test]
    fn a_key_named_for_one_algorithm_takes_only_that_one() {
        let rsa = r#"{"keys":[{"kty":"RSA","kid":"r","alg":"PS256","e":"AQAB","n":"sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw"}]}"#;
        let set = KeySet::parse(rsa.as_bytes()).unwrap();
        let key = set.named(Some("r")).next().unwrap();
        assert!(key.takes(Algorithm::PS256));
        assert!(!key.takes(Algorithm::RS256));
    }

    #[test]
    fn a_set_that_drops_a_key_does_not_keep_the_old_one() {
        let one = KeySet::parse(format!(r#"{{"keys":[{P256}]}}"#).as_bytes()).unwrap();
        let same = KeySet::parse(format!(r#"{{"keys":[{P256}]}}"#).as_bytes()).unwrap();
        let other = KeySet::parse(
            br#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#,
        )
        .unwrap();
        assert!(one.kept_in(&same));
        assert!(!one.kept_in(&other));
    }

    #[test]
    fn only_https_is_fetched() {
        let e = Fetcher::new("http://idp.example/jwks", "").err().unwrap();
        assert_eq!(e.0, "jwks_url");
    }
}
