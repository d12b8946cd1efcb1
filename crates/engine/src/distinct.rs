//! The distinct block hashes of each group, counted out of core.
//!
//! A group's unbounded reuse is its blocks less its distinct hashes. A day of a large fleet has billions of blocks,
//! too many to hold in one set: each `(group, hash)` is appended to one of several partition files in the scratch
//! directory, chosen by a mix of the hash's bits, so that equal pairs meet in one file. Then each file is read back
//! alone and counted in a set small enough for the processor's caches, a file per thread at a time (8 bytes a
//! hash, 12 with its group).
//!
//! The query engine's `GROUP BY` of the hashes does the same job several times slower: its one hash table of all
//! the hashes is too large for the caches (measurements in `docs/performance.md`).

use std::collections::HashSet;
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use infertrace_query::QueryError;

/// Partition files: about 400 thousand pairs each at 10 M requests, 4 million at 100 M. Fewer than a system's
/// usual limit of 1024 open files.
const PARTITIONS: usize = 512;

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

    /// Adds a hash to `group` (0 when not grouped).
    pub(crate) fn insert(&mut self, group: u32, hash: u64) -> Result<(), QueryError> {
        // The high bits of a multiplication depend on every bit of the hash: hashes that are not uniform (small
        // integers in a hand-written dataset) still spread over the partitions.
        let partition = (hash.wrapping_mul(SPREAD) >> (64 - PARTITIONS.trailing_zeros())) as usize;
        let path = || partition_path(&self.dir, partition);
        let file = match &mut self.files[partition] {
            Some(file) => file,
            slot => slot.insert(BufWriter::new(File::create(path()).map_err(|e| scratch(&path(), e))?)),
        };
        let written = if self.grouped {
            file.write_all(&group.to_le_bytes()).and_then(|()| file.write_all(&hash.to_le_bytes()))
        } else {
            file.write_all(&hash.to_le_bytes())
        };
        written.map_err(|e| scratch(&path(), e))
    }

    /// The number of distinct hashes of each of the `groups` groups; removes the partition files.
    pub(crate) fn counts(self, groups: usize) -> Result<Vec<u64>, QueryError> {
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
        let count = || -> Result<Vec<u64>, QueryError> {
            let mut counts = vec![0u64; groups];
            let mut seen: HashSet<u128, BuildHasherDefault<Mix>> = HashSet::default();
            loop {
                let Some(&partition) = partitions.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    return Ok(counts);
                };
                let path = partition_path(dir, partition);
                let bytes = std::fs::read(&path).map_err(|e| scratch(&path, e))?;
                std::fs::remove_file(&path).map_err(|e| scratch(&path, e))?;
                seen.clear();
                let width = if grouped { 12 } else { 8 };
                for pair in bytes.chunks_exact(width) {
                    let (group, hash) = pair.split_at(width - 8);
                    let group = if grouped { u32::from_le_bytes(group.try_into().expect("4 bytes")) } else { 0 };
                    let hash = u64::from_le_bytes(hash.try_into().expect("8 bytes"));
                    if seen.insert(u128::from(group) << 64 | u128::from(hash)) {
                        counts[group as usize] += 1;
                    }
                }
            }
        };
        let tallies = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..self.threads.min(partitions.len())).map(|_| scope.spawn(count)).collect();
            workers.into_iter().map(|w| w.join().expect("a counting thread panicked")).collect::<Vec<_>>()
        });
        let mut counts = vec![0u64; groups];
        for tally in tallies {
            for (total, n) in counts.iter_mut().zip(tally?) {
                *total += n;
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
        for round in 0..2 {
            for h in 0..1000u64 {
                counter.insert(0, h * 7919).unwrap();
            }
            if round == 0 {
                for h in 0..10u64 {
                    counter.insert(1, h * 7919).unwrap();
                }
            }
        }
        for _ in 0..3 {
            counter.insert(1, u64::MAX).unwrap();
        }
        assert_eq!(counter.counts(3).unwrap(), [1000, 11, 0]);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the partition files are removed");
    }

    #[test]
    fn one_group_writes_hashes_alone_and_small_hashes_spread() {
        let dir = tempfile::tempdir().unwrap();
        let mut counter = DistinctCounter::new(dir.path(), false, 1).unwrap();
        for round in 0..3u64 {
            for h in 0..(102_400 + round) {
                counter.insert(0, h).unwrap();
            }
        }
        // 307,203 hashes of 8 bytes over 512 files, each with about 600.
        let sizes: Vec<usize> = counter.files.iter().map(|f| f.as_ref().map_or(0, |f| f.buffer().len())).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 307_203 * 8);
        assert!(sizes.iter().all(|&s| s > 400 * 8), "{:?}", sizes.iter().min());
        assert_eq!(counter.counts(1).unwrap(), [102_402]);
    }
}
