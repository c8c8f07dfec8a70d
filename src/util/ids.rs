//! Fresh random ids on the call path: each call's `X-Request-Id` (when the client sent none),
//! its trace and span ids, and the `request_id` sent upstream for a call without a usable id;
//! and the draws that sample calls (a split's side for a caller without a sticky key, a
//! shadow's share).
//!
//! `uuid::Uuid::new_v4` draws from a ChaCha generator, several times a proxied call (measured
//! dearer: docs/performance.md). These ids name calls and these draws pick them; they guard
//! nothing (no token, no secret is derived from them), so they come from a per-thread wyrand
//! generator instead: fastrand's (a 64-bit state stepped by a constant, passes BigCrush and
//! PractRand), seeded once per thread from the process's hasher seed: an add, a widening
//! multiply and an xor per 64 bits. Two threads or two processes draw from independently seeded
//! states, so ids stay unique across them as random ids do.

/// 64 random bits from the calling thread's generator (fastrand's wyrand, seeded per thread).
pub(crate) fn random_u64() -> u64 {
    fastrand::u64(..)
}

/// 128 random bits.
pub(crate) fn random_bytes() -> [u8; 16] {
    let (a, b) = (random_u64(), random_u64());
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&a.to_le_bytes());
    out[8..].copy_from_slice(&b.to_le_bytes());
    out
}

/// A random (version 4) UUID.
pub(crate) fn uuid_v4() -> uuid::Uuid {
    uuid::Builder::from_random_bytes(random_bytes()).into_uuid()
}

/// A random (version 4) UUID as its 36 hyphenated lowercase characters (a call's made
/// `X-Request-Id`): what `uuid_v4().hyphenated().encode_lower` writes, its digits eight bytes at
/// a time ([`crate::util::hex`]) where uuid's writer takes a byte at a time (docs/performance.md).
pub(crate) fn uuid_v4_text() -> [u8; 36] {
    hyphenated(*uuid_v4().as_bytes())
}

/// The 36 characters of the UUID `bytes`, `8-4-4-4-12` digits.
fn hyphenated(bytes: [u8; 16]) -> [u8; 36] {
    let d = crate::util::hex::hex16(bytes);
    let mut out = [b'-'; 36];
    out[..8].copy_from_slice(&d[..8]);
    out[9..13].copy_from_slice(&d[8..12]);
    out[14..18].copy_from_slice(&d[12..16]);
    out[19..23].copy_from_slice(&d[16..20]);
    out[24..].copy_from_slice(&d[20..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn uuids_are_version_4_and_unique_across_calls_and_threads() {
        let draw = || (0..50_000).map(|_| uuid_v4()).collect::<Vec<_>>();
        let others = std::thread::spawn(draw).join().unwrap();
        let mine = draw();
        let all: HashSet<uuid::Uuid> = mine.iter().chain(&others).copied().collect();
        assert_eq!(all.len(), 100_000, "no id drawn twice");
        for u in mine.iter().take(100) {
            assert_eq!(u.get_version_num(), 4);
            assert_eq!(u.get_variant(), uuid::Variant::RFC4122);
        }
    }

    proptest::proptest! {
        /// Byte for byte what uuid's own writer makes of the same bytes.
        #[test]
        fn hyphenated_is_uuids(bytes in proptest::prelude::any::<[u8; 16]>()) {
            let mut expect = [0u8; 36];
            uuid::Uuid::from_bytes(bytes).hyphenated().encode_lower(&mut expect);
            proptest::prop_assert_eq!(hyphenated(bytes), expect);
        }
    }

    #[test]
    fn text_uuids_are_version_4() {
        for _ in 0..100 {
            let text = uuid_v4_text();
            let u = uuid::Uuid::parse_str(std::str::from_utf8(&text).unwrap()).unwrap();
            assert_eq!(u.get_version_num(), 4);
            assert_eq!(u.get_variant(), uuid::Variant::RFC4122);
        }
    }

    #[test]
    fn bits_are_spread() {
        // Every bit of 64-bit draws is set in about half of them (a stuck bit would show).
        let n = 4096;
        let mut ones = [0u32; 64];
        for _ in 0..n {
            let x = random_u64();
            for (i, c) in ones.iter_mut().enumerate() {
                *c += ((x >> i) & 1) as u32;
            }
        }
        for (i, c) in ones.iter().enumerate() {
            assert!((1700..2400).contains(c), "bit {i} set in {c} of {n}");
        }
    }
}
