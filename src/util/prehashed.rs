//! Maps whose keys are hashes already (seeded 64-bit hashes of tokens, keys, bucket keys): the
//! key is its own hash, so a lookup hashes nothing more.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The hasher of such a map: `write_u64` keeps the key as it is.
#[derive(Default, Clone, Copy)]
pub(crate) struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is called for a `u64` key; this keeps the trait's contract anyway.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A map keyed by a hash.
pub(crate) type PrehashedMap<V> = HashMap<u64, V, BuildHasherDefault<Prehashed>>;
