//! Lowercase hex digits of ids on the call path (the made `X-Request-Id`, the `traceparent`
//! sent upstream), eight bytes at a time.
//!
//! A byte at a time (a table of digits, two stores a byte) measured dearer for a
//! UUID and for a `traceparent` (docs/performance.md). Here the eight bytes' sixteen
//! nibbles are spread one to a byte of a `u128` and turned into digits all at once: a few shifts,
//! masks and adds for the lot.

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
