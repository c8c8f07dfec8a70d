//! sid's output split into lines, each handed over as a slice of the read buffer.
//!
//! The reader of sid's stdout is the one serial step of a stream: every delta of a flood passes
//! through it. `BufReader::read_until` copied each line into a vector of its own after a bytewise
//! search for its end; here the end is found with `memchr` and a line that lies whole in the
//! buffer (all but the one a read cuts) is read where it is. Only the cut line's start moves, to
//! the front of the buffer, before the next read.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Lines of `R`, read `capacity` bytes at a time.
pub(crate) struct Lines<R> {
    io: R,
    buf: Vec<u8>,
    /// The unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    /// Reads `io` through a buffer of `capacity` bytes, grown for a longer line (a line is not
    /// bounded here, as `read_until`'s was not: sid is the gateway's own child).
    pub(crate) fn new(io: R, capacity: usize) -> Self {
        Lines {
            io,
            buf: vec![0; capacity.max(1)],
            start: 0,
            end: 0,
        }
    }

    /// The next line with its `\n`, or the bytes before the end of the stream without one;
    /// `None` at its end. Cancel-safe: a read that did not complete consumed nothing.
    pub(crate) async fn next(&mut self) -> std::io::Result<Option<&[u8]>> {
        let mut searched = self.start;
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[searched..self.end]) {
                let line = self.start..searched + i + 1;
                self.start = line.end;
                return Ok(Some(&self.buf[line]));
            }
            searched = self.end;
            if self.start > 0 {
                // The cut line to the front, to read the rest after it.
                self.buf.copy_within(self.start..self.end, 0);
                (searched, self.end, self.start) =
                    (self.end - self.start, self.end - self.start, 0);
            }
            if self.end == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            let n = self.io.read(&mut self.buf[self.end..]).await?;
            if n == 0 {
                if self.start == self.end {
                    return Ok(None);
                }
                let last = self.start..self.end;
                self.start = self.end;
                return Ok(Some(&self.buf[last]));
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
        let mut l = Lines::new(tokio_test_reader(pieces), capacity);
        let mut out = Vec::new();
        while let Some(line) = l.next().await.unwrap() {
            out.push(line.to_vec());
        }
        out
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

    proptest! {
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
