//! Input discovery and the path each input is recorded under.

use std::fs;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use infertrace_adapter::recorded_text_bytes;

/// One input file and the path outputs call it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    /// Where to open it.
    pub path: PathBuf,
    /// How it appears in the manifest and in `source_file`: relative, `/`-separated, never an absolute path of
    /// this machine.
    pub display: String,
    /// Its size on disk.
    pub bytes: u64,
    /// For a file named as gzip'd or zstd'd, the bytes of text its compression records (a hint: see
    /// [`recorded_text_bytes`]); `None` for other files and where none is recorded.
    pub recorded_text: Option<u64>,
    /// Its modification time in UTC nanoseconds, for formats whose times lack a year or are missing.
    pub modified: Option<i64>,
    /// Found by walking a directory given on the command line (rather than named): such a file may be skipped
    /// when no adapter recognises it.
    pub in_directory: bool,
    /// The recorded name of an earlier input with the same content: this one is skipped (see
    /// `collect_inputs`).
    pub duplicate_of: Option<String>,
    /// What it is read from.
    pub kind: InputKind,
}

/// What an input is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// A regular file: its size is known and it can be read twice.
    File,
    /// A named pipe or a device: read once, to its end, whatever size it says.
    Stream,
    /// Standard input, named `-`: read once, to its end or to Ctrl-C.
    Stdin,
}

/// The name that stands for standard input on the command line and in the manifest.
pub const STDIN: &str = "-";

/// Whether `path` is named as gzip'd or zstd'd (`.gz`, `.zst`, `.zstd`).
pub fn named_compressed(path: &Path) -> bool {
    path.extension().is_some_and(|e| ["gz", "zst", "zstd"].iter().any(|c| e == *c))
}

/// [`InputFile::recorded_text`]: read from the file's header or trailer, for a regular file only (reading a named
/// pipe here would take bytes the parse needs). A file that cannot be read here fails when it is parsed, with the
/// message that names it.
fn recorded_text(path: &Path, metadata: &fs::Metadata) -> Option<u64> {
    if metadata.is_file() && named_compressed(path) { recorded_text_bytes(path).ok().flatten() } else { None }
}

fn kind(metadata: &fs::Metadata) -> InputKind {
    if metadata.is_file() { InputKind::File } else { InputKind::Stream }
}

fn modified(metadata: &fs::Metadata) -> Option<i64> {
    let since_epoch = metadata.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(since_epoch.as_nanos()).ok()
}

/// Expands the inputs given on the command line into files: files as given, directories walked recursively in
/// sorted order, skipping hidden entries and anything under `exclude` (the output being written).
pub fn collect_inputs(inputs: &[PathBuf], exclude: &Path) -> Result<Vec<InputFile>> {
    let exclude = absolute(exclude);
    let mut files = Vec::new();
    for input in inputs {
        if input.as_os_str() == STDIN {
            if files.iter().any(|f: &InputFile| f.kind == InputKind::Stdin) {
                bail!("standard input (-) is given twice; name it once");
            }
            files.push(InputFile {
                path: input.clone(),
                display: STDIN.to_owned(),
                bytes: 0,
                recorded_text: None,
                modified: None,
                in_directory: false,
                duplicate_of: None,
                kind: InputKind::Stdin,
            });
            continue;
        }
        let metadata = fs::metadata(input)
            .with_context(|| format!("cannot read input {}; check the path exists and is readable", input.display()))?;
        if metadata.is_dir() {
            let before = files.len();
            walk(input, input, &exclude, &mut files)?;
            if files.len() == before {
                bail!("input directory {} holds no files", input.display());
            }
        } else {
            files.push(InputFile {
                path: input.clone(),
                display: display_path(input, input),
                bytes: metadata.len(),
                recorded_text: recorded_text(input, &metadata),
                modified: modified(&metadata),
                in_directory: false,
                duplicate_of: None,
                kind: kind(&metadata),
            });
        }
    }
    mark_duplicates(&mut files)?;
    Ok(files)
}

/// Marks each input whose content equals an earlier one's (the same file named twice, a directory and a file in it,
/// or a copy) as its duplicate, so that its rows are not written twice.
///
/// Only regular files of equal, non-zero size can be equal, so only those are hashed (SHA-256, before the parse):
/// inputs of distinct sizes, the usual case, cost nothing. The same file under two names is known by its device
/// and inode without reading it.
fn mark_duplicates(files: &mut [InputFile]) -> Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    /// An input kept, against which later ones of its size are compared.
    struct Kept {
        index: usize,
        /// Device and inode.
        identity: (u64, u64),
        /// Its SHA-256, computed once another file of its size is not the same file.
        hash: Option<[u8; 32]>,
    }
    let identity = |file: &InputFile| {
        if file.kind != InputKind::File {
            return anyhow::Ok(None);
        }
        let metadata = fs::metadata(&file.path).with_context(|| format!("cannot read input {}", file.display))?;
        anyhow::Ok(metadata.is_file().then(|| (metadata.dev(), metadata.ino())))
    };
    /// Per size, the inputs of that size: index and identity.
    type BySize = std::collections::BTreeMap<u64, Vec<(usize, (u64, u64))>>;
    let mut by_size = BySize::new();
    for (i, file) in files.iter().enumerate() {
        if let Some(id) = identity(file)?.filter(|_| file.bytes > 0) {
            by_size.entry(file.bytes).or_default().push((i, id));
        }
    }
    for group in by_size.into_values().filter(|g| g.len() > 1) {
        let mut kept: Vec<Kept> = Vec::new();
        for (i, id) in group {
            let mut original = kept.iter().find(|k| k.identity == id).map(|k| k.index);
            let mut hash = None;
            if original.is_none() && !kept.is_empty() {
                let own = content_hash(&files[i])?;
                for k in &mut kept {
                    let theirs = match k.hash {
                        Some(h) => h,
                        None => *k.hash.insert(content_hash(&files[k.index])?),
                    };
                    if theirs == own {
                        original = Some(k.index);
                        break;
                    }
                }
                hash = Some(own);
            }
            match original {
                Some(first) => files[i].duplicate_of = Some(files[first].display.clone()),
                None => kept.push(Kept { index: i, identity: id, hash }),
            }
        }
    }
    Ok(())
}

/// The SHA-256 of `file`'s stored bytes.
fn content_hash(file: &InputFile) -> Result<[u8; 32]> {
    use sha2::Digest as _;
    let mut reader = fs::File::open(&file.path).with_context(|| format!("cannot read input {}", file.display))?;
    let mut hasher = sha2::Sha256::new();
    let mut block = vec![0; 1 << 20];
    loop {
        let n = match std::io::Read::read(&mut reader, &mut block) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            read => read.with_context(|| format!("cannot read input {}", file.display))?,
        };
        if n == 0 {
            return Ok(hasher.finalize().into());
        }
        hasher.update(&block[..n]);
    }
}

fn walk(root: &Path, dir: &Path, exclude: &Path, files: &mut Vec<InputFile>) -> Result<()> {
    let entries = fs::read_dir(dir).with_context(|| format!("cannot list input directory {}", dir.display()))?;
    let mut paths = entries
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("cannot list input directory {}", dir.display()))?;
    paths.sort();
    for path in paths {
        let hidden = path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if hidden || absolute(&path).starts_with(exclude) {
            continue;
        }
        let metadata = fs::metadata(&path).with_context(|| format!("cannot read input {}", path.display()))?;
        if metadata.is_dir() {
            walk(root, &path, exclude, files)?;
        } else {
            files.push(InputFile {
                display: display_path(root, &path),
                recorded_text: recorded_text(&path, &metadata),
                path,
                bytes: metadata.len(),
                modified: modified(&metadata),
                in_directory: true,
                duplicate_of: None,
                kind: kind(&metadata),
            });
        }
    }
    Ok(())
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// The recorded name of `file`, found under the command-line argument `arg` (or equal to it).
///
/// Relative arguments are kept as given. Absolute ones become relative to the working directory when inside it,
/// and otherwise start at the argument's own last component, so no absolute path of the machine is recorded.
pub fn display_path(arg: &Path, file: &Path) -> String {
    let shown: PathBuf = if file.is_relative() {
        file.to_owned()
    } else if let Some(inside) = std::env::current_dir().ok().and_then(|cwd| file.strip_prefix(cwd).ok()) {
        inside.to_owned()
    } else {
        let rest = file.strip_prefix(arg).unwrap_or(Path::new(""));
        let base = arg.file_name().map(PathBuf::from).unwrap_or_default();
        base.join(rest)
    };
    let parts: Vec<String> = shown
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part.to_string_lossy().into_owned()),
            Component::ParentDir => Some("..".to_owned()),
            Component::CurDir => Some(".".to_owned()),
            Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_kept_and_absolute_ones_are_not_recorded() {
        assert_eq!(display_path(Path::new("testdata"), Path::new("testdata/a/b.csv")), "testdata/a/b.csv");
        assert_eq!(display_path(Path::new("../x.jsonl"), Path::new("../x.jsonl")), "../x.jsonl");
        let outside = Path::new("/nonexistent-root-for-test/traces");
        assert_eq!(display_path(outside, &outside.join("m/c.jsonl")), "traces/m/c.jsonl");
        let file = Path::new("/nonexistent-root-for-test/one.csv");
        assert_eq!(display_path(file, file), "one.csv");
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(display_path(&cwd, &cwd.join("sub/f.csv")), "sub/f.csv");
    }

    #[test]
    fn a_compressed_file_s_recorded_text_size_is_read_when_its_name_says_compressed() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let text = "a line of a log\n".repeat(10_000);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text.as_bytes()).unwrap();
        let gz = gz.finish().unwrap();
        for (name, bytes) in [("a.log.gz", &gz), ("b.log", &gz), ("c.log.gz", &text.as_bytes().to_vec())] {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        let files = collect_inputs(&[dir.path().to_owned()], &dir.path().join("out")).unwrap();
        let recorded: Vec<_> = files.iter().map(|f| (f.display.rsplit('/').next().unwrap(), f.recorded_text)).collect();
        // 160,000 bytes of text; a gzip'd file not named so, and a plain file named `.gz`, record nothing.
        assert_eq!(recorded, [("a.log.gz", Some(160_000)), ("b.log", None), ("c.log.gz", None)]);
        assert_eq!(files[0].bytes, gz.len() as u64);
    }

    #[cfg(unix)]
    #[test]
    fn a_named_pipe_named_as_gzip_d_is_not_opened_while_inputs_are_collected() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("stream.log.gz");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let (done, wait) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || done.send(collect_inputs(&[path], Path::new("out")).unwrap()[0].recorded_text));
        // Opening the pipe to read it would block until a writer came: unblock it, then fail.
        let recorded = wait.recv_timeout(std::time::Duration::from_secs(10)).unwrap_or_else(|_| {
            drop(std::fs::OpenOptions::new().write(true).open(&fifo));
            panic!("collecting the inputs opened the named pipe")
        });
        assert_eq!(recorded, None);
    }

    #[test]
    fn directories_are_walked_sorted_skipping_hidden_and_output() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for name in ["b/2.csv", "b/1.csv", "a.jsonl", ".hidden/x.csv", "out/requests.parquet", ".c.swp"] {
            let path = root.join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, "x").unwrap();
        }
        let files = collect_inputs(&[root.to_owned()], &root.join("out")).unwrap();
        let names: Vec<_> = files.iter().map(|f| f.path.strip_prefix(root).unwrap().to_owned()).collect();
        assert_eq!(names, [PathBuf::from("a.jsonl"), "b/1.csv".into(), "b/2.csv".into()]);
    }
}
