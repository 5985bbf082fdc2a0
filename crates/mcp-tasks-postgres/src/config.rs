//! Where to connect: a URL (`postgres://` or `postgresql://`, as libpq
//! reads them) or a `key=value` string, with what the URL leaves out taken
//! from the standard `PG*` variables and the password file, as `psql`
//! does. Passwords are never logged: [`redacted`] is what may be.
//!
//! tokio-postgres parses the URL itself; this module takes out first the
//! parameters it does not know (`sslmode` beyond `disable`, `prefer` and
//! `require`; `sslrootcert`; `passfile`), then fills the gaps:
//!
//! * `PGHOST`, `PGPORT`, `PGDATABASE`, `PGUSER`, `PGPASSWORD`, `PGSSLMODE`,
//!   `PGSSLROOTCERT`, `PGAPPNAME`, `PGCONNECT_TIMEOUT` when the URL says
//!   nothing of them;
//! * the password from the password file (`passfile=`, else `PGPASSFILE`,
//!   else `~/.pgpass`: lines `host:port:database:user:password`, `*` for
//!   any, `\:` and `\\` escaped) when neither the URL nor `PGPASSWORD` has
//!   one;
//! * the user from `USER` (as libpq takes the operating system's), the
//!   database from the user, the host `localhost`, the port 5432.
//!
//! `sslmode=require`, `verify-ca` and `verify-full` all connect with TLS
//! and verify the server's certificate and name with rustls (the system's
//! roots, or `sslrootcert`): rustls has no TLS without verification.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_tasks::store::StoreError;
use tokio_postgres::config::{Host, SslMode};

/// A parsed connection: tokio-postgres's config and what it cannot hold.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) config: tokio_postgres::Config,
    /// Certificates (PEM) to trust instead of the system's roots.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    pub(crate) root_cert: Option<PathBuf>,
}

/// Where the variables come from: the process's environment, or a test's.
pub(crate) trait Env {
    fn var(&self, name: &str) -> Option<String>;
}

/// The process's environment.
#[derive(Debug)]
pub(crate) struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|value| !value.is_empty())
    }
}

fn invalid(message: impl Into<String>) -> StoreError {
    StoreError::msg(format!(
        "the PostgreSQL URL does not parse: {}",
        message.into()
    ))
}

/// True when `url` names a PostgreSQL store (either URL scheme libpq reads).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// `url` with its password (in the user part or a `password=` parameter)
/// replaced by `***`: what may be logged.
pub fn redacted(url: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let base = match base.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest
                .split_once('/')
                .map_or((rest, None), |(a, p)| (a, Some(p)));
            let authority = match authority.rsplit_once('@') {
                Some((user, host)) => match user.split_once(':') {
                    Some((name, _)) => format!("{name}:***@{host}"),
                    None => format!("{user}@{host}"),
                },
                None => authority.to_owned(),
            };
            match path {
                Some(path) => format!("{scheme}://{authority}/{path}"),
                None => format!("{scheme}://{authority}"),
            }
        }
        None => base.to_owned(),
    };
    match query {
        Some(query) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if key == "password" => format!("{key}=***"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{base}?{}", query.join("&"))
        }
        None => base,
    }
}

/// Parses `url` (or a `key=value` string), filling what it leaves out from
/// `env` and the password file.
pub(crate) fn parse(url: &str, env: &dyn Env) -> Result<Target, StoreError> {
    let mut ssl_mode = None;
    let mut root_cert = None;
    let mut passfile = None;
    let cleaned = if is_postgres_url(url) {
        let (base, query) = url
            .split_once('?')
            .map_or((url, None), |(b, q)| (b, Some(q)));
        let mut kept = Vec::new();
        for pair in query.into_iter().flat_map(|query| query.split('&')) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decoded = percent_encoding::percent_decode_str(value)
                .decode_utf8()
                .map_err(|_| invalid(format!("the value of {key} is not UTF-8")))?
                .into_owned();
            match key {
                "sslmode" => ssl_mode = Some(decoded),
                "sslrootcert" => root_cert = Some(PathBuf::from(decoded)),
                "passfile" => passfile = Some(PathBuf::from(decoded)),
                _ => kept.push(pair),
            }
        }
        if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        }
    } else {
        url.to_owned()
    };
    let mut config: tokio_postgres::Config =
        cleaned.parse().map_err(|error: tokio_postgres::Error| {
            let cause = std::error::Error::source(&error).map(ToString::to_string);
            invalid(cause.map_or_else(|| error.to_string(), |cause| format!("{error}: {cause}")))
        })?;
    fill_from_env(&mut config, env)?;
    let ssl_mode = ssl_mode.or_else(|| env.var("PGSSLMODE"));
    if let Some(mode) = ssl_mode {
        config.ssl_mode(ssl_mode_of(&mode)?);
    }
    let root_cert = root_cert.or_else(|| env.var("PGSSLROOTCERT").map(PathBuf::from));
    if config.get_password().is_none() {
        let file = passfile
            .or_else(|| env.var("PGPASSFILE").map(PathBuf::from))
            .or_else(|| env.var("HOME").map(|home| Path::new(&home).join(".pgpass")));
        if let Some(password) = file.and_then(|file| from_passfile(&file, &config)) {
            config.password(password);
        }
    }
    Ok(Target { config, root_cert })
}

fn ssl_mode_of(mode: &str) -> Result<SslMode, StoreError> {
    match mode {
        "disable" => Ok(SslMode::Disable),
        "allow" | "prefer" => Ok(SslMode::Prefer),
        "require" | "verify-ca" | "verify-full" => Ok(SslMode::Require),
        other => Err(invalid(format!(
            "sslmode={other}: use disable, prefer, require, verify-ca or verify-full"
        ))),
    }
}

fn fill_from_env(config: &mut tokio_postgres::Config, env: &dyn Env) -> Result<(), StoreError> {
    if config.get_hosts().is_empty() {
        let hosts = env.var("PGHOST").unwrap_or_else(|| "localhost".to_owned());
        for host in hosts.split(',') {
            config.host(host);
        }
    }
    if config.get_ports().is_empty()
        && let Some(port) = env.var("PGPORT")
    {
        let port = port
            .parse::<u16>()
            .map_err(|_| invalid(format!("PGPORT={port} is not a port")))?;
        config.port(port);
    }
    if config.get_user().is_none() {
        let user = env
            .var("PGUSER")
            .or_else(|| env.var("USER"))
            .ok_or_else(|| invalid("no user: put one in the URL, or set PGUSER"))?;
        config.user(user);
    }
    if config.get_dbname().is_none() {
        let name = env
            .var("PGDATABASE")
            .or_else(|| config.get_user().map(str::to_owned))
            .unwrap_or_default();
        config.dbname(name);
    }
    if config.get_password().is_none()
        && let Some(password) = env.var("PGPASSWORD")
    {
        config.password(password);
    }
    if config.get_application_name().is_none() {
        config.application_name(
            env.var("PGAPPNAME")
                .unwrap_or_else(|| "mcp-tasks".to_owned()),
        );
    }
    if config.get_connect_timeout().is_none()
        && let Some(seconds) = env.var("PGCONNECT_TIMEOUT")
    {
        let seconds = seconds
            .parse::<u64>()
            .map_err(|_| invalid(format!("PGCONNECT_TIMEOUT={seconds} is not seconds")))?;
        config.connect_timeout(Duration::from_secs(seconds.max(2)));
    }
    Ok(())
}

/// The password the password file holds for the config's first host,
/// port, database and user, if any line matches (the first that does).
fn from_passfile(file: &Path, config: &tokio_postgres::Config) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    let host = match config.get_hosts().first()? {
        Host::Tcp(host) => host.clone(),
        #[cfg(unix)]
        Host::Unix(path) => path.display().to_string(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let wanted = [
        host.as_str(),
        port.as_str(),
        config.get_dbname().unwrap_or_default(),
        config.get_user().unwrap_or_default(),
    ];
    text.lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .find_map(|line| {
            let fields = passfile_fields(line);
            let [host, port, db, user, password] = fields.as_slice() else {
                return None;
            };
            let matches = [host, port, db, user]
                .iter()
                .zip(wanted)
                .all(|(field, want)| {
                    field.as_str() == "*"
                        || field.as_str() == want
                        || (want == "localhost" && field.as_str() == "127.0.0.1")
                });
            matches.then(|| password.clone())
        })
}

/// The five fields of a password file's line (`\:` and `\\` escaped).
fn passfile_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(next), Some(field)) = (chars.next(), fields.last_mut()) {
                    field.push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => {
                if let Some(field) = fields.last_mut() {
                    field.push(c);
                }
            }
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    struct Vars(HashMap<&'static str, String>);

    impl Env for Vars {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).cloned()
        }
    }

    fn vars(pairs: &[(&'static str, &str)]) -> Vars {
        Vars(pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect())
    }

    #[test]
    fn both_schemes_parse_and_the_url_wins_over_the_variables() {
        let env = vars(&[
            ("PGUSER", "env-user"),
            ("PGHOST", "env-host"),
            ("PGPORT", "6000"),
        ]);
        for scheme in ["postgres", "postgresql"] {
            let target =
                parse(&format!("{scheme}://app:pw@db.internal:5433/tasks"), &env).expect("parses");
            assert_eq!(target.config.get_user(), Some("app"));
            assert_eq!(target.config.get_password(), Some(&b"pw"[..]));
            assert_eq!(target.config.get_dbname(), Some("tasks"));
            assert_eq!(target.config.get_ports(), &[5433]);
            assert_eq!(
                target.config.get_hosts(),
                &[Host::Tcp("db.internal".to_owned())]
            );
        }
    }

    #[test]
    fn what_the_url_leaves_out_comes_from_the_pg_variables() {
        let env = vars(&[
            ("PGUSER", "env-user"),
            ("PGHOST", "env-host"),
            ("PGPORT", "6000"),
            ("PGPASSWORD", "env-pw"),
            ("PGDATABASE", "env-db"),
            ("PGSSLMODE", "require"),
        ]);
        let target = parse("postgres://", &env).expect("parses");
        assert_eq!(target.config.get_user(), Some("env-user"));
        assert_eq!(target.config.get_password(), Some(&b"env-pw"[..]));
        assert_eq!(target.config.get_dbname(), Some("env-db"));
        assert_eq!(target.config.get_ports(), &[6000]);
        assert_eq!(target.config.get_ssl_mode(), SslMode::Require);
        assert!(parse("postgres://h/db", &vars(&[("PGPORT", "x")])).is_err());
    }

    #[test]
    fn the_password_file_answers_when_nothing_else_does() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("pgpass");
        std::fs::write(
            &file,
            "# comment\nother:5432:*:app:no\ndb:5432:tasks:app:pa\\:ss\n*:*:*:*:fallback\n",
        )
        .expect("write");
        let url = format!(
            "postgresql://app@db/tasks?passfile={}&connect_timeout=3",
            file.display()
        );
        let target = parse(&url, &vars(&[])).expect("parses");
        assert_eq!(target.config.get_password(), Some(&b"pa:ss"[..]));
        assert_eq!(
            target.config.get_connect_timeout(),
            Some(&Duration::from_secs(3))
        );
        let env = vars(&[("PGPASSFILE", file.to_str().expect("utf-8"))]);
        let target = parse("postgres://bob@elsewhere/x", &env).expect("parses");
        assert_eq!(target.config.get_password(), Some(&b"fallback"[..]));
    }

    #[test]
    fn sslmodes_libpq_knows_are_read_and_others_refused() {
        let env = vars(&[("PGUSER", "u")]);
        let mode = |url: &str| parse(url, &env).map(|target| target.config.get_ssl_mode());
        assert_eq!(
            mode("postgres://h/d?sslmode=disable").ok(),
            Some(SslMode::Disable)
        );
        assert_eq!(
            mode("postgres://h/d?sslmode=verify-full").ok(),
            Some(SslMode::Require)
        );
        let target = parse(
            "postgres://h/d?sslmode=verify-ca&sslrootcert=%2Fetc%2Fca.pem",
            &env,
        )
        .expect("parses");
        assert_eq!(target.root_cert, Some(PathBuf::from("/etc/ca.pem")));
        let error = mode("postgres://h/d?sslmode=sometimes").expect_err("refused");
        assert!(error.to_string().contains("sslmode=sometimes"), "{error}");
        let error = parse("postgres://h/d?bogus=1", &env).expect_err("refused");
        assert!(error.to_string().contains("bogus"), "{error}");
    }

    #[test]
    fn a_redacted_url_hides_every_password() {
        assert_eq!(
            redacted("postgres://app:secret@db:5432/tasks?sslmode=require"),
            "postgres://app:***@db:5432/tasks?sslmode=require"
        );
        assert_eq!(
            redacted("postgresql://db/tasks?user=app&password=secret"),
            "postgresql://db/tasks?user=app&password=***"
        );
        assert_eq!(redacted("postgres://app@db/t"), "postgres://app@db/t");
        assert!(!redacted("postgres://a:p%40ss@db/t").contains("p%40ss"));
    }
}
