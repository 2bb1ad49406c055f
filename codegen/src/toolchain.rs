//! The system C compiler and the publishing of artifacts, arranged so that a kill at any
//! moment, SIGKILL included (which nothing can catch), leaves nothing behind: no scratch
//! directory, no named temporary file.
//!
//! Nothing is ever written under a name until the artifact is whole. `main.c` reaches `cc` on
//! its standard input; the objects and the linked program live in memory files
//! (`memfd_create`), which `cc` and the linker it runs open as `/proc/self/fd/N` (the
//! descriptors are inherited); the output is written unnamed (`O_TMPFILE`) in its directory
//! and linked in under its name whole. Replacing an existing file needs a name for the rename:
//! the file is linked under a temporary name and renamed over the output at once, so a
//! temporary name exists only between two system calls (and is removed if the rename fails).
//! Where the file system lacks `O_TMPFILE`, the bytes go to a temporary name that any failure
//! removes (only a kill in the middle of that write could leave it).
//! An output path that is a symbolic link keeps the link (the file it names is replaced), and
//! one that names no regular file (`/dev/null`, a FIFO) is written into, never replaced.
//!
//! What `cc` itself does is its own: GCC's `collect2` makes (and removes) a few empty files in
//! `TMPDIR` while linking.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A file that lives only in memory and has no name in any directory.
pub(crate) struct MemFile(File);

impl MemFile {
    /// A memory file holding `contents`, positioned at its start. `name` shows only in
    /// `/proc/PID/fd` listings. The descriptor is inherited by child processes (that is how
    /// `cc` reaches it), which is harmless: it names nothing on disk.
    pub fn new(name: &str, contents: &[u8]) -> Result<MemFile, String> {
        let cname = CString::new(name).map_err(|_| format!("bad memory file name `{name}`"))?;
        // SAFETY: `cname` is a valid NUL-terminated string; the returned descriptor, when not
        // -1, is a fresh one that nothing else owns.
        let fd = unsafe { libc::memfd_create(cname.as_ptr(), 0) };
        if fd < 0 {
            return Err(format!(
                "cannot create a memory file: {}",
                io::Error::last_os_error()
            ));
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let mut file = unsafe { File::from_raw_fd(fd) };
        file.write_all(contents)
            .and_then(|()| file.seek(SeekFrom::Start(0)).map(drop))
            .map_err(|e| format!("cannot fill a memory file: {e}"))?;
        Ok(MemFile(file))
    }

    /// The path under which this process and its children open the file.
    pub fn path(&self) -> String {
        format!("/proc/self/fd/{}", self.0.as_raw_fd())
    }

    /// A second descriptor for the same file (e.g. as a child's standard input).
    pub fn stdin(&self) -> Result<Stdio, String> {
        self.0
            .try_clone()
            .map(Stdio::from)
            .map_err(|e| format!("cannot share a memory file: {e}"))
    }

    /// Everything the file holds now.
    pub fn contents(&self) -> Result<Vec<u8>, String> {
        let mut file = &self.0;
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.read_to_end(&mut bytes))
            .map_err(|e| format!("cannot read back a memory file: {e}"))?;
        Ok(bytes)
    }
}

/// Runs `cmd` (the tool named `tool`), turning a failure to start or a non-zero exit into a
/// message carrying the tool's stderr.
pub(crate) fn run(cmd: &mut Command, tool: &str) -> Result<(), String> {
    let output = cmd
        .output()
        .map_err(|e| format!("cannot run `{tool}`: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{tool}` failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Writes `contents` to `path` so that the file appears whole or not at all, and nothing else
/// is left behind on any failure (see the module's doc). `mode` is the new file's permission
/// bits before the umask (0o666 for data, 0o777 for a program).
pub fn publish(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    // A symbolic link stays a link: the file it names is the one replaced, as `>` in a shell
    // would do.
    let resolved = follow_links(path)?;
    let path = resolved.as_path();
    // Something that is not a regular file -- `/dev/null`, a FIFO, a terminal -- is a stream to
    // write into, not a file to replace: renaming over it would destroy it. (Run as root,
    // `-o /dev/null` once turned `/dev/null` into a regular file, which every later reader of
    // `/dev/null` -- cargo's `rustc -` probes among them -- then read back as input.)
    if let Ok(meta) = std::fs::metadata(path) {
        if !meta.is_file() && !meta.is_dir() {
            return std::fs::OpenOptions::new()
                .write(true)
                .open(path)?
                .write_all(contents);
        }
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // Without /proc there is no unprivileged way to name an O_TMPFILE file.
    if !Path::new("/proc/self/fd").is_dir() {
        return write_then_rename(path, contents, mode);
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(mode)
        .open(dir)
    {
        Ok(mut file) => {
            file.write_all(contents)?;
            file.sync_all()?;
            link_in(&file, path)
        }
        // Kernels and file systems without O_TMPFILE answer one of these.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
            ) =>
        {
            write_then_rename(path, contents, mode)
        }
        Err(e) => Err(e),
    }
}

/// `path` with every symbolic link in its last component followed (a link to a link to a file
/// gives the file's path), whether or not the final target exists yet; `ELOOP` after 40 links,
/// as the kernel counts.
fn follow_links(path: &Path) -> io::Result<PathBuf> {
    let mut path = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&path)?;
                path = match path.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(path),
        }
    }
    Err(io::Error::from_raw_os_error(libc::ELOOP))
}

fn proc_path(file: &File) -> String {
    format!("/proc/self/fd/{}", file.as_raw_fd())
}

/// `linkat` through `/proc/self/fd`, which needs no privilege (unlike `AT_EMPTY_PATH`).
fn link_at(file: &File, to: &Path) -> io::Result<()> {
    let from = CString::new(proc_path(file)).map_err(io::Error::other)?;
    let to = CString::new(to.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    // SAFETY: both are valid NUL-terminated paths.
    let rc = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Gives the unnamed `file` the name `path`, replacing what is there.
fn link_in(file: &File, path: &Path) -> io::Result<()> {
    match link_at(file, path) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        other => return other,
    }
    for attempt in 0.. {
        let tmp = temp_name(path, attempt);
        match link_at(file, &tmp) {
            Ok(()) => return rename_or_remove(&tmp, path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => continue,
            Err(e) => return Err(e),
        }
    }
    unreachable!("the loop returns by its 100th attempt")
}

/// Where `O_TMPFILE` is missing: the bytes under a fresh temporary name, renamed onto `path`;
/// any failure removes the temporary.
fn write_then_rename(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    for attempt in 0.. {
        let tmp = temp_name(path, attempt);
        let mut file = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => continue,
            Err(e) => return Err(e),
        };
        let written = file.write_all(contents).and_then(|()| file.sync_all());
        drop(file);
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        return rename_or_remove(&tmp, path);
    }
    unreachable!("the loop returns by its 100th attempt")
}

fn temp_name(path: &Path, attempt: u32) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.tmp{}.{attempt}", std::process::id()))
}

fn rename_or_remove(tmp: &Path, path: &Path) -> io::Result<()> {
    std::fs::rename(tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(tmp);
    })
}
