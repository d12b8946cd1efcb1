//! Opening an input: compression by magic bytes, the head for detection, and the SHA-256 of the stored bytes.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Chain, Cursor, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use flate2::read::MultiGzDecoder;
use sha2::{Digest, Sha256};

/// Bytes of decompressed input given to [`Adapter::detect`](crate::Adapter::detect).
pub const HEAD_BYTES: usize = 4096;

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

/// How an input is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Plain bytes.
    None,
    /// gzip, possibly several concatenated members (rotated logs).
    Gzip,
    /// Zstandard, possibly several frames.
    Zstd,
}

impl Compression {
    /// The name recorded in the manifest.
    pub const fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }

    /// The compression whose magic bytes start `head`.
    pub fn sniff(head: &[u8]) -> Self {
        if head.starts_with(GZIP_MAGIC) {
            Compression::Gzip
        } else if head.starts_with(ZSTD_MAGIC) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }
}

/// Limits on how much a compressed input may expand, against decompression bombs.
///
/// Reading fails with an I/O error naming the limit once the decompressed bytes exceed `max_bytes`, or exceed
/// `max_ratio` times the stored bytes read so far after the first [`RATIO_GRACE_BYTES`] (small inputs of repeated
/// lines compress extremely well and are no danger). Plain inputs are not limited: they cannot expand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecompressionLimits {
    /// Most decompressed bytes of one input.
    pub max_bytes: u64,
    /// Most decompressed bytes per stored byte.
    pub max_ratio: u64,
}

/// Decompressed bytes of an input read before [`DecompressionLimits::max_ratio`] applies.
pub const RATIO_GRACE_BYTES: u64 = 64 << 20;

impl Default for DecompressionLimits {
    /// 1 TiB and 1000:1: far beyond real logs (which compress 5–50:1), far below what fills a disk or takes a day.
    fn default() -> Self {
        Self { max_bytes: 1 << 40, max_ratio: 1000 }
    }
}

/// Counts decompressed bytes against [`DecompressionLimits`] and names a stream cut short.
struct Limited {
    inner: Box<dyn Read + Send>,
    compression: Compression,
    limits: DecompressionLimits,
    /// Stored bytes read so far (by the reading thread, a few blocks ahead of the decoder).
    stored: Arc<AtomicU64>,
    decompressed: u64,
}

impl Read for Limited {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the {} stream ends early: the file is truncated or still being written",
                    self.compression.as_str()
                ),
            ),
            _ => e,
        })?;
        self.decompressed += n as u64;
        let limits = self.limits;
        if self.decompressed > limits.max_bytes {
            return Err(io::Error::other(format!(
                "decompresses to more than {} bytes, the limit; pass --max-decompressed with a larger size if the \
                 input is genuine",
                limits.max_bytes
            )));
        }
        if self.decompressed > RATIO_GRACE_BYTES {
            let stored = self.stored.load(Ordering::Relaxed);
            if self.decompressed / stored.max(1) >= limits.max_ratio {
                return Err(io::Error::other(format!(
                    "decompresses more than {}:1 ({} bytes from {stored}), which looks like a decompression bomb; \
                     pass --max-ratio with a larger ratio if the input is genuine",
                    limits.max_ratio, self.decompressed
                )));
            }
        }
        Ok(n)
    }
}

/// Size and hash of an input as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputDigest {
    /// Stored bytes.
    pub bytes: u64,
    /// SHA-256 of the stored bytes, lower-case hex.
    pub sha256: String,
}

/// Called with the number of stored bytes each time some are read, to drive a progress bar.
pub type Progress = Arc<dyn Fn(u64) + Send + Sync>;

/// Bytes the reading thread reads at a time.
const BLOCK_BYTES: usize = 1 << 20;
/// Blocks read ahead of the parser: memory is bounded by about this many blocks.
const BLOCKS_AHEAD: usize = 4;

/// What the reading thread hands back once the whole stored file has passed through it.
type Hashed = io::Result<(u64, Sha256)>;

/// Reads the stored file on a thread of its own, hashing every byte as it passes and handing blocks to the
/// parser through a bounded channel: reading and SHA-256 (about a fifth of the work on a plain log) overlap with
/// parsing instead of adding to it. Spent blocks go back to the thread, so no block is allocated twice. Dropped
/// unfinished (a failed parse), it leaves the thread to hash the rest on its own, without waiting for it.
struct StoredReader {
    /// Stored bytes the thread has read so far.
    read: Arc<AtomicU64>,
    blocks: Option<Receiver<io::Result<Vec<u8>>>>,
    spent: SyncSender<Vec<u8>>,
    block: Vec<u8>,
    at: usize,
    thread: Option<JoinHandle<Hashed>>,
}

impl StoredReader {
    fn spawn(mut file: File, progress: Option<Progress>) -> io::Result<Self> {
        let (send, blocks) = sync_channel::<io::Result<Vec<u8>>>(BLOCKS_AHEAD);
        let (spent, recycled) = sync_channel::<Vec<u8>>(BLOCKS_AHEAD + 2);
        let read = Arc::new(AtomicU64::new(0));
        let counter = read.clone();
        let thread = std::thread::Builder::new().name("input-reader".to_owned()).spawn(move || -> Hashed {
            let (mut sha, mut bytes) = (Sha256::new(), 0u64);
            // Once the parser stops listening (it finished early), the rest is still hashed.
            let mut listening = true;
            loop {
                let mut block = recycled.try_recv().unwrap_or_else(|_| Vec::with_capacity(BLOCK_BYTES));
                block.resize(BLOCK_BYTES, 0);
                let n = match read_full(&mut file, &mut block) {
                    Ok(n) => n,
                    Err(e) => {
                        let kind = e.kind();
                        if listening {
                            let _ = send.send(Err(e));
                        }
                        return Err(io::Error::new(kind, "reading the input failed"));
                    }
                };
                if n == 0 {
                    return Ok((bytes, sha));
                }
                block.truncate(n);
                sha.update(&block);
                bytes += n as u64;
                counter.store(bytes, Ordering::Relaxed);
                if let Some(progress) = &progress {
                    progress(n as u64);
                }
                listening = listening && send.send(Ok(block)).is_ok();
            }
        })?;
        Ok(Self { read, blocks: Some(blocks), spent, block: Vec::new(), at: 0, thread: Some(thread) })
    }

    /// Stops reading blocks and returns the size and hash of the whole stored file.
    fn finish(&mut self) -> io::Result<(u64, Sha256)> {
        self.blocks = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(hashed)) => hashed,
            Some(Err(_)) => Err(io::Error::other("the input reading thread panicked")),
            None => Err(io::Error::other("the input was already finished")),
        }
    }
}

/// Reads until `buf` is full or the file ends, so blocks are whole except the last.
fn read_full(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

impl BufRead for StoredReader {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.at == self.block.len() {
            let Some(blocks) = &self.blocks else { return Ok(&[]) };
            match blocks.recv() {
                Ok(Ok(block)) => {
                    let spent = std::mem::replace(&mut self.block, block);
                    self.at = 0;
                    let _ = self.spent.try_send(spent);
                }
                Ok(Err(e)) => return Err(e),
                // The thread ended: the whole file was read.
                Err(_) => return Ok(&[]),
            }
        }
        Ok(&self.block[self.at..])
    }

    fn consume(&mut self, amount: usize) {
        self.at = (self.at + amount).min(self.block.len());
    }
}

impl Read for StoredReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = buf.len().min(available.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

type Decoded = Chain<Cursor<Vec<u8>>, Box<dyn Read + Send>>;

/// Where an [`Input`]'s content comes from.
enum Content {
    /// A plain file, read straight from the reading thread's blocks: no copy between them and the parser.
    Plain(StoredReader),
    /// A compressed file: its decoder, reading the stored bytes through a handle on the reader that
    /// [`Input::finish`] takes back once the decoder is gone.
    Decoded { reader: BufReader<Decoded>, stored: Arc<Mutex<StoredReader>> },
}

/// An opened input: a decompressed line reader, its head for detection, and its digest once read.
pub struct Input {
    content: Content,
    head: Vec<u8>,
    compression: Compression,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input").field("compression", &self.compression).finish_non_exhaustive()
    }
}

impl Input {
    /// Opens `path`, sniffs its compression and reads the head.
    ///
    /// Fails on I/O errors, including a compressed stream too damaged to yield its first bytes.
    pub fn open(path: &Path, progress: Option<Progress>) -> io::Result<Self> {
        Self::open_with_limits(path, progress, DecompressionLimits::default())
    }

    /// [`open`](Self::open) with other limits on decompression.
    pub fn open_with_limits(path: &Path, progress: Option<Progress>, limits: DecompressionLimits) -> io::Result<Self> {
        let mut stored = StoredReader::spawn(File::open(path)?, progress)?;
        // A block holds the first `BLOCK_BYTES` of the file, or all of a shorter one: room for the magic bytes, and
        // for the head of a plain file, which is not consumed.
        let first = stored.fill_buf()?;
        let compression = Compression::sniff(first);
        if compression == Compression::None {
            let head = first[..first.len().min(HEAD_BYTES)].to_vec();
            return Ok(Self { content: Content::Plain(stored), head, compression });
        }
        let stored_bytes = stored.read.clone();
        let stored = Arc::new(Mutex::new(stored));
        let raw = BufReader::with_capacity(1 << 16, Shared(stored.clone()));
        let decoder: Box<dyn Read + Send> = match compression {
            Compression::Gzip => Box::new(MultiGzDecoder::new(raw)),
            _ => Box::new(zstd::Decoder::with_buffer(raw)?),
        };
        let mut decoder: Box<dyn Read + Send> =
            Box::new(Limited { inner: decoder, compression, limits, stored: stored_bytes, decompressed: 0 });
        let mut head = Vec::with_capacity(HEAD_BYTES);
        (&mut decoder).take(HEAD_BYTES as u64).read_to_end(&mut head)?;
        let reader = BufReader::with_capacity(1 << 18, Cursor::new(head.clone()).chain(decoder));
        Ok(Self { content: Content::Decoded { reader, stored }, head, compression })
    }

    /// The first [`HEAD_BYTES`] decompressed bytes (fewer for a shorter input).
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// How the input is stored.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The decompressed content, from its first byte.
    pub fn reader(&mut self) -> &mut dyn BufRead {
        match &mut self.content {
            Content::Plain(stored) => stored,
            Content::Decoded { reader, .. } => reader,
        }
    }

    /// Hashes whatever of the stored file was not read yet and returns its size and SHA-256.
    pub fn finish(self) -> io::Result<InputDigest> {
        let (bytes, sha) = match self.content {
            Content::Plain(mut stored) => stored.finish()?,
            Content::Decoded { reader, stored } => {
                drop(reader);
                stored.lock().unwrap_or_else(PoisonError::into_inner).finish()?
            }
        };
        let mut sha256 = String::with_capacity(64);
        for byte in sha.finalize().iter() {
            write!(sha256, "{byte:02x}").expect("writing to a String cannot fail");
        }
        Ok(InputDigest { bytes, sha256 })
    }
}

/// The stored reader behind the decoder; shared with [`Input`] so that [`Input::finish`] can reach its thread
/// after the decoder is gone (a `Mutex` only to make it `Sync`: one thread uses it at a time).
struct Shared(Arc<Mutex<StoredReader>>);

impl Read for Shared {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).read(buf)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn read_all(path: &Path) -> (Compression, Vec<u8>, Vec<u8>, InputDigest) {
        let mut input = Input::open(path, None).unwrap();
        let head = input.head().to_vec();
        let mut content = Vec::new();
        input.reader().read_to_end(&mut content).unwrap();
        let compression = input.compression();
        (compression, head, content, input.finish().unwrap())
    }

    #[test]
    fn plain_gzip_and_zstd_give_the_same_content() {
        let dir = tempfile::tempdir().unwrap();
        let text: Vec<u8> = (0..2000).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
        let plain = dir.path().join("a.log");
        std::fs::write(&plain, &text).unwrap();
        let gz = dir.path().join("a.log.gz");
        let mut enc = flate2::write::GzEncoder::new(File::create(&gz).unwrap(), flate2::Compression::default());
        enc.write_all(&text).unwrap();
        enc.finish().unwrap();
        let zst = dir.path().join("a.log.zst");
        std::fs::write(&zst, zstd::encode_all(&text[..], 3).unwrap()).unwrap();

        for (path, expected) in [(&plain, Compression::None), (&gz, Compression::Gzip), (&zst, Compression::Zstd)] {
            let (compression, head, content, digest) = read_all(path);
            assert_eq!(compression, expected);
            assert_eq!(content, text);
            assert_eq!(head, &text[..HEAD_BYTES]);
            let stored = std::fs::read(path).unwrap();
            assert_eq!(digest.bytes, stored.len() as u64);
        }
    }

    #[test]
    fn digest_covers_bytes_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("abc.txt");
        std::fs::write(&path, b"abc").unwrap();
        let input = Input::open(&path, None).unwrap();
        // SHA-256("abc") from FIPS 180-2, appendix B.1.
        assert_eq!(
            input.finish().unwrap(),
            InputDigest {
                bytes: 3,
                sha256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".to_owned()
            }
        );

        // A file far larger than what opening reads: the digest must still cover all of it.
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let path = dir.path().join("big.bin");
        std::fs::write(&path, &big).unwrap();
        let input = Input::open(&path, None).unwrap();
        let expected: String = Sha256::digest(&big).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(input.finish().unwrap(), InputDigest { bytes: 300_000, sha256: expected });
    }

    fn read_limited(path: &Path, limits: DecompressionLimits) -> io::Result<u64> {
        let mut input = Input::open_with_limits(path, None, limits)?;
        io::copy(input.reader(), &mut io::sink())
    }

    #[test]
    fn a_bomb_stops_at_the_ratio_or_the_size_limit_with_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        // 100 MiB of zeros: zstd stores it in a few KiB, far past 1000:1 once the 64 MiB grace is read.
        let zeros = vec![0u8; 100 << 20];
        let bomb = dir.path().join("bomb.zst");
        std::fs::write(&bomb, zstd::encode_all(&zeros[..], 3).unwrap()).unwrap();
        let error = read_limited(&bomb, DecompressionLimits::default()).unwrap_err();
        assert!(error.to_string().contains("which looks like a decompression bomb; pass --max-ratio"), "{error}");
        // Within a raised ratio, the size cap still applies.
        let limits = DecompressionLimits { max_bytes: 10 << 20, max_ratio: u64::MAX };
        let error = read_limited(&bomb, limits).unwrap_err();
        assert!(error.to_string().starts_with("decompresses to more than 10485760 bytes, the limit;"), "{error}");
        // And with both raised, the whole input reads.
        let limits = DecompressionLimits { max_bytes: u64::MAX, max_ratio: u64::MAX };
        assert_eq!(read_limited(&bomb, limits).unwrap(), 100 << 20);
    }

    #[test]
    fn a_truncated_stream_is_an_unexpected_eof_naming_the_compression() {
        let dir = tempfile::tempdir().unwrap();
        let text: Vec<u8> = (0..20_000).flat_map(|i| format!("line {i} {}\n", i * 7919 % 1000).into_bytes()).collect();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&text).unwrap();
        let gz = gz.finish().unwrap();
        let zst = zstd::encode_all(&text[..], 3).unwrap();
        for (name, bytes, compression) in [("cut.gz", gz, "gzip"), ("cut.zst", zst, "zstd")] {
            let path = dir.path().join(name);
            std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
            let error = read_limited(&path, DecompressionLimits::default()).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof, "{name}: {error}");
            assert_eq!(
                error.to_string(),
                format!("the {compression} stream ends early: the file is truncated or still being written")
            );
        }
    }
}
