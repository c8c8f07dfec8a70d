//! Hex digits, written and read: the one writer of lowercase digits (ids on the call path, the
//! made `X-Request-Id` and the `traceparent` sent upstream, logs' trace ids, Redis' key names,
//! list cursors, chunk sizes) and the one reader (`traceparent`, API key digests, cursors).
//!
//! Ids are written eight bytes at a time ([`hex8`]): the eight bytes' sixteen nibbles are spread
//! one to a byte of a `u128` and turned into digits all at once, a few shifts, masks and adds
//! for the lot, where a byte at a time (a table of digits, two stores a byte) measured dearer
//! for a UUID and for a `traceparent` (docs/performance.md).

/// The lowercase hex digits, by value.
pub(crate) const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// The two lowercase digits of `b`.
#[inline]
pub(crate) fn byte(b: u8) -> [u8; 2] {
    [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]]
}

/// The 16 lowercase hex digits of `bytes`, in order (`[0xab, ..]` is `b"ab.."`).
pub(crate) fn hex8(bytes: [u8; 8]) -> [u8; 16] {
    const fn rep(b: u8) -> u128 {
        u128::from_ne_bytes([b; 16])
    }
    // Nibble i (counted from the least significant) goes to byte i: the most significant
    // nibble, the first digit, lands in the most significant byte, first in big-endian order.
    let mut x = u128::from(u64::from_be_bytes(bytes));
    x = (x | (x << 32)) & 0x0000_0000_ffff_ffff_0000_0000_ffff_ffff;
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff_0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff_00ff_00ff_00ff_00ff;
    x = (x | (x << 4)) & rep(0x0f);
    // Each byte is a nibble n (no carries between bytes below: n + 6 < 0x10 + 6, n + 0x57 <
    // 0x100): a digit is '0' + n, or 'a' + n - 10 when n > 9, which n + 6 carrying into bit 4
    // tells.
    let letters = ((x + rep(6)) >> 4) & rep(1);
    (x + rep(b'0') + letters * u128::from(b'a' - b'0' - 10)).to_be_bytes()
}

/// The 32 lowercase hex digits of a 16-byte id (a UUID, a trace id), eight bytes at a time.
pub(crate) fn hex16(bytes: [u8; 16]) -> [u8; 32] {
    let [a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7] = bytes;
    let mut out = [0u8; 32];
    out[..16].copy_from_slice(&hex8([a0, a1, a2, a3, a4, a5, a6, a7]));
    out[16..].copy_from_slice(&hex8([b0, b1, b2, b3, b4, b5, b6, b7]));
    out
}

/// Appends the lowercase digits of `bytes` to `out`, eight bytes at a time.
pub(crate) fn push(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let eight: [u8; 8] = c.try_into().unwrap_or_default();
        out.extend(hex8(eight).map(char::from));
    }
    for &b in chunks.remainder() {
        out.extend(byte(b).map(char::from));
    }
}

/// The lowercase digits of `bytes`.
pub(crate) fn encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    push(&mut out, bytes);
    out
}

/// Fills `out` with the bytes the digits `s` spell, two a byte: `None` unless `s` is exactly
/// that many digits, lowercase (as `traceparent` must be) or, with `any_case`, either case.
pub(crate) fn decode_into(s: &[u8], out: &mut [u8], any_case: bool) -> Option<()> {
    let nibble = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' if any_case => Some(b - b'A' + 10),
        _ => None,
    };
    if s.len() != 2 * out.len() {
        return None;
    }
    for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        *o = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(())
}

/// The `N` bytes that the `2 N` digits `s` spell (see [`decode_into`]).
pub(crate) fn decode<const N: usize>(s: &str, any_case: bool) -> Option<[u8; N]> {
    let mut out = [0u8; N];
    decode_into(s.as_bytes(), &mut out, any_case)?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The digits `format!("{:02x}")` writes, byte for byte, whatever the bytes.
        #[test]
        fn hex8_is_format(bytes in any::<[u8; 8]>()) {
            let expect: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            prop_assert_eq!(&hex8(bytes)[..], expect.as_bytes());
        }

        /// Any bytes written read back as themselves; upper case only when asked for.
        #[test]
        fn encode_then_decode(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let text = encode(&bytes);
            let expect: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            prop_assert_eq!(&text, &expect);
            let mut back = vec![0; bytes.len()];
            prop_assert_eq!(decode_into(text.as_bytes(), &mut back, false), Some(()));
            prop_assert_eq!(&back, &bytes);
            let upper = text.to_uppercase();
            prop_assert_eq!(decode_into(upper.as_bytes(), &mut back, true), Some(()));
            prop_assert_eq!(&back, &bytes);
            if upper.bytes().any(|b| b.is_ascii_uppercase()) {
                prop_assert_eq!(decode_into(upper.as_bytes(), &mut back, false), None);
            }
        }
    }

    #[test]
    fn only_whole_digit_pairs_decode() {
        assert_eq!(decode::<2>("0aff", false), Some([0x0a, 0xff]));
        assert_eq!(decode::<2>("0af", false), None);
        assert_eq!(decode::<2>("0aff0", false), None);
        assert_eq!(decode::<1>("+f", true), None);
        assert_eq!(decode::<1>("g0", true), None);
        assert_eq!(byte(0x5c), *b"5c");
    }

    #[test]
    fn sixteen_bytes_are_two_halves() {
        let bytes = [
            0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54,
            0x32, 0x10,
        ];
        assert_eq!(&hex16(bytes), b"0123456789abcdeffedcba9876543210");
    }

    #[test]
    fn every_digit() {
        assert_eq!(
            &hex8([0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]),
            b"0123456789abcdef"
        );
        assert_eq!(&hex8([0xff; 8]), b"ffffffffffffffff");
        assert_eq!(&hex8([0; 8]), b"0000000000000000");
    }
}
