//! The `hash_ids` of Mooncake-style traces: a prompt's blocks at the export's block size, each named by a small
//! integer that stands for the block and every block before it.

use std::collections::HashMap;

/// What identifies one output block of a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    /// The dataset's hash of a block that holds the output block's last token, and the output block's length.
    /// That hash fixes every token before it, so equal keys mean equal prefixes up to the block's end. The length
    /// is part of the key because a load generator gives an id one length only (AIPerf refuses an id used at two).
    Shared { hash: u64, tokens: u32 },
    /// A block the dataset did not hash (a partial last block, a prompt without hashes): never shared.
    Own,
}

/// Dense ids for blocks, in the order they are first seen, so the same export always numbers them the same way.
///
/// Memory holds one entry per distinct block of the segment (16 bytes and the map's overhead), as much as the load
/// generator that reads the file holds.
#[derive(Debug, Default)]
pub(crate) struct DenseIds {
    ids: HashMap<(u64, u32), u64>,
    next: u64,
}

/// How one prompt's blocks came out.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlockCounts {
    /// Blocks named by the dataset's hashes.
    pub(crate) shared: u64,
    /// Blocks the dataset did not hash, given ids of their own.
    pub(crate) own: u64,
}

impl DenseIds {
    /// The ids of the first `tokens` tokens of a prompt whose dataset hashes are `hashes`, chained over
    /// `source`-token blocks of a prompt of `original` tokens, at `size` tokens per output block:
    /// `ceil(tokens / size)` ids, the last for a partial block when `size` does not divide `tokens`.
    pub(crate) fn ids(
        &mut self,
        hashes: &[u64],
        source: Option<u32>,
        original: u32,
        tokens: u32,
        size: u32,
        counts: &mut BlockCounts,
    ) -> Vec<u64> {
        let size = size.max(1);
        (0..tokens.div_ceil(size))
            .map(|block| {
                let start = block * size;
                let end = (start + size).min(tokens);
                let key = key(hashes, source, original, end, end - start);
                match key {
                    Key::Shared { hash, tokens } => {
                        counts.shared += 1;
                        let next = &mut self.next;
                        *self.ids.entry((hash, tokens)).or_insert_with(|| {
                            *next += 1;
                            *next - 1
                        })
                    }
                    Key::Own => {
                        counts.own += 1;
                        self.next += 1;
                        self.next - 1
                    }
                }
            })
            .collect()
    }
}

/// The key of the output block ending at token `end` (exclusive) and `tokens` long.
fn key(hashes: &[u64], source: Option<u32>, original: u32, end: u32, tokens: u32) -> Key {
    let Some(source) = source.filter(|&s| s > 0) else { return Key::Own };
    // The dataset block that holds token `end - 1`. Its hash fixes every token up to its own end, at or past `end`,
    // when it is a full block or the dataset's hash of the partial last one.
    let index = (end - 1) / source;
    let full = (u64::from(index) + 1) * u64::from(source) <= u64::from(original);
    match hashes.get(index as usize) {
        Some(&hash) if full || is_last(hashes, source, original, index) => Key::Shared { hash, tokens },
        _ => Key::Own,
    }
}

/// Whether block `index` is the dataset's hash of a partial last block (Mooncake traces hash it; vLLM and WEKA
/// hash full blocks only).
fn is_last(hashes: &[u64], source: u32, original: u32, index: u32) -> bool {
    !original.is_multiple_of(source)
        && index as usize + 1 == hashes.len()
        && hashes.len() as u32 == original.div_ceil(source)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(dense: &mut DenseIds, hashes: &[u64], source: u32, original: u32, tokens: u32, size: u32) -> Vec<u64> {
        dense.ids(hashes, Some(source), original, tokens, size, &mut BlockCounts::default())
    }

    #[test]
    fn same_block_size_numbers_hashes_in_first_seen_order() {
        let mut dense = DenseIds::default();
        // Mooncake-style: 3 blocks of 4 for 10 tokens, the last one partial and hashed.
        assert_eq!(ids(&mut dense, &[90, 91, 92], 4, 10, 10, 4), [0, 1, 2]);
        assert_eq!(ids(&mut dense, &[90, 91, 93], 4, 12, 12, 4), [0, 1, 3]);
        // Hash 92 again, now as a full block: another id, as a load generator needs.
        assert_eq!(ids(&mut dense, &[90, 91, 92], 4, 12, 12, 4), [0, 1, 4]);
    }

    #[test]
    fn full_block_hashes_only_give_the_tail_an_id_of_its_own() {
        let mut dense = DenseIds::default();
        let mut counts = BlockCounts::default();
        // vLLM-style: 2 hashes of 16-token blocks for a 40-token prompt; the last 8 tokens have no hash.
        assert_eq!(dense.ids(&[5, 6], Some(16), 40, 40, 16, &mut counts), [0, 1, 2]);
        assert_eq!(dense.ids(&[5, 6], Some(16), 40, 40, 16, &mut counts), [0, 1, 3]);
        assert_eq!(counts, BlockCounts { shared: 4, own: 2 });
    }

    #[test]
    fn coarser_blocks_take_the_hash_of_their_last_dataset_block() {
        let mut dense = DenseIds::default();
        // 16-token dataset blocks, 32-token output blocks: output block j is dataset block 2j+1.
        assert_eq!(ids(&mut dense, &[1, 2, 3, 4], 16, 64, 64, 32), [0, 1]);
        // Shares dataset blocks 0-2 only: the first output block is shared, the second is not.
        assert_eq!(ids(&mut dense, &[1, 2, 3, 9], 16, 64, 64, 32), [0, 2]);
        // 50 tokens: the second output block (18 tokens) ends inside dataset block 3, which has no hash.
        assert_eq!(ids(&mut dense, &[1, 2, 3], 16, 50, 50, 32), [0, 3]);
    }

    #[test]
    fn a_clipped_prompt_keeps_the_hash_that_fixes_its_last_token() {
        let mut dense = DenseIds::default();
        // 64 tokens clipped to 40: the partial last block (8 tokens) ends in dataset block 2, hashed as 3.
        assert_eq!(ids(&mut dense, &[1, 2, 3, 4], 16, 64, 40, 16), [0, 1, 2]);
        assert_eq!(ids(&mut dense, &[1, 2, 3, 5], 16, 64, 40, 16), [0, 1, 2]);
        assert_eq!(ids(&mut dense, &[1, 2, 3, 5], 16, 64, 48, 16), [0, 1, 3]);
    }

    #[test]
    fn without_hashes_every_block_is_its_own() {
        let mut dense = DenseIds::default();
        let mut counts = BlockCounts::default();
        assert_eq!(dense.ids(&[], None, 10, 10, 4, &mut counts), [0, 1, 2]);
        assert_eq!(dense.ids(&[], Some(4), 10, 10, 4, &mut counts), [3, 4, 5]);
        assert_eq!(counts, BlockCounts { shared: 0, own: 6 });
        assert!(dense.ids(&[], None, 0, 0, 4, &mut counts).is_empty());
    }
}
