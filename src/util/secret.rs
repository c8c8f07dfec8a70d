//! The one comparison of a secret a client presents (bearer tokens, admin tokens, API keys)
//! with one the gateway holds.

use subtle::ConstantTimeEq;

/// Whether `a` and `b` are the same bytes, in time that depends on their lengths only, never on
/// where they differ (`subtle`, whose comparison the optimiser cannot turn into an early exit).
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn equal_bytes_only() {
        assert!(same(b"", b""));
        assert!(same(b"key-0123", b"key-0123"));
        assert!(!same(b"key-0123", b"key-0124"));
        assert!(!same(b"Key-0123", b"key-0123"));
        assert!(!same(b"key-012", b"key-0123"));
    }
}
