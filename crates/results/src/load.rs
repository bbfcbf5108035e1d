//! Reading results files: parse, identify, migrate, type-check, validate.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::convert::RawError;
use crate::migrate::{MigrationError, migrate};
use crate::schema::{CURRENT_VERSION, FORMAT, ResultsFile};

/// Why a results file could not be loaded. The messages do not repeat the path (except
/// for [`LoadError::Io`]); the caller prefixes it.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file ends in the middle of the JSON document (an interrupted copy, or a
    /// file written without bloatlab's atomic write).
    #[error("results file is truncated: it ends unexpectedly at line {line}, column {column}")]
    Truncated {
        /// 1-based line of the end of input.
        line: usize,
        /// 1-based column.
        column: usize,
    },
    /// Not JSON at all, or malformed JSON.
    #[error("results file is corrupt: {message} at line {line}, column {column}")]
    Corrupt {
        /// The parser's description.
        message: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
    },
    /// Larger than [`MAX_FILE_BYTES`]: parsing would take many times its size in memory.
    #[error("results file is too large: {size} bytes, the limit is {max} bytes (32 MiB)")]
    TooLarge {
        /// The file's size.
        size: u64,
        /// [`MAX_FILE_BYTES`].
        max: u64,
    },
    /// A FIFO, a device, a socket or a directory: reading one can block forever (a FIFO
    /// with no writer) or never end (`/dev/zero`), so only regular files are read.
    #[error("not a regular file ({kind}): a results file is a regular file")]
    NotRegular {
        /// What the path is instead (`a FIFO`, `a directory`, ...).
        kind: &'static str,
    },
    /// Gzip-compressed data, most likely a flent `.flent.gz` file.
    #[error("not a bloatlab results file: this is gzip-compressed data (a flent .flent.gz file?)")]
    Gzip,
    /// Valid JSON, but not a bloatlab results file.
    #[error("not a bloatlab results file: {}", match found {
        Some(f) => format!("\"format\" is {f:?}, expected {FORMAT:?}"),
        None => format!("no \"format\": {FORMAT:?} field"),
    })]
    WrongFormat {
        /// The `format` value found, if it was a string.
        found: Option<String>,
    },
    /// The `version` field is missing or not a non-negative integer.
    #[error("results file has no valid \"version\" field (expected an integer, found {found})")]
    BadVersion {
        /// The JSON found there (`null` if absent).
        found: String,
    },
    /// Written by a newer bloatlab.
    #[error("written by a newer bloatlab (version {found}); this build reads up to {supported}")]
    NewerVersion {
        /// The version in the file.
        found: u64,
        /// The newest this build reads.
        supported: u32,
    },
    /// An older version could not be migrated.
    #[error(transparent)]
    Migration(MigrationError),
    /// The document does not match the schema (a missing field, a wrong type).
    #[error("results file does not match schema version {version}: {message}")]
    Schema {
        /// The (migrated) version checked against.
        version: u32,
        /// The deserializer's description, naming the field.
        message: String,
    },
    /// The samples parse but are inconsistent.
    #[error("results file is inconsistent: {0}")]
    Raw(#[from] RawError),
}

/// The largest results file `load` reads. A JSON document takes about 20 times its
/// size in memory while it is parsed (issue 11: a 100 MB file peaked at 2 GB RSS), so
/// this bounds a report run to well under a gigabyte. A one-hour run with 100 Hz probes
/// writes a few MB.
pub const MAX_FILE_BYTES: u64 = 32 << 20;

/// Reads and loads the results file at `path` (at most [`MAX_FILE_BYTES`]).
pub fn load(path: &Path) -> Result<ResultsFile, LoadError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| LoadError::Io {
        path: path.to_owned(),
        source,
    };
    // O_NONBLOCK: opening a FIFO with no writer for reading would block forever (issue
    // 19); the type is checked on what was opened, so nothing can swap it in between.
    // (O_NONBLOCK does not change reads of a regular file.)
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    let kind = file.metadata().map_err(io)?.file_type();
    if !kind.is_file() {
        return Err(LoadError::NotRegular {
            kind: file_kind(kind),
        });
    }
    // Read at most one byte past the limit, so a growing or special file cannot
    // get past a size taken from metadata.
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        let size = std::fs::metadata(path).map_or(bytes.len() as u64, |m| m.len());
        return Err(LoadError::TooLarge {
            size,
            max: MAX_FILE_BYTES,
        });
    }
    from_slice(&bytes)
}

/// What a non-regular file is, for [`LoadError::NotRegular`].
fn file_kind(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}

/// Loads a results document from bytes. Never panics, whatever the input.
pub fn from_slice(bytes: &[u8]) -> Result<ResultsFile, LoadError> {
    // RFC 1952 magic: users will try to open flent's files with us.
    if bytes.starts_with(&[0x1f, 0x8b]) {
        return Err(LoadError::Gzip);
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        if e.is_eof() {
            LoadError::Truncated {
                line: e.line(),
                column: e.column(),
            }
        } else {
            LoadError::Corrupt {
                message: e
                    .to_string()
                    .split(" at line ")
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
                line: e.line(),
                column: e.column(),
            }
        }
    })?;
    match value.get("format") {
        Some(Value::String(s)) if s == FORMAT => {}
        Some(Value::String(s)) => {
            return Err(LoadError::WrongFormat {
                found: Some(s.clone()),
            });
        }
        _ => return Err(LoadError::WrongFormat { found: None }),
    }
    let version = match value.get("version") {
        Some(v) => v.as_u64().ok_or_else(|| LoadError::BadVersion {
            found: v.to_string(),
        })?,
        None => {
            return Err(LoadError::BadVersion {
                found: "null".into(),
            });
        }
    };
    if version > u64::from(CURRENT_VERSION) {
        return Err(LoadError::NewerVersion {
            found: version,
            supported: CURRENT_VERSION,
        });
    }
    let value = migrate(value, version).map_err(|e| match e {
        MigrationError::NewerVersion { found, supported } => {
            LoadError::NewerVersion { found, supported }
        }
        other => LoadError::Migration(other),
    })?;
    let file: ResultsFile = serde_json::from_value(value).map_err(|e| LoadError::Schema {
        version: CURRENT_VERSION,
        message: e.to_string(),
    })?;
    // Reject raw data that would make every report wrong, at load time rather than
    // at plot time.
    file.raw.timeline()?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> LoadError {
        from_slice(s.as_bytes()).unwrap_err()
    }

    #[test]
    fn classifies_bad_input() {
        assert!(matches!(err(""), LoadError::Truncated { .. }));
        assert!(matches!(
            err("{\"format\": \"bloatlab-res"),
            LoadError::Truncated { .. }
        ));
        assert!(matches!(err("\u{1f}garbage"), LoadError::Corrupt { .. }));
        assert!(matches!(
            err("[1, 2]"),
            LoadError::WrongFormat { found: None }
        ));
        assert!(matches!(
            from_slice(&[0x1f, 0x8b, 8, 0, 0, 0]).unwrap_err(),
            LoadError::Gzip
        ));
        let e = err(r#"{"version": 4, "x_values": []}"#);
        assert_eq!(
            e.to_string(),
            "not a bloatlab results file: no \"format\": \"bloatlab-results\" field"
        );
        let e = err(r#"{"format": "flent", "version": 1}"#);
        assert!(matches!(&e, LoadError::WrongFormat { found: Some(f) } if f == "flent"));
        assert!(matches!(
            err(r#"{"format": "bloatlab-results"}"#),
            LoadError::BadVersion { .. }
        ));
        assert!(matches!(
            err(r#"{"format": "bloatlab-results", "version": "1"}"#),
            LoadError::BadVersion { .. }
        ));
        assert!(matches!(
            err(r#"{"format": "bloatlab-results", "version": 0}"#),
            LoadError::Migration(MigrationError::UnknownVersion { found: 0 })
        ));
        let e = err(r#"{"format": "bloatlab-results", "version": 7}"#);
        assert_eq!(
            e.to_string(),
            format!(
                "written by a newer bloatlab (version 7); this build reads up to {CURRENT_VERSION}"
            )
        );
        let e = err(r#"{"format": "bloatlab-results", "version": 1}"#);
        assert!(
            matches!(&e, LoadError::Schema { message, .. } if message.contains("metadata")),
            "{e}"
        );
    }

    #[test]
    fn corrupt_message_has_position() {
        let e = err("{\"format\": ?}");
        assert_eq!(
            e.to_string(),
            "results file is corrupt: expected value at line 1, column 12"
        );
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;

    #[test]
    fn files_over_the_cap_are_refused_without_reading_them_whole() {
        let dir = std::env::temp_dir().join(format!("bloatlab-load-cap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("big.json");
        // Sparse: 40 MiB of zeros on disk costs nothing.
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(40 << 20).unwrap();
        let e = load(&p).unwrap_err();
        assert!(
            matches!(e, LoadError::TooLarge { size, max } if size == 40 << 20 && max == MAX_FILE_BYTES),
            "{e:?}"
        );
        assert!(e.to_string().contains("too large"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_fifo_with_no_writer_is_refused_at_once_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("run.json");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(
            made.as_ref().is_ok_and(|s| s.success()),
            "mkfifo failed: {made:?}"
        );
        // Before the fix this open blocked forever; a thread bounds the test.
        let (tx, rx) = std::sync::mpsc::channel();
        let p = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(load(&p).map(|_| ()));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("load() blocked on a FIFO");
        let e = got.unwrap_err();
        assert!(
            matches!(e, LoadError::NotRegular { kind: "a FIFO" }),
            "{e:?}"
        );
        assert!(e.to_string().contains("not a regular file (a FIFO)"), "{e}");
        let d = load(dir.path()).unwrap_err();
        assert!(
            matches!(
                d,
                LoadError::NotRegular {
                    kind: "a directory"
                }
            ),
            "{d:?}"
        );
    }
}
