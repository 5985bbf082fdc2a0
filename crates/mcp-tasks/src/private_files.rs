//! Files only their owner may read: the helpers every file that holds task
//! ids (bearer tokens) or results goes through.
//!
//! A task store's file (`mcp_tasks_sqlite`), its WAL and shared-memory
//! files, a client's journal of its tasks, a file of bearer tokens: other
//! users of the machine must not read them. [`create_private_dir`] makes a
//! folder `0700` and [`create_private_file`] a file `0600` (on Unix; the
//! process's umask can only narrow that); either, given a path that already
//! exists with wider permissions, leaves it as it is and logs a warning that
//! names it ([`warn_if_exposed`]), so an operator's own choice is never
//! undone behind their back. Elsewhere than Unix these create the folder or
//! file and check nothing (the folder's ACLs apply).
//!
//! The warnings go through `tracing` at `warn`, with the path; they never
//! name anything inside the file.

use std::io;
use std::path::Path;

/// Creates `path` and any missing parents, each created one `0700`. An
/// existing folder is left as it is, with a warning if group or others may
/// use it.
///
/// # Errors
///
/// When a folder cannot be created or inspected.
pub fn create_private_dir(path: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    let existed = path.is_dir();
    builder.create(path)?;
    if existed {
        warn_if_exposed(path)?;
    }
    Ok(())
}

/// Creates the empty file `path` `0600` if it does not exist (its folder
/// must). An existing file is left as it is, with a warning if group or
/// others may read or write it. Returns whether the file was created.
///
/// # Errors
///
/// When the file cannot be created or inspected.
pub fn create_private_file(path: &Path) -> io::Result<bool> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(true),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
            warn_if_exposed(path)?;
            Ok(false)
        }
        Err(error) => Err(error),
    }
}

/// The permission bits (`0o077` at most) that let group or others at
/// `path`, if any; `None` when only its owner may, or when `path` does not
/// exist. Always `None` elsewhere than Unix.
///
/// # Errors
///
/// When `path` exists but cannot be inspected.
pub fn exposure(path: &Path) -> io::Result<Option<u32>> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::metadata(path) {
            Ok(metadata) => {
                let wider = metadata.permissions().mode() & 0o077;
                Ok((wider != 0).then_some(wider))
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(None)
    }
}

/// Logs a warning naming `path` and its mode if group or others may use it
/// ([`exposure`]); returns whether it warned.
///
/// # Errors
///
/// When `path` exists but cannot be inspected.
pub fn warn_if_exposed(path: &Path) -> io::Result<bool> {
    let Some(wider) = exposure(path)? else {
        return Ok(false);
    };
    let what = if path.is_dir() { "folder" } else { "file" };
    let fix = if path.is_dir() { "700" } else { "600" };
    tracing::warn!(
        "{} may be used by other users than its owner (mode {wider:03o} for group and others), \
         yet this {what} holds task ids or secrets; consider chmod {fix} on it",
        path.display()
    );
    Ok(true)
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn new_folders_and_files_are_private() {
        let temp = tempfile::tempdir().unwrap();
        let folder = temp.path().join("a/b");
        create_private_dir(&folder).unwrap();
        assert_eq!(mode(&folder), 0o700);
        assert_eq!(mode(&temp.path().join("a")), 0o700, "missing parents too");
        let file = folder.join("tasks.db");
        assert!(create_private_file(&file).unwrap());
        assert_eq!(mode(&file), 0o600);
        assert_eq!(exposure(&file).unwrap(), None);
        assert!(!warn_if_exposed(&file).unwrap());
        assert_eq!(exposure(&folder.join("missing")).unwrap(), None);
    }

    #[test]
    fn existing_wider_paths_are_reported_and_left_alone() {
        let temp = tempfile::tempdir().unwrap();
        let file = temp.path().join("tasks.db");
        std::fs::write(&file, b"data").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(!create_private_file(&file).unwrap(), "not created again");
        assert_eq!(std::fs::read(&file).unwrap(), b"data", "not truncated");
        assert_eq!(mode(&file), 0o644, "the operator's choice stays");
        assert_eq!(exposure(&file).unwrap(), Some(0o044));
        assert!(warn_if_exposed(&file).unwrap());
        let folder = temp.path().join("shared");
        std::fs::create_dir(&folder).unwrap();
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
        create_private_dir(&folder).unwrap();
        assert_eq!(mode(&folder), 0o755);
        assert_eq!(exposure(&folder).unwrap(), Some(0o055));
    }
}
