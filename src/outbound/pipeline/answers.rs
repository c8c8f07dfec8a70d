//! A pipelined connection's answers read off its read buffer, one complete answer at a time: a
//! parsed head is kept between reads until its body is whole.

use bytes::{Buf, Bytes, BytesMut};

use crate::outbound::h1::{self, Chunked, Framing, Parsed};

/// The next complete answer at the front of `read`, consumed, and whether it declared that the
/// connection ends (`Connection: close`, or HTTP/1.0 without keep-alive) so the requests behind
/// it were not processed; `None` until one is complete (`head` keeps a parsed head and a
/// chunked body's progress between reads). Interim `1xx` answers are skipped; a
/// close-delimited body is complete only when the upstream closes
/// ([`Task::closed`](super::Task::closed)).
pub(super) fn next_answer(
    read: &mut BytesMut,
    head: &mut Option<(Parsed, Chunked)>,
    limit: usize,
) -> Result<Option<(h1::Answer, bool)>, h1::Error> {
    if head.is_none() {
        loop {
            let parsed = h1::parse_head(read)?;
            let Some(p) = parsed else {
                if read.len() > h1::MAX_HEAD {
                    return Err(h1::Error::Malformed("answer head too large"));
                }
                return Ok(None);
            };
            if p.status == axum::http::StatusCode::SWITCHING_PROTOCOLS {
                return Err(h1::Error::Malformed("101 Switching Protocols"));
            }
            read.advance(p.len);
            if p.status.is_informational() {
                continue;
            }
            *head = Some((p, Chunked::default()));
            break;
        }
    }
    let (parsed, chunked) = head.as_mut().expect("a head");
    let status = parsed.status;
    let body = match parsed.framing {
        Framing::Empty => Bytes::new(),
        Framing::Length(n) if n > limit => return Err(h1::Error::TooLarge { status, limit }),
        Framing::Length(n) if read.len() < n => {
            read.reserve(n - read.len());
            return Ok(None);
        }
        Framing::Length(n) => read.split_to(n).freeze(),
        Framing::Chunked => {
            if !chunked.advance(read, limit, status)? {
                return Ok(None);
            }
            read.advance(chunked.pos);
            Bytes::from(std::mem::take(&mut chunked.body))
        }
        Framing::Close if read.len() > limit => return Err(h1::Error::TooLarge { status, limit }),
        Framing::Close => return Ok(None),
    };
    let (parsed, _) = head.take().expect("a head");
    let ends = parsed.ends;
    Ok(Some((
        h1::Answer {
            status,
            body,
            reusable: parsed.keep_alive,
        },
        ends,
    )))
}
