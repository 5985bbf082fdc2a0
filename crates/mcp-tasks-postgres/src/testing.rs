//! A throwaway PostgreSQL server for tests and benchmarks (feature
//! `testing`): a real `postgres` process from the system's packages, with
//! its cluster made by `initdb` in a temporary directory, listening on a
//! free port of 127.0.0.1, killed when dropped. Not for production.
//!
//! PostgreSQL refuses to run as root: when the tests run as root (as CI
//! does), the cluster belongs to the `postgres` user and both programs run
//! as that user (through `setpriv`, which execs the program in place, so
//! the child killed is PostgreSQL itself). It runs with `fsync` and
//! `synchronous_commit` on (the settings under which nothing acknowledged
//! is lost), so a test can kill it with SIGKILL, start it again on the same
//! port and files, and find every acknowledged write.
//!
//! The programs are found in `MCP_TASKS_PG_BIN` if set, else in the newest
//! `/usr/lib/postgresql/*/bin` (Debian's packages), else on `PATH`.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The user the server runs as when the tests run as root.
const SERVER_USER: &str = "postgres";

/// A running PostgreSQL; killed (SIGKILL) when dropped.
#[derive(Debug)]
pub struct PostgresServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    bin: PathBuf,
    /// `(uid, gid)` to run as, when the tests run as root.
    user: Option<(u32, u32)>,
    extra: Vec<String>,
}

impl PostgresServer {
    /// Makes a cluster and starts a server on a free port.
    ///
    /// # Panics
    ///
    /// When it cannot: PostgreSQL is not installed (Debian: `apt-get
    /// install postgresql`; CI installs it in `.ci/run`) or does not start.
    /// A test that needs PostgreSQL fails then, with this message; it is
    /// never skipped.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// [`PostgresServer::start`] with more settings for `postgres`, as
    /// `-c name=value` arguments (`["-c", "synchronous_commit=off"]`).
    ///
    /// # Panics
    ///
    /// As [`PostgresServer::start`].
    pub fn start_with(extra: &[&str]) -> Self {
        match Self::try_start_with(extra) {
            Ok(server) => server,
            Err(error) => panic!(
                "cannot start a real PostgreSQL for this test: {error}. Install it (Debian: \
                 `apt-get install -y postgresql`; .ci/run does), or set MCP_TASKS_PG_BIN to the \
                 directory of its `initdb` and `postgres`"
            ),
        }
    }

    /// [`PostgresServer::start_with`], answering an error instead of panicking.
    ///
    /// # Errors
    ///
    /// `initdb` or `postgres` cannot be found or run, exits, or the server
    /// does not accept connections within 30 s.
    pub fn try_start_with(extra: &[&str]) -> std::io::Result<Self> {
        let bin = bin_dir()?;
        let dir = tempfile::tempdir()?;
        let user = server_user()?;
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))?;
        }
        let mut server = Self {
            child: None,
            port: 0,
            dir,
            bin,
            user,
            extra: extra.iter().map(|arg| (*arg).to_owned()).collect(),
        };
        server.initdb()?;
        let mut last = None;
        // A free port may be taken between finding and binding it: try a few.
        for _ in 0..5 {
            server.port = free_port()?;
            match server.spawn() {
                Ok(()) => return Ok(server),
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no attempt was made")))
    }

    /// A command for `program` of the server's directory, as the server's user.
    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        match self.user {
            Some((uid, gid)) => {
                let mut command = Command::new("setpriv");
                command
                    .arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--clear-groups")
                    .arg("--")
                    .arg(path);
                command
            }
            None => Command::new(path),
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn initdb(&self) -> std::io::Result<()> {
        let output = self
            .command("initdb")
            .arg("-D")
            .arg(self.data())
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"])
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .output()
            .map_err(|error| {
                std::io::Error::new(
                    error.kind(),
                    format!("`initdb` did not run ({}): {error}", self.bin.display()),
                )
            })?;
        if !output.status.success() {
            return Err(std::io::Error::other(format!(
                "`initdb` failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        Ok(())
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let log = self.dir.path().join("postgres.log");
        let log_file = std::fs::File::create(&log)?;
        if let Some((uid, gid)) = self.user {
            std::os::unix::fs::chown(&log, Some(uid), Some(gid))?;
        }
        let mut child = self
            .command("postgres")
            .arg("-D")
            .arg(self.data())
            .args(["-p", &self.port.to_string(), "-h", "127.0.0.1", "-k"])
            .arg(self.dir.path())
            .args([
                "-c",
                "fsync=on",
                "-c",
                "synchronous_commit=on",
                "-c",
                "max_connections=300",
            ])
            .args(&self.extra)
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(|error| {
                std::io::Error::new(error.kind(), format!("`postgres` did not run: {error}"))
            })?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait()? {
                return Err(std::io::Error::other(format!(
                    "`postgres` exited at start ({status}): {}",
                    tail(&log)
                )));
            }
            if self.ready() {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(std::io::Error::other(format!(
                    "`postgres` did not accept connections within 30 s: {}",
                    tail(&log)
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// True when `pg_isready` says the server accepts connections.
    fn ready(&self) -> bool {
        Command::new(self.bin.join("pg_isready"))
            .args([
                "-q",
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-t",
                "1",
            ])
            .stdin(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its directory (the cluster in `data`, the log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `sql` with `psql` (from the same directory), for a test's own
    /// look at the database; its output, unaligned and without headers.
    ///
    /// # Panics
    ///
    /// When `psql` fails.
    pub fn psql(&self, sql: &str) -> String {
        let output = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d"])
            .arg(self.url())
            .arg("-c")
            .arg(sql)
            .stdin(Stdio::null())
            .output()
            .expect("psql runs");
        assert!(
            output.status.success(),
            "psql failed on {sql:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// Kills it with SIGKILL: nothing gets flushed, closed or finished. Its
    /// backends notice the postmaster's death and exit by themselves.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again (after [`PostgresServer::kill`]) on the same port
    /// and files: it recovers what its write-ahead log holds.
    ///
    /// # Panics
    ///
    /// When it does not start again within 30 s.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.spawn() {
                Ok(()) => return,
                // The port, or the old backends' shared memory, may linger
                // for a moment after the kill.
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                Err(error) => panic!("PostgreSQL did not start again: {error}"),
            }
        }
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // An immediate shutdown ends the backends too.
            let _ = Command::new("kill")
                .args(["-QUIT", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if self
                    .child
                    .as_mut()
                    .is_some_and(|child| child.try_wait().ok().flatten().is_some())
                {
                    self.child = None;
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.kill();
    }
}

/// Where `initdb` and `postgres` are.
fn bin_dir() -> std::io::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("MCP_TASKS_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .ok()
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .max_by_key(|(version, _)| *version);
    if let Some((_, bin)) = newest {
        return Ok(bin);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .find(|dir| dir.join("initdb").exists() && dir.join("postgres").exists())
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no `initdb` in MCP_TASKS_PG_BIN, /usr/lib/postgresql/*/bin or PATH",
            )
        })
}

/// The `postgres` user's ids when this process is root, else `None`.
fn server_user() -> std::io::Result<Option<(u32, u32)>> {
    if std::fs::metadata("/proc/self")?.uid() != 0 {
        return Ok(None);
    }
    let passwd = std::fs::read_to_string("/etc/passwd")?;
    passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.first() == Some(&SERVER_USER))
                .then(|| Some((fields.get(2)?.parse().ok()?, fields.get(3)?.parse().ok()?)))?
        })
        .map(Some)
        .ok_or_else(|| {
            std::io::Error::other(format!(
                "running as root, and there is no `{SERVER_USER}` user to run PostgreSQL as \
                 (Debian's postgresql package makes it)"
            ))
        })
}

fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
    Ok(listener.local_addr()?.port())
}

/// The last lines of the server's log, for an error message.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(5).collect();
    let lines: Vec<&str> = lines.into_iter().rev().collect();
    if lines.is_empty() {
        String::new()
    } else {
        format!("(log: {})", lines.join(" | "))
    }
}
