//! The feed's body cut into records, none longer than `events.max_line_bytes`, before anything
//! parses it.
//!
//! An NDJSON record is a line (the bytes up to and including its `\n`). An SSE record is an
//! event: its lines (each ended by CR, LF or CRLF) up to and including the blank line that
//! dispatches it, so the SSE parser only ever holds one whole event of at most the cap, however
//! many `data:` lines it has. The cap counts a record's bytes but the line end that closes it.
//!
//! A record over the cap is not kept: once its bytes pass the cap they are dropped as they
//! arrive, up to its end, and it is reported as [`Piece::TooLong`]; the records after it come
//! through as usual. Each byte is looked at once (a record cut across many chunks is never
//! searched again from its start), and a record that lies whole in one chunk is handed on as a
//! slice of it, uncopied.

use bytes::{Bytes, BytesMut};

/// What the feed's body is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// One JSON record per line.
    Ndjson,
    /// Server-sent events.
    Sse,
}

/// One record of the body, or one that was too long.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    /// A whole record, with the line end(s) that close it.
    Record(Bytes),
    /// A record over the cap, dropped: `bytes` long.
    TooLong {
        /// Its length, its ends included.
        bytes: u64,
    },
}

/// Cuts a body, chunk by chunk, into [`Piece`]s.
#[derive(Debug)]
pub struct Records {
    framing: Framing,
    max: usize,
    /// The start of a record cut by a chunk's end.
    pending: BytesMut,
    /// Bytes of a record over the cap dropped so far, while its end is still to come.
    skipping: Option<u64>,
    /// SSE: no byte but line ends since the last line end (a line end now is a blank line).
    line_empty: bool,
    /// SSE: the last byte was a CR (an LF now is the rest of a CRLF, not another line end).
    after_cr: bool,
    /// SSE: the last record ended with a CR at a chunk's end (kept or not): an LF first in the
    /// next chunk is its CRLF's.
    lf_owed: Option<bool>,
    /// Bytes searched for a record's end, ever (tests check each is searched once).
    #[cfg(test)]
    scanned: usize,
}

impl Records {
    /// Records of `framing`, none longer than `max` bytes (at least 1).
    pub fn new(framing: Framing, max: usize) -> Self {
        Records {
            framing,
            max: max.max(1),
            pending: BytesMut::new(),
            skipping: None,
            line_empty: true,
            after_cr: false,
            lf_owed: None,
            #[cfg(test)]
            scanned: 0,
        }
    }

    /// Cuts the next chunk of the body, handing each record it ends (or drops) to `out`.
    pub fn push(&mut self, chunk: Bytes, out: &mut impl FnMut(Piece)) {
        let mut start = 0;
        if chunk.is_empty() {
            return;
        }
        if let Some(kept) = self.lf_owed.take() {
            if chunk[0] == b'\n' {
                // The LF of a CRLF whose CR closed the last record, in the last chunk: a piece
                // of its own for the parser (never counted in the next record), or dropped
                // with a dropped record.
                if kept {
                    out(Piece::Record(chunk.slice(..1)));
                }
                (start, self.after_cr) = (1, false);
            }
        }
        let mut at = start;
        while let Some(mut end) = self.next_end(&chunk, at) {
            let len = end - start;
            let kept = if let Some(dropped) = self.skipping.take() {
                out(Piece::TooLong {
                    bytes: dropped + len as u64,
                });
                false
            } else if self.pending.len() + len - 1 > self.max {
                let bytes = (self.pending.len() + len) as u64;
                self.pending = BytesMut::new();
                out(Piece::TooLong { bytes });
                false
            } else {
                true
            };
            // A record closed by a CR takes the LF of its CRLF along (kept or dropped).
            if self.after_cr {
                match chunk.get(end) {
                    Some(b'\n') => (end, self.after_cr) = (end + 1, false),
                    Some(_) => {}
                    None => self.lf_owed = Some(kept),
                }
            }
            if kept && self.pending.is_empty() {
                out(Piece::Record(chunk.slice(start..end)));
            } else if kept {
                self.pending.extend_from_slice(&chunk[start..end]);
                out(Piece::Record(self.pending.split().freeze()));
            }
            (start, at) = (end, end);
        }
        let rest = &chunk[start..];
        if let Some(dropped) = &mut self.skipping {
            *dropped += rest.len() as u64;
        } else if self.pending.len() + rest.len() > self.max {
            // Over the cap before its end: dropped from here on, and its start freed.
            self.skipping = Some((self.pending.len() + rest.len()) as u64);
            self.pending = BytesMut::new();
        } else {
            self.pending.extend_from_slice(rest);
        }
    }

    /// The body ended: a record over the cap it cut is reported; a shorter one it cut is no
    /// record (a line or an event without its end is none, whatever its length).
    pub fn finish(&mut self, out: &mut impl FnMut(Piece)) {
        self.pending = BytesMut::new();
        if let Some(bytes) = self.skipping.take() {
            out(Piece::TooLong { bytes });
        }
    }

    /// Where the record that `chunk[at..]` continues ends (the index after its last byte), if
    /// in this chunk; the SSE line state follows every line end passed.
    fn next_end(&mut self, chunk: &[u8], mut at: usize) -> Option<usize> {
        if self.framing == Framing::Ndjson {
            let found = memchr::memchr(b'\n', &chunk[at..]);
            self.count(found, chunk.len() - at);
            return found.map(|i| at + i + 1);
        }
        loop {
            let found = memchr::memchr2(b'\r', b'\n', &chunk[at..]);
            self.count(found, chunk.len() - at);
            let Some(i) = found else {
                if at < chunk.len() {
                    (self.line_empty, self.after_cr) = (false, false);
                }
                return None;
            };
            if i > 0 {
                (self.line_empty, self.after_cr) = (false, false);
            }
            let end = at + i;
            at = end + 1;
            if chunk[end] == b'\n' && self.after_cr {
                // The LF of a CRLF: the line ended at the CR.
                self.after_cr = false;
                continue;
            }
            self.after_cr = chunk[end] == b'\r';
            if std::mem::replace(&mut self.line_empty, true) {
                return Some(at);
            }
        }
    }

    #[inline]
    fn count(&mut self, _found: Option<usize>, _left: usize) {
        #[cfg(test)]
        {
            self.scanned += _found.map_or(_left, |i| i + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The pieces of `chunks`, a record as its text, a dropped one as its length.
    fn cut(framing: Framing, max: usize, chunks: &[&[u8]]) -> (Vec<Result<Vec<u8>, u64>>, Records) {
        let mut r = Records::new(framing, max);
        let mut got = Vec::new();
        let mut out = |p: Piece| {
            got.push(match p {
                Piece::Record(b) => Ok(b.to_vec()),
                Piece::TooLong { bytes } => Err(bytes),
            })
        };
        for c in chunks {
            r.push(Bytes::copy_from_slice(c), &mut out);
        }
        r.finish(&mut out);
        (got, r)
    }

    fn ok(s: &str) -> Result<Vec<u8>, u64> {
        Ok(s.as_bytes().to_vec())
    }

    #[test]
    fn ndjson_lines_are_records_and_a_line_of_the_cap_is_kept() {
        let body: &[u8] = b"12345678\n123456789\nok\n\ntail";
        let (got, _) = cut(Framing::Ndjson, 8, &[body]);
        assert_eq!(got, vec![ok("12345678\n"), Err(10), ok("ok\n"), ok("\n")]);
        // The same a byte at a time.
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(cut(Framing::Ndjson, 8, &bytes).0, got);
    }

    /// SSE records as the parser reads them, wherever the body was cut: a cut between the CR
    /// and the LF of a CRLF moves the LF to the start of the next record (or leaves it unread
    /// at the body's end); here it goes in neither.
    fn normal(records: &[Result<Vec<u8>, u64>]) -> Vec<Result<Vec<u8>, u64>> {
        let mut prev_cr = false;
        records
            .iter()
            .filter_map(|r| match r {
                Ok(r) if prev_cr && r.as_slice() == b"\n" => {
                    prev_cr = false;
                    None
                }
                Ok(r) => {
                    prev_cr = r.ends_with(b"\r");
                    Some(Ok(r
                        .strip_suffix(b"\n")
                        .filter(|_| r.ends_with(b"\r\n"))
                        .unwrap_or(r)
                        .to_vec()))
                }
                Err(n) => {
                    prev_cr = false;
                    Some(Err(*n))
                }
            })
            .collect()
    }

    #[test]
    fn sse_events_are_records_whatever_their_line_ends() {
        let body: &[u8] = b"id: 1\ndata: a\n\nid: 2\r\ndata: b\r\n\r\nid: 3\rdata: c\r\r: c\n\n";
        let want = vec![
            ok("id: 1\ndata: a\n\n"),
            ok("id: 2\r\ndata: b\r\n\r\n"),
            ok("id: 3\rdata: c\r\r"),
            ok(": c\n\n"),
        ];
        assert_eq!(cut(Framing::Sse, 1000, &[body]).0, want);
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        let got = cut(Framing::Sse, 1000, &bytes).0;
        assert_eq!(normal(&got), normal(&want));
        assert_eq!(got.concat_ok(), body);
    }

    /// An event over the cap is dropped with the LF of its closing CRLF, wherever the body is
    /// cut; the next one comes through whole.
    #[test]
    fn an_sse_event_over_the_cap_is_dropped_whole_with_its_crlf() {
        let body: &[u8] = b"data: 0123456789\r\n\r\ndata: ok\r\n\r\n";
        let want = vec![Err(19), ok("data: ok\r\n\r\n")];
        assert_eq!(cut(Framing::Sse, 12, &[body]).0, want);
        for at in 0..body.len() {
            let got = cut(Framing::Sse, 12, &[&body[..at], &body[at..]]).0;
            assert_eq!(normal(&got), normal(&want), "cut at {at}");
        }
    }

    trait ConcatOk {
        fn concat_ok(&self) -> Vec<u8>;
    }

    impl ConcatOk for [Result<Vec<u8>, u64>] {
        fn concat_ok(&self) -> Vec<u8> {
            self.iter()
                .flat_map(|r| r.clone().unwrap_or_default())
                .collect()
        }
    }

    /// A line of 10 MB without a newline, a byte per chunk: dropped as it comes (nothing of it
    /// kept), every byte searched once, and the line after it read.
    #[test]
    fn a_line_over_the_cap_across_many_chunks_is_dropped_at_read_speed() {
        for framing in [Framing::Ndjson, Framing::Sse] {
            let mut r = Records::new(framing, 1000);
            let mut got = Vec::new();
            let mut out = |p: Piece| got.push(p);
            let x = Bytes::from_static(b"x");
            let mut most = 0;
            for _ in 0..10_000_000 {
                r.push(x.clone(), &mut out);
                most = most.max(r.pending.capacity());
            }
            r.push(Bytes::from_static(b"\n\n{\"ok\":1}\n\n"), &mut out);
            r.finish(&mut out);
            assert!(most <= 2048, "{framing:?}: {most} bytes held");
            assert!(
                r.scanned <= 10_000_012,
                "{framing:?}: {} searched",
                r.scanned
            );
            let want = match framing {
                Framing::Ndjson => vec![
                    Piece::TooLong { bytes: 10_000_001 },
                    Piece::Record(Bytes::from_static(b"\n")),
                    Piece::Record(Bytes::from_static(b"{\"ok\":1}\n")),
                    Piece::Record(Bytes::from_static(b"\n")),
                ],
                Framing::Sse => vec![
                    Piece::TooLong { bytes: 10_000_002 },
                    Piece::Record(Bytes::from_static(b"{\"ok\":1}\n\n")),
                ],
            };
            assert_eq!(got, want, "{framing:?}");
        }
    }

    /// A long line under the cap, a byte per chunk: each byte searched once.
    #[test]
    fn a_long_record_in_many_chunks_is_searched_once() {
        let mut chunks: Vec<&[u8]> = vec![b"x"; 200_000];
        chunks.push(b"\n\n");
        for framing in [Framing::Ndjson, Framing::Sse] {
            let (got, r) = cut(framing, 1 << 20, &chunks);
            let whole = match framing {
                Framing::Ndjson => vec![Ok(200_001), Ok(1)],
                Framing::Sse => vec![Ok(200_002)],
            };
            let lens: Vec<Result<usize, u64>> = got
                .iter()
                .map(|r| r.as_ref().map(Vec::len).map_err(|e| *e))
                .collect();
            assert_eq!(lens, whole, "{framing:?}");
            assert!(r.scanned <= 200_002, "{framing:?}: {} searched", r.scanned);
        }
    }

    /// What the cap must give for NDJSON: the lines, each longer than `max` before its newline
    /// replaced by its length; a last line without a newline is no record.
    fn ndjson_model(body: &[u8], max: usize) -> Vec<Result<Vec<u8>, u64>> {
        let mut out = Vec::new();
        let mut rest = body;
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            let line = &rest[..=i];
            out.push(if i > max {
                Err(line.len() as u64)
            } else {
                Ok(line.to_vec())
            });
            rest = &rest[i + 1..];
        }
        if rest.len() > max {
            out.push(Err(rest.len() as u64));
        }
        out
    }

    /// `body` cut at the points `cuts` pick, in order.
    fn pieces<'a>(body: &'a [u8], cuts: &[prop::sample::Index]) -> Vec<&'a [u8]> {
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(body.len() + 1)).collect();
        at.sort();
        let mut chunks = Vec::new();
        let mut from = 0;
        for a in at.into_iter().chain([body.len()]) {
            chunks.push(&body[from..a]);
            from = a;
        }
        chunks
    }

    proptest! {
        /// NDJSON cut anywhere under any cap: the model's lines.
        #[test]
        fn ndjson_cut_anywhere_gives_the_lines(
            body in prop::collection::vec(prop_oneof![Just(b'\n'), Just(b'x'), Just(b'\r'), any::<u8>()], 0..200),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
            max in 1usize..40,
        ) {
            let chunks = pieces(&body, &cuts);
            prop_assert_eq!(cut(Framing::Ndjson, max, &chunks).0, ndjson_model(&body, max));
        }

        /// SSE cut anywhere: the same records as the body whole; with a cap no record reaches,
        /// the records put together are the body up to its last blank line.
        #[test]
        fn sse_cut_anywhere_gives_the_same_records(
            body in prop::collection::vec(prop_oneof![Just(b'\n'), Just(b'\r'), Just(b'x'), any::<u8>()], 0..200),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
            max in 1usize..40,
        ) {
            let chunks = pieces(&body, &cuts);
            let whole = cut(Framing::Sse, max, &[&body]).0;
            let split = cut(Framing::Sse, max, &chunks).0;
            prop_assert_eq!(normal(&split), normal(&whole));
            for r in split.iter().flatten() {
                let closing = if r.ends_with(b"\r\n") { 2 } else { 1 };
                prop_assert!(r.len() - closing <= max || r.len() <= 2, "{:?} over {}", r, max);
            }
            let all: Vec<u8> = cut(Framing::Sse, 1000, &chunks).0.concat_ok();
            prop_assert!(body.starts_with(&all));
        }
    }
}
