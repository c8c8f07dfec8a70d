//! URLs a user configured or a caller chose, as logs, spans, metrics and `check-config` show
//! them. Such a URL often carries a credential: user info (`redis://:password@…`), or a token
//! in its query (`https://hook.example/notify?token=…`). Neither ever leaves the process as
//! text; the scheme, host, port and path stay, so an operator still sees where it points.
//!
//! Pure string work (no URL parser: a string that is not a valid URL is redacted the same way).

use std::borrow::Cow;
use std::fmt;

/// A URL's parts that are shown, borrowed from it.
#[derive(Clone, Copy, Debug)]
struct Parts<'a> {
    /// `https://`, or empty when the string names no scheme.
    scheme: &'a str,
    /// User info before `@`, when there is any.
    userinfo: Option<&'a str>,
    /// Host and port.
    host: &'a str,
    /// The path, up to the query or fragment.
    path: &'a str,
    /// Whether a non-empty query or fragment followed.
    hidden: bool,
}

fn parts(url: &str) -> Parts<'_> {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    // An `@` after a `/`, `?` or `#` may end a password holding one of those unencoded (a
    // malformed URL, but a secret all the same) or lie in a path: nothing past the scheme is
    // shown then.
    let first_delim = rest.find(['/', '?', '#']);
    if let (false, Some(at), Some(d)) = (scheme.is_empty(), rest.rfind('@'), first_delim) {
        if at > d {
            return Parts {
                scheme,
                userinfo: None,
                host: "…",
                path: "",
                hidden: false,
            };
        }
    }
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let (before, after) = rest.split_at(end);
    // `?` or `#` alone hides nothing; anything after it may be a token.
    let hidden = after.len() > 1;
    let (authority, path) = match scheme.is_empty() {
        true => ("", before),
        false => before.split_at(before.find('/').unwrap_or(before.len())),
    };
    let (userinfo, host) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    Parts {
        scheme,
        userinfo,
        host,
        path,
        hidden,
    }
}

/// A URL as logs, spans and metrics show it (see [`url`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Url<'a>(Parts<'a>);

impl fmt::Display for Url<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.0;
        f.write_str(p.scheme)?;
        f.write_str(p.host)?;
        f.write_str(p.path)?;
        if p.hidden {
            f.write_str("?…")?;
        }
        Ok(())
    }
}

/// `url` for a log line, a span attribute or a metric label: without user info, and with a
/// non-empty query (or fragment) replaced by `?…`: `https://u:p@hook.example:8443/path?t=1`
/// shows as `https://hook.example:8443/path?…`. Written when displayed, not allocated.
pub(crate) fn url(url: &str) -> Url<'_> {
    Url(parts(url))
}

/// `url` for `check-config`, which shows the configuration to its operator: as [`url`], but
/// user info is kept in place with its secret masked, so the file's shape is recognisable:
/// `user:***@` for a user and a password, `***@` for user info alone (often a token itself).
pub(crate) fn masked(url: &str) -> String {
    let p = parts(url);
    let mut out = String::with_capacity(url.len());
    out.push_str(p.scheme);
    if let Some(info) = p.userinfo {
        match info.split_once(':') {
            Some((user, _)) => {
                out.push_str(user);
                out.push_str(":***@");
            }
            None => out.push_str("***@"),
        }
    }
    out.push_str(p.host);
    out.push_str(p.path);
    if p.hidden {
        out.push_str("?…");
    }
    out
}

/// `url` without its user info, for a client to dial: an HTTP client names its connections by
/// the URL's authority, in its own log lines at debug and trace level, and would write a
/// password there. User info in an `http(s)://` URL is never sent on its own anyway.
pub(crate) fn without_userinfo(url: &str) -> Cow<'_, str> {
    let p = parts(url);
    match p.userinfo {
        None => Cow::Borrowed(url),
        Some(info) => {
            let at = p.scheme.len() + info.len();
            Cow::Owned(format!("{}{}", p.scheme, &url[at + 1..]))
        }
    }
}

/// `text` (an error's message, say) with every occurrence of `url` in it written as [`url`]
/// shows it: for messages that quote a URL they were given.
pub(crate) fn scrub<'a>(text: &'a str, raw: &str) -> Cow<'a, str> {
    if raw.is_empty() || !text.contains(raw) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.replace(raw, &url(raw).to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_keep_where_and_drop_credentials() {
        for (raw, shown) in [
            (
                "https://hook.example/path?token=S3CR3T",
                "https://hook.example/path?…",
            ),
            (
                "https://user:S3CR3T@hook.example:8443/a/b?x=1#frag",
                "https://hook.example:8443/a/b?…",
            ),
            ("http://S3CR3T@h", "http://h"),
            (
                "redis://:S3CR3T@127.0.0.1:6379/0",
                "redis://127.0.0.1:6379/0",
            ),
            ("http://h:1/x@y", "http://…"),
            ("redis://:pa/S3CR3T@h:6379/0", "redis://…"),
            ("redis://:pa?S3CR3T@h:6379", "redis://…"),
            ("redis://:pa#S3CR3T@h", "redis://…"),
            ("http://h/?", "http://h/"),
            ("grpc://collector:4317", "grpc://collector:4317"),
            ("http://h#S3CR3T", "http://h?…"),
            ("", ""),
            ("not a url?S3CR3T", "not a url?…"),
        ] {
            assert_eq!(url(raw).to_string(), shown, "{raw}");
        }
    }

    #[test]
    fn check_config_masks_the_secret_in_place() {
        assert_eq!(masked("http://u:p@h:1/x"), "http://u:***@h:1/x");
        assert_eq!(masked("https://tok@h/x?k=v"), "https://***@h/x?…");
        assert_eq!(masked("redis://:pw@h:6379/0"), "redis://:***@h:6379/0");
        assert_eq!(masked("http://h:1/x@y"), "http://…");
        assert_eq!(masked("redis://:pa/S3CR3T@h:6379/0"), "redis://…");
    }

    #[test]
    fn user_info_is_dropped_before_dialling() {
        assert_eq!(
            without_userinfo("http://u:S3CR3T@h:1/feed?token=t"),
            "http://h:1/feed?token=t"
        );
        assert!(matches!(
            without_userinfo("https://h/x?a=b@c"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_quoted_url_is_scrubbed_from_a_message() {
        let raw = "http://127.0.0.1:9/hook?token=S3CR3T";
        let msg = format!("webhook url {raw:?}: reaches 127.0.0.1");
        assert_eq!(
            scrub(&msg, raw),
            "webhook url \"http://127.0.0.1:9/hook?…\": reaches 127.0.0.1"
        );
        assert!(matches!(scrub("nothing", raw), Cow::Borrowed(_)));
    }

    proptest::proptest! {
        #[test]
        fn no_query_or_user_info_survives(
            user in "[a-z]{1,8}", secret in "[A-Z0-9]{4,12}", path in "(/[a-z]{0,5}){0,3}"
        ) {
            let raw = format!("https://{user}:{secret}@h.example:1{path}?k={secret}");
            let shown = url(&raw).to_string();
            proptest::prop_assert!(!shown.contains(&secret), "{}", shown);
            proptest::prop_assert!(!masked(&raw).contains(&secret));
            proptest::prop_assert_eq!(shown, format!("https://h.example:1{path}?…"));
        }
    }
}
