//! A request's headers read by name, from a [`HeaderMap`] or straight from the bytes of the
//! head they arrived in; what a `Connection` header says of its connection.
//!
//! A proxied call reads a handful of headers by name (`content-type`, `x-request-id`,
//! `traceparent`, `authorization`, and whatever a split's `sticky = "header:NAME"`, the caller
//! report or the cluster's carry asks for). The HTTP/1 loop ([`crate::server`]'s `h1`) already
//! has each header's place in the head from httparse; building a map from them (hashing,
//! appends, `HeaderValue` checks) costs more than the lookups it serves (docs/performance.md), so
//! its calls read the head's ranges instead, a lookup scanning the few lines. Calls that came
//! through hyper keep their map.

use std::ops::Range;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use bytes::Bytes;

/// `X-Request-Id`: the id a request is answered and logged with.
pub(crate) const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// `X-API-Key`: where an API key comes, unless `auth.api_keys.header` says otherwise.
pub(crate) const X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");

/// A request head as received: its bytes and where each header's value lies in them.
#[derive(Debug)]
pub struct RawHead {
    bytes: Bytes,
    lines: Vec<(HeaderName, Range<usize>)>,
}

impl RawHead {
    /// `lines` are the head's headers in order (name, value range in `bytes`); httparse checked
    /// the values (no control characters but tab), which [`HeaderValue`] asks of them too.
    pub fn new(bytes: Bytes, lines: Vec<(HeaderName, Range<usize>)>) -> Self {
        debug_assert!(lines.iter().all(|(_, r)| r.end <= bytes.len()));
        Self { bytes, lines }
    }

    /// The text at `range` of the head (the request target, say), if it is UTF-8.
    pub fn text(&self, range: Range<usize>) -> Option<&str> {
        std::str::from_utf8(self.bytes.get(range)?).ok()
    }

    /// The head's bytes back.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// Where the first value of `name` lies: the one scan [`Headers::get`] and
    /// [`Headers::value`] share.
    fn find(&self, name: impl Name) -> Option<&Range<usize>> {
        self.lines.iter().find(|(n, _)| name.is(n)).map(|(_, v)| v)
    }

    /// The same headers as a map (for the paths that need a real one).
    pub fn to_map(&self) -> Result<HeaderMap, axum::http::header::InvalidHeaderValue> {
        let mut map = HeaderMap::with_capacity(self.lines.len());
        for (name, value) in &self.lines {
            map.append(
                name.clone(),
                HeaderValue::from_maybe_shared(self.bytes.slice(value.clone()))?,
            );
        }
        Ok(map)
    }
}

/// A request's headers, looked up by (case-insensitive) name.
#[derive(Clone, Copy, Debug)]
pub enum Headers<'a> {
    /// Headers a map holds (a request hyper read).
    Map(&'a HeaderMap),
    /// Headers lying in a head's bytes (a request the HTTP/1 loop read).
    Head(&'a RawHead),
}

impl<'a> From<&'a HeaderMap> for Headers<'a> {
    fn from(map: &'a HeaderMap) -> Self {
        Headers::Map(map)
    }
}

impl<'a> From<&'a RawHead> for Headers<'a> {
    fn from(head: &'a RawHead) -> Self {
        Headers::Head(head)
    }
}

impl<'a> Headers<'a> {
    /// The first value of `name`, as bytes.
    pub fn get(self, name: impl Name) -> Option<&'a [u8]> {
        match self {
            Headers::Map(m) => name.in_map(m).map(HeaderValue::as_bytes),
            Headers::Head(h) => h.find(name).map(|v| &h.bytes[v.clone()]),
        }
    }

    /// Every value of `name`, in order.
    pub fn get_all(self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        let (map, head) = match self {
            Headers::Map(m) => (
                Some(m.get_all(name).iter().map(HeaderValue::as_bytes)),
                None,
            ),
            Headers::Head(h) => (
                None,
                Some(
                    h.lines
                        .iter()
                        .filter(move |(n, _)| same(n, name))
                        .map(move |(_, v)| &h.bytes[v.clone()]),
                ),
            ),
        };
        map.into_iter().flatten().chain(head.into_iter().flatten())
    }

    /// Whether `name` was sent.
    pub fn contains(self, name: impl Name) -> bool {
        self.get(name).is_some()
    }

    /// The first value of `name` as text, when it is visible ASCII (tab and space allowed), as
    /// [`HeaderValue::to_str`] reads it.
    pub fn str(self, name: impl Name) -> Option<&'a str> {
        self.get(name).and_then(visible)
    }

    /// The first value of `first`, and the value of `sole` (another name) when it came once
    /// (none when it came more than once), read together: in a head, in one pass over its
    /// lines. A call reads its `traceparent` and `tracestate` so ([`crate::http::trace`]), in the one
    /// scan `traceparent` alone cost. `sole`'s value is a [`HeaderValue`] sharing the head's
    /// bytes (a reference count, no copy), kept beyond the head: it goes upstream.
    pub fn get_and_sole(
        self,
        first: impl Name,
        sole: impl Name,
    ) -> (Option<&'a [u8]>, Option<HeaderValue>) {
        match self {
            Headers::Map(m) => {
                let mut all = sole.all_in_map(m);
                let one = all.next().filter(|_| all.next().is_none());
                (first.in_map(m).map(HeaderValue::as_bytes), one.cloned())
            }
            Headers::Head(h) => {
                let (mut found, mut one, mut times) = (None, None, 0);
                for (name, value) in &h.lines {
                    if found.is_none() && first.is(name) {
                        found = Some(&h.bytes[value.clone()]);
                    } else if sole.is(name) {
                        one = Some(value);
                        times += 1;
                    }
                }
                let one = one
                    .filter(|_| times == 1)
                    .and_then(|v| HeaderValue::from_maybe_shared(h.bytes.slice(v.clone())).ok());
                (found, one)
            }
        }
    }

    /// The first value of `name` as a [`HeaderValue`] (sharing the head's bytes, not copied).
    pub fn value(self, name: impl Name) -> Option<HeaderValue> {
        match self {
            Headers::Map(m) => name.in_map(m).cloned(),
            Headers::Head(h) => h
                .find(name)
                .and_then(|v| HeaderValue::from_maybe_shared(h.bytes.slice(v.clone())).ok()),
        }
    }
}

/// A header name to look up: a [`HeaderName`] (the gateway's own: compared as one, which for
/// a standard name is one byte) or text (a configured name, any case).
pub trait Name: Copy {
    /// Whether `have` is this name.
    fn is(self, have: &HeaderName) -> bool;
    /// The first value of this name in `map`.
    fn in_map(self, map: &HeaderMap) -> Option<&HeaderValue>;
    /// Every value of this name in `map`.
    fn all_in_map(self, map: &HeaderMap) -> axum::http::header::ValueIter<'_, HeaderValue>;
}

impl Name for &HeaderName {
    fn is(self, have: &HeaderName) -> bool {
        have == self
    }
    fn in_map(self, map: &HeaderMap) -> Option<&HeaderValue> {
        map.get(self)
    }
    fn all_in_map(self, map: &HeaderMap) -> axum::http::header::ValueIter<'_, HeaderValue> {
        map.get_all(self).iter()
    }
}

impl Name for &str {
    fn is(self, have: &HeaderName) -> bool {
        same(have, self)
    }
    fn in_map(self, map: &HeaderMap) -> Option<&HeaderValue> {
        map.get(self)
    }
    fn all_in_map(self, map: &HeaderMap) -> axum::http::header::ValueIter<'_, HeaderValue> {
        map.get_all(self).iter()
    }
}

/// Whether `have` is `name` (a header name is lower case; `name` may not be). Lengths first:
/// most names a lookup passes differ in length.
fn same(have: &HeaderName, name: &str) -> bool {
    let have = have.as_str();
    have.len() == name.len() && have.eq_ignore_ascii_case(name)
}

/// `bytes` as text when [`HeaderValue::to_str`] would give it: tab or visible ASCII and space.
///
/// Every byte is looked at, with no early exit: such a loop is vectorised, where a
/// short-circuiting `all` measured dearer a byte (docs/performance.md).
pub(crate) fn visible(bytes: &[u8]) -> Option<&str> {
    let text = bytes.iter().fold(true, |all, &b| {
        all & ((b' '..127).contains(&b) | (b == b'\t'))
    });
    text.then(|| std::str::from_utf8(bytes).expect("ASCII is UTF-8"))
}

/// What a head's `Connection` values say of the connection's fate (RFC 9112 §9.3, §9.6): its
/// `close` and `keep-alive` options, among the comma-separated tokens in any case. The one
/// reader of them, for an upstream's answer read alone or off a pipelined connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ConnectionOptions {
    /// `close`: the connection ends after this message.
    pub(crate) close: bool,
    /// `keep-alive`: an HTTP/1.0 peer keeps the connection.
    pub(crate) keep_alive: bool,
}

impl ConnectionOptions {
    /// Adds what one `Connection` value says (a head may carry several).
    pub(crate) fn read(&mut self, value: &[u8]) {
        for token in value.split(|b| *b == b',').map(<[u8]>::trim_ascii) {
            self.close |= token.eq_ignore_ascii_case(b"close");
            self.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(head: &str) -> RawHead {
        let bytes = Bytes::copy_from_slice(head.as_bytes());
        let mut lines = Vec::new();
        let mut at = 0;
        for line in head.split("\r\n") {
            if let Some((n, v)) = line.split_once(": ") {
                let start = at + n.len() + 2;
                lines.push((
                    HeaderName::from_bytes(n.as_bytes()).unwrap(),
                    start..start + v.len(),
                ));
            }
            at += line.len() + 2;
        }
        RawHead::new(bytes, lines)
    }

    use proptest::prelude::*;

    /// A head of `lines` (name, value), as a client would send it.
    fn head_of(lines: &[(String, String)]) -> String {
        let mut head = String::from("POST /rpc HTTP/1.1\r\n");
        for (n, v) in lines {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        head + "\r\n"
    }

    proptest! {
        /// Whatever the names' case, order and repeats, and values with tabs, spaces and
        /// bytes past ASCII, a lookup in the head's bytes answers what the map built from the
        /// same head answers.
        #[test]
        fn the_head_answers_as_its_map(
            lines in proptest::collection::vec(
                ("(?i)(x-client|accept|content-type|traceparent|x-b)", "[ -~\t\u{e9}]{0,12}")
                    .prop_map(|(n, v)| (n, v.trim_matches([' ', '\t']).to_owned())),
                0..8,
            ),
            probe in "(?i)(x-client|accept|content-type|traceparent|x-b|x-none)",
        ) {
            let head = raw(&head_of(&lines));
            let map = head.to_map().unwrap();
            let (h, m) = (Headers::Head(&head), Headers::Map(&map));
            prop_assert_eq!(h.get(probe.as_str()), m.get(probe.as_str()));
            prop_assert_eq!(h.str(probe.as_str()), m.str(probe.as_str()));
            prop_assert_eq!(h.value(probe.as_str()), m.value(probe.as_str()));
            if !probe.eq_ignore_ascii_case("x-b") {
                prop_assert_eq!(
                    h.get_and_sole(probe.as_str(), "x-b"),
                    m.get_and_sole(probe.as_str(), "x-b")
                );
            }
            prop_assert_eq!(
                h.get_all(probe.as_str()).collect::<Vec<_>>(),
                m.get_all(probe.as_str()).collect::<Vec<_>>()
            );
            let lower = HeaderName::from_bytes(probe.to_ascii_lowercase().as_bytes()).unwrap();
            prop_assert_eq!(h.get(&lower), m.get(&lower));
            prop_assert_eq!(
                m.get(&lower),
                map.get(&lower).map(HeaderValue::as_bytes)
            );
            prop_assert_eq!(
                m.str(&lower),
                map.get(&lower).and_then(|v| v.to_str().ok())
            );
        }
    }

    const HEAD: &str = "POST /rpc HTTP/1.1\r\nHost: a\r\nX-Client: billing\r\naccept: a\r\n\
                        Accept: b\r\nx-bin: caf\u{e9}\r\n\r\n";

    #[test]
    fn a_head_and_its_map_answer_every_lookup_alike() {
        let head = raw(HEAD);
        let map = head.to_map().unwrap();
        for h in [Headers::Head(&head), Headers::Map(&map)] {
            assert_eq!(h.get("x-client"), Some(&b"billing"[..]), "{h:?}");
            assert_eq!(h.get("X-CLIENT"), Some(&b"billing"[..]));
            assert_eq!(h.str("host"), Some("a"));
            assert_eq!(h.str(&axum::http::header::HOST), Some("a"));
            assert_eq!(
                h.get(&HeaderName::from_static("x-client")),
                Some(&b"billing"[..])
            );
            assert_eq!(h.get(&axum::http::header::ACCEPT), Some(&b"a"[..]));
            assert_eq!(h.get(&axum::http::header::AUTHORIZATION), None);
            assert_eq!(h.get("accept"), Some(&b"a"[..]));
            assert_eq!(
                h.get_all("accept").collect::<Vec<_>>(),
                [&b"a"[..], &b"b"[..]]
            );
            assert!(h.contains("host") && !h.contains("x-other"));
            assert_eq!(h.get("x-other"), None);
            assert_eq!(h.get_all("x-other").count(), 0);
            // Not visible ASCII: bytes, but no text (as `HeaderValue::to_str`).
            assert_eq!(h.get("x-bin"), Some("caf\u{e9}".as_bytes()));
            assert_eq!(h.str("x-bin"), None);
            assert_eq!(h.value("x-client").unwrap(), "billing");
            assert_eq!(h.value("x-none"), None);
            // A name sent once comes as a value; sent twice, as none.
            let (first, sole) = h.get_and_sole(&axum::http::header::ACCEPT, "x-client");
            assert_eq!(
                (first, sole.unwrap().as_bytes()),
                (Some(&b"a"[..]), &b"billing"[..])
            );
            assert_eq!(h.get_and_sole("host", "accept"), (Some(&b"a"[..]), None));
            assert_eq!(h.get_and_sole("x-none", "x-other"), (None, None));
        }
        assert_eq!(
            map.get("x-bin").unwrap().to_str().is_ok(),
            visible("caf\u{e9}".as_bytes()).is_some()
        );
    }

    #[test]
    fn connection_options_are_tokens_in_any_case() {
        let read = |values: &[&str]| {
            let mut o = ConnectionOptions::default();
            for v in values {
                o.read(v.as_bytes());
            }
            (o.close, o.keep_alive)
        };
        assert_eq!(read(&["close"]), (true, false));
        assert_eq!(read(&["Keep-Alive"]), (false, true));
        assert_eq!(read(&["upgrade , CLOSE"]), (true, false));
        assert_eq!(read(&["keep-alive", "close"]), (true, true));
        assert_eq!(read(&["closed, x-close, keep-alive-x"]), (false, false));
        assert_eq!(read(&[]), (false, false));
    }
}
