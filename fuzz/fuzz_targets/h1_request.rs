//! The HTTP/1 loop's request head parser (`http::request_head::parse`, which `server::h1`
//! reads its heads with), driven as `serve` drives it: called on a buffer that grows as reads
//! arrive, until it says something other than "not whole yet". Each input is read twice: arrived
//! whole, and arrived in random pieces (byte by byte for some short inputs).
//!
//! Input: bytes 0..8 seed the split points; the rest is what the client sent.
//!
//! The parser serves a request itself (`Head`) or hands the connection to hyper (`Other`), which
//! answers what it refuses (`400`, `501`); so "refuse" here is `Other`. Asserts, besides "no
//! panic":
//! - whole and split readings end the same (same head, or both hand over, or both wait);
//! - it agrees with an oracle of httparse (the same 48 header slots) plus RFC 9112's framing rules
//!   as this loop applies them: served only when httparse reads a whole head of at most
//!   `MAX_HEAD` bytes (a longer one, or an incomplete one of `MAX_HEAD` bytes, is handed over),
//!   with method `POST`, version 1.1, an origin-form target, and framing that is unambiguous by
//!   §6.3: no `Transfer-Encoding` at all (TE + CL, a TE not ending in chunked, any TE: hyper's;
//!   rules 3 and 4), at most one `Content-Length` line (several, even equal: hyper's; rule 5
//!   lets a recipient refuse differing ones and merge equal ones, this loop does neither), its
//!   value `1*DIGIT` within `usize` (`+1`, `1 1`, `1,1`: hyper's); no `Expect`, no `Upgrade`, no
//!   `Connection` other than exactly `keep-alive`; the body is that length, 0 without one (rule
//!   7: a request without either has no body);
//! - a served head also passes a strict line reader of our own (RFC 9112 §2.2, §3, §5): the
//!   request line is `POST SP target SP HTTP/1.1` (the target visible ASCII, or UTF-8 as
//!   httparse takes it: the loop's `plain_target` and URI parser then hand it to hyper), every field line `token ":" OWS value OWS`
//!   with no whitespace before the colon, no obs-fold (refused: §5.2 lets a server refuse it),
//!   no bare CR, no control byte in a value but HTAB; a bare LF is taken as a line end (§2.2
//!   allows it; httparse and hyper do the same), and empty lines before the request line are
//!   skipped (§2.2); the head's length, target, names and values are the ones it reports;
//! - conversely every input that strict reader and those framing rules accept, within the
//!   bounds, is served.
#![no_main]
#![forbid(unsafe_code)]

use std::ops::Range;

use libfuzzer_sys::fuzz_target;
use wiregate::http::request_head::{parse, Parsed, MAX_HEAD};

#[path = "common/split.rs"]
mod split;
use split::cuts;

const MAX_HEADERS: usize = 48;

#[derive(Debug, PartialEq, Eq, Clone)]
enum Outcome {
    Partial,
    Other,
    Head {
        len: usize,
        path: Range<usize>,
        headers: Vec<(String, Range<usize>)>,
        body: usize,
    },
}

fn outcome(p: Parsed) -> Outcome {
    match p {
        Parsed::Partial => Outcome::Partial,
        Parsed::Other => Outcome::Other,
        Parsed::Head(h) => Outcome::Head {
            len: h.len,
            path: h.path,
            headers: h
                .headers
                .into_iter()
                .map(|(n, v)| (n.as_str().to_owned(), v))
                .collect(),
            body: h.body,
        },
    }
}

/// As `serve` reads: the first answer other than `Partial` on the bytes so far.
fn driven(wire: &[u8], cuts: &[usize]) -> Outcome {
    for &end in cuts {
        match outcome(parse(&wire[..end])) {
            Outcome::Partial => continue,
            o => return o,
        }
    }
    Outcome::Partial
}

fn digits(v: &[u8]) -> Option<usize> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// httparse plus RFC 9112 §6.3, as the loop applies them (see the module's comment).
fn oracle(wire: &[u8]) -> Outcome {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut slots);
    let len = match req.parse(wire) {
        Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
        Ok(httparse::Status::Partial) if wire.len() < MAX_HEAD => return Outcome::Partial,
        _ => return Outcome::Other,
    };
    if req.method != Some("POST") || req.version != Some(1) {
        return Outcome::Other;
    }
    let path = req.path.expect("a complete head has a target");
    if !path.starts_with('/') {
        return Outcome::Other;
    }
    let at = |s: &[u8]| {
        let start = s.as_ptr() as usize - wire.as_ptr() as usize;
        start..start + s.len()
    };
    let mut body = None;
    let mut headers = Vec::new();
    for h in req.headers.iter() {
        let Ok(name) = http::HeaderName::from_bytes(h.name.as_bytes()) else {
            return Outcome::Other;
        };
        let n = name.as_str();
        match n {
            "content-length" => match (digits(h.value), body) {
                (Some(v), None) => body = Some(v),
                _ => return Outcome::Other,
            },
            "transfer-encoding" | "expect" | "upgrade" => return Outcome::Other,
            "connection" if !h.value.eq_ignore_ascii_case(b"keep-alive") => return Outcome::Other,
            _ => {}
        }
        headers.push((n.to_owned(), at(h.value)));
    }
    Outcome::Head {
        len,
        path: at(path.as_bytes()),
        headers,
        body: body.unwrap_or(0),
    }
}

fn tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A strict reader of a whole request head (RFC 9112 §2.2, §3, §5), independent of httparse:
/// `(head length, target, [(name, value)], method is POST)` where values are trimmed of OWS, or `None` when the
/// head is not whole or not well-formed. A bare LF ends a line.
#[allow(clippy::type_complexity)]
fn strict(wire: &[u8]) -> Option<(usize, Range<usize>, Vec<(Vec<u8>, Range<usize>)>, bool)> {
    // Lines: (start, end without the CR LF / LF); `at` moves to where the next one starts.
    let line = |at: &mut usize| -> Option<(usize, usize)> {
        let lf = wire[*at..].iter().position(|&b| b == b'\n')? + *at;
        let end = if lf > *at && wire[lf - 1] == b'\r' {
            lf - 1
        } else {
            lf
        };
        let start = *at;
        *at = lf + 1;
        Some((start, end))
    };
    let mut at = 0;
    let (mut s, mut e) = line(&mut at)?;
    while s == e {
        (s, e) = line(&mut at)?;
    }
    let rl = &wire[s..e];
    let method_end = rl.iter().position(|&b| b == b' ')?;
    if method_end == 0 || !rl[..method_end].iter().all(|&b| tchar(b)) {
        return None;
    }
    let rest = &rl[method_end + 1..];
    let target_end = rest.iter().position(|&b| b == b' ')?;
    if target_end == 0 || &rest[target_end + 1..] != b"HTTP/1.1" {
        return None;
    }
    let post = &rl[..method_end] == b"POST";
    let target = s + method_end + 1..s + method_end + 1 + target_end;
    // Visible ASCII, or UTF-8 beyond it as httparse takes (`&str` targets): the loop's later
    // checks (`plain_target`, the URI parser) hand a non-ASCII target to hyper.
    let t = &wire[target.clone()];
    if !t.iter().all(|&b| b.is_ascii_graphic() || b >= 0x80) || std::str::from_utf8(t).is_err() {
        return None;
    }
    let mut fields = Vec::new();
    loop {
        let (s, e) = line(&mut at)?;
        if s == e {
            return Some((at, target, fields, post));
        }
        let l = &wire[s..e];
        let colon = l.iter().position(|&b| b == b':')?;
        if colon == 0 || !l[..colon].iter().all(|&b| tchar(b)) {
            // An empty name, whitespace before the colon, or obs-fold (a line starting with SP
            // or HTAB).
            return None;
        }
        let v = &l[colon + 1..];
        if !v.iter().all(|&b| b == b'\t' || (b >= b' ' && b != 0x7f)) {
            return None;
        }
        let ows = |b: &u8| *b == b' ' || *b == b'\t';
        let lead = v.iter().take_while(|b| ows(b)).count();
        let trail = v[lead..].iter().rev().take_while(|b| ows(b)).count();
        let vs = s + colon + 1 + lead;
        fields.push((
            l[..colon].to_ascii_lowercase(),
            vs..vs + v.len() - lead - trail,
        ));
    }
}

/// The framing rules alone, on the strict reader's fields: whether the loop serves such a head.
fn served_by_rules(wire: &[u8], fields: &[(Vec<u8>, Range<usize>)]) -> bool {
    let mut lengths = 0;
    for (n, v) in fields {
        let v = &wire[v.clone()];
        match &n[..] {
            b"content-length" => {
                lengths += 1;
                if digits(v).is_none() {
                    return false;
                }
            }
            b"transfer-encoding" | b"expect" | b"upgrade" => return false,
            b"connection" if !v.eq_ignore_ascii_case(b"keep-alive") => return false,
            _ => {}
        }
    }
    lengths <= 1
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 9 {
        return;
    }
    let seed = u64::from_le_bytes(data[..8].try_into().unwrap());
    let wire = &data[8..];

    let whole = outcome(parse(wire));
    let split = driven(wire, &cuts(wire.len(), seed));
    assert_eq!(whole, split, "whole and split readings differ");

    let expected = oracle(wire);
    assert_eq!(
        whole, expected,
        "the parser and httparse + RFC 9112 §6.3 differ"
    );

    let strict = strict(wire);
    if let Outcome::Head {
        len,
        path,
        headers,
        body,
    } = &whole
    {
        let (slen, starget, sfields, _) = strict
            .as_ref()
            .expect("a served head passes the strict reader");
        assert_eq!(len, slen, "head length");
        assert_eq!(path, starget, "target");
        assert_eq!(headers.len(), sfields.len(), "header count");
        for ((n, v), (sn, sv)) in headers.iter().zip(sfields) {
            assert_eq!(n.as_bytes(), &sn[..], "header name");
            assert_eq!(v, sv, "header value of {n}");
        }
        assert!(served_by_rules(wire, sfields));
        if let Some(cl) = sfields.iter().find(|(n, _)| n == b"content-length") {
            assert_eq!(Some(*body), digits(&wire[cl.1.clone()]));
        } else {
            assert_eq!(*body, 0, "no Content-Length, no body");
        }
    }
    if let Some((slen, starget, sfields, post)) = &strict {
        if *post
            && wire[starget.start] == b'/'
            && served_by_rules(wire, sfields)
            && sfields.len() <= MAX_HEADERS
            && *slen <= MAX_HEAD
        {
            assert!(
                matches!(whole, Outcome::Head { .. }),
                "a well-formed, unambiguously framed POST is handed over: {whole:?}"
            );
        }
    }
});
