//! Opening an input: compression by magic bytes, the head for detection, and the SHA-256 of the stored bytes.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufRead, Chain, Cursor, Read, Seek as _, SeekFrom};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use flate2::bufread::MultiGzDecoder;
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

/// The bytes of text a compressed file says it holds, read from its header or trailer without decompressing it:
/// a gzip file's last 4 bytes (the size of its last member, modulo 2³², RFC 1952) or a zstd file's frame header
/// (the size of its first frame, which `zstd` writes when it knows it). `None` for a plain file, a file too short
/// for the field, or a zstd frame that does not record its size.
///
/// A hint, not a bound: a file of several gzip members or zstd frames holds more, and a gzip'd text of 4 GiB or
/// more wraps around. Fails only on I/O errors.
pub fn recorded_text_bytes(path: &Path) -> io::Result<Option<u64>> {
    /// The longest zstd frame header (`ZSTD_FRAMEHEADERSIZE_MAX`).
    const ZSTD_HEADER_BYTES: usize = 18;
    /// A gzip member's shortest header (10 bytes) and its trailer (CRC-32 and size, 8 bytes).
    const GZIP_MIN_BYTES: u64 = 18;
    let mut file = File::open(path)?;
    let mut head = [0u8; ZSTD_HEADER_BYTES];
    let (n, error) = read_full(&mut file, &mut head);
    if let Some(e) = error {
        return Err(e);
    }
    let head = &head[..n];
    match Compression::sniff(head) {
        Compression::None => Ok(None),
        Compression::Zstd => Ok(zstd::zstd_safe::get_frame_content_size(head).ok().flatten()),
        Compression::Gzip => {
            if file.metadata()?.len() < GZIP_MIN_BYTES {
                return Ok(None);
            }
            let mut size = [0u8; 4];
            file.seek(SeekFrom::End(-4))?;
            file.read_exact(&mut size)?;
            Ok(Some(u64::from(u32::from_le_bytes(size))))
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

/// A decompressor reading the stored bytes in place from the reading thread's blocks.
// One per compressed input, moved once into its thread: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Decoder {
    Gzip(MultiGzDecoder<StoredReader>),
    Zstd(zstd::Decoder<'static, StoredReader>),
}

impl Decoder {
    /// The stored reader, given back once decoding ends, for the digest of the whole file.
    fn into_stored(self) -> StoredReader {
        match self {
            Decoder::Gzip(decoder) => decoder.into_inner(),
            Decoder::Zstd(decoder) => decoder.finish(),
        }
    }
}

impl Read for Decoder {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Decoder::Gzip(decoder) => decoder.read(buf),
            Decoder::Zstd(decoder) => decoder.read(buf),
        }
    }
}

/// Counts decompressed bytes against [`DecompressionLimits`] and names a stream cut short.
struct Limited {
    inner: Decoder,
    compression: Compression,
    limits: DecompressionLimits,
    /// Stored bytes read so far (by the reading thread a few blocks ahead of the decoder, or all of a small file).
    stored: Arc<AtomicU64>,
    decompressed: u64,
}

impl Limited {
    fn read_inner(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the {} stream ends early: the file is truncated or still being written",
                    self.compression.as_str()
                ),
            ),
            _ => e,
        })
    }
}

impl Read for Limited {
    /// Reads no further than the size limit, so that every byte within it is handed on before the error; the
    /// error comes once a byte past the limit is found.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let limits = self.limits;
        let room = limits.max_bytes.saturating_sub(self.decompressed);
        let n = if room == 0 {
            match self.read_inner(&mut [0])? {
                0 => 0,
                _ => {
                    return Err(io::Error::other(format!(
                        "decompresses to more than {} bytes, the limit; pass --max-decompressed with a larger size \
                         if the input is genuine",
                        limits.max_bytes
                    )));
                }
            }
        } else {
            let len = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
            self.read_inner(&mut buf[..len])?
        };
        self.decompressed += n as u64;
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

impl InputDigest {
    /// The digest of `bytes` bytes that `sha` has hashed.
    pub fn new(bytes: u64, sha: Sha256) -> Self {
        let mut sha256 = String::with_capacity(64);
        for byte in sha.finalize().iter() {
            write!(sha256, "{byte:02x}").expect("writing to a String cannot fail");
        }
        Self { bytes, sha256 }
    }
}

/// Called with the number of stored bytes each time some are read, to drive a progress bar.
pub type Progress = Arc<dyn Fn(u64) + Send + Sync>;

/// Bytes a producing thread (the reader, the decoder) hands over at a time.
const BLOCK_BYTES: usize = 1 << 20;
/// Bytes of the first blocks of a small input: a new block is zeroed before it is filled, and zeroing a whole
/// [`BLOCK_BYTES`] block for each of thousands of small files was 5% of the work of reading them.
const FIRST_BLOCK_BYTES: usize = 64 << 10;
/// Files smaller than this are read whole, and hashed, by the thread that opens them, without a reading thread
/// (see `StoredReader::spawn`).
const READ_HERE_BYTES: usize = FIRST_BLOCK_BYTES;
/// Blocks a producing thread fills ahead of its consumer: memory is bounded by about this many blocks per thread.
const BLOCKS_AHEAD: usize = 4;

/// What the reading thread hands back once the whole stored file has passed through it.
type Hashed = io::Result<(u64, Sha256)>;

/// The consuming end of a thread that fills blocks of bytes: reads them in place, as a [`BufRead`], and hands each
/// spent block back to be filled again, so no block is allocated twice. (Or the one block of a small input read
/// without a thread, [`Blocks::whole`].)
///
/// The thread sends its blocks, then either an empty block, the end, or the failure that stopped it, after the
/// bytes it read before it. The end or the failure is given again on every later read, so a failure can never be
/// read as an end; and a thread that stops without either (it panicked) is a failure too.
struct Blocks {
    /// `None` once the consumer stopped listening.
    blocks: Option<Receiver<io::Result<Vec<u8>>>>,
    spent: SyncSender<Vec<u8>>,
    block: Vec<u8>,
    at: usize,
    /// Once the thread sent its last word: `None` for the end, or the failure's kind and message.
    ended: Option<Option<(io::ErrorKind, String)>>,
    /// What the thread does, for the failure when it stops without a word.
    what: &'static str,
}

/// The producing end of [`Blocks`]: where filled blocks go, and where spent ones come back.
struct BlockSender {
    send: SyncSender<io::Result<Vec<u8>>>,
    recycled: Receiver<Vec<u8>>,
}

impl BlockSender {
    /// A block of `len` bytes to fill: a spent one if the consumer gave one back, else a new one.
    fn block(&self, len: usize) -> Vec<u8> {
        let mut block = self.recycled.try_recv().unwrap_or_default();
        block.resize(len, 0);
        block
    }
}

impl Blocks {
    /// `what` names the thread's work in the failure it is taken to have had if it stops without a word.
    fn channel(what: &'static str) -> (BlockSender, Self) {
        let (send, blocks) = sync_channel::<io::Result<Vec<u8>>>(BLOCKS_AHEAD);
        let (spent, recycled) = sync_channel::<Vec<u8>>(BLOCKS_AHEAD + 2);
        let blocks = Self { blocks: Some(blocks), spent, block: Vec::new(), at: 0, ended: None, what };
        (BlockSender { send, recycled }, blocks)
    }

    /// The whole of a small input, read without a thread: `block`, then its end or its failure.
    fn whole(block: Vec<u8>, failure: Option<(io::ErrorKind, String)>) -> Self {
        let (spent, _) = sync_channel(0);
        Self { blocks: None, spent, block, at: 0, ended: Some(failure), what: "reading the input" }
    }

    /// Stops listening: the producing thread sees it at its next block.
    fn close(&mut self) {
        self.blocks = None;
    }
}

impl BufRead for Blocks {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.at == self.block.len() {
            match &self.ended {
                Some(None) => return Ok(&[]),
                Some(Some((kind, message))) => return Err(io::Error::new(*kind, message.clone())),
                None => {}
            }
            let Some(blocks) = &self.blocks else { return Ok(&[]) };
            match blocks.recv() {
                Ok(Ok(block)) if block.is_empty() => self.ended = Some(None),
                Ok(Ok(block)) => {
                    let spent = std::mem::replace(&mut self.block, block);
                    self.at = 0;
                    let _ = self.spent.try_send(spent);
                }
                Ok(Err(e)) => {
                    self.ended = Some(Some((e.kind(), e.to_string())));
                    return Err(e);
                }
                Err(_) => {
                    let message = format!("the thread {} stopped before the input's end", self.what);
                    self.ended = Some(Some((io::ErrorKind::Other, message)));
                }
            }
        }
        Ok(&self.block[self.at..])
    }

    fn consume(&mut self, amount: usize) {
        self.at = (self.at + amount).min(self.block.len());
    }
}

impl Read for Blocks {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = buf.len().min(available.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

/// Reads the stored file, hashing every byte as it passes, and hands it to the parser (or the decoder) in blocks.
///
/// A file of at least [`READ_HERE_BYTES`] is read on a thread of its own, its blocks handed on through a bounded
/// channel: reading and SHA-256 (about a fifth of the work on a plain log) overlap with parsing instead of adding to
/// it. Dropped unfinished (a failed parse), it leaves the thread to hash the rest on its own, without waiting for
/// it. A smaller file is read whole when it is opened, by the thread that opens it.
struct StoredReader {
    /// Stored bytes read so far.
    read: Arc<AtomicU64>,
    blocks: Blocks,
    /// `None` once finished.
    hashing: Option<Hashing>,
}

/// Where the size and hash of the stored file come from.
enum Hashing {
    /// The reading thread, once it has read the whole file.
    Thread(JoinHandle<Hashed>),
    /// A small file, read whole when it was opened.
    Done(Hashed),
}

impl StoredReader {
    /// Reads `file`, whose size is taken to be `size` (0 for a stream such as a pipe, whose size is unknown).
    fn spawn(mut file: impl Read + Send + 'static, size: u64, progress: Option<Progress>) -> io::Result<Self> {
        let read = Arc::new(AtomicU64::new(0));
        // Blocks no larger than the file needs (one byte more, to see its end): a hint, for a file that grows
        // while it is read is read to its end all the same.
        let (mut sha, mut bytes) = (Sha256::new(), 0u64);
        // A file smaller than `READ_HERE_BYTES` is read and hashed here: starting (and joining) a thread for it
        // cost more than reading it. A file longer than it said (it grew, or it is a named pipe, which says 0) fills
        // a first block as the thread would have (the head and the magic bytes are read from it), which a thread
        // then hands on before it reads the rest.
        let mut first = None;
        if size < READ_HERE_BYTES as u64 {
            let mut block = vec![0; size as usize + 1];
            let (mut n, mut error) = read_full(&mut file, &mut block);
            if error.is_none() && n == block.len() {
                block.resize(block.len().max(FIRST_BLOCK_BYTES), 0);
                let (more, failure) = read_full(&mut file, &mut block[n..]);
                (n, error) = (n + more, failure);
            }
            let ended = n < block.len();
            block.truncate(n);
            if let Some(e) = error {
                // As from the thread: the bytes read, then the failure, which the digest is too.
                let kind = e.kind();
                let blocks = Blocks::whole(block, Some((kind, e.to_string())));
                let failed = Err(io::Error::new(kind, "reading the input failed"));
                return Ok(Self { read, blocks, hashing: Some(Hashing::Done(failed)) });
            }
            if !block.is_empty() {
                count(&block, &mut sha, &mut bytes, &read, progress.as_ref());
            }
            if ended {
                let hashing = Some(Hashing::Done(Ok((bytes, sha))));
                return Ok(Self { read, blocks: Blocks::whole(block, None), hashing });
            }
            first = Some(block);
        }
        let (sender, blocks) = Blocks::channel("reading the input");
        let counter = read.clone();
        let thread = std::thread::Builder::new().name("input-reader".to_owned()).spawn(move || -> Hashed {
            // Once the parser stops listening (it finished early), the rest is still hashed.
            let mut listening = true;
            if let Some(block) = first {
                listening = sender.send.send(Ok(block)).is_ok();
            }
            loop {
                let left = size.saturating_sub(bytes).saturating_add(1);
                let mut block = sender.block(left.clamp(FIRST_BLOCK_BYTES as u64, BLOCK_BYTES as u64) as usize);
                let (n, error) = read_full(&mut file, &mut block);
                if let Some(e) = error {
                    let kind = e.kind();
                    if listening {
                        block.truncate(n);
                        if n == 0 || sender.send.send(Ok(block)).is_ok() {
                            let _ = sender.send.send(Err(e));
                        }
                    }
                    return Err(io::Error::new(kind, "reading the input failed"));
                }
                if n == 0 {
                    if listening {
                        let _ = sender.send.send(Ok(Vec::new()));
                    }
                    return Ok((bytes, sha));
                }
                block.truncate(n);
                count(&block, &mut sha, &mut bytes, &counter, progress.as_ref());
                listening = listening && sender.send.send(Ok(block)).is_ok();
            }
        })?;
        Ok(Self { read, blocks, hashing: Some(Hashing::Thread(thread)) })
    }

    /// Stops reading blocks and returns the size and hash of the whole stored file.
    fn finish(&mut self) -> io::Result<(u64, Sha256)> {
        self.blocks.close();
        match self.hashing.take() {
            Some(Hashing::Thread(thread)) => {
                thread.join().unwrap_or_else(|_| Err(io::Error::other("the input reading thread panicked")))
            }
            Some(Hashing::Done(hashed)) => hashed,
            None => Err(io::Error::other("the input was already finished")),
        }
    }
}

impl BufRead for StoredReader {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.blocks.fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        self.blocks.consume(amount);
    }
}

impl Read for StoredReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.blocks.read(buf)
    }
}

/// Hashes and counts a block of `n > 0` stored bytes just read: into the digest, the count of bytes read, the
/// shared count the decompression limits read, and the progress bar.
fn count(block: &[u8], sha: &mut Sha256, bytes: &mut u64, counter: &AtomicU64, progress: Option<&Progress>) {
    sha.update(block);
    *bytes += block.len() as u64;
    counter.store(*bytes, Ordering::Relaxed);
    if let Some(progress) = progress {
        progress(block.len() as u64);
    }
}

/// Reads until `buf` is full or `source` ends or fails, so blocks are whole except the last: the bytes read, and
/// the failure that stopped it, if any.
fn read_full(source: &mut impl Read, buf: &mut [u8]) -> (usize, Option<io::Error>) {
    let mut filled = 0;
    while filled < buf.len() {
        match source.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (filled, Some(e)),
        }
    }
    (filled, None)
}

/// Decompresses on a thread of its own, handing blocks of decompressed bytes to the parser through a bounded
/// channel: gzip and zstd decoding (on a gzip'd vLLM log, more work than the parse) run beside the parse instead
/// of on the thread that folds its lines. Bytes read before a failure (a stream cut short, the size limit
/// passed) are handed on before it. The thread stops once the parser stops listening, and gives the stored reader
/// back for the digest.
fn spawn_decoder(mut decoder: Limited, first: Option<Vec<u8>>) -> io::Result<(Blocks, Decoding)> {
    let (sender, blocks) = Blocks::channel("decompressing the input");
    let thread = std::thread::Builder::new().name("input-decoder".to_owned()).spawn(move || {
        // The decompressed size is unknown: blocks start small and double up to `BLOCK_BYTES`.
        let mut len = FIRST_BLOCK_BYTES;
        if let Some(block) = first {
            // A whole block decoded already (see `decode`).
            if sender.send.send(Ok(block)).is_err() {
                return decoder.inner.into_stored();
            }
            len = BLOCK_BYTES;
        }
        loop {
            let mut block = sender.block(len);
            len = (len * 2).min(BLOCK_BYTES);
            let (n, error) = read_full(&mut decoder, &mut block);
            let ended = error.is_some() || n < block.len();
            block.truncate(n);
            if n > 0 && sender.send.send(Ok(block)).is_err() {
                break;
            }
            if ended {
                // The last word: the failure, or an empty block for the end.
                let _ = sender.send.send(error.map_or(Ok(Vec::new()), Err));
                break;
            }
        }
        decoder.inner.into_stored()
    })?;
    Ok((blocks, Decoding::Thread(thread)))
}

/// Decompresses `decoder`: here, whole, when its stored file was read whole when it was opened (`small`, see
/// [`StoredReader`]) and it holds less than a [`BLOCK_BYTES`] block, as `spawn_decoder` would hand it on (its bytes,
/// then its end or its failure); on a thread otherwise, after the block decoded here. A thread for each of thousands
/// of small gzip'd files cost about as much as decoding them.
fn decode(mut decoder: Limited, small: bool) -> io::Result<(Blocks, Decoding)> {
    if !small {
        return spawn_decoder(decoder, None);
    }
    let (mut block, mut n, mut len) = (Vec::new(), 0, FIRST_BLOCK_BYTES);
    let failure = loop {
        block.resize(len, 0);
        let (more, error) = read_full(&mut decoder, &mut block[n..]);
        n += more;
        if error.is_some() || n < len {
            break error;
        }
        if len == BLOCK_BYTES {
            // Longer than a block: a thread decodes the rest.
            return spawn_decoder(decoder, Some(block));
        }
        len = (len * 2).min(BLOCK_BYTES);
    };
    block.truncate(n);
    let blocks = Blocks::whole(block, failure.map(|e| (e.kind(), e.to_string())));
    Ok((blocks, Decoding::Done(Box::new(decoder.inner.into_stored()))))
}

/// Where the stored reader of a compressed input is once the content has been read.
enum Decoding {
    /// With the decoding thread, which gives it back once the parser stops listening.
    Thread(JoinHandle<StoredReader>),
    /// Here: a small input decoded whole when it was opened.
    Done(Box<StoredReader>),
}

/// Where an [`Input`]'s content comes from.
enum Content {
    /// A plain file, read straight from the stored reader's blocks: no copy between them and the parser.
    Plain(StoredReader),
    /// A compressed file: the head, then the decoded blocks, read in place (the decoding thread's, or the one block
    /// of a small input decoded whole); `decoder` gives the stored reader back to [`Input::finish`].
    Decoded { reader: Chain<Cursor<Vec<u8>>, Blocks>, decoder: Decoding },
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
        let file = File::open(path)?;
        let size = file.metadata().map_or(u64::MAX, |m| m.len());
        Self::from_stored(StoredReader::spawn(file, size, progress)?, limits)
    }

    /// Reads a stream that is not a file, such as standard input, as [`open_with_limits`](Self::open_with_limits)
    /// reads a named pipe: to its end, in blocks, on a thread of its own once it is longer than its first block.
    ///
    /// Fails on I/O errors, including a compressed stream too damaged to yield its first bytes.
    pub fn from_reader(
        reader: impl Read + Send + 'static,
        progress: Option<Progress>,
        limits: DecompressionLimits,
    ) -> io::Result<Self> {
        Self::from_stored(StoredReader::spawn(reader, 0, progress)?, limits)
    }

    fn from_stored(mut stored: StoredReader, limits: DecompressionLimits) -> io::Result<Self> {
        let stored_bytes = stored.read.clone();
        let small = matches!(stored.hashing, Some(Hashing::Done(_)));
        // The first block holds the first `FIRST_BLOCK_BYTES` of the file at least, or all of a shorter one: room
        // for the magic bytes, and for the head of a plain file, which is not consumed.
        let first = stored.fill_buf()?;
        let compression = Compression::sniff(first);
        let decoder = match compression {
            Compression::None => {
                let head = first[..first.len().min(HEAD_BYTES)].to_vec();
                return Ok(Self { content: Content::Plain(stored), head, compression });
            }
            Compression::Gzip => Decoder::Gzip(MultiGzDecoder::new(stored)),
            Compression::Zstd => Decoder::Zstd(zstd::Decoder::with_buffer(stored)?),
        };
        let limited = Limited { inner: decoder, compression, limits, stored: stored_bytes, decompressed: 0 };
        let (mut blocks, decoder) = decode(limited, small)?;
        let mut head = Vec::with_capacity(HEAD_BYTES);
        (&mut blocks).take(HEAD_BYTES as u64).read_to_end(&mut head)?;
        let reader = Cursor::new(head.clone()).chain(blocks);
        Ok(Self { content: Content::Decoded { reader, decoder }, head, compression })
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
            Content::Decoded { reader, decoder } => {
                // The decoder stops at its next block once nobody listens.
                drop(reader);
                let mut stored = match decoder {
                    Decoding::Thread(thread) => {
                        thread.join().map_err(|_| io::Error::other("the input decompressing thread panicked"))?
                    }
                    Decoding::Done(stored) => *stored,
                };
                stored.finish()?
            }
        };
        Ok(InputDigest::new(bytes, sha))
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
    fn a_stream_reads_as_the_file_it_came_from() {
        // Standard input is a stream of unknown size: plain or compressed, short or past a first block, it reads
        // as the same bytes would from a file, with the same digest.
        let text: Vec<u8> = (0..20_000).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
        let stored = zstd::encode_all(&text[..], 3).unwrap();
        for (name, bytes, content, compression) in [
            ("plain", text.clone(), &text, Compression::None),
            ("short", text[..100].to_vec(), &text[..100].to_vec(), Compression::None),
            ("zstd", stored.clone(), &text, Compression::Zstd),
        ] {
            let mut input =
                Input::from_reader(Cursor::new(bytes.clone()), None, DecompressionLimits::default()).unwrap();
            assert_eq!(input.compression(), compression, "{name}");
            assert_eq!(input.head(), &content[..content.len().min(HEAD_BYTES)], "{name}");
            let mut read = Vec::new();
            input.reader().read_to_end(&mut read).unwrap();
            assert!(read == *content, "{name}: the content differs");
            let digest = input.finish().unwrap();
            assert_eq!(digest, InputDigest { bytes: bytes.len() as u64, sha256: sha256_hex(&bytes) }, "{name}");
        }
    }

    #[test]
    fn a_file_smaller_than_a_first_block_is_read_without_a_thread_and_any_other_with_one() {
        let dir = tempfile::tempdir().unwrap();
        let text: Vec<u8> = (0..7000).flat_map(|i| format!("{i}\n").into_bytes()).collect();
        // 7000 numbers and their newlines: 10 of one digit, 90 of two, 900 of three, 6000 of four.
        assert_eq!(text.len(), 10 * 2 + 90 * 3 + 900 * 4 + 6000 * 5);
        for (name, len, threaded) in [
            ("empty", 0, false),
            ("small", 1000, false),
            ("one-less", READ_HERE_BYTES - 1, false),
            ("at-the-bound", READ_HERE_BYTES, true),
        ] {
            let bytes: Vec<u8> = text.iter().copied().cycle().take(len).collect();
            let path = dir.path().join(name);
            std::fs::write(&path, &bytes).unwrap();
            let mut stored =
                StoredReader::spawn(File::open(&path).unwrap(), std::fs::metadata(&path).unwrap().len(), None).unwrap();
            assert_eq!(matches!(stored.hashing, Some(Hashing::Thread(_))), threaded, "{name}");
            let mut content = Vec::new();
            stored.read_to_end(&mut content).unwrap();
            assert!(content == bytes, "{name}: the content differs");
            let (n, sha) = stored.finish().unwrap();
            assert_eq!((n, hex(sha)), (len as u64, sha256_hex(&bytes)), "{name}");
            assert!(stored.finish().is_err(), "{name}: finished twice");
            let (_, head, content, digest) = read_all(&path);
            assert_eq!((head.len(), content.len()), (len.min(HEAD_BYTES), len), "{name}");
            assert_eq!(digest, InputDigest { bytes: len as u64, sha256: sha256_hex(&bytes) }, "{name}");
        }
    }

    /// A named pipe at `dir/name` that a thread of its own fills with `bytes` once it is opened.
    fn pipe(dir: &Path, name: &str, bytes: &[u8]) -> (std::path::PathBuf, std::thread::JoinHandle<()>) {
        let path = dir.join(name);
        let made = std::process::Command::new("mkfifo").arg(&path).status().unwrap();
        assert!(made.success());
        let (to, bytes) = (path.clone(), bytes.to_vec());
        (path, std::thread::spawn(move || std::fs::write(to, bytes).unwrap()))
    }

    #[test]
    fn a_file_longer_than_it_said_is_read_on_by_a_thread() {
        // A named pipe says it is empty. One of 120 KB fills a first block here (one byte past its size shows it
        // is longer), and a thread reads the rest after it; one of 100 bytes ends within that block, no thread.
        let dir = tempfile::tempdir().unwrap();
        let text: Vec<u8> = (0..20_000).flat_map(|i| format!("{i:05}\n").into_bytes()).collect();
        assert_eq!(text.len(), 120_000);
        for (name, bytes, threaded) in [("long", &text[..], true), ("short", &text[..100], false)] {
            let (path, writer) = pipe(dir.path(), name, bytes);
            let mut stored =
                StoredReader::spawn(File::open(&path).unwrap(), std::fs::metadata(&path).unwrap().len(), None).unwrap();
            assert_eq!(matches!(stored.hashing, Some(Hashing::Thread(_))), threaded, "{name}");
            assert_eq!(stored.fill_buf().unwrap().len(), bytes.len().min(FIRST_BLOCK_BYTES), "{name}: first block");
            let mut content = Vec::new();
            stored.read_to_end(&mut content).unwrap();
            writer.join().unwrap();
            assert!(content == bytes, "{name}: the content differs: {} bytes", content.len());
            let (n, sha) = stored.finish().unwrap();
            assert_eq!((n, hex(sha)), (bytes.len() as u64, sha256_hex(bytes)), "{name}");
        }
        // Its magic bytes and head come from that first block: a gzip'd pipe is read as gzip.
        let stored = gzip(&[&text]);
        let (path, writer) = pipe(dir.path(), "log.gz", &stored);
        let (compression, head, content, digest) = read_all(&path);
        writer.join().unwrap();
        assert_eq!(compression, Compression::Gzip);
        assert_eq!(head, &text[..HEAD_BYTES]);
        assert!(content == text, "the gzip'd pipe's content differs: {} bytes", content.len());
        assert_eq!(digest, InputDigest { bytes: stored.len() as u64, sha256: sha256_hex(&stored) });
    }

    #[test]
    fn a_small_compressed_file_is_decoded_without_a_thread_unless_it_holds_more_than_a_block() {
        let dir = tempfile::tempdir().unwrap();
        // Lines of 9 bytes, `{:08}\n` of `i % 100`: 1,000 of them, and 200,000 (1.8 MB, more than a block), both
        // under 64 KiB compressed; and long_text, which is not.
        let lines = |n: usize| -> Vec<u8> { (0..n).flat_map(|i| format!("{:08}\n", i % 100).into_bytes()).collect() };
        let (short, long) = (lines(1_000), lines(200_000));
        assert_eq!((short.len(), long.len()), (9_000, 1_800_000));
        let text = long_text();
        let cases = [
            ("short.gz", gzip(&[&short]), &short[..], false),
            ("short.zst", zstd::encode_all(&short[..], 3).unwrap(), &short[..], false),
            ("empty.gz", gzip(&[b""]), &[][..], false),
            ("long.gz", gzip(&[&long]), &long[..], true),
            ("text.gz", gzip(&[&text]), &text[..], true),
        ];
        for (name, stored, expected, threaded) in cases {
            assert_eq!(stored.len() < READ_HERE_BYTES, name != "text.gz", "{name}: {} stored bytes", stored.len());
            let path = dir.path().join(name);
            std::fs::write(&path, &stored).unwrap();
            let input = Input::open(&path, None).unwrap();
            let Content::Decoded { decoder, .. } = &input.content else { panic!("{name} is not decoded") };
            assert_eq!(matches!(decoder, Decoding::Thread(_)), threaded, "{name}");
            drop(input);
            let (_, head, content, digest) = read_all(&path);
            assert_eq!(head, &expected[..expected.len().min(HEAD_BYTES)], "{name}");
            assert!(content == expected, "{name}: the content differs: {} bytes", content.len());
            assert_eq!(digest, InputDigest { bytes: stored.len() as u64, sha256: sha256_hex(&stored) }, "{name}");
        }
        // Cut short, a small stream decoded here hands on every byte before the cut, then fails, and stays failed,
        // as the thread does.
        let text: Vec<u8> = (0..20_000).flat_map(|i| format!("line {i} {}\n", i * 7919 % 1000).into_bytes()).collect();
        for (name, stored) in [("cut.gz", gzip(&[&text])), ("cut.zst", zstd::encode_all(&text[..], 3).unwrap())] {
            // Half way in, and three quarters in for zstd: past its first block of 128 KiB.
            let cut = &stored[..if name.ends_with(".gz") { stored.len() / 2 } else { stored.len() * 3 / 4 }];
            assert!(cut.len() < READ_HERE_BYTES, "{name}: {} stored bytes", cut.len());
            let (expected, kind) = if name.ends_with(".gz") {
                decode_directly(flate2::read::MultiGzDecoder::new(cut))
            } else {
                decode_directly(zstd::Decoder::new(cut).unwrap())
            };
            assert!(
                kind == io::ErrorKind::UnexpectedEof && expected.len() > HEAD_BYTES,
                "{name}: {kind:?}, {}",
                expected.len()
            );
            let path = dir.path().join(name);
            std::fs::write(&path, cut).unwrap();
            let mut input = Input::open(&path, None).unwrap();
            assert!(matches!(input.content, Content::Decoded { decoder: Decoding::Done(_), .. }), "{name}");
            let (got, error) = read_to_failure(&mut input);
            assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof, "{name}: {error}");
            assert!(got == expected, "{name}: {} bytes before the failure, {} expected", got.len(), expected.len());
            let again = input.reader().fill_buf().map(<[u8]>::len).unwrap_err();
            assert_eq!((again.kind(), again.to_string()), (error.kind(), error.to_string()), "{name}");
        }
    }

    #[test]
    fn a_small_file_that_cannot_be_read_fails_to_open() {
        // A directory opens, and fails at its first read (on Linux, `EISDIR`), as a file failing on a disk would.
        let dir = tempfile::tempdir().unwrap();
        let error = Input::open(dir.path(), None).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::IsADirectory, "{error}");
        let mut stored =
            StoredReader::spawn(File::open(dir.path()).unwrap(), std::fs::metadata(dir.path()).unwrap().len(), None)
                .unwrap();
        assert!(stored.fill_buf().is_err());
        assert!(stored.fill_buf().is_err(), "the failure stays one");
        assert_eq!(stored.finish().unwrap_err().kind(), io::ErrorKind::IsADirectory);
    }

    #[test]
    fn the_recorded_text_size_comes_from_the_gzip_trailer_or_the_zstd_frame_header() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let text = long_text();
        assert!(text.len() > 3 << 20);
        let size = |bytes: &[u8], name: &str| recorded_text_bytes(&write(name, bytes)).unwrap();
        assert_eq!(size(&text, "plain.log"), None);
        assert_eq!(size(&gzip(&[&text]), "one.gz"), Some(text.len() as u64));
        // Two members: the trailer is the last member's.
        assert_eq!(size(&gzip(&[&text, b"tail\n"]), "two.gz"), Some(5));
        // `zstd::bulk` knows the size before it starts and writes it into the frame header, as the `zstd` command does.
        assert_eq!(size(&zstd::bulk::compress(&text, 3).unwrap(), "one.zst"), Some(text.len() as u64));
        // A streaming compressor that does not know it writes none.
        let mut encoder = zstd::Encoder::new(Vec::new(), 3).unwrap();
        encoder.include_contentsize(false).unwrap();
        encoder.write_all(&text).unwrap();
        assert_eq!(size(&encoder.finish().unwrap(), "unsized.zst"), None);
        // Too short for a trailer, or not even a whole header: no size, and no failure.
        assert_eq!(size(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3], "cut.gz"), None);
        assert_eq!(size(&[0x28, 0xb5, 0x2f, 0xfd], "cut.zst"), None);
        assert_eq!(size(b"", "empty"), None);
        assert!(recorded_text_bytes(&dir.path().join("missing.gz")).is_err());
    }

    /// About 3.4 MiB of numbered lines: the decoder's blocks of every size (64 KiB doubling to 1 MiB), the last one
    /// partly filled.
    fn long_text() -> Vec<u8> {
        (0..200_000).flat_map(|i| format!("line {i} {}\n", i * 7919 % 100_003).into_bytes()).collect()
    }

    fn gzip(members: &[&[u8]]) -> Vec<u8> {
        members
            .iter()
            .flat_map(|member| {
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                gz.write_all(member).unwrap();
                gz.finish().unwrap()
            })
            .collect()
    }

    fn sha256_hex(bytes: &[u8]) -> String {
        let mut sha = Sha256::new();
        sha.update(bytes);
        hex(sha)
    }

    fn hex(sha: Sha256) -> String {
        sha.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn a_compressed_input_of_many_blocks_members_and_frames_reads_whole_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let text = long_text();
        assert!(text.len() > 3 * BLOCK_BYTES && !text.len().is_multiple_of(BLOCK_BYTES), "{}", text.len());
        // Split unevenly: rotated logs concatenated into one file are several gzip members (or zstd frames).
        let (a, b) = text.split_at(1_234_567);
        let zst: Vec<u8> = [zstd::encode_all(a, 3).unwrap(), zstd::encode_all(b, 3).unwrap()].concat();
        let empty = gzip(&[b""]);
        for (name, stored, expected) in
            [("two.gz", gzip(&[a, b]), &text[..]), ("two.zst", zst, &text[..]), ("empty.gz", empty, &[][..])]
        {
            let path = dir.path().join(name);
            std::fs::write(&path, &stored).unwrap();
            let (_, head, content, digest) = read_all(&path);
            assert_eq!(content.len(), expected.len(), "{name}");
            assert!(content == expected, "{name}: the content differs");
            assert_eq!(head, &expected[..expected.len().min(HEAD_BYTES)], "{name}");
            assert_eq!(digest, InputDigest { bytes: stored.len() as u64, sha256: sha256_hex(&stored) }, "{name}");
        }
    }

    #[test]
    fn finishing_a_compressed_input_early_still_digests_the_whole_stored_file() {
        let dir = tempfile::tempdir().unwrap();
        let stored = gzip(&[&long_text()]);
        let path = dir.path().join("a.log.gz");
        std::fs::write(&path, &stored).unwrap();
        let expected = InputDigest { bytes: stored.len() as u64, sha256: sha256_hex(&stored) };
        // Nothing read past the head, then a little more than a whole block: the decoder is still running in both.
        assert_eq!(Input::open(&path, None).unwrap().finish().unwrap(), expected);
        let mut input = Input::open(&path, None).unwrap();
        let mut part = vec![0; BLOCK_BYTES + 1000];
        input.reader().read_exact(&mut part).unwrap();
        assert_eq!(input.finish().unwrap(), expected);
        // Dropped without being finished (a failed parse), its threads stop or finish on their own.
        let mut input = Input::open(&path, None).unwrap();
        input.reader().read_exact(&mut part).unwrap();
        drop(input);
    }

    /// What a decoder reading `stored` in place gives: the bytes up to its first failure, and that failure.
    fn decode_directly(mut decoder: impl Read) -> (Vec<u8>, io::ErrorKind) {
        let mut out = Vec::new();
        let mut buf = vec![0; 1 << 16];
        loop {
            match decoder.read(&mut buf) {
                Ok(0) => panic!("the stream should fail"),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => return (out, e.kind()),
            }
        }
    }

    #[test]
    fn a_stream_cut_short_hands_on_every_byte_before_the_cut_then_fails() {
        let dir = tempfile::tempdir().unwrap();
        let text = long_text();
        let gz = gzip(&[&text]);
        let zst = zstd::encode_all(&text[..], 3).unwrap();
        for (name, stored) in [("cut.gz", gz), ("cut.zst", zst)] {
            // Two thirds in: past two whole blocks of decompressed bytes.
            let cut = &stored[..stored.len() * 2 / 3];
            let (expected, kind) = if name.ends_with(".gz") {
                decode_directly(flate2::read::MultiGzDecoder::new(cut))
            } else {
                decode_directly(zstd::Decoder::new(cut).unwrap())
            };
            assert_eq!(kind, io::ErrorKind::UnexpectedEof, "{name}");
            assert!(expected.len() > 2 * BLOCK_BYTES, "{name}: {}", expected.len());
            let path = dir.path().join(name);
            std::fs::write(&path, cut).unwrap();
            let mut input = Input::open(&path, None).unwrap();
            let mut got = Vec::new();
            let error = loop {
                match input.reader().fill_buf() {
                    Ok([]) => panic!("{name}: the cut stream read to its end without failing"),
                    Ok(bytes) => {
                        let n = bytes.len();
                        got.extend_from_slice(bytes);
                        input.reader().consume(n);
                    }
                    Err(e) => break e,
                }
            };
            assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof, "{name}: {error}");
            assert!(got == expected, "{name}: {} bytes before the failure, {} expected", got.len(), expected.len());
            // Asked again, it fails again: a failure is never read as the end.
            let again = input.reader().fill_buf().map(<[u8]>::len).unwrap_err();
            assert_eq!((again.kind(), again.to_string()), (error.kind(), error.to_string()), "{name}");
        }
    }

    /// Reads `input` to its first failure: the bytes before it, and it.
    fn read_to_failure(input: &mut Input) -> (Vec<u8>, io::Error) {
        let mut got = Vec::new();
        let mut buf = vec![0; 1 << 16];
        loop {
            match input.reader().read(&mut buf) {
                Ok(0) => panic!("read to its end without failing"),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => return (got, e),
            }
        }
    }

    #[test]
    fn every_byte_within_the_size_limit_is_handed_on_before_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let text = long_text();
        let path = dir.path().join("a.log.gz");
        std::fs::write(&path, gzip(&[&text])).unwrap();
        // Inside the third block, and just past the 4 KiB head (the first block is 64 KiB).
        for max_bytes in [2_500_000, 5_000] {
            let limits = DecompressionLimits { max_bytes, max_ratio: u64::MAX };
            let mut input = Input::open_with_limits(&path, None, limits).unwrap();
            assert_eq!(input.head(), &text[..HEAD_BYTES]);
            let (got, error) = read_to_failure(&mut input);
            assert_eq!(got.len(), max_bytes as usize);
            assert!(got == text[..max_bytes as usize], "the bytes within the limit differ");
            assert!(error.to_string().starts_with(&format!("decompresses to more than {max_bytes} bytes")), "{error}");
            assert!(input.reader().fill_buf().is_err(), "the failure is given again");
        }
        // A limit of exactly the input's size is not passed.
        let limits = DecompressionLimits { max_bytes: text.len() as u64, max_ratio: u64::MAX };
        assert_eq!(read_limited(&path, limits).unwrap(), text.len() as u64);
    }

    #[test]
    fn a_stream_damaged_within_its_head_fails_to_open() {
        let dir = tempfile::tempdir().unwrap();
        // A gzip header, then bytes that are no deflate stream (block type 3 is reserved).
        let mut stored = gzip(&[b"x"])[..10].to_vec();
        stored.extend_from_slice(&[0xff; 64]);
        let path = dir.path().join("bad.gz");
        std::fs::write(&path, &stored).unwrap();
        let error = Input::open(&path, None).unwrap_err();
        assert_ne!(error.kind(), io::ErrorKind::UnexpectedEof, "{error}");
    }

    #[test]
    fn a_thread_that_stops_without_its_last_word_is_a_failure_and_stays_one() {
        // A panic drops the thread's sender without the empty block that ends its input.
        let (sender, mut blocks) = Blocks::channel("decompressing the input");
        sender.send.send(Ok(b"abc".to_vec())).unwrap();
        drop(sender);
        assert_eq!(blocks.fill_buf().unwrap(), b"abc");
        blocks.consume(3);
        for _ in 0..2 {
            let error = blocks.fill_buf().unwrap_err();
            assert_eq!(error.to_string(), "the thread decompressing the input stopped before the input's end");
        }
        // With its last word, the input ends, and stays ended.
        let (sender, mut blocks) = Blocks::channel("reading the input");
        for block in [&b"x"[..], b"yz", b""] {
            sender.send.send(Ok(block.to_vec())).unwrap();
        }
        drop(sender);
        let mut content = Vec::new();
        blocks.read_to_end(&mut content).unwrap();
        assert_eq!(content, b"xyz");
        assert_eq!(blocks.fill_buf().unwrap(), b"");
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
