//! HTTP/1 head lines written by hand, for the writers that lay out a head without hyper (the
//! HTTP/1 loop's answers, the pass-through's relayed heads, an SSE connection's head): the status
//! line's and a header line's bytes in one place; and the one value both hand-read heads (the
//! HTTP/1 loop's requests, the upstream client's answers) read as a number, `Content-Length`.

use axum::http::{HeaderMap, StatusCode};

/// A `Content-Length` value: ASCII digits only (RFC 9110 §8.6), within `usize`.
pub(crate) fn content_length(value: &[u8]) -> Option<usize> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0usize, |n, &b| match b {
        b'0'..=b'9' => n.checked_mul(10)?.checked_add(usize::from(b - b'0')),
        _ => None,
    })
}

/// Appends `{version} {code} {reason}\r\n`; `version` is `b"HTTP/1.1"` or `b"HTTP/1.0"`.
pub(crate) fn status_line(out: &mut Vec<u8>, version: &[u8], status: StatusCode) {
    out.extend_from_slice(version);
    out.push(b' ');
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends `{name}: {value}\r\n`.
#[inline]
pub(crate) fn header_line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Appends an answer's `headers` as head lines, but for its framing (`content-length`,
/// `transfer-encoding`) and the connection's fate (`connection`), which are the writer's to say,
/// and the names in `also_skip` (lowercase), which the writer says itself.
pub(crate) fn answer_headers(out: &mut Vec<u8>, headers: &HeaderMap, also_skip: &[&str]) {
    for (name, value) in headers {
        let name = name.as_str();
        if matches!(name, "content-length" | "transfer-encoding" | "connection")
            || also_skip.contains(&name)
        {
            continue;
        }
        header_line(out, name.as_bytes(), value.as_bytes());
    }
}

/// The last chunk of a chunked body, with no trailers.
pub(crate) const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// A chunk's size line (`{len:x}\r\n`), laid out on the stack: every chunked writer (the HTTP/1
/// loop's streamed answers, the SSE socket writer, the pass-through's uploads) frames its chunks
/// with it.
pub(crate) struct ChunkSize {
    buf: [u8; 18],
    start: usize,
}

impl ChunkSize {
    /// The size line of a chunk of `len` bytes.
    pub(crate) fn new(mut len: usize) -> Self {
        let mut buf = [0u8; 18];
        buf[16] = b'\r';
        buf[17] = b'\n';
        let mut start = 16;
        loop {
            start -= 1;
            buf[start] = crate::util::hex::DIGITS[len & 0xf];
            len >>= 4;
            if len == 0 {
                break;
            }
        }
        ChunkSize { buf, start }
    }

    /// The line's bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_size_lines_are_lowercase_hex() {
        assert_eq!(ChunkSize::new(0).as_bytes(), b"0\r\n");
        assert_eq!(ChunkSize::new(300).as_bytes(), b"12c\r\n");
        assert_eq!(
            ChunkSize::new(usize::MAX).as_bytes(),
            b"ffffffffffffffff\r\n"
        );
        for len in [1usize, 15, 16, 255, 4096, 65_535, 1 << 40] {
            assert_eq!(
                ChunkSize::new(len).as_bytes(),
                format!("{len:x}\r\n").as_bytes()
            );
        }
    }
    use axum::http::HeaderValue;

    #[test]
    fn a_length_is_read_as_the_number_parser_reads_digits() {
        for v in [
            "0",
            "12",
            "007",
            "18446744073709551615",
            "18446744073709551616",
            "",
            "+2",
            "1 2",
            "-1",
            "1a",
        ] {
            let parsed = std::str::from_utf8(v.as_bytes())
                .ok()
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<usize>().ok());
            assert_eq!(content_length(v.as_bytes()), parsed, "{v:?}");
        }
    }

    #[test]
    fn framing_and_skipped_names_are_left_out() {
        let mut headers = HeaderMap::new();
        headers.insert("content-length", HeaderValue::from_static("3"));
        headers.insert("connection", HeaderValue::from_static("close"));
        headers.insert("x-a", HeaderValue::from_static("1"));
        headers.insert("content-type", HeaderValue::from_static("text/plain"));
        let mut out = Vec::new();
        status_line(&mut out, b"HTTP/1.1", StatusCode::NOT_FOUND);
        answer_headers(&mut out, &headers, &["content-type"]);
        assert_eq!(out, b"HTTP/1.1 404 Not Found\r\nx-a: 1\r\n");
    }
}
