//! `outbound::h1`'s answer reader: `parse_head` and the chunked decoder (`Chunked::advance`), driven
//! the way `Conn::exchange` drives them, over a buffer that grows as reads arrive. Each input is
//! read twice: arrived whole, and arrived in random pieces (1-byte pieces for short inputs, on
//! some runs), as TCP may deliver it.
//!
//! Input: byte 0 picks the mode (bit 0: a whole answer, or a chunked body alone) and the body
//! limit (bits 1-2); bytes 1..9 seed the split points; the rest is what the upstream sent.
//!
//! Asserts, besides "no panic":
//! - the whole and the split reading end the same: the same status and body, or the same kind of
//!   error; an answer reusable when read whole is reusable when read split;
//! - a parsed head: its length is within the input and ends in LF, the head alone parses the same,
//!   every shorter prefix is incomplete (not an error), a close-delimited body is never keep-alive,
//!   1xx/204/304 have no body;
//! - bodies never exceed the limit; the chunked decoder's position stays within the buffer and
//!   its body is no longer than what it consumed.
#![no_main]
#![forbid(unsafe_code)]

use http::StatusCode;
use libfuzzer_sys::fuzz_target;
use wiregate::outbound::h1::{parse_head, Chunked, Error, Framing};

#[path = "common/split.rs"]
mod split;
use split::cuts;

const MAX_HEAD: usize = 64 * 1024;
const LIMITS: [usize; 4] = [0, 7, 64, 1 << 20];

#[derive(Debug, PartialEq)]
enum Outcome {
    Answer {
        status: u16,
        body: Vec<u8>,
        reusable: bool,
    },
    Failed(&'static str),
}

fn kind(e: &Error) -> &'static str {
    match e {
        Error::Closed => "closed",
        Error::Malformed(_) => "malformed",
        Error::TooLarge { .. } => "too large",
        _ => "i/o",
    }
}

/// The bytes received so far: `wire[start..avail]` is the read buffer.
struct Feed<'a> {
    wire: &'a [u8],
    cuts: std::vec::IntoIter<usize>,
    start: usize,
    avail: usize,
}

impl Feed<'_> {
    fn buf(&self) -> &[u8] {
        &self.wire[self.start..self.avail]
    }
    /// One read: the next piece, or `Closed` at the end of the input.
    fn fill(&mut self) -> Result<(), Error> {
        match self.cuts.next() {
            Some(c) => {
                self.avail = c;
                Ok(())
            }
            None => Err(Error::Closed),
        }
    }
}

fn decode_chunked(f: &mut Feed<'_>, limit: usize, status: StatusCode) -> Result<Vec<u8>, Error> {
    let mut c = Chunked::default();
    loop {
        let done = c.advance(f.buf(), limit, status)?;
        assert!(c.pos <= f.buf().len(), "position beyond the buffer");
        assert!(c.body.len() <= limit, "chunked body over the limit");
        assert!(c.body.len() <= c.pos, "more body than bytes consumed");
        if done {
            break;
        }
        f.fill()?;
    }
    f.start += c.pos;
    Ok(c.body)
}

/// What `Conn::exchange` does after writing its request.
fn exchange(f: &mut Feed<'_>, limit: usize) -> Result<(u16, Vec<u8>, bool), Error> {
    let parsed = loop {
        if f.buf().is_empty() {
            f.fill()?;
            continue;
        }
        match parse_head(f.buf())? {
            Some(p) if p.status.is_informational() => {
                if p.status == StatusCode::SWITCHING_PROTOCOLS {
                    return Err(Error::Malformed("101 Switching Protocols"));
                }
                f.start += p.len;
            }
            Some(p) => break p,
            None if f.buf().len() > MAX_HEAD => return Err(Error::Malformed("head too large")),
            None => f.fill()?,
        }
    };
    f.start += parsed.len;
    let status = parsed.status;
    let too_large = Error::TooLarge { status, limit };
    let (body, complete) = match parsed.framing {
        Framing::Empty => (Vec::new(), true),
        Framing::Length(n) if n > limit => return Err(too_large),
        Framing::Length(n) => {
            while f.buf().len() < n {
                f.fill()?;
            }
            let body = f.buf()[..n].to_vec();
            f.start += n;
            (body, true)
        }
        Framing::Chunked => (decode_chunked(f, limit, status)?, true),
        Framing::Close => {
            loop {
                if f.buf().len() > limit {
                    return Err(too_large);
                }
                if f.fill().is_err() {
                    break;
                }
            }
            let body = f.buf().to_vec();
            f.start = f.avail;
            (body, false)
        }
    };
    Ok((
        status.as_u16(),
        body,
        complete && parsed.keep_alive && f.buf().is_empty(),
    ))
}

fn check_head(buf: &[u8]) {
    let Ok(Some(p)) = parse_head(buf) else {
        return;
    };
    assert!(
        p.len > 0 && p.len <= buf.len(),
        "head length {} of {}",
        p.len,
        buf.len()
    );
    assert_eq!(buf[p.len - 1], b'\n', "the head does not end in LF");
    assert_eq!(parse_head(&buf[..p.len]).ok().flatten().as_ref(), Some(&p));
    let step = (p.len / 64).max(1);
    for end in (0..p.len).step_by(step) {
        assert!(
            matches!(parse_head(&buf[..end]), Ok(None)),
            "a prefix of a good head ({end} of {}) is not incomplete",
            p.len
        );
    }
    if p.framing == Framing::Close {
        assert!(!p.keep_alive, "close-delimited yet keep-alive");
    }
    if matches!(p.status.as_u16(), 100..=199 | 204 | 304) {
        assert_eq!(p.framing, Framing::Empty);
    }
}

fn run(wire: &[u8], cuts: Vec<usize>, limit: usize, chunked_only: bool) -> Outcome {
    let mut f = Feed {
        wire,
        cuts: cuts.into_iter(),
        start: 0,
        avail: 0,
    };
    let result = if chunked_only {
        f.fill()
            .and_then(|()| decode_chunked(&mut f, limit, StatusCode::OK))
            .map(|b| {
                let rest = f.buf().is_empty();
                (200, b, rest)
            })
    } else {
        exchange(&mut f, limit)
    };
    match result {
        Ok((status, body, reusable)) => {
            assert!(body.len() <= limit, "body over the limit");
            Outcome::Answer {
                status,
                body,
                reusable,
            }
        }
        Err(e) => Outcome::Failed(kind(&e)),
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 9 {
        return;
    }
    let chunked_only = data[0] & 1 == 1;
    let limit = LIMITS[usize::from((data[0] >> 1) & 3)];
    let seed = u64::from_le_bytes(data[1..9].try_into().unwrap());
    let wire = &data[9..];
    if !chunked_only {
        check_head(wire);
    }
    let whole = run(
        wire,
        if wire.is_empty() {
            vec![]
        } else {
            vec![wire.len()]
        },
        limit,
        chunked_only,
    );
    let split = run(wire, cuts(wire.len(), seed), limit, chunked_only);
    match (&whole, &split) {
        (
            Outcome::Answer {
                status: s1,
                body: b1,
                reusable: r1,
            },
            Outcome::Answer {
                status: s2,
                body: b2,
                reusable: r2,
            },
        ) => {
            assert_eq!((s1, b1), (s2, b2), "whole and split answers differ");
            assert!(!r1 || *r2, "reusable whole, not split");
        }
        _ => assert_eq!(whole, split, "whole and split readings end differently"),
    }
});
