//! What `serve --http` asks of the operating system at start, for many
//! connections held open at once (listen streams above all).
//!
//! * **Open files.** Every connection is a file descriptor, so a
//!   `--max-connections` past the soft `RLIMIT_NOFILE` (1,024 on many
//!   systems) would fail its accepts with `EMFILE` long before the
//!   connection bound refuses anyone with a clear 503. The soft limit is
//!   raised to the hard limit when it is lower than the connections need
//!   (the hard limit is the most an unprivileged process may take; raising
//!   it is the operator's call: `ulimit -Hn`, systemd's `LimitNOFILE`).
//!   When even the hard limit is short, `serve` starts anyway and says so
//!   once: the connections past it are not accepted until others close.
//! * **Small pages** (Linux). mimalloc asks for transparent huge pages for
//!   its heap, and a huge page is resident whole: then every idle
//!   connection's two 8 KiB hyper buffers (the read buffer and the head
//!   buffer, which hyper 1.12 sizes at 8 KiB at least), of which an idle
//!   stream touches a page or less, cost their full size in RSS. With
//!   `PR_SET_THP_DISABLE` only the pages touched are resident: an open
//!   listen stream costs 12.4 KiB of RSS instead of 20.1 KiB
//!   (docs/benchmarks-history.md, "Ten thousand listeners").

/// Descriptors kept beside the connections: the listener, the store's
/// files, the operator listener, an upstream's pipes, logs.
const RESERVE: u64 = 64;

/// What the limit was and became.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenFiles {
    /// The soft limit already covers the connections.
    Enough { soft: u64 },
    /// The soft limit was raised to `to` (the hard limit).
    Raised { from: u64, to: u64 },
    /// The hard limit is short of what the connections need (`soft` as set,
    /// possibly raised to the hard limit).
    Short { soft: u64, needed: u64 },
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit when it is below
/// `max_connections` plus a reserve; says what it did.
#[cfg(unix)]
pub(crate) fn raise_for(max_connections: usize) -> std::io::Result<OpenFiles> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let needed = max_connections as u64 + RESERVE;
    let limit = getrlimit(Resource::Nofile);
    // `None` is unlimited.
    let soft = limit.current.unwrap_or(u64::MAX);
    if soft >= needed {
        return Ok(OpenFiles::Enough { soft });
    }
    let hard = limit.maximum.unwrap_or(u64::MAX);
    let to = if hard > soft {
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            },
        )?;
        hard
    } else {
        soft
    };
    if to < needed {
        return Ok(OpenFiles::Short { soft: to, needed });
    }
    Ok(OpenFiles::Raised { from: soft, to })
}

/// Elsewhere the limit is the system's business.
#[cfg(not(unix))]
pub(crate) fn raise_for(_max_connections: usize) -> std::io::Result<OpenFiles> {
    Ok(OpenFiles::Enough { soft: u64::MAX })
}

/// [`raise_for`], with a warning when the connections do not fit.
pub(crate) fn ensure_open_files(max_connections: usize) {
    match raise_for(max_connections) {
        Ok(OpenFiles::Enough { .. }) => {}
        Ok(OpenFiles::Raised { from, to }) => {
            tracing::debug!(from, to, "raised the open-file limit for --max-connections");
        }
        Ok(OpenFiles::Short { soft, needed }) => tracing::warn!(
            soft,
            needed,
            "the open-file limit (hard limit included) is below what --max-connections needs: \
             connections past it wait in the backlog until others close; raise `ulimit -Hn` \
             (systemd: LimitNOFILE) or lower --max-connections"
        ),
        Err(error) => tracing::warn!(%error, "cannot raise the open-file limit"),
    }
}

/// Turns transparent huge pages off for this process (see the module
/// docs); elsewhere than Linux, nothing to do.
pub(crate) fn small_pages() {
    #[cfg(target_os = "linux")]
    if let Err(error) = rustix::thread::disable_transparent_huge_pages(true) {
        tracing::debug!(%error, "cannot turn transparent huge pages off");
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use rustix::process::{Resource, getrlimit};

    #[test]
    fn the_soft_limit_covers_the_connections_after_raising() {
        let hard = getrlimit(Resource::Nofile).maximum.unwrap_or(u64::MAX);
        // A bound the hard limit covers: the soft limit ends at least there.
        let connections = usize::try_from(hard.saturating_sub(RESERVE).min(4096)).unwrap();
        let outcome = raise_for(connections).unwrap();
        assert!(
            matches!(outcome, OpenFiles::Enough { .. } | OpenFiles::Raised { .. }),
            "{outcome:?}"
        );
        let soft = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
        assert!(soft >= connections as u64 + RESERVE, "soft {soft}");
        // A bound past the hard limit is reported short, the soft limit at the hard one.
        if hard < u64::MAX - RESERVE {
            let past = usize::try_from(hard).unwrap();
            assert_eq!(
                raise_for(past).unwrap(),
                OpenFiles::Short {
                    soft: hard,
                    needed: hard + RESERVE
                }
            );
            assert_eq!(getrlimit(Resource::Nofile).current, Some(hard));
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod pages {
    #[test]
    fn serve_turns_transparent_huge_pages_off() {
        super::small_pages();
        assert!(rustix::thread::transparent_huge_pages_are_disabled().unwrap());
    }
}
