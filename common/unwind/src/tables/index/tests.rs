use super::*;

/// Every lookup in and around `keys` by the index (twice: the second from the cache)
/// agrees with a binary search over all of them.
fn agrees<K: Key + std::fmt::Debug>(keys: Vec<K>, probe: impl Fn(u64) -> K) {
    let values: Vec<u32> = match keys.first().and_then(|k| k.value()) {
        Some(_) => Vec::new(),
        None => (0..keys.len() as u32).map(|v| v * 7).collect(),
    };
    let index = BlockIndex::new(keys.clone(), values);
    let mut addrs: Vec<u64> = keys
        .iter()
        .flat_map(|k| {
            let k = k.to_u64();
            [k.saturating_sub(1), k, k.saturating_add(1)]
        })
        .collect();
    addrs.push(0);
    addrs.push(u64::MAX);
    for _ in 0..2 {
        for &a in &addrs {
            let at = probe(a);
            assert_eq!(index.get(at), index.get_by_search(at), "{at:?}");
        }
    }
}

/// Packed keys at `offs`, each valued its position.
fn packed(offs: &[u32]) -> Vec<Packed> {
    offs.iter()
        .enumerate()
        .map(|(i, &o)| Packed::new(o, i as u32))
        .collect()
}

fn probe(a: u64) -> Packed {
    Packed::probe(a.min(u32::MAX as u64) as u32)
}

#[test]
fn finds_the_rightmost_key_at_or_before() {
    let index = BlockIndex::new(vec![10u64, 20, 20, 300, 301], vec![1, 2, 3, 4, 5]);
    assert_eq!(index.get(9), None);
    assert_eq!(index.get(10), Some(1));
    assert_eq!(index.get(19), Some(1));
    // Of equal keys, the last.
    assert_eq!(index.get(20), Some(3));
    assert_eq!(index.get(299), Some(3));
    assert_eq!(index.get(301), Some(5));
    assert_eq!(index.get(u64::MAX), Some(5));
    // Again, from the cache.
    assert_eq!(index.get(20), Some(3));
    assert_eq!(index.get(9), None);
    // Packed: the same, the values stored with the keys.
    let index = BlockIndex::new(packed(&[10, 20, 20, 300, 301]), Vec::new());
    assert_eq!(index.get(probe(9)), None);
    assert_eq!(index.get(probe(20)), Some(2));
    assert_eq!(index.get(probe(u32::MAX as u64)), Some(4));
    // Of keys at one offset the last, whatever the values' order (ORC's real entry after a
    // terminator at its address).
    let keys = vec![Packed::new(20, 9), Packed::new(20, 2), Packed::new(30, 5)];
    let index = BlockIndex::new(keys, Vec::new());
    assert_eq!(index.get(probe(25)), Some(2));
    assert_eq!(index.get_by_search(probe(25)), Some(2));
}

#[test]
fn agrees_with_a_binary_search() {
    let mut rng = fastrand::Rng::with_seed(28);
    // Sparse, dense (more keys in a block than the window), duplicated, near the top.
    let mut sparse: Vec<u32> = (0..2000).map(|_| rng.u32(..1 << 24)).collect();
    sparse.sort();
    agrees(packed(&sparse), probe);
    let mut dense: Vec<u32> = (0..3000).map(|_| rng.u32(..600)).collect();
    dense.sort();
    agrees(packed(&dense), probe);
    agrees(packed(&[u32::MAX - 1, u32::MAX, u32::MAX]), probe);
    // u64 keys over more than 4 GiB (the cache does not hold those), and one key alone.
    let mut wide: Vec<u64> = (0..2000).map(|_| rng.u64(..)).collect();
    wide.sort();
    agrees(wide, |a| a);
    agrees(vec![0x1000u64], |a| a);
}

#[test]
fn stays_small_over_a_wide_span() {
    let index = BlockIndex::new(vec![0u64, u64::MAX / 2, u64::MAX], vec![0, 1, 2]);
    assert!(index.heap_bytes() < 8 << 20, "{}", index.heap_bytes());
    assert_eq!(index.get(u64::MAX / 2 + 1), Some(1));
}

#[test]
fn the_cache_holds_colliding_lookups() {
    // Many more lookups than slots: every answer stays right whatever the cache evicts.
    let keys: Vec<u32> = (0..40_000).map(|i| i * 16).collect();
    let index = BlockIndex::new(packed(&keys), Vec::new());
    for round in 0..2 {
        for i in (0..40_000u32).rev() {
            assert_eq!(
                index.get(probe(i as u64 * 16 + 3)),
                Some(i),
                "round {round}"
            );
        }
    }
}

#[test]
fn names_the_distinct_items() {
    let (unique, ids) = distinct([5, 7, 5, 9, 7].into_iter());
    assert_eq!(unique, [5, 7, 9]);
    assert_eq!(ids, [0, 1, 0, 2, 1]);
}
