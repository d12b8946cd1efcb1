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
//! Memory stays bounded: at most three batches of `2 × threads` chunks are alive (one folded, one prepared, one
//! read), each chunk at most [`CHUNK_BYTES`] (a line longer than a chunk makes a chunk of its own, up to the line
//! length limit) and a batch ends once it holds [`BATCH_BYTES`] of input, so it holds less than that and one more
//! chunk, however long the lines and however many the threads. What `prepare` makes of a line can be several times
//! its size (a Mooncake record is about 4×), hence the small batches. Chunk buffers come from, and go back to, a
//! process-wide bin ([`SPARE_CHUNKS`]), so a chunk may have more room than it needs: at most the bin's 32 MiB more in
//! all.

use std::cell::Cell;
use std::io::{self, BufRead};
use std::ops::Range;

use rayon::prelude::*;
use serde::de::DeserializeOwned;

use crate::lines::{LineReader, OVERLONG};
use crate::spare::SpareBuffers;
use crate::{Diagnostic, DiagnosticKind, ParseError, Sink, json, utf8_line};

/// Most bytes of input per chunk handed to a worker: enough that a chunk's bookkeeping is negligible.
pub const CHUNK_BYTES: usize = 256 << 10;

/// Most bytes of input in one batch, whatever the thread count (many threads get smaller chunks).
pub const BATCH_BYTES: usize = 4 << 20;

/// Fewest lines a batch holds per thread, up to [`BATCH_BYTES`]: a batch of `2 × threads` chunks of a few long lines
/// each (a vLLM log's prompts, 3 to 180 KB) gives each thread one or two lines of very different cost, and the
/// threads wait for the slowest at every batch's end.
pub const BATCH_LINES_PER_THREAD: usize = 32;

/// The buffers of chunks whose input ended, for the next input's chunks, which may be cut on another thread (the
/// CLI parses files read ahead together on the pool's threads). It holds at most about what the inputs parsed at
/// once have in flight (three batches each, a window of files at most 16 MiB of text), and no buffer grown past
/// four chunks for a long line. With a new buffer for every chunk of every file, the peak memory of 254 gzip'd
/// parts of a vLLM log grew with the thread count (about 345 MiB with eight threads and 670 with thirty-two; with
/// this bin, 245 and 380; see `docs/performance.md`).
static SPARE_CHUNKS: SpareBuffers = SpareBuffers::new(32 << 20, 4 * CHUNK_BYTES);

/// Reads every line of `lines`, calls `prepare` on each (on any thread), and `fold` on each in input order with its
/// number, its bytes and what `prepare` returned.
///
/// The bytes given to both are what [`LineReader::next_bytes`] returns, the too-long marker included, so `fold`
/// passes them to [`utf8_line`](crate::utf8_line) as a sequential read loop would. `prepare` must be a pure function
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
    let chunk_bytes = (BATCH_BYTES / (2 * threads)).clamp(16 << 10, CHUNK_BYTES);
    map_lines_with(
        lines,
        threads,
        Batches {
            chunk_bytes,
            batch_bytes: BATCH_BYTES,
            batch_lines: BATCH_LINES_PER_THREAD * threads,
            spare: &SPARE_CHUNKS,
        },
        prepare,
        fold,
    )
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

/// How [`map_lines_with`] cuts its input: chunks of about `chunk_bytes` (a longer line makes a chunk of its own), and
/// batches of `2 × threads` chunks, or more while they hold fewer than `batch_lines` lines, that stop once they hold
/// `batch_bytes` (so long lines, each a chunk, cannot make a batch of `2 × threads` of them: 64 vLLM
/// `Received request` lines of 180 KB each on 32 threads).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batches {
    pub chunk_bytes: usize,
    pub batch_bytes: usize,
    pub batch_lines: usize,
    /// Where chunk buffers come from and go back to.
    pub spare: &'static SpareBuffers,
}

/// [`map_lines`] with an explicit thread count and cut, so tests can cut an input into many small chunks.
pub(crate) fn map_lines_with<R, T, E>(
    lines: &mut LineReader<R>,
    threads: usize,
    cut: Batches,
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
    let batch_chunks = 2 * threads;
    let mut spare: Vec<Chunk<T>> = Vec::new();
    let mut current = read_batch(lines, batch_chunks, cut, &mut spare)?;
    current.par_iter_mut().for_each(|chunk| chunk.prepare(&prepare));
    let mut next = read_batch(lines, batch_chunks, cut, &mut spare)?;
    while !current.is_empty() {
        // Prepare the next batch on the pool while this thread folds the current one and then reads the one after.
        let (folded, read) = rayon::in_place_scope(|scope| {
            let to_prepare = &mut next;
            let prepare = &prepare;
            scope.spawn(move |_| to_prepare.par_iter_mut().for_each(|chunk| chunk.prepare(prepare)));
            let folded = current.iter_mut().try_for_each(|chunk| chunk.fold(&mut fold));
            let read = match folded {
                Ok(()) => read_batch(lines, batch_chunks, cut, &mut spare).map(Some),
                Err(_) => Ok(None),
            };
            (folded, read)
        });
        folded?;
        let after = read?.unwrap_or_default();
        spare.append(&mut current);
        current = std::mem::replace(&mut next, after);
    }
    Ok(())
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
    fn line(&self, i: usize) -> &[u8] {
        match &self.lines[i] {
            Some(range) => &self.data[range.clone()],
            None => OVERLONG,
        }
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
}

/// Reads `chunks` chunks of about `cut.chunk_bytes` each, or more while they hold fewer than `cut.batch_lines` lines,
/// and no more once they hold `cut.batch_bytes`, reusing the buffers of `spare`; empty at the end.
fn read_batch<R: BufRead, T>(
    lines: &mut LineReader<R>,
    chunks: usize,
    cut: Batches,
    spare: &mut Vec<Chunk<T>>,
) -> io::Result<Vec<Chunk<T>>> {
    let chunk_bytes = cut.chunk_bytes;
    let mut batch = Vec::with_capacity(chunks);
    let (mut bytes, mut lines_in) = (0, 0);
    while (batch.len() < chunks || lines_in < cut.batch_lines) && (batch.is_empty() || bytes < cut.batch_bytes) {
        let mut chunk = spare.pop().unwrap_or_else(|| {
            let mut data = cut.spare.take();
            data.reserve(chunk_bytes + (chunk_bytes >> 2));
            Chunk { spare: cut.spare, first: 0, data, lines: Vec::new(), prepared: Vec::new() }
        });
        chunk.data.clear();
        chunk.lines.clear();
        chunk.first = lines.lines_read() + 1;
        while chunk.data.len() < chunk_bytes {
            // Read straight into the chunk: a line is copied out of the reader's buffer once, not twice.
            let start = chunk.data.len();
            let Some(kept) = lines.append_line(&mut chunk.data)? else { break };
            chunk.lines.push(kept.then_some(start..chunk.data.len()));
        }
        if chunk.lines.is_empty() {
            spare.push(chunk);
            break;
        }
        bytes += chunk.data.len();
        lines_in += chunk.lines.len();
        batch.push(chunk);
    }
    Ok(batch)
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

    fn parallel(input: &[u8], threads: usize, cut: Batches) -> (Vec<(u64, Vec<u8>, usize)>, u64) {
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
                assert!(ends < seen.len() || chunk_bytes == 1, "threads {threads}, chunks of {chunk_bytes}");
            }
            (seen, lines.lines_read())
        })
    }

    #[test]
    fn the_chunk_buffers_of_one_input_serve_the_next() {
        static SPARE: SpareBuffers = SpareBuffers::new(1 << 20, 4 << 10);
        // 400 lines of 8 bytes: chunks of 32 lines (256 bytes), batches of 4 chunks (1 KiB), 13 chunks in all. The
        // first three batches are read before any chunk is spent, so 12 buffers of 320 bytes (a chunk and a
        // quarter) are made; the last chunk reuses one of the first batch's.
        let input: Vec<u8> = (0..400).flat_map(|i| format!("line {i:03}\n").into_bytes()).collect();
        let run = || {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
            pool.install(|| {
                let mut lines = LineReader::new(&input[..]);
                let cut = Batches { chunk_bytes: 256, batch_bytes: 1024, batch_lines: 0, spare: &SPARE };
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
        assert_eq!(SPARE.held_bytes(), 12 * 320, "its twelve buffers came back when it ended");
        assert_eq!(run(), (4 * 320, 3200), "the next input's first two batches took eight of them");
        assert_eq!(SPARE.held_bytes(), 12 * 320, "and gave them back: no buffer was made anew");
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
            (1, 1, usize::MAX, 0),
            (2, 1, usize::MAX, 0),
            (2, 7, usize::MAX, 0),
            (2, 60, usize::MAX, 20),
            (3, 100, 250, 0),
            (3, 100, 500, 64),
            (4, 1 << 20, 1, 0),
            (7, 33, 70, 0),
        ];
        for (threads, chunk_bytes, batch_bytes, batch_lines) in cuts {
            let (seen, read) =
                parallel(&input, threads, Batches { chunk_bytes, batch_bytes, batch_lines, spare: &SPARE_CHUNKS });
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

    #[test]
    fn a_batch_of_long_lines_stops_at_its_size() {
        // 200 lines of 99 `x`s and a newline: each longer than a chunk of 10 bytes, so each a chunk of its own.
        let input = [vec![b'x'; 99], b"\n".to_vec()].concat().repeat(200);
        let batch_lines = |batch_bytes: usize| {
            let mut lines = LineReader::new(&input[..]);
            let mut spare = Vec::new();
            let batch = read_batch::<_, ()>(
                &mut lines,
                64,
                Batches { chunk_bytes: 10, batch_bytes, batch_lines: 0, spare: &SPARE_CHUNKS },
                &mut spare,
            );
            let batch = batch.unwrap();
            assert!(batch.iter().all(|chunk| chunk.lines.len() == 1));
            (batch.len(), lines.lines_read())
        };
        // Unbounded, 64 chunks; bounded to 350 bytes, four lines (396 bytes kept: the fourth passes the bound).
        assert_eq!(batch_lines(usize::MAX), (64, 64));
        assert_eq!(batch_lines(350), (4, 4));
        assert_eq!(batch_lines(396), (4, 4));
        assert_eq!(batch_lines(397), (5, 5));
        // At least one chunk, however small the bound.
        assert_eq!(batch_lines(0), (1, 1));
    }

    #[test]
    fn a_batch_of_few_lines_takes_more_chunks() {
        // (chunks, lines) of the first batch of `input` cut into chunks of 100 bytes, batches of 4 chunks or more
        // while they hold fewer than `batch_lines` lines, at most `batch_bytes`.
        let first_batch = |input: &[u8], batch_lines: usize, batch_bytes: usize| {
            let mut lines = LineReader::new(input);
            let cut = Batches { chunk_bytes: 100, batch_bytes, batch_lines, spare: &SPARE_CHUNKS };
            let batch = read_batch::<_, ()>(&mut lines, 4, cut, &mut Vec::new()).unwrap();
            let read: usize = batch.iter().map(|chunk| chunk.lines.len()).sum();
            assert_eq!(read as u64, lines.lines_read());
            (batch.len(), read)
        };
        // Lines of 300 bytes, a chunk each: 4 chunks hold 4 lines, so a batch of at least 10 lines takes 10.
        let long = [vec![b'x'; 299], b"\n".to_vec()].concat().repeat(50);
        assert_eq!(first_batch(&long, 0, usize::MAX), (4, 4));
        assert_eq!(first_batch(&long, 10, usize::MAX), (10, 10));
        // Still no more than its bytes: 2,000 bytes end it at the seventh line.
        assert_eq!(first_batch(&long, 10, 2_000), (7, 7));
        // Lines of 9 bytes (a chunk keeps them without their newline), twelve a chunk: 4 chunks hold 48 lines,
        // enough for 48; 49 takes a fifth chunk.
        let short = b"012345678\n".repeat(100);
        assert_eq!(first_batch(&short, 48, usize::MAX), (4, 48));
        assert_eq!(first_batch(&short, 49, usize::MAX), (5, 60));
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
                Batches { chunk_bytes: 1, batch_bytes: usize::MAX, batch_lines: 0, spare: &SPARE_CHUNKS },
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
                Batches { chunk_bytes: 4, batch_bytes: usize::MAX, batch_lines: 0, spare: &SPARE_CHUNKS },
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
