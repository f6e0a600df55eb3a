//! Damaged copies of a good file, for tests that a reader never panics: a small xorshift
//! keeps them the same from run to run without a dependency.

/// A xorshift64 generator seeded with `seed` (not 0).
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// `copies` copies of `good`, each with 1 to 8 bytes overwritten and then cut to the length
/// `keep` picks from its length and a random number.
pub fn damaged_copies(
    good: &[u8],
    seed: u64,
    copies: usize,
    keep: fn(usize, u64) -> usize,
) -> impl Iterator<Item = Vec<u8>> + '_ {
    let mut next = xorshift(seed);
    (0..copies).map(move |_| {
        let mut b = good.to_vec();
        for _ in 0..(next() % 8 + 1) {
            let i = (next() as usize) % b.len();
            b[i] = next() as u8;
        }
        b.truncate(keep(b.len(), next()));
        b
    })
}
