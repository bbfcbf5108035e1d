//! Writing results files atomically.
//!
//! The document is written to a temporary file in the **same directory** (so the final
//! rename stays within one filesystem), flushed to disk with `fsync`, then renamed over
//! the target, and the directory is fsynced so the rename itself survives a crash.
//! `rename(2)` replaces the target atomically: a reader, or a run interrupted at any
//! point, sees either the old file or the complete new one, never a half-written one.
//! If anything fails before the rename, the temporary file is removed.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::schema::ResultsFile;

/// Why a results file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    /// The document could not be serialised (cannot happen for well-formed data, but
    /// serde_json's API is fallible).
    #[error("cannot serialise results: {0}")]
    Serialize(#[from] serde_json::Error),
    /// The target path has no file name (e.g. `/` or `..`).
    #[error("{} is not a file path", path.display())]
    NotAFile {
        /// The rejected path.
        path: PathBuf,
    },
    /// A filesystem operation failed.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What we were doing: `create`, `write`, `sync`, `rename to`.
        op: &'static str,
        /// The file concerned.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The serialised document: compact JSON plus a trailing newline.
pub fn to_vec(file: &ResultsFile) -> Result<Vec<u8>, SaveError> {
    let mut v = serde_json::to_vec(file)?;
    v.push(b'\n');
    Ok(v)
}

/// Writes `file` to `path` atomically (see the module docs).
pub fn save(path: &Path, file: &ResultsFile) -> Result<(), SaveError> {
    let bytes = to_vec(file)?;
    write_atomic(path, |f| f.write_all(&bytes))
}

/// Removes the temporary file unless the rename happened.
struct TempGuard {
    path: PathBuf,
    armed: bool,
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if self.armed {
            // Best effort: the error that got us here matters more.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// An error-mapping closure for one operation on one path.
fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SaveError {
    let path = path.to_owned();
    move |source| SaveError::Io { op, path, source }
}

/// Atomically replaces `path` with whatever `fill` writes. `fill` may fail part-way
/// (which is how the tests simulate an interrupted write); the target is then untouched.
pub fn write_atomic(
    path: &Path,
    fill: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<(), SaveError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| SaveError::NotAFile {
        path: path.to_owned(),
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(
        ".tmp.{}.{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = dir.join(tmp_name);

    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(io("create", &tmp))?;
    let mut guard = TempGuard {
        path: tmp.clone(),
        armed: true,
    };
    fill(&mut f).map_err(io("write", &tmp))?;
    f.sync_all().map_err(io("sync", &tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io("rename to", path))?;
    guard.armed = false;
    // Make the rename durable. Directories cannot be opened for writing, only read.
    File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(io("sync", &dir))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::ErrorKind;

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_the_target_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.json");
        write_atomic(&p, |f| f.write_all(b"old")).unwrap();
        write_atomic(&p, |f| f.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(entries(dir.path()), ["run.json"]);
    }

    #[test]
    fn interrupted_write_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.json");
        write_atomic(&p, |f| f.write_all(b"{\"complete\": true}")).unwrap();
        // The writer dies half-way through the new document.
        let e = write_atomic(&p, |f| {
            f.write_all(b"{\"compl")?;
            Err(std::io::Error::new(ErrorKind::Interrupted, "killed"))
        })
        .unwrap_err();
        assert!(matches!(e, SaveError::Io { op: "write", .. }), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), b"{\"complete\": true}");
        assert_eq!(entries(dir.path()), ["run.json"]);
        // And with no previous file, nothing at all appears.
        let q = dir.path().join("other.json");
        let _ = write_atomic(&q, |_| Err(std::io::Error::other("boom")));
        assert!(!q.exists());
        assert_eq!(entries(dir.path()), ["run.json"]);
    }

    #[test]
    fn failures_are_typed() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no/such/dir/run.json");
        assert!(matches!(
            write_atomic(&missing, |_| Ok(())),
            Err(SaveError::Io { op: "create", .. })
        ));
        // Renaming a file over a non-empty directory fails; the temp file is removed.
        let sub = dir.path().join("taken");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("x"), b"x").unwrap();
        let e = write_atomic(&sub, |f| f.write_all(b"data")).unwrap_err();
        assert!(
            matches!(
                e,
                SaveError::Io {
                    op: "rename to",
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(entries(dir.path()), ["taken"]);
        assert!(matches!(
            write_atomic(Path::new("/"), |_| Ok(())),
            Err(SaveError::NotAFile { .. })
        ));
    }
}
