//! The one reader of a credential in HTTP's form, `Authorization: <scheme> <credentials>`
//! (RFC 9110 §11.6.2), for every carrier the gateway reads one from: the `Authorization`
//! header, and a legacy envelope's `auth` once written in that form
//! ([`Auth::to_header`](super::legacy::Auth::to_header)). The scheme is compared without
//! regard to case (RFC 9110 §11.1); spaces around the credentials are not part of them.

/// A credential: its scheme and what follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Credential<'a> {
    /// The scheme as it was written (`Bearer`, `bearer`, `ApiKey`, ...).
    pub scheme: &'a [u8],
    /// The credentials after the scheme and its spaces; never empty.
    pub token: &'a [u8],
}

impl Credential<'_> {
    /// Whether the scheme is `scheme`, in any case.
    pub fn is(&self, scheme: &str) -> bool {
        self.scheme.eq_ignore_ascii_case(scheme.as_bytes())
    }
}

/// Reads `value`: a scheme, one or more spaces, the credentials. `None` for anything else (a
/// bare scheme, an empty value, a scheme followed by nothing but spaces).
pub fn parse(value: &[u8]) -> Option<Credential<'_>> {
    let value = value.trim_ascii();
    let at = value.iter().position(|&b| b == b' ')?;
    let (scheme, rest) = value.split_at(at);
    let token = rest.trim_ascii_start();
    (!scheme.is_empty() && !token.is_empty()).then_some(Credential { scheme, token })
}

/// The credentials of `value` when its scheme is `scheme` (in any case).
pub fn token_of<'a>(value: &'a [u8], scheme: &str) -> Option<&'a [u8]> {
    parse(value).filter(|c| c.is(scheme)).map(|c| c.token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_is_read_in_any_case() {
        for v in [
            "Bearer abc",
            "bearer abc",
            "BEARER abc",
            "bEaReR   abc",
            " Bearer abc ",
        ] {
            assert_eq!(token_of(v.as_bytes(), "bearer"), Some(&b"abc"[..]), "{v}");
        }
        assert_eq!(token_of(b"ApiKey k1", "apikey"), Some(&b"k1"[..]));
    }

    #[test]
    fn a_value_without_credentials_is_none() {
        for v in ["", "Bearer", "Bearer ", "Bearer    ", " ", "Bearerabc"] {
            assert_eq!(parse(v.as_bytes()), None, "{v:?}");
        }
        assert_eq!(token_of(b"Basic abc", "bearer"), None);
    }

    #[test]
    fn the_credentials_keep_their_inner_spaces() {
        let c = parse(b"Digest a=1, b=2").unwrap();
        assert_eq!((c.scheme, c.token), (&b"Digest"[..], &b"a=1, b=2"[..]));
    }
}
