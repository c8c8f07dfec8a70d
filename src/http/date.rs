//! The `Date` header's value: every writer of a head (the HTTP/1 loop, the SSE socket writer)
//! takes it from here.

/// Appends the answer's `Date` value, formatted once a second per thread (the second read
/// through [`crate::util::clock`]).
pub(crate) fn write_date(out: &mut Vec<u8>) {
    use std::cell::RefCell;
    use std::time::{Duration, UNIX_EPOCH};
    thread_local! {
        static NOW: RefCell<Option<(u64, String)>> = const { RefCell::new(None) };
    }
    let second = crate::util::clock::unix_second();
    NOW.with_borrow_mut(|kept| match kept {
        Some((at, text)) if *at == second => out.extend_from_slice(text.as_bytes()),
        _ => {
            let text = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(second));
            out.extend_from_slice(text.as_bytes());
            *kept = Some((second, text));
        }
    });
}
