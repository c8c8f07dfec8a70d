//! Which side of a split serves a caller: a stable hash of who the caller is, placed on the
//! weights. Pure: no clocks, no randomness but what the caller passes in.
//!
//! The caller's hash is `upstream::affinity`'s (fixed, so every replica and every restart puts a
//! caller on the same side). Sides are laid out primary first, so when a canary's weight
//! grows from 10 to 20 the callers it already had stay on it.

use crate::upstream::affinity::mix;

/// The side at `point` (any u64: a caller's hash salted by the route, or a random number for a
/// caller without a key) given `weights`. `None` when every weight is 0.
pub(crate) fn choose(weights: &[u32], point: u64) -> Option<usize> {
    let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
    if total == 0 {
        return None;
    }
    // point / 2^64 scaled onto [0, total): the same fraction of the line whatever the weights.
    let at = ((u128::from(point) * u128::from(total)) >> 64) as u64;
    let mut acc = 0u64;
    for (i, w) in weights.iter().enumerate() {
        acc += u64::from(*w);
        if at < acc {
            return Some(i);
        }
    }
    None
}

/// A caller's point on a route: the caller's hash salted with the route's name, so a caller on
/// the canary of one route is not thereby on the canary of every route.
pub(crate) fn point(route_salt: u64, caller: u64) -> u64 {
    mix(route_salt ^ caller.rotate_left(17))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::affinity::hash;

    #[test]
    fn weights_are_honoured_over_many_callers() {
        let salt = hash(b"plans");
        let mut counts = [0usize; 2];
        for i in 0..100_000 {
            let caller = hash(format!("token-{i}").as_bytes());
            counts[choose(&[90, 10], point(salt, caller)).unwrap()] += 1;
        }
        let share = counts[1] as f64 / 100_000.0;
        assert!((share - 0.10).abs() < 0.005, "canary share {share}");
    }

    #[test]
    fn a_growing_canary_keeps_its_callers() {
        let salt = hash(b"r");
        for i in 0..10_000 {
            let p = point(salt, hash(format!("c{i}").as_bytes()));
            if choose(&[90, 10], p) == Some(1) {
                assert_eq!(choose(&[80, 20], p), Some(1));
            }
        }
    }

    #[test]
    fn zero_weights_choose_nothing_and_extremes_hold() {
        assert_eq!(choose(&[0, 0], 5), None);
        assert_eq!(choose(&[0, 7], 0), Some(1));
        assert_eq!(choose(&[3, 0], u64::MAX), Some(0));
        assert_eq!(choose(&[1, 1], u64::MAX), Some(1));
        assert_eq!(choose(&[1, 1], 0), Some(0));
    }
}
