//! A throwaway `redis-server` for tests and benchmarks (feature `testing`):
//! a real server process on a free port of 127.0.0.1, with its files in a
//! temporary directory, killed when dropped. Not for production.
//!
//! It runs with `appendonly yes` and `appendfsync always` (the settings the
//! crate docs assume for "nothing acknowledged is lost"), so a test can
//! kill it with SIGKILL, start it again on the same port and files, and
//! find every acknowledged write.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The program started, from `PATH`.
pub const PROGRAM: &str = "redis-server";

/// A running `redis-server`; killed (SIGKILL) when dropped.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts a server on a free port with durable settings.
    ///
    /// # Panics
    ///
    /// When it cannot: `redis-server` is not installed (Debian: `apt-get
    /// install redis-server`; CI installs it in `.ci/run`) or does not
    /// start. A test that needs Redis fails then, with this message; it is
    /// never skipped.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// [`RedisServer::start`] with more `redis-server` arguments (`--appendfsync everysec`, ...).
    ///
    /// # Panics
    ///
    /// As [`RedisServer::start`].
    pub fn start_with(extra: &[&str]) -> Self {
        match Self::try_start_with(extra) {
            Ok(server) => server,
            Err(error) => panic!(
                "cannot start a real {PROGRAM} for this test: {error}. Install it (Debian: \
                 `apt-get install -y redis-server`; .ci/run does) and make sure `{PROGRAM}` is on PATH"
            ),
        }
    }

    /// [`RedisServer::start_with`], answering an error instead of panicking.
    ///
    /// # Errors
    ///
    /// `redis-server` cannot be run, exits, or does not answer a ping within 10 s.
    pub fn try_start_with(extra: &[&str]) -> std::io::Result<Self> {
        let dir = tempfile::tempdir()?;
        let mut server = Self {
            child: None,
            port: 0,
            dir,
            extra: extra.iter().map(|arg| (*arg).to_owned()).collect(),
        };
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

    fn spawn(&mut self) -> std::io::Result<()> {
        let log = self.dir.path().join("redis.log");
        let mut child = Command::new(PROGRAM)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(self.dir.path())
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--daemonize",
                "no",
                "--protected-mode",
                "no",
            ])
            .arg("--logfile")
            .arg(&log)
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| {
                std::io::Error::new(error.kind(), format!("`{PROGRAM}` did not run: {error}"))
            })?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = child.try_wait()? {
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = pipe.read_to_string(&mut stderr);
                }
                return Err(std::io::Error::other(format!(
                    "`{PROGRAM}` exited at start ({status}): {} {}",
                    stderr.trim(),
                    tail(&log)
                )));
            }
            if ping(self.port) {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(std::io::Error::other(format!(
                    "`{PROGRAM}` did not answer a ping within 10 s: {}",
                    tail(&log)
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its directory (the append-only files, the log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Kills it with SIGKILL: nothing gets flushed, closed or finished.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again (after [`RedisServer::kill`]) on the same port and
    /// files: it loads what its append-only file holds.
    ///
    /// # Panics
    ///
    /// When it does not start again.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.spawn() {
                Ok(()) => return,
                // The port may linger for a moment after the kill.
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(error) => panic!("{PROGRAM} did not start again: {error}"),
            }
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
    Ok(listener.local_addr()?.port())
}

/// True when a server on `port` answers `PING` with `+PONG`.
fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(
        &SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        Duration::from_millis(200),
    ) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut answer = [0u8; 7];
    stream.read_exact(&mut answer).is_ok() && &answer == b"+PONG\r\n"
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
