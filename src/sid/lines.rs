//! sid's output split into lines, each handed over as a slice of the read buffer, none longer
//! than `sid.max_line_bytes`.
//!
//! The reader of sid's stdout is the one serial step of a stream: every delta of a flood passes
//! through it. `BufReader::read_until` copied each line into a vector of its own after a bytewise
//! search for its end; here the end is found with `memchr` and a line that lies whole in the
//! buffer (all but the one a read cuts) is read where it is. Only the cut line's start moves, to
//! the front of the buffer, before the next read. Each byte is searched once: the search resumes
//! where the last one stopped.
//!
//! A line longer than the cap (a child that writes without a newline) is not kept: once its
//! bytes pass the cap they are dropped as they are read, up to its newline, and the reader
//! reports it as [`Line::TooLong`] and goes on with the next line. The buffer never grows beyond
//! the cap and its newline (or the initial capacity, if larger).

use tokio::io::{AsyncRead, AsyncReadExt};

/// One line of the output.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    /// A line with its `\n` (or the last bytes of the stream, without one).
    Text(&'a [u8]),
    /// A line whose bytes before its `\n` were more than the cap: dropped, `bytes` long (with
    /// its newline).
    TooLong { bytes: u64 },
}

/// Lines of `R`, read `capacity` bytes at a time.
pub(crate) struct Lines<R> {
    io: R,
    buf: Vec<u8>,
    /// The unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// `buf[start..searched]` holds no newline: where the next search resumes.
    searched: usize,
    /// The longest line kept, not counting its newline.
    max: usize,
    /// Bytes of a line over `max` dropped so far, while its newline is still to come.
    skipping: Option<u64>,
    /// Bytes searched for a newline, ever (tests check each is searched once).
    #[cfg(test)]
    scanned: usize,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    /// Reads `io` through a buffer of `capacity` bytes, grown for a longer line up to `max`
    /// bytes (and its newline); a longer one is skipped.
    pub(crate) fn new(io: R, capacity: usize, max: usize) -> Self {
        Lines {
            io,
            buf: vec![0; capacity.max(1)],
            start: 0,
            end: 0,
            searched: 0,
            max: max.max(1),
            skipping: None,
            #[cfg(test)]
            scanned: 0,
        }
    }

    /// The next line, or `None` at the stream's end. Cancel-safe: a read that did not complete
    /// consumed nothing.
    pub(crate) async fn next(&mut self) -> std::io::Result<Option<Line<'_>>> {
        loop {
            let found = memchr::memchr(b'\n', &self.buf[self.searched..self.end]);
            #[cfg(test)]
            {
                self.scanned += found.map_or(self.end - self.searched, |i| i + 1);
            }
            if let Some(i) = found {
                let line = self.start..self.searched + i + 1;
                (self.start, self.searched) = (line.end, line.end);
                let bytes = line.len() as u64;
                if let Some(dropped) = self.skipping.take() {
                    return Ok(Some(Line::TooLong {
                        bytes: dropped + bytes,
                    }));
                }
                if line.len() - 1 > self.max {
                    return Ok(Some(Line::TooLong { bytes }));
                }
                return Ok(Some(Line::Text(&self.buf[line])));
            }
            let pending = self.end - self.start;
            if let Some(dropped) = &mut self.skipping {
                // Still the line too long: its bytes go as they come.
                *dropped += pending as u64;
                (self.start, self.end, self.searched) = (0, 0, 0);
            } else if pending > self.max {
                self.skipping = Some(pending as u64);
                (self.start, self.end, self.searched) = (0, 0, 0);
            } else {
                if self.start > 0 {
                    // The cut line to the front, to read the rest after it.
                    self.buf.copy_within(self.start..self.end, 0);
                    self.start = 0;
                }
                (self.end, self.searched) = (pending, pending);
            }
            if self.end == self.buf.len() {
                // Here `end <= max`: room for the rest of a line up to the cap and its newline.
                let grown = (self.buf.len() * 2).min(self.max.saturating_add(1));
                self.buf.resize(grown, 0);
            }
            let n = self.io.read(&mut self.buf[self.end..]).await?;
            if n == 0 {
                if let Some(bytes) = self.skipping.take() {
                    return Ok(Some(Line::TooLong { bytes }));
                }
                if self.start == self.end {
                    return Ok(None);
                }
                let last = self.start..self.end;
                (self.start, self.searched) = (self.end, self.end);
                return Ok(Some(Line::Text(&self.buf[last])));
            }
            self.end += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tokio::io::AsyncBufReadExt;

    /// What `BufReader::read_until` gives for the same bytes read in the same pieces.
    async fn read_until(pieces: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut io = tokio_test_reader(pieces);
        let mut r = tokio::io::BufReader::with_capacity(4, &mut io);
        let mut out = Vec::new();
        loop {
            let mut line = Vec::new();
            match r.read_until(b'\n', &mut line).await.unwrap() {
                0 => return out,
                _ => out.push(line),
            }
        }
    }

    async fn lines(pieces: &[Vec<u8>], capacity: usize) -> Vec<Vec<u8>> {
        bounded(pieces, capacity, usize::MAX)
            .await
            .0
            .into_iter()
            .map(|l| l.unwrap())
            .collect()
    }

    /// The lines of `pieces` through a reader of `capacity` bytes capped at `max`: each line,
    /// or the length of one skipped; and the reader, to look at its buffer and searches.
    async fn bounded(
        pieces: &[Vec<u8>],
        capacity: usize,
        max: usize,
    ) -> (Vec<Result<Vec<u8>, u64>>, Lines<Pieces>) {
        let mut l = Lines::new(Pieces(pieces.iter().cloned().collect()), capacity, max);
        let mut out = Vec::new();
        while let Some(line) = l.next().await.unwrap() {
            out.push(match line {
                Line::Text(t) => Ok(t.to_vec()),
                Line::TooLong { bytes } => Err(bytes),
            });
        }
        (out, l)
    }

    /// What a capped reader must give: `read_until`'s lines, each longer than `max` before its
    /// newline replaced by its length.
    async fn capped_read_until(pieces: &[Vec<u8>], max: usize) -> Vec<Result<Vec<u8>, u64>> {
        read_until(pieces)
            .await
            .into_iter()
            .map(|l| {
                let content = l.len() - usize::from(l.ends_with(b"\n"));
                if content > max {
                    Err(l.len() as u64)
                } else {
                    Ok(l)
                }
            })
            .collect()
    }

    /// A reader that returns `pieces` one read each (a pipe's writes as they arrive), a piece
    /// larger than the reader's room over several.
    fn tokio_test_reader(pieces: &[Vec<u8>]) -> impl AsyncRead + Unpin {
        Pieces(pieces.iter().cloned().collect())
    }

    struct Pieces(std::collections::VecDeque<Vec<u8>>);

    impl AsyncRead for Pieces {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            if let Some(p) = self.0.front_mut() {
                let n = p.len().min(buf.remaining());
                buf.put_slice(&p[..n]);
                p.drain(..n);
                if p.is_empty() {
                    self.0.pop_front();
                }
            }
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn lines_cut_anywhere_are_read_whole() {
        let pieces = vec![
            b"{\"a\":1}\n{\"b\"".to_vec(),
            b":2}\n\n".to_vec(),
            b"a line longer than the buffer\nlast".to_vec(),
        ];
        let want: Vec<Vec<u8>> = vec![
            b"{\"a\":1}\n".to_vec(),
            b"{\"b\":2}\n".to_vec(),
            b"\n".to_vec(),
            b"a line longer than the buffer\n".to_vec(),
            b"last".to_vec(),
        ];
        assert_eq!(lines(&pieces, 8).await, want);
        assert_eq!(read_until(&pieces).await, want);
        assert!(lines(&[], 8).await.is_empty());
    }

    #[tokio::test]
    async fn a_line_of_the_cap_is_kept_and_one_byte_more_is_skipped() {
        let pieces = vec![b"12345678\n123456789\nok\n12345678".to_vec()];
        let (got, l) = bounded(&pieces, 4, 8).await;
        assert_eq!(
            got,
            vec![
                Ok(b"12345678\n".to_vec()),
                Err(10),
                Ok(b"ok\n".to_vec()),
                Ok(b"12345678".to_vec()),
            ]
        );
        assert!(
            l.buf.len() <= 9,
            "the buffer stays within the cap: {}",
            l.buf.len()
        );
        // The same whole in a buffer larger than the cap.
        assert_eq!(bounded(&pieces, 64, 8).await.0, got);
        // A last line over the cap, without a newline, is skipped too.
        let (got, _) = bounded(&[b"ok\n1234567890".to_vec()], 4, 8).await;
        assert_eq!(got, vec![Ok(b"ok\n".to_vec()), Err(10)]);
    }

    /// A line far over the cap, written a byte at a time: dropped as it comes (the buffer
    /// stays within the cap), every byte searched once, and the next line read.
    #[tokio::test]
    async fn a_line_over_the_cap_across_many_reads_is_skipped_at_read_speed() {
        let mut pieces: Vec<Vec<u8>> = vec![b"first\n".to_vec()];
        pieces.extend((0..100_000).map(|_| b"x".to_vec()));
        pieces.push(b"\nnext\n".to_vec());
        let total: usize = pieces.iter().map(Vec::len).sum();
        let (got, l) = bounded(&pieces, 16, 1000).await;
        assert_eq!(
            got,
            vec![
                Ok(b"first\n".to_vec()),
                Err(100_001),
                Ok(b"next\n".to_vec())
            ]
        );
        assert!(l.buf.len() <= 1001, "{}", l.buf.len());
        assert!(
            l.scanned <= total,
            "{} bytes searched of {total}",
            l.scanned
        );
    }

    /// A long line under the cap, a byte per read: each byte is searched once, not once per
    /// read (a search from the line's start each time would be 5 000 000 000 bytes).
    #[tokio::test]
    async fn a_long_line_read_a_byte_at_a_time_is_searched_once() {
        let mut pieces: Vec<Vec<u8>> = (0..100_000).map(|_| b"x".to_vec()).collect();
        pieces.push(b"\n".to_vec());
        let (got, l) = bounded(&pieces, 8, 1 << 20).await;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].as_ref().map(Vec::len), Ok(100_001));
        assert!(l.scanned <= 100_001, "{} bytes searched", l.scanned);
    }

    proptest! {
        /// Any bytes, cut anywhere, through any buffer and any cap: `read_until`'s lines, those
        /// over the cap skipped.
        #[test]
        fn capped_lines_are_read_untils_without_the_long_ones(
            pieces in prop::collection::vec(prop::collection::vec(prop_oneof![Just(b'\n'), Just(b'x'), any::<u8>()], 1..40), 0..8),
            capacity in 1usize..64,
            max in 1usize..32,
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let (got, want) = rt.block_on(async {
                (bounded(&pieces, capacity, max).await.0, capped_read_until(&pieces, max).await)
            });
            prop_assert_eq!(got, want);
        }


        /// Any bytes, in any pieces, through any buffer size: the lines `read_until` reads.
        #[test]
        fn the_lines_read_until_reads(
            pieces in prop::collection::vec(prop::collection::vec(prop_oneof![Just(b'\n'), Just(b'x'), any::<u8>()], 1..40), 0..8),
            capacity in 1usize..64,
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let (got, want) = rt.block_on(async { (lines(&pieces, capacity).await, read_until(&pieces).await) });
            prop_assert_eq!(got, want);
        }
    }
}
