//! Standard input (`-`) as an input that ends at its end or at Ctrl-C.
//!
//! Following a live server (`kubectl logs -f pod | infertrace normalize - …`) has no end of input: the user stops
//! it with Ctrl-C. The dataset must then be finished with the rows read so far, not lost. So standard input is read
//! by a pump thread into a bounded channel, and the parse reads from the channel: once SIGINT or SIGTERM arrives it
//! takes what was already read and then sees an end of input, and the run finishes as at a real end. The pump may
//! stay blocked in its read; the process exits without waiting for it.
//!
//! A second signal ends the process at once (exit 130), as Ctrl-C does by default; so does SIGKILL. Neither leaves
//! a partial dataset at the output path: the dataset is written to a temporary directory and renamed into place
//! only when finished.

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::time::Duration;

use anyhow::{Context as _, Result};

/// Bytes the pump reads at a time.
const CHUNK_BYTES: usize = 64 << 10;
/// Chunks read ahead of the parse: memory stays bounded by this many chunks whatever the input's length.
const CHUNKS_AHEAD: usize = 16;
/// How often a reader waiting for input looks whether it was interrupted.
const POLL: Duration = Duration::from_millis(100);

/// Standard input as a [`Read`] that ends early once the process is asked to stop (see the module documentation).
pub(crate) struct Stdin {
    chunks: Receiver<io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    at: usize,
    stop: Arc<AtomicBool>,
    ended: bool,
}

impl Stdin {
    /// Starts the pump and installs the SIGINT and SIGTERM handlers: the first such signal ends the input, a
    /// second one ends the process (exit 130).
    pub(crate) fn open() -> Result<Self> {
        let stop = stop_on_signals("while reading standard input")?;
        // The one line a user following a live log sees before its rows: how to end it.
        #[allow(clippy::print_stderr)]
        {
            eprintln!("reading standard input until its end; Ctrl-C finishes the dataset with the rows read so far");
        }
        let (send, chunks) = sync_channel(CHUNKS_AHEAD);
        std::thread::Builder::new()
            .name("stdin".to_owned())
            .spawn(move || pump(io::stdin().lock(), &send))
            .context("cannot start the thread that reads standard input")?;
        Ok(Self::from_channel(chunks, stop))
    }

    fn from_channel(chunks: Receiver<io::Result<Vec<u8>>>, stop: Arc<AtomicBool>) -> Self {
        Self { chunks, chunk: Vec::new(), at: 0, stop, ended: false }
    }
}

/// A flag the first SIGINT or SIGTERM sets; a second one ends the process at once (exit 130). `doing` completes
/// the error message: "cannot handle Ctrl-C {doing}".
pub(crate) fn stop_on_signals(doing: &str) -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registered first, so it sees the flag as it was before this signal: set by an earlier one.
        signal_hook::flag::register_conditional_shutdown(signal, 130, stop.clone())
            .with_context(|| format!("cannot handle Ctrl-C {doing}"))?;
        signal_hook::flag::register(signal, stop.clone()).with_context(|| format!("cannot handle Ctrl-C {doing}"))?;
    }
    Ok(stop)
}

/// Reads `source` into `send` a chunk at a time until its end (an empty chunk), a failure, or nobody listens.
pub(crate) fn pump(mut source: impl Read, send: &SyncSender<io::Result<Vec<u8>>>) {
    loop {
        let mut chunk = vec![0; CHUNK_BYTES];
        match source.read(&mut chunk) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = send.send(Err(e));
                return;
            }
            Ok(n) => {
                chunk.truncate(n);
                if send.send(Ok(chunk)).is_err() || n == 0 {
                    return;
                }
            }
        }
    }
}

impl Read for Stdin {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.chunk.len() {
            if self.ended {
                return Ok(0);
            }
            // Once stopped, what was already read is still taken, then the input ends.
            let next = if self.stop.load(Ordering::Relaxed) {
                self.chunks.try_recv().map_err(|_| RecvTimeoutError::Disconnected)
            } else {
                self.chunks.recv_timeout(POLL)
            };
            match next {
                Ok(Ok(chunk)) if chunk.is_empty() => self.ended = true,
                Ok(Ok(chunk)) => (self.chunk, self.at) = (chunk, 0),
                Ok(Err(e)) => {
                    self.ended = true;
                    return Err(e);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.ended = true,
            }
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_takes_what_was_read_then_ends_the_input() {
        let (send, chunks) = sync_channel(CHUNKS_AHEAD);
        let stop = Arc::new(AtomicBool::new(false));
        let mut input = Stdin::from_channel(chunks, stop.clone());
        send.send(Ok(b"one\n".to_vec())).unwrap();
        let mut buf = [0; 16];
        assert_eq!(input.read(&mut buf).unwrap(), 4);
        assert_eq!(&buf[..4], b"one\n");
        // The writer is still open: without the stop, the read would wait for more.
        send.send(Ok(b"two\n".to_vec())).unwrap();
        stop.store(true, Ordering::Relaxed);
        assert_eq!(input.read(&mut buf).unwrap(), 4);
        assert_eq!(&buf[..4], b"two\n");
        assert_eq!(input.read(&mut buf).unwrap(), 0);
        assert_eq!(input.read(&mut buf).unwrap(), 0);
        drop(send);
    }

    #[test]
    fn the_input_ends_at_its_end_and_a_failure_is_given() {
        let (send, chunks) = sync_channel(CHUNKS_AHEAD);
        let mut input = Stdin::from_channel(chunks, Arc::new(AtomicBool::new(false)));
        pump(&b"abc"[..], &send);
        let mut all = Vec::new();
        input.read_to_end(&mut all).unwrap();
        assert_eq!(all, b"abc");

        let (send, chunks) = sync_channel(CHUNKS_AHEAD);
        let mut input = Stdin::from_channel(chunks, Arc::new(AtomicBool::new(false)));
        send.send(Ok(b"ab".to_vec())).unwrap();
        send.send(Err(io::Error::other("broken"))).unwrap();
        let mut all = Vec::new();
        assert_eq!(input.read_to_end(&mut all).unwrap_err().to_string(), "broken");
        assert_eq!(all, b"ab");
    }
}
