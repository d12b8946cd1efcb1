//! Line-parallel parsing: an adapter's pure first stage on every thread, its fold in input order on one.
//!
//! Every line-oriented adapter has two stages: pure functions that turn one line into a typed value, and a fold that
//! joins those values into rows with state that spans lines (open requests, the clock, instance names). Only the
//! first stage can run out of order, and for the heavy lines (a vLLM `Received request` line with 30,000 token ids,
//! a JSON record) it is almost all of the work. [`map_lines`] reads the input in chunks of whole lines, runs the
//! adapter's `prepare` over every line of a chunk on the rayon pool, and meanwhile calls its `fold` for every line
//! of the previous chunks, in input order, with what `prepare` made of the line.
//!
//! The fold sees the same lines in the same order with the same prepared values whatever the number of threads, so
//! the output is the same byte for byte: parallelism changes when work happens, never what is written. The thread
//! count is rayon's ([`rayon::current_num_threads`]): the CLI runs `normalize` inside a pool of `--threads` threads;
//! with one thread, lines are prepared and folded one at a time without copying.
//!
//! The calling thread reads the input into chunks and folds them; the pool's other threads prepare the chunks read
//! ahead, and the folding thread prepares any chunk it comes to that no other thread has taken (see
//! `map_lines_with`): where the other cores are busy, preparing falls back on the folding thread, which then costs
//! little more than on one thread (the copy of the lines into chunks).
//!
//! Memory stays bounded: at most `4 × threads` chunks are read and not yet folded, and no more are read once those hold
//! [`AHEAD_BYTES`] (but always the one the fold needs next), each chunk at most [`CHUNK_BYTES`] with its lines'
//! bookkeeping (a line longer than a chunk makes a chunk of its own, up to the line length limit), however long or
//! short the lines and however many the threads; only as many chunk buffers are made as chunks are read ahead at once.
//! What `prepare` makes of a line can be several times its size (a Mooncake record is about 4×), hence the small
//! chunks. Chunk buffers come from, and go back to, a process-wide bin (`SPARE_CHUNKS`), so a chunk may have more room
//! than it needs: at most the bin's 32 MiB more in all.

use std::cell::Cell;
use std::collections::VecDeque;
use std::io::{self, BufRead};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::de::DeserializeOwned;

use crate::lines::{LineReader, OVERLONG};
use crate::spare::SpareBuffers;
use crate::{Diagnostic, DiagnosticKind, ParseError, Sink, json, utf8_line};

/// Most bytes a chunk handed to a worker holds (its lines, and for each its place and its prepared value): enough
/// that a chunk's bookkeeping is negligible.
pub const CHUNK_BYTES: usize = 256 << 10;

/// Most bytes the chunks read ahead of the fold hold, whatever the thread count (many threads get smaller chunks).
pub const AHEAD_BYTES: usize = 8 << 20;

/// Chunks read ahead of the fold per thread, up to [`AHEAD_BYTES`]: enough that a thread that finished a chunk
/// finds another to prepare while the fold is still on an earlier one.
pub const CHUNKS_PER_THREAD: usize = 4;

/// The buffers of chunks whose input ended, for the next input's chunks, which may be cut on another thread (the CLI
/// parses files read ahead together on the pool's threads). It holds at most about what the inputs parsed at once have
/// in flight (the chunks each reads ahead, a window of files at most 16 MiB of text), and no buffer grown past four
/// chunks for a long line. With a new buffer for every chunk of every file, the peak memory of 254 gzip'd parts of a
/// vLLM log grew with the thread count (about 345 MiB with eight threads and 670 with thirty-two; with this bin, 245
/// and 380; see `docs/performance-history.md`, seventeenth pass).
static SPARE_CHUNKS: SpareBuffers = SpareBuffers::new(32 << 20, 4 * CHUNK_BYTES);

/// Reads every line of `lines`, calls `prepare` on each (on any thread), and `fold` on each in input order with its
/// number, its bytes and what `prepare` returned.
///
/// The bytes given to both are what [`LineReader::next_bytes`] returns, the too-long marker included, so `fold`
/// passes them to [`utf8_line`] as a sequential read loop would. `prepare` must be a pure function
/// of the line's bytes: it runs on any thread, in any order, and never sees the fold's state.
/// Stops at the first error of `fold` or of reading.
pub fn map_lines<R, T, E>(
    lines: &mut LineReader<R>,
    prepare: impl Fn(&[u8]) -> T + Sync,
    mut fold: impl FnMut(u64, &[u8], T) -> Result<(), E>,
) -> Result<(), E>
where
    R: BufRead,
    T: Send,
    E: From<io::Error>,
{
    map_lines_ahead(lines, prepare, |number, bytes, value, _: &[T]| fold(number, bytes, value))
}

/// [`map_lines`] whose `fold` also sees the values prepared for the lines after the one at hand, as far as they are
/// ready: the rest of the chunk, empty on one thread. For a fold whose state is too large for the cache (a table
/// of 100,000 sessions), reading ahead where the next lines will look lets their cache misses overlap instead of
/// coming one after another. `fold` must not let those values change what it writes: they are a hint, and which
/// of them it is shown depends on the thread count and the chunks.
pub fn map_lines_ahead<R, T, E>(
    lines: &mut LineReader<R>,
    prepare: impl Fn(&[u8]) -> T + Sync,
    fold: impl FnMut(u64, &[u8], T, &[T]) -> Result<(), E>,
) -> Result<(), E>
where
    R: BufRead,
    T: Send,
    E: From<io::Error>,
{
    let threads = if SEQUENTIAL.with(Cell::get) { 1 } else { rayon::current_num_threads() };
    let chunks = CHUNKS_PER_THREAD * threads;
    let chunk_bytes = (AHEAD_BYTES / chunks).clamp(16 << 10, CHUNK_BYTES);
    map_lines_with(lines, threads, Cut { chunk_bytes, chunks, bytes: AHEAD_BYTES, spare: &SPARE_CHUNKS }, prepare, fold)
}

thread_local! {
    /// Set while [`sequentially`] runs on this thread.
    static SEQUENTIAL: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with every [`map_lines`] (and [`map_lines_ahead`], [`map_json_lines`]) it calls on this thread
/// preparing and folding its lines one at a time, as with one thread: for a caller that already keeps the pool
/// busy with other inputs (the CLI's files read ahead together), for which handing each line to the pool would
/// only add copies and memory. What is written is the same either way.
pub fn sequentially<R>(f: impl FnOnce() -> R) -> R {
    /// Puts the flag back as it was, even if `f` panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            SEQUENTIAL.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(SEQUENTIAL.with(|s| s.replace(true)));
    f()
}

/// [`map_lines`] for JSON Lines: every non-blank UTF-8 line is parsed as a `T` on any thread, and `fold` is called in
/// input order with the line's number and its record. The lines that give no record are handled as every JSON Lines
/// adapter handles them: a line that is not UTF-8 (or too long) is reported by [`utf8_line`], one that is not a `T`
/// as `malformed-json` with serde's message, and a blank line is skipped (it carries nothing to lose). A byte-order
/// mark starting a line is dropped, on any line: files joined with `cat` carry one at each join.
pub fn map_json_lines<R, T, E>(
    lines: &mut LineReader<R>,
    sink: &mut dyn Sink,
    mut fold: impl FnMut(u64, T, &mut dyn Sink) -> Result<(), E>,
) -> Result<(), ParseError>
where
    R: BufRead,
    T: DeserializeOwned + Send,
    E: Into<ParseError>,
{
    let prepare = |bytes: &[u8]| {
        let line = crate::utf8(bytes)?;
        let line = line.strip_prefix('\u{feff}').unwrap_or(line);
        (!line.trim_ascii().is_empty()).then(|| serde_json::from_str::<T>(line).map_err(|e| json::error_message(&e)))
    };
    map_lines(lines, prepare, |line_no, bytes, record| {
        match record {
            Some(Ok(record)) => return fold(line_no, record, sink).map_err(Into::into),
            Some(Err(message)) => sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedJson, message)),
            None => {
                // Blank, or not UTF-8 (which `utf8_line` reports).
                let _ = utf8_line(line_no, bytes, sink);
            }
        }
        Ok(())
    })
}

/// How [`map_lines_with`] cuts its input and how far it reads ahead: chunks of about `chunk_bytes` (a longer line
/// makes a chunk of its own), at most `chunks` of them read and not yet folded, and no more read once those hold
/// `bytes` (but always the one the fold needs next).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cut {
    pub chunk_bytes: usize,
    pub chunks: usize,
    pub bytes: usize,
    /// Where chunk buffers come from and go back to.
    pub spare: &'static SpareBuffers,
}

/// [`map_lines`] with an explicit thread count and cut, so tests can cut an input into many small chunks.
///
/// With several threads, the calling thread reads chunks ahead into slots and folds them in order. While fewer jobs
/// than the pool's other threads are out, each chunk read starts a job on the pool, which prepares the newest chunk
/// no thread has taken, and the next, until none is left. The folding thread prepares a chunk itself when it comes
/// to one no job has taken, and waits only for one a job is preparing. So the fold never waits for a whole batch to
/// be prepared (the threads of an earlier version met at the end of every batch of chunks: the vLLM log took about
/// 15% longer on two threads than on one), the jobs work at the far end of the chunks read while the folding thread
/// works at the near end, and where the other cores are busy (reading and hashing the input, encoding the tables),
/// preparing falls back on the folding thread chunk by chunk, as on one thread.
pub(crate) fn map_lines_with<R, T, E>(
    lines: &mut LineReader<R>,
    threads: usize,
    cut: Cut,
    prepare: impl Fn(&[u8]) -> T + Sync,
    mut fold: impl FnMut(u64, &[u8], T, &[T]) -> Result<(), E>,
) -> Result<(), E>
where
    R: BufRead,
    T: Send,
    E: From<io::Error>,
{
    if threads <= 1 {
        while let Some((number, bytes)) = lines.next_bytes()? {
            let prepared = prepare(bytes);
            fold(number, bytes, prepared, &[])?;
        }
        return Ok(());
    }
    let slots = Slots::new(cut.chunks.max(2), cut.spare);
    let (prepare, slots) = (&prepare, &slots);
    rayon::in_place_scope(|scope| {
        // However this returns or unwinds, the jobs still out find nothing more to prepare.
        let _stop = StopJobs(slots);
        // The slots of the chunks read and not yet folded, in input order, with their sequence numbers; the slots
        // free, the last freed on top, so that only as many slots (and buffers) are ever used as chunks are read
        // ahead at once.
        let mut ahead: VecDeque<(usize, usize)> = VecDeque::with_capacity(slots.len());
        let mut free: Vec<usize> = (0..slots.len()).rev().collect();
        let (mut sequence, mut held_ahead, mut input_ended) = (0, 0, false);
        loop {
            while !input_ended && ahead.len() < slots.len() && (ahead.is_empty() || held_ahead < cut.bytes) {
                let index = free.pop().expect("a slot is free while fewer chunks than slots are read ahead");
                // Read out of its slot, so that no lock is held while reading waits for the input.
                let mut chunk = std::mem::replace(&mut slots.lock(index).chunk, Chunk::new(cut.spare));
                let read = chunk.read(lines, cut);
                let held = chunk.held();
                let mut slot = slots.lock(index);
                slot.chunk = chunk;
                read?;
                if slot.chunk.lines.is_empty() {
                    drop(slot);
                    free.push(index);
                    input_ended = true;
                    break;
                }
                held_ahead += held;
                slot.unprepared = true;
                sequence += 1;
                slots.waiting[index].store(sequence, Ordering::Release);
                drop(slot);
                ahead.push_back((index, sequence));
                // A job prepares chunks until none waits; no more of them than the other threads.
                if slots.jobs.load(Ordering::Acquire) < threads - 1 {
                    slots.jobs.fetch_add(1, Ordering::AcqRel);
                    scope.spawn(move |_| {
                        let _done = JobDone(slots);
                        while slots.prepare_newest(prepare) {}
                    });
                }
            }
            let Some((index, sequence)) = ahead.pop_front() else { return Ok(()) };
            // No job is to take it now. One that took it already prepares it (this thread's lock waits for it to
            // finish), or has yet to lock it (then this thread prepares it, and the job finds it prepared).
            let _ = slots.waiting[index].compare_exchange(sequence, 0, Ordering::AcqRel, Ordering::Relaxed);
            let mut slot = slots.lock(index);
            if slot.unprepared {
                slot.chunk.prepare(prepare);
                slot.unprepared = false;
            }
            // Folded out of its slot, so that no lock is held while the fold runs.
            let mut chunk = std::mem::replace(&mut slot.chunk, Chunk::new(cut.spare));
            drop(slot);
            held_ahead -= chunk.held();
            let folded = chunk.fold(&mut fold);
            chunk.shrink(cut.chunk_bytes);
            slots.lock(index).chunk = chunk;
            folded?;
            free.push(index);
        }
    })
}

/// Leaves no chunk for the jobs to take when it is dropped: the fold stopped (an error, a panic), so what it has not
/// folded is not to be prepared.
struct StopJobs<'a, T>(&'a Slots<T>);

impl<T> Drop for StopJobs<'_, T> {
    fn drop(&mut self) {
        for waiting in &self.0.waiting {
            waiting.store(0, Ordering::Release);
        }
    }
}

/// Counts a job out when it ends, even by a panic in `prepare`, so that later chunks still start jobs.
struct JobDone<'a, T>(&'a Slots<T>);

impl<T> Drop for JobDone<'_, T> {
    fn drop(&mut self) {
        self.0.jobs.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The chunks read ahead of the fold, each in a slot of its own.
struct Slots<T> {
    slots: Vec<Mutex<Slot<T>>>,
    /// Each slot's chunk's sequence number (from 1) while it is read and no thread has taken it, else 0: where the
    /// jobs look for work without taking the slots' locks.
    waiting: Vec<AtomicUsize>,
    /// Jobs started and not ended.
    jobs: AtomicUsize,
}

/// A chunk, and whether it is read and waiting to be prepared: whichever thread locks the slot first then prepares
/// it, holding the lock.
struct Slot<T> {
    chunk: Chunk<T>,
    unprepared: bool,
}

impl<T> Slots<T> {
    fn new(count: usize, spare: &'static SpareBuffers) -> Self {
        let slot = || Mutex::new(Slot { chunk: Chunk::new(spare), unprepared: false });
        Self {
            slots: (0..count).map(|_| slot()).collect(),
            waiting: (0..count).map(|_| AtomicUsize::new(0)).collect(),
            jobs: AtomicUsize::new(0),
        }
    }

    fn len(&self) -> usize {
        self.slots.len()
    }

    /// Slot `index`. A job that panicked while preparing its chunk left it unprepared, so the fold's thread prepares
    /// it again.
    fn lock(&self, index: usize) -> MutexGuard<'_, Slot<T>> {
        self.slots[index].lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A job's work: prepares the newest chunk read that no thread has taken, if there is one (and says so).
    fn prepare_newest(&self, prepare: &(impl Fn(&[u8]) -> T + Sync)) -> bool {
        loop {
            let newest = (self.waiting.iter().enumerate())
                .map(|(index, waiting)| (waiting.load(Ordering::Acquire), index))
                .max()
                .filter(|&(sequence, _)| sequence > 0);
            let Some((sequence, index)) = newest else { return false };
            // Taken by another job or the fold in the meantime: look again.
            if self.waiting[index].compare_exchange(sequence, 0, Ordering::AcqRel, Ordering::Relaxed).is_err() {
                continue;
            }
            let mut slot = self.lock(index);
            if slot.unprepared {
                slot.chunk.prepare(prepare);
                slot.unprepared = false;
            }
            return true;
        }
    }
}

/// Whole lines of the input, copied, with what `prepare` made of each. Its buffer goes back to `spare` when it is
/// dropped, at the input's end or when it stops early.
struct Chunk<T> {
    spare: &'static SpareBuffers,
    /// Number of the first line.
    first: u64,
    data: Vec<u8>,
    /// Each line's bytes in `data`, or `None` for a line longer than the limit (given as the too-long marker).
    lines: Vec<Option<Range<usize>>>,
    prepared: Vec<T>,
}

impl<T> Drop for Chunk<T> {
    fn drop(&mut self) {
        self.spare.give(std::mem::take(&mut self.data));
    }
}

impl<T> Chunk<T> {
    /// An empty chunk, without a buffer until it reads lines.
    fn new(spare: &'static SpareBuffers) -> Self {
        Self { spare, first: 0, data: Vec::new(), lines: Vec::new(), prepared: Vec::new() }
    }

    fn line(&self, i: usize) -> &[u8] {
        match &self.lines[i] {
            Some(range) => &self.data[range.clone()],
            None => OVERLONG,
        }
    }

    /// Memory the chunk's lines take: their bytes, and for each line its place in the chunk and its prepared value
    /// (what that value owns elsewhere is not counted). Lines that keep no bytes (blank ones, the too-long marker)
    /// still count, so that a chunk of them is bounded like any other.
    fn held(&self) -> usize {
        self.data.len() + self.lines.len() * (std::mem::size_of::<Option<Range<usize>>>() + std::mem::size_of::<T>())
    }

    /// Reads the next lines into the chunk, until they [hold](Self::held) `cut.chunk_bytes` or the input ends: none
    /// at the end. Its buffer comes from `spare` when it has none, and is made a chunk and a quarter large (or as
    /// large as its first line) once it holds a line, not before: a read at the input's end makes none.
    fn read<R: BufRead>(&mut self, lines: &mut LineReader<R>, cut: Cut) -> io::Result<()> {
        if self.data.capacity() == 0 {
            self.data = self.spare.take();
        }
        self.data.clear();
        self.lines.clear();
        self.first = lines.lines_read() + 1;
        while self.held() < cut.chunk_bytes {
            // Read straight into the chunk: a line is copied out of the reader's buffer once, not twice.
            let start = self.data.len();
            let Some(kept) = lines.append_line(&mut self.data)? else { break };
            self.lines.push(kept.then_some(start..self.data.len()));
            if self.lines.len() == 1 {
                let room = cut.chunk_bytes + (cut.chunk_bytes >> 2);
                self.data.reserve_exact(room.saturating_sub(self.data.len()));
            }
        }
        Ok(())
    }

    fn prepare(&mut self, prepare: &(impl Fn(&[u8]) -> T + Sync)) {
        self.prepared.clear();
        self.prepared.reserve(self.lines.len());
        for i in 0..self.lines.len() {
            let value = prepare(self.line(i));
            self.prepared.push(value);
        }
    }

    fn fold<E>(&mut self, fold: &mut impl FnMut(u64, &[u8], T, &[T]) -> Result<(), E>) -> Result<(), E> {
        // Drained rather than consumed, so the vector's allocation serves the chunk's next use.
        let mut prepared = std::mem::take(&mut self.prepared);
        let mut values = prepared.drain(..);
        let mut result = Ok(());
        let mut i = 0;
        while let Some(value) = values.next() {
            result = fold(self.first + i as u64, self.line(i), value, values.as_slice());
            if result.is_err() {
                break;
            }
            i += 1;
        }
        drop(values);
        self.prepared = prepared;
        result
    }

    /// Frees a buffer a long line grew past four chunks, rather than keep it for the rest of the input.
    fn shrink(&mut self, chunk_bytes: usize) {
        if self.data.capacity() > 4 * chunk_bytes {
            self.data = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a sequential read loop sees: (number, bytes, prepared) for every line.
    fn sequential(input: &[u8]) -> Vec<(u64, Vec<u8>, usize)> {
        let mut lines = LineReader::with_limit(input, 40);
        let mut seen = Vec::new();
        while let Some((number, bytes)) = lines.next_bytes().unwrap() {
            seen.push((number, bytes.to_vec(), bytes.iter().filter(|b| **b == b'a').count()));
        }
        seen
    }

    fn parallel(input: &[u8], threads: usize, cut: Cut) -> (Vec<(u64, Vec<u8>, usize)>, u64) {
        let chunk_bytes = cut.chunk_bytes;
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            let mut lines = LineReader::with_limit(input, 40);
            let mut seen = Vec::new();
            let prepare = |bytes: &[u8]| bytes.iter().filter(|b| **b == b'a').count();
            let mut ahead = Vec::new();
            map_lines_with(&mut lines, threads, cut, prepare, |number, bytes, prepared, upcoming: &[usize]| {
                seen.push((number, bytes.to_vec(), prepared));
                ahead.push(upcoming.to_vec());
                Ok::<_, io::Error>(())
            })
            .unwrap();
            // What the fold is shown ahead is what the next lines were prepared as, and on several threads the
            // rest of a chunk: empty only at a chunk's last line (every chunk here has at least one line).
            let mut ends = 0;
            for (i, upcoming) in ahead.iter().enumerate() {
                let next: Vec<usize> = seen[i + 1..].iter().take(upcoming.len()).map(|s| s.2).collect();
                assert_eq!(upcoming, &next, "line {}", i + 1);
                if i > 0 && !ahead[i - 1].is_empty() {
                    assert_eq!(upcoming.len() + 1, ahead[i - 1].len(), "line {}", i + 1);
                }
                ends += usize::from(upcoming.is_empty());
            }
            if threads == 1 {
                assert_eq!(ends, seen.len());
            } else {
                // A line takes 32 bytes of a chunk besides its own (its place, its prepared `usize`): chunks of at
                // most that hold one line each.
                let one_line_chunks = chunk_bytes <= 32;
                assert!(ends < seen.len() || one_line_chunks, "threads {threads}, chunks of {chunk_bytes}");
            }
            (seen, lines.lines_read())
        })
    }

    #[test]
    fn the_chunk_buffers_of_one_input_serve_the_next() {
        static SPARE: SpareBuffers = SpareBuffers::new(1 << 20, 4 << 10);
        // 400 lines of 8 bytes, each holding 40 (its bytes, 24 for its place in the chunk and 8 for its prepared
        // `usize`): chunks of 10 lines (400 bytes held), 40 chunks in all, at most 1,600 bytes of them read ahead:
        // four chunks at a time, so four of the twelve slots are used, each with a buffer of 500 bytes (a chunk and
        // a quarter), all four taken before the first line is folded.
        let input: Vec<u8> = (0..400).flat_map(|i| format!("line {i:03}\n").into_bytes()).collect();
        let run = || {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
            pool.install(|| {
                let mut lines = LineReader::new(&input[..]);
                let cut = Cut { chunk_bytes: 400, chunks: 12, bytes: 1600, spare: &SPARE };
                let (mut held_at_first_line, mut folded) = (None, 0);
                map_lines_with(&mut lines, 3, cut, <[u8]>::len, |_, _, len, _: &[usize]| {
                    held_at_first_line.get_or_insert(SPARE.held_bytes());
                    folded += len;
                    Ok::<_, io::Error>(())
                })
                .unwrap();
                (held_at_first_line.unwrap(), folded)
            })
        };
        assert_eq!(run(), (0, 3200), "the first input finds no buffer to reuse");
        assert_eq!(SPARE.held_bytes(), 4 * 500, "its four buffers came back when it ended");
        assert_eq!(run(), (0, 3200), "the next input took all four");
        assert_eq!(SPARE.held_bytes(), 4 * 500, "and gave them back: none was made anew");
    }

    #[test]
    fn every_line_is_folded_once_in_order_whatever_the_threads_and_chunks() {
        // Lines of 0 to 60 bytes (some over the 40-byte limit), CRLF and LF, a final line without a newline.
        let mut input = Vec::new();
        for i in 0..500usize {
            input.extend(std::iter::repeat_n(b'a', i % 61));
            input.extend_from_slice(if i % 3 == 0 { b"b\r\n" } else { b"\n" });
        }
        input.extend_from_slice(b"aaa");
        let expected = sequential(&input);
        assert_eq!(expected.len(), 501);
        assert_eq!(expected[0], (1, b"b".to_vec(), 0));
        assert_eq!(expected[2], (3, b"aa".to_vec(), 2));
        // Line 46 holds 45 `a`s, over the limit of 40: the marker stands for it.
        assert_eq!(expected[45].1, OVERLONG);
        let cuts = [
            (1, 1, 2, usize::MAX),
            (2, 1, 2, usize::MAX),
            (2, 7, 8, usize::MAX),
            (2, 60, 3, 120),
            (3, 100, 4, 250),
            (3, 100, 64, 500),
            (4, 1 << 20, 8, 1),
            (7, 33, 28, 70),
        ];
        for (threads, chunk_bytes, chunks, bytes) in cuts {
            let (seen, read) = parallel(&input, threads, Cut { chunk_bytes, chunks, bytes, spare: &SPARE_CHUNKS });
            assert_eq!(read, 501, "threads {threads}, chunks of {chunk_bytes}");
            // The too-long marker is passed as itself, so `utf8_line` still recognises it.
            assert_eq!(seen.len(), expected.len());
            for (got, want) in seen.iter().zip(&expected) {
                assert_eq!(got, want, "threads {threads}, chunks of {chunk_bytes}");
            }
        }
    }

    #[test]
    fn sequentially_folds_one_line_at_a_time_and_then_no_longer() {
        let input = b"a\n".repeat(50_000);
        // On several threads the fold is shown the rest of a chunk ahead; one line at a time, nothing.
        let shown_ahead = || {
            let mut lines = LineReader::new(&input[..]);
            let mut shown = 0;
            map_lines_ahead(
                &mut lines,
                |bytes| bytes.len(),
                |_, _, _, upcoming| {
                    shown += upcoming.len();
                    Ok::<_, io::Error>(())
                },
            )
            .unwrap();
            shown
        };
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        pool.install(|| {
            assert!(shown_ahead() > 0);
            assert_eq!(sequentially(|| sequentially(shown_ahead) + shown_ahead()), 0);
            assert!(shown_ahead() > 0, "the flag is put back");
            let panicked = std::panic::catch_unwind(|| sequentially(|| panic!("in f")));
            assert!(panicked.is_err());
            assert!(shown_ahead() > 0, "the flag is put back after a panic");
        });
    }

    /// A reader of `input` that counts the bytes taken from it.
    struct Counted<'a> {
        input: &'a [u8],
        taken: std::rc::Rc<Cell<usize>>,
    }

    impl io::Read for Counted<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = io::Read::read(&mut self.input, buf)?;
            self.taken.set(self.taken.get() + n);
            Ok(n)
        }
    }

    impl BufRead for Counted<'_> {
        fn fill_buf(&mut self) -> io::Result<&[u8]> {
            Ok(self.input)
        }

        fn consume(&mut self, amount: usize) {
            self.input.consume(amount);
            self.taken.set(self.taken.get() + amount);
        }
    }

    #[test]
    fn the_fold_reads_ahead_at_most_its_chunks_and_bytes() {
        // 200 lines of 99 `x`s and a newline: each longer than a chunk of 10 bytes, so each a chunk of its own.
        let input = [vec![b'x'; 99], b"\n".to_vec()].concat().repeat(200);
        // The lines read from the input when each line is folded, less that line's number.
        let ahead = |chunks: usize, bytes: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
            pool.install(|| {
                let taken = std::rc::Rc::new(Cell::new(0));
                let mut lines = LineReader::new(Counted { input: &input, taken: taken.clone() });
                let mut ahead = std::collections::BTreeSet::new();
                let cut = Cut { chunk_bytes: 10, chunks, bytes, spare: &SPARE_CHUNKS };
                map_lines_with(
                    &mut lines,
                    2,
                    cut,
                    |_| (),
                    |number, bytes, (), _: &[()]| {
                        assert_eq!(bytes.len(), 99);
                        ahead.insert((taken.get() / 100) as u64 - number);
                        Ok::<_, io::Error>(())
                    },
                )
                .unwrap();
                assert_eq!(lines.lines_read(), 200);
                ahead.into_iter().collect::<Vec<_>>()
            })
        };
        // Bounded by bytes: a chunk holds 123 (99 bytes of line and 24 for its place), so 350 bytes stop the reading
        // after the third (369 bytes); two lines ahead of the one folded, then fewer as the input ends.
        assert_eq!(ahead(64, 350), [0, 1, 2]);
        assert_eq!(ahead(64, 369), [0, 1, 2]);
        assert_eq!(ahead(64, 370), [0, 1, 2, 3]);
        // Bounded by chunks: three slots, two lines ahead.
        assert_eq!(ahead(3, usize::MAX), [0, 1, 2]);
        // At least two slots, but no more than the bytes allow: the line folded is the only one read.
        assert_eq!(ahead(1, usize::MAX), [0, 1]);
        assert_eq!(ahead(64, 0), [0]);
    }

    #[test]
    fn a_chunk_of_lines_without_bytes_is_bounded_like_any_other() {
        // Blank lines keep no bytes, but each takes its place in the chunk (24 bytes) and its prepared value (8): a
        // chunk holding 320 bytes takes 10 of them. Counting only the lines' bytes made 50 MB of blank lines one
        // chunk of 50 million places and values (5 GB).
        let input = b"\n\r\n".repeat(5_000);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let (longest, folded) = pool.install(|| {
            let mut lines = LineReader::new(&input[..]);
            let (mut longest, mut folded) = (0, 0);
            let cut = Cut { chunk_bytes: 320, chunks: 8, bytes: usize::MAX, spare: &SPARE_CHUNKS };
            map_lines_with(&mut lines, 2, cut, <[u8]>::len, |_, bytes, len, upcoming: &[usize]| {
                assert_eq!((bytes.len(), len), (0, 0));
                // What the fold is shown ahead is the rest of the line's chunk.
                longest = longest.max(upcoming.len() + 1);
                folded += 1;
                Ok::<_, io::Error>(())
            })
            .unwrap();
            (longest, folded)
        });
        assert_eq!((longest, folded), (10, 10_000));
    }

    #[test]
    fn the_other_threads_prepare_chunks_the_fold_has_not_reached() {
        // Lines that take a millisecond each to prepare, a chunk each: the folding thread cannot prepare them all
        // before the pool's other thread takes some.
        let input = b"line\n".repeat(200);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let (elsewhere, folded) = pool.install(|| {
            let folding = std::thread::current().id();
            let mut lines = LineReader::new(&input[..]);
            let (mut elsewhere, mut folded) = (0, 0);
            let cut = Cut { chunk_bytes: 1, chunks: 8, bytes: usize::MAX, spare: &SPARE_CHUNKS };
            let prepare = |_: &[u8]| {
                std::thread::sleep(std::time::Duration::from_millis(1));
                std::thread::current().id()
            };
            map_lines_with(&mut lines, 2, cut, prepare, |_, _, on, _: &[_]| {
                elsewhere += usize::from(on != folding);
                folded += 1;
                Ok::<_, io::Error>(())
            })
            .unwrap();
            (elsewhere, folded)
        });
        assert_eq!(folded, 200);
        assert!(elsewhere > 0, "every line was prepared by the folding thread");
    }

    #[test]
    fn a_prepare_that_panics_on_any_thread_panics_the_caller() {
        let input = b"line\n".repeat(200);
        for panicking_line in [1, 37, 200] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
            let counter = std::sync::atomic::AtomicUsize::new(0);
            let run = std::panic::AssertUnwindSafe(|| {
                pool.install(|| {
                    let mut lines = LineReader::new(&input[..]);
                    let cut = Cut { chunk_bytes: 1, chunks: 8, bytes: usize::MAX, spare: &SPARE_CHUNKS };
                    let prepare = |_: &[u8]| {
                        // Each line is prepared once unless a panic left it to be prepared again.
                        let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
                        assert_ne!(n, panicking_line, "prepare panics");
                    };
                    map_lines_with(&mut lines, 2, cut, prepare, |_, _, (), _: &[()]| Ok::<_, io::Error>(()))
                })
            });
            assert!(std::panic::catch_unwind(run).is_err(), "line {panicking_line}");
        }
    }

    #[test]
    fn a_prepare_that_panics_on_a_job_panics_the_caller() {
        // Lines take a millisecond each to prepare, so the pool's other thread takes some; the first it takes
        // panics. The folding thread prepares that chunk again, later chunks start jobs again, and the panic reaches
        // the caller once the scope ends.
        let input = b"line\n".repeat(200);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let panicked_on_a_job = std::sync::atomic::AtomicBool::new(false);
        let run = std::panic::AssertUnwindSafe(|| {
            pool.install(|| {
                let folding = std::thread::current().id();
                let mut lines = LineReader::new(&input[..]);
                let cut = Cut { chunk_bytes: 1, chunks: 8, bytes: usize::MAX, spare: &SPARE_CHUNKS };
                let prepare = |_: &[u8]| {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    if std::thread::current().id() != folding && !panicked_on_a_job.swap(true, Ordering::Relaxed) {
                        panic!("prepare panics on a job");
                    }
                };
                let mut folded = 0;
                let result = map_lines_with(&mut lines, 2, cut, prepare, |_, _, (), _: &[()]| {
                    folded += 1;
                    Ok::<_, io::Error>(())
                });
                (result.is_ok(), folded)
            })
        });
        assert!(std::panic::catch_unwind(run).is_err());
        assert!(panicked_on_a_job.load(Ordering::Relaxed), "no job prepared a line");
    }

    #[derive(Debug, serde::Deserialize)]
    struct N {
        n: u64,
    }

    #[test]
    fn json_lines_give_records_in_order_and_report_the_lines_that_are_not() {
        let input =
            b"{\"n\":1}\n\n{\"n\":\n\xff\xfe\n   \n{\"n\":2,\"pad\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}\n\xef\xbb\xbf{\"n\":3}";
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let (records, sink) = pool.install(|| {
            let mut lines = LineReader::with_limit(&input[..], 40);
            let (mut records, mut sink) = (Vec::new(), crate::CollectSink::default());
            map_json_lines(&mut lines, &mut sink, |line, record: N, _| {
                records.push((line, record.n));
                Ok::<_, ParseError>(())
            })
            .unwrap();
            (records, sink)
        });
        assert_eq!(records, [(1, 1), (7, 3)]);
        let diagnostics: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind)).collect();
        assert_eq!(
            diagnostics,
            [(3, DiagnosticKind::MalformedJson), (4, DiagnosticKind::InvalidUtf8), (6, DiagnosticKind::LineTooLong)]
        );
        assert_eq!(sink.diagnostics[0].message, "JSON ends early at column 5");
    }

    #[test]
    fn json_lines_over_many_chunks_keep_their_order() {
        let input: String = (0..60_000).map(|n| format!("{{\"n\":{n}}}\n")).collect();
        assert!(input.len() > 2 * CHUNK_BYTES, "{} bytes make too few chunks", input.len());
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let numbers = pool.install(|| {
            let mut lines = LineReader::new(input.as_bytes());
            let mut numbers = Vec::new();
            let mut sink = crate::CollectSink::default();
            map_json_lines(&mut lines, &mut sink, |line, record: N, _| {
                assert_eq!(line, record.n + 1);
                numbers.push(record.n);
                Ok::<_, ParseError>(())
            })
            .unwrap();
            assert_eq!(sink.diagnostics, []);
            numbers
        });
        assert_eq!(numbers, (0..60_000).collect::<Vec<_>>());
    }

    #[test]
    fn the_too_long_marker_survives_chunking() {
        let input = [vec![b'x'; 100], b"\nok\n".to_vec()].concat();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let markers = pool.install(|| {
            let mut lines = LineReader::with_limit(&input[..], 40);
            let mut markers = Vec::new();
            map_lines_with(
                &mut lines,
                2,
                Cut { chunk_bytes: 1, chunks: 4, bytes: usize::MAX, spare: &SPARE_CHUNKS },
                |_| (),
                |number, bytes, (), _: &[()]| {
                    markers.push((number, std::ptr::eq(bytes, OVERLONG), bytes.len()));
                    Ok::<_, io::Error>(())
                },
            )
            .unwrap();
            markers
        });
        assert_eq!(markers, [(1, true, OVERLONG.len()), (2, false, 2)]);
    }

    #[test]
    fn the_first_fold_error_stops_the_run() {
        let input = b"1\n2\n3\n4\n5\n".repeat(100);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let (result, folded) = pool.install(|| {
            let mut lines = LineReader::new(&input[..]);
            let mut folded = 0;
            let result = map_lines_with(
                &mut lines,
                2,
                Cut { chunk_bytes: 4, chunks: 4, bytes: usize::MAX, spare: &SPARE_CHUNKS },
                |_| (),
                |number, _, (), _: &[()]| {
                    folded += 1;
                    if number == 17 { Err(io::Error::other("stop")) } else { Ok(()) }
                },
            );
            (result, folded)
        });
        assert_eq!(result.unwrap_err().to_string(), "stop");
        assert_eq!(folded, 17);
    }
}
