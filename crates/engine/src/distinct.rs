//! The distinct block hashes of each group, counted out of core, and the tokens their first sights weigh.
//!
//! A group's unbounded reuse is its blocks less its distinct hashes: every block but the first sight of a hash
//! hits. Each block weighs its share of its request's input tokens (`block_size`, less for a partly filled last
//! block, 0 past the input), so the hit tokens are the shares of all blocks less those of the first sights: the
//! share of each hash's earliest sight by arrival. A day of a large fleet has billions of blocks, too many to hold in
//! one map: each `(group, share, arrival, hash)` is appended to one of several partition files in the scratch
//! directory, chosen by a mix of the hash's bits, so that equal hashes meet in one file. Then each file is read
//! back alone and counted in a map small enough for the processor's caches, a file per thread at a time (20 bytes
//! a block, 24 with its group).
//!
//! The query engine's `GROUP BY` of the hashes does the same job several times slower: its one hash table of all
//! the hashes is too large for the caches (measurements in `docs/performance.md`).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use infertrace_query::QueryError;

/// Partition files: about 400 thousand pairs each at 10 M requests, 4 million at 100 M. Fewer than a system's
/// usual limit of 1024 open files.
const PARTITIONS: usize = 512;

/// What [`DistinctCounter::counts`] found in one group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Distinct hashes.
    pub distinct: u64,
    /// Σ over the distinct hashes of the share of the earliest sight of each.
    pub first_shares: u64,
    /// Some hash's earliest sights (at one arrival, or without one) came with two shares: which of them was first
    /// is decided by input order, which the counter does not know.
    pub mixed: bool,
}

/// Bytes each partition file gathers before it is written: 512 of them hold 16 MiB.
const BUFFER_BYTES: usize = 32 << 10;

/// Counts the distinct hashes of each group (numbered from 0) out of core.
pub(crate) struct DistinctCounter {
    dir: PathBuf,
    /// Each partition's file, made when a first pair comes.
    files: Vec<Option<BufWriter<File>>>,
    /// Whether pairs carry their group: with one group, only the hash is written.
    grouped: bool,
    /// Threads that count the partitions.
    threads: usize,
}

impl DistinctCounter {
    /// A counter of several groups or one, its partition files in a directory it makes in `dir` (removed by
    /// [`counts`](Self::counts); `dir` is the session's scratch directory, removed with it in any case), counted on
    /// `threads` threads.
    pub(crate) fn new(dir: &Path, grouped: bool, threads: usize) -> Result<Self, QueryError> {
        let dir = dir.join("distinct");
        std::fs::create_dir_all(&dir).map_err(|source| scratch(&dir, source))?;
        let files = (0..PARTITIONS).map(|_| None).collect();
        Ok(Self { dir, files, grouped, threads: threads.max(1) })
    }

    /// Adds a block to `group` (0 when not grouped): its hash, the input tokens it holds and its request's arrival
    /// (`i64::MAX` for none: such requests are replayed last).
    pub(crate) fn insert(&mut self, group: u32, hash: u64, share: u32, arrival: i64) -> Result<(), QueryError> {
        // The high bits of a multiplication depend on every bit of the hash: hashes that are not uniform (small
        // integers in a hand-written dataset) still spread over the partitions.
        let partition = (hash.wrapping_mul(SPREAD) >> (64 - PARTITIONS.trailing_zeros())) as usize;
        let path = || partition_path(&self.dir, partition);
        let file = match &mut self.files[partition] {
            Some(file) => file,
            slot => slot
                .insert(BufWriter::with_capacity(BUFFER_BYTES, File::create(path()).map_err(|e| scratch(&path(), e))?)),
        };
        let grouped = if self.grouped { file.write_all(&group.to_le_bytes()) } else { Ok(()) };
        let written = grouped
            .and_then(|()| file.write_all(&share.to_le_bytes()))
            .and_then(|()| file.write_all(&arrival.to_le_bytes()))
            .and_then(|()| file.write_all(&hash.to_le_bytes()));
        written.map_err(|e| scratch(&path(), e))
    }

    /// The tally of each of the `groups` groups; removes the partition files.
    pub(crate) fn counts(self, groups: usize) -> Result<Vec<Tally>, QueryError> {
        let mut partitions = Vec::new();
        for (partition, file) in self.files.into_iter().enumerate() {
            if let Some(file) = file {
                file.into_inner().map_err(|e| scratch(&partition_path(&self.dir, partition), e.into_error()))?;
                partitions.push(partition);
            }
        }
        // Each thread takes the next partition left and counts into its own tally.
        let next = AtomicUsize::new(0);
        let (dir, grouped) = (&self.dir, self.grouped);
        let count = || -> Result<Vec<Tally>, QueryError> {
            let mut counts = vec![Tally::default(); groups];
            // Per hash: its earliest arrival, the share seen at it, and whether another share was seen at it too.
            let mut seen: HashMap<u128, (i64, u32, bool), BuildHasherDefault<Mix>> = HashMap::default();
            loop {
                let Some(&partition) = partitions.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    return Ok(counts);
                };
                let path = partition_path(dir, partition);
                let bytes = std::fs::read(&path).map_err(|e| scratch(&path, e))?;
                std::fs::remove_file(&path).map_err(|e| scratch(&path, e))?;
                seen.clear();
                let width = if grouped { 24 } else { 20 };
                for block in bytes.chunks_exact(width) {
                    let (group, rest) = block.split_at(width - 20);
                    let group = if grouped { u32::from_le_bytes(group.try_into().expect("4 bytes")) } else { 0 };
                    let share = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes"));
                    let arrival = i64::from_le_bytes(rest[4..12].try_into().expect("8 bytes"));
                    let hash = u64::from_le_bytes(rest[12..].try_into().expect("8 bytes"));
                    match seen.entry(u128::from(group) << 64 | u128::from(hash)) {
                        Entry::Vacant(entry) => {
                            entry.insert((arrival, share, false));
                        }
                        Entry::Occupied(mut entry) => {
                            let earliest = entry.get_mut();
                            if arrival < earliest.0 {
                                *earliest = (arrival, share, false);
                            } else if arrival == earliest.0 && share != earliest.1 {
                                earliest.2 = true;
                            }
                        }
                    }
                }
                for (pair, (_, share, mixed)) in seen.drain() {
                    let tally = &mut counts[(pair >> 64) as usize];
                    tally.distinct += 1;
                    tally.first_shares += u64::from(share);
                    tally.mixed |= mixed;
                }
            }
        };
        let tallies = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..self.threads.min(partitions.len())).map(|_| scope.spawn(count)).collect();
            workers.into_iter().map(|w| w.join().expect("a counting thread panicked")).collect::<Vec<_>>()
        });
        let mut counts = vec![Tally::default(); groups];
        for tally in tallies {
            for (total, part) in counts.iter_mut().zip(tally?) {
                total.distinct += part.distinct;
                total.first_shares += part.first_shares;
                total.mixed |= part.mixed;
            }
        }
        // Only the directory this counter made, now empty.
        std::fs::remove_dir(dir).map_err(|e| scratch(dir, e))?;
        Ok(counts)
    }
}

/// An odd constant near 2⁶⁴/φ: multiplying by it mixes low bits into high ones.
const SPREAD: u64 = 0x9e37_79b9_7f4a_7c15;

fn partition_path(dir: &Path, partition: usize) -> PathBuf {
    dir.join(format!("{partition:03}.pairs"))
}

fn scratch(path: &Path, source: io::Error) -> QueryError {
    QueryError::Scratch { path: path.to_owned(), source }
}

/// The set's hash of a pair: one multiplication, rotated so that the table's index bits come from the middle of the
/// product, which depends on every low bit of the pair. SipHash, the standard one, takes several times as long,
/// and the pairs are not chosen by an adversary: they are hashes already.
#[derive(Default)]
struct Mix(u64);

impl Hasher for Mix {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(SPREAD);
        }
    }

    fn write_u128(&mut self, n: u128) {
        let folded = (n as u64) ^ ((n >> 64) as u64).wrapping_mul(SPREAD).rotate_left(17);
        self.0 = folded.wrapping_mul(SPREAD).rotate_left(32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_group_apart_across_partitions() {
        let dir = tempfile::tempdir().unwrap();
        let mut counter = DistinctCounter::new(dir.path(), true, 2).unwrap();
        // Group 0: 1000 hashes, each twice; group 1: the first 10 of the same hashes (counted apart), and
        // 2⁶⁴ − 1 three times; group 2: nothing.
        // Group 0's blocks weigh 16 tokens, the later sight of each 8; group 1's 10 hashes 16, and its last one 3 at
        // 2 s, then 5 and 7 at 1 s (the earliest: two shares at one instant).
        for round in 0..2 {
            for h in 0..1000u64 {
                counter.insert(0, h * 7919, 16 >> round, round).unwrap();
            }
            if round == 0 {
                for h in 0..10u64 {
                    counter.insert(1, h * 7919, 16, 0).unwrap();
                }
            }
        }
        for (share, arrival) in [(3, 2), (5, 1), (7, 1)] {
            counter.insert(1, u64::MAX, share, arrival).unwrap();
        }
        let tally = |distinct, first_shares, mixed| Tally { distinct, first_shares, mixed };
        assert_eq!(counter.counts(3).unwrap(), [tally(1000, 16_000, false), tally(11, 165, true), tally(0, 0, false)]);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the partition files are removed");
    }

    #[test]
    fn one_group_writes_hashes_alone_and_small_hashes_spread() {
        let dir = tempfile::tempdir().unwrap();
        let mut counter = DistinctCounter::new(dir.path(), false, 1).unwrap();
        for round in 0..3u64 {
            for h in 0..(51_200 + round) {
                counter.insert(0, h, 1, 0).unwrap();
            }
        }
        // 153,603 blocks of 20 bytes over 512 files, each with about 300 (all still in the files' buffers).
        let sizes: Vec<usize> = counter.files.iter().map(|f| f.as_ref().map_or(0, |f| f.buffer().len())).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 153_603 * 20);
        assert!(sizes.iter().all(|&s| s > 200 * 20), "{:?}", sizes.iter().min());
        assert_eq!(counter.counts(1).unwrap(), [Tally { distinct: 51_202, first_shares: 51_202, mixed: false }]);
    }
}
