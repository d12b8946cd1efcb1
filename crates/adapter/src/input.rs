//! Opening an input: compression by magic bytes, the head for detection, and the SHA-256 of the stored bytes.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Chain, Cursor, Read};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

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

#[derive(Default)]
struct Hashing {
    sha: Sha256,
    bytes: u64,
}

/// Reads the stored file, hashing every byte as it passes.
struct HashingReader {
    file: File,
    state: Arc<Mutex<Hashing>>,
    progress: Option<Progress>,
}

impl Read for HashingReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read(buf)?;
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.sha.update(&buf[..n]);
        state.bytes += n as u64;
        if let Some(progress) = &self.progress {
            progress(n as u64);
        }
        Ok(n)
    }
}

type Decoded = Chain<Cursor<Vec<u8>>, Box<dyn Read + Send>>;

/// An opened input: a decompressed line reader, its head for detection, and its digest once read.
pub struct Input {
    reader: BufReader<Decoded>,
    head: Vec<u8>,
    compression: Compression,
    state: Arc<Mutex<Hashing>>,
    rest: File,
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
        let file = File::open(path)?;
        let rest = file.try_clone()?;
        let state = Arc::new(Mutex::new(Hashing::default()));
        let mut raw = BufReader::with_capacity(1 << 16, HashingReader { file, state: state.clone(), progress });
        let compression = Compression::sniff(raw.fill_buf()?);
        let mut decoder: Box<dyn Read + Send> = match compression {
            Compression::None => Box::new(raw),
            Compression::Gzip => Box::new(MultiGzDecoder::new(raw)),
            Compression::Zstd => Box::new(zstd::Decoder::with_buffer(raw)?),
        };
        let mut head = Vec::with_capacity(HEAD_BYTES);
        (&mut decoder).take(HEAD_BYTES as u64).read_to_end(&mut head)?;
        let reader = BufReader::with_capacity(1 << 18, Cursor::new(head.clone()).chain(decoder));
        Ok(Self { reader, head, compression, state, rest })
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
        &mut self.reader
    }

    /// Hashes whatever of the stored file was not read yet and returns its size and SHA-256.
    pub fn finish(mut self) -> io::Result<InputDigest> {
        drop(self.reader);
        // `rest` shares the file offset with the reader's handle, so it continues where decoding stopped.
        let mut buf = vec![0; 1 << 16];
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let n = self.rest.read(&mut buf)?;
            if n == 0 {
                break;
            }
            state.sha.update(&buf[..n]);
            state.bytes += n as u64;
        }
        let hash = std::mem::take(&mut state.sha).finalize();
        let mut sha256 = String::with_capacity(64);
        for byte in hash.iter() {
            write!(sha256, "{byte:02x}").expect("writing to a String cannot fail");
        }
        Ok(InputDigest { bytes: state.bytes, sha256 })
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
}
