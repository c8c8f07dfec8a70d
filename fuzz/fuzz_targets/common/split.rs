//! Where a fuzz input is cut into reads: the same split points for every target that feeds a
//! parser in pieces, so a crash found by one reproduces the same way in another.

/// Split points (ends of successive reads), from a small PRNG seeded by the input.
pub fn cuts(len: usize, seed: u64) -> Vec<usize> {
    let mut x = seed | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let bytewise = len <= 256 && next() % 4 == 0;
    let mut out = Vec::new();
    let mut at = 0;
    while at < len {
        let step = if bytewise {
            1
        } else {
            1 + (next() as usize) % (len / 3).max(1)
        };
        at = (at + step).min(len);
        out.push(at);
    }
    out
}
