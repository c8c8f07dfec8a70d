//! Protobuf's wire format, the few pieces OTLP's messages need: keys, varints and
//! length-delimited fields, written into a byte buffer. Pure.

/// Wire type of a varint field.
pub(crate) const VARINT: u32 = 0;
/// Wire type of a length-delimited field (bytes, strings, messages).
pub(crate) const LEN: u32 = 2;
/// Wire type of a four-byte field.
pub(crate) const FIXED32: u32 = 5;

/// The length of a length-delimited field of `len` bytes: its key (one byte: every such tag
/// OTLP's messages use here is below 16), its length, its content.
#[inline]
pub(crate) fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// A field's key.
#[inline]
pub(crate) fn key(out: &mut Vec<u8>, tag: u32, wire: u32) {
    varint(out, u64::from(tag << 3 | wire));
}

/// A length-delimited field holding `b`.
#[inline]
pub(crate) fn put_bytes(out: &mut Vec<u8>, tag: u32, b: &[u8]) {
    key(out, tag, LEN);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A varint.
#[inline]
pub(crate) fn varint(out: &mut Vec<u8>, mut v: u64) {
    if v < 0x80 {
        // Keys and most lengths: one byte.
        out.push(v as u8);
        return;
    }
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// How many bytes [`varint`] writes for `v`.
#[inline]
pub(crate) fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Reads a varint at the start of `b`: its value and the bytes it took; `None` when `b` ends
/// first or it runs past ten bytes.
pub(crate) fn read_varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_varint_reads_back_in_the_length_it_said(v in any::<u64>()) {
            let mut out = Vec::new();
            varint(&mut out, v);
            prop_assert_eq!(out.len(), varint_len(v));
            prop_assert_eq!(read_varint(&out), Some((v, out.len())));
        }
    }

    #[test]
    fn a_field_is_its_key_its_length_and_its_bytes() {
        let mut out = Vec::new();
        put_bytes(&mut out, 5, b"abc");
        assert_eq!(out, [5 << 3 | 2, 3, b'a', b'b', b'c']);
        assert_eq!(field_len(3), out.len());
        assert_eq!(read_varint(&[0x80]), None, "cut short");
    }
}
