//! Chained prefix-block hashes of token ids, the `prefix_hashes` of adapters that see the prompt's tokens.
//!
//! Hash `i` covers blocks `0..=i`: `h[0] = xxh3_64(block 0, seed 0)`, `h[i] = xxh3_64(block i, seed h[i-1])`, each
//! block being `block_size` token ids as little-endian `u32` (ids above `u32::MAX` as little-endian `u64`). Only
//! full blocks are hashed, as engines cache only full blocks. Equal hashes therefore mean an equal token prefix, and
//! no token id can be recovered from them.

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// The chained hashes of the full `block_size`-token blocks of `tokens`.
pub fn chained_block_hashes(tokens: &[u64], block_size: usize) -> Vec<u64> {
    if block_size == 0 {
        return Vec::new();
    }
    // The usual blocks (at most 64 ids, none above `u32::MAX`) are written into this array, the rest into `bytes`.
    let mut small = [0u8; 256];
    let mut bytes = Vec::new();
    let mut previous = 0;
    tokens
        .chunks_exact(block_size)
        .map(|block| {
            let narrow = block.iter().fold(0, |all, &token| all | token) <= u64::from(u32::MAX);
            let written: &[u8] = match small.get_mut(..block.len() * 4) {
                Some(out) if narrow => {
                    for (out, &token) in out.chunks_exact_mut(4).zip(block) {
                        out.copy_from_slice(&(token as u32).to_le_bytes());
                    }
                    out
                }
                _ => {
                    bytes.clear();
                    for &token in block {
                        match u32::try_from(token) {
                            Ok(small) => bytes.extend_from_slice(&small.to_le_bytes()),
                            Err(_) => bytes.extend_from_slice(&token.to_le_bytes()),
                        }
                    }
                    &bytes
                }
            };
            previous = xxh3_64_with_seed(written, previous);
            previous
        })
        .collect()
}

/// The key of `--hash-salt`: `xxh3_64` of the salt's bytes. The salt itself is never stored.
pub fn salt_key(salt: &[u8]) -> u64 {
    xxh3_64(salt)
}

/// A prefix or block hash keyed by `key` ([`salt_key`]): `xxh3_64(h as little-endian bytes, seed key)`.
///
/// One keyed transform of the final hashes rather than a salted chain: equal hashes stay equal inside a dataset,
/// so prefix sharing and cache simulation are unchanged, while datasets keyed differently share no value.
pub fn keyed(hash: u64, key: u64) -> u64 {
    xxh3_64_with_seed(&hash.to_le_bytes(), key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_prefixes_give_equal_hashes_and_only_full_blocks_count() {
        let a: Vec<u64> = (0..40).collect();
        let mut b = a.clone();
        b[35] = 999; // Third block differs.
        let (ha, hb) = (chained_block_hashes(&a, 16), chained_block_hashes(&b, 16));
        assert_eq!(ha.len(), 2, "40 tokens hold two full 16-token blocks");
        assert_eq!(ha, hb, "the difference is in the partial third block");
        let mut c = a.clone();
        c[3] = 999;
        let hc = chained_block_hashes(&c, 16);
        assert_ne!(ha[0], hc[0]);
        assert_ne!(ha[1], hc[1], "a change in block 0 changes every later hash");
        assert_eq!(chained_block_hashes(&a[..15], 16), Vec::<u64>::new());
        assert_eq!(chained_block_hashes(&a, 0), Vec::<u64>::new());
    }

    #[test]
    fn the_first_hash_is_xxh3_of_the_little_endian_block() {
        let tokens = [1u64, 2, 3, 4];
        let bytes: Vec<u8> = [1u32, 2, 3, 4].iter().flat_map(|t| t.to_le_bytes()).collect();
        let first = xxh3_64_with_seed(&bytes, 0);
        assert_eq!(
            chained_block_hashes(&tokens, 2)[1],
            xxh3_64_with_seed(&bytes[8..], xxh3_64_with_seed(&bytes[..8], 0))
        );
        assert_eq!(chained_block_hashes(&tokens, 4), [first]);
    }

    #[test]
    fn wide_ids_and_long_blocks_hash_as_documented() {
        // Blocks that fit the stack array and blocks that do not (65 ids), with and without an id above u32::MAX.
        let mut tokens: Vec<u64> = (0..400u64).map(|t| t * 2_654_435_761 % 200_003).collect();
        tokens[70] = u64::from(u32::MAX) + 1;
        tokens[300] = u64::MAX;
        for block_size in [1, 16, 64, 65, 100] {
            let mut previous = 0;
            let expected: Vec<u64> = tokens
                .chunks_exact(block_size)
                .map(|block| {
                    let mut bytes = Vec::new();
                    for &t in block {
                        match u32::try_from(t) {
                            Ok(t) => bytes.extend(t.to_le_bytes()),
                            Err(_) => bytes.extend(t.to_le_bytes()),
                        }
                    }
                    previous = xxh3_64_with_seed(&bytes, previous);
                    previous
                })
                .collect();
            assert_eq!(chained_block_hashes(&tokens, block_size), expected, "block size {block_size}");
        }
        // The wide id is 8 bytes: the block holding it is not the 4-byte form of the same ids.
        let narrowed: Vec<u64> = tokens.iter().map(|&t| t & u64::from(u32::MAX)).collect();
        assert_ne!(chained_block_hashes(&tokens, 64)[1], chained_block_hashes(&narrowed, 64)[1]);
        assert_eq!(chained_block_hashes(&tokens, 64)[0], chained_block_hashes(&narrowed, 64)[0]);
    }

    #[test]
    fn keyed_hashes_keep_equality_and_differ_between_keys() {
        let (a, b) = (salt_key(b"tenant-a"), salt_key(b"tenant-b"));
        assert_ne!(a, b);
        assert_eq!(keyed(42, a), keyed(42, a));
        assert_ne!(keyed(42, a), keyed(42, b));
        assert_ne!(keyed(42, a), keyed(43, a));
        assert_eq!(keyed(42, a), xxh3_64_with_seed(&42u64.to_le_bytes(), xxh3_64(b"tenant-a")));
    }
}
