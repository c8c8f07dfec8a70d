//! Which endpoint of an upstream takes a call, among those that may (a set of endpoint
//! indices as bits). Pure: the loads, the turn and the random numbers are passed in.

use super::affinity::mix;

/// The index of the `k`-th set bit of `set` (`k` below its count).
fn nth_set(mut set: u64, k: u32) -> usize {
    for _ in 0..k {
        set &= set - 1;
    }
    set.trailing_zeros() as usize
}

/// `round_robin`: the endpoints of `set` in turn, so each of them gets an equal share when some
/// are out (the next one after an endpoint that is out does not take its turns too).
pub(crate) fn round_robin(set: u64, turn: usize) -> usize {
    debug_assert!(set != 0);
    nth_set(set, (turn % set.count_ones() as usize) as u32)
}

/// `least_request`: of two endpoints of `set` drawn with `r1` and `r2`, the one with fewer
/// calls in flight (power of two choices); on a tie the one listed first, so a lightly loaded
/// upstream's calls gather on few endpoints and few connections, which answer them in batches.
pub(crate) fn least_request(set: u64, load: impl Fn(usize) -> usize, r1: u64, r2: u64) -> usize {
    let count = set.count_ones();
    debug_assert!(count > 0);
    let a = (r1 % u64::from(count)) as u32;
    if count == 1 {
        return nth_set(set, 0);
    }
    // A second index other than the first.
    let b = (a + 1 + (r2 % u64::from(count - 1)) as u32) % count;
    let (a, b) = (nth_set(set, a), nth_set(set, b));
    match load(a).cmp(&load(b)) {
        std::cmp::Ordering::Less => a,
        std::cmp::Ordering::Greater => b,
        std::cmp::Ordering::Equal => a.min(b),
    }
}

/// `hash`: the endpoint of `set` whose salt scores highest with the caller's `key`
/// (rendezvous hashing: an endpoint that leaves moves only the callers it had).
pub(crate) fn rendezvous(set: u64, salts: &[u64], key: u64) -> usize {
    let mut best = (0u64, set.trailing_zeros() as usize);
    let mut rest = set;
    while rest != 0 {
        let i = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        let score = mix(key ^ salts[i]);
        if score > best.0 {
            best = (score, i);
        }
    }
    best.1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::affinity::hash;

    #[test]
    fn round_robin_cycles_over_the_set_only() {
        let picks: Vec<usize> = (0..6).map(|t| round_robin(0b111, t)).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
        let picks: Vec<usize> = (0..4).map(|t| round_robin(0b101, t)).collect();
        assert_eq!(
            picks,
            [0, 2, 0, 2],
            "an endpoint out: the others share its turns"
        );
    }

    #[test]
    fn least_request_takes_the_less_loaded_of_two_distinct() {
        let loads = [5usize, 1, 9];
        for r1 in 0..6 {
            for r2 in 0..6 {
                let i = least_request(0b111, |i| loads[i], r1, r2);
                // Never the most loaded: it loses against either other one.
                assert_ne!(i, 2);
            }
        }
        assert_eq!(least_request(0b100, |i| loads[i], 7, 3), 2);
    }

    #[test]
    fn rendezvous_moves_only_the_callers_of_a_removed_endpoint() {
        let salts: Vec<u64> = (0..4).map(|i| hash(format!("e{i}").as_bytes())).collect();
        let mut moved = 0;
        let mut counts = [0usize; 4];
        for c in 0..4000 {
            let key = hash(format!("caller-{c}").as_bytes());
            let all = rendezvous(0b1111, &salts, key);
            counts[all] += 1;
            let without_2 = rendezvous(0b1011, &salts, key);
            if all != 2 {
                assert_eq!(all, without_2, "a caller not on endpoint 2 stays put");
            } else {
                moved += 1;
            }
        }
        assert_eq!(moved, counts[2]);
        assert!(counts.iter().all(|n| *n > 800), "spread: {counts:?}");
    }
}
