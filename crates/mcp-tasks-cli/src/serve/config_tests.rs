//! The config file: flags from keys, upstreams from entries, and an error
//! at the right line for each way a file can be wrong.

use std::ffi::OsString;

use super::*;

/// A file with `text` in a folder of its own (kept while the test runs).
fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn expanded(path: &Path, rest: &[&str]) -> Result<Vec<String>, ConfigError> {
    let mut argv: Vec<OsString> = ["mcp-tasks", "serve", "--config"]
        .iter()
        .map(OsString::from)
        .collect();
    argv.push(path.into());
    argv.extend(rest.iter().map(OsString::from));
    match expand(argv) {
        Ok(argv) => Ok(argv
            .into_iter()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect()),
        Err(Expanded::Config(error)) => Err(error),
        Err(Expanded::Clap) => panic!("the command line was refused"),
    }
}

#[test]
fn keys_become_flags_and_the_command_line_wins() {
    let (dir, path) = file(
        "http = \"127.0.0.1:0\"\nttl = 60\nquota-by-header = true\nstdio = false\n\
         allowed-host = [\"a.example\", \"b.example\"]\ntool-concurrency = { sleep = 2 }\n\
         auth-tokens = \"tokens.txt\"\nstore = \"sqlite:tasks.db\"\n",
    );
    let argv = expanded(&path, &["--ttl", "5"]).unwrap();
    let folder = dir.path().display().to_string();
    let config = path.display().to_string();
    let want: Vec<String> = [
        "mcp-tasks",
        "serve",
        "--config",
        &config,
        "--allowed-host",
        "a.example",
        "--allowed-host",
        "b.example",
        "--auth-tokens",
        &format!("{folder}/tokens.txt"),
        "--http",
        "127.0.0.1:0",
        "--quota-by-header",
        "--store",
        &format!("sqlite:{folder}/tasks.db"),
        "--tool-concurrency",
        "sleep=2",
        "--ttl",
        "5",
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect();
    assert_eq!(
        argv, want,
        "the file's ttl is left out: the command line gives it"
    );
}

#[test]
fn a_bad_key_or_value_is_refused_at_its_line() {
    let cases = [
        (
            "http = \"127.0.0.1:0\"\n\nmax-runing = 4\n",
            3,
            "unknown key `max-runing`",
        ),
        (
            "ttl = \"soon\"\n",
            1,
            "invalid value 'soon' for '--ttl <SECS>'",
        ),
        (
            "http = [\"a\", \"b\"]\n",
            1,
            "`http` takes one value, not a list",
        ),
        ("stdio = \"yes\"\n", 1, "`stdio` is true or false"),
        ("config = \"other.toml\"\n", 1, "unknown key `config`"),
        ("ttl = 5\nttl = 6\n", 2, "duplicate key"),
        (
            "separator = \"--\"\n",
            1,
            "`separator` applies to [[upstream]] entries",
        ),
    ];
    for (text, line, message) in cases {
        let (_dir, path) = file(text);
        let error = expanded(&path, &[])
            .and_then(|_| {
                let file = ConfigFile::read(&path)?;
                read_gateway(&file).map(|_| Vec::<String>::new())
            })
            .unwrap_err();
        assert_eq!(error.line, Some(line), "{text:?}: {error}");
        assert!(
            error.to_string().contains(message),
            "{text:?}: {error} (wanted {message:?})"
        );
        assert!(
            error
                .to_string()
                .starts_with(&format!("{}:{line}: ", path.display()))
        );
    }
}

const TEAM: &str = r#"
separator = "."
store = "memory"

[[upstream]]
name = "files"
command = "npx files-server"
env = { ROOT = "/srv" }
prefix = false
tasks = { read = "forbidden" }
tasks-default = "required"
connections = 3
call-timeout = 2.5
deny-tools = ["delete*"]
breaker-failures = 2
breaker-cool-down = 10
rerun-on-restart = ["read*", "list"]

[[upstream]]
name = "search"
url = "http://127.0.0.1:9/mcp"
headers = { "X-Api-Key" = "k" }
rerun-on-restart = true
labels = ["alice", "ops"]
identity = "label"
identity-header = "X-User"
identity-values = { alice = "u-1" }

[[upstream.access]]
tools = ["reindex"]
labels = ["ops"]
"#;

#[test]
fn upstream_entries_become_the_gateway_config() {
    let (_dir, path) = file(TEAM);
    let config = read_gateway(&ConfigFile::read(&path).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(config.separator, ".");
    let [files, search] = &config.upstreams[..] else {
        panic!("two upstreams: {config:?}");
    };
    assert_eq!(
        files.upstream,
        Upstream::command("npx files-server").with_env("ROOT", "/srv")
    );
    assert!(!files.prefixed);
    assert_eq!(files.denied_tools, ["delete*"]);
    assert_eq!(files.call_timeout, Some(Duration::from_millis(2500)));
    assert_eq!(
        files.breaker,
        CircuitBreaker::new(2, Duration::from_secs(10))
    );
    assert_eq!(
        files.options,
        GatewayOptions::default()
            .with_default_policy(mcp_tasks::server::TaskPolicy::Required)
            .with_tool_policy("read", mcp_tasks::server::TaskPolicy::Forbidden)
            .with_max_upstream_connections(3)
            .with_rerun_on_restart(["read*", "list"])
    );
    assert_eq!(search.options.rerun_on_restart, ["*"]);
    assert_eq!(
        search.upstream,
        Upstream::url("http://127.0.0.1:9/mcp").with_header("X-Api-Key", "k")
    );
    assert_eq!(
        search.labels.as_deref(),
        Some(&["alice".to_owned(), "ops".to_owned()][..])
    );
    assert_eq!(search.tool_labels.len(), 1);
    assert_eq!(
        search.identity,
        Identity::label_header("X-User").with_values([("alice", "u-1")])
    );
    // The flags of the same file are the top-level keys only.
    let argv = expanded(&path, &[]).unwrap();
    assert_eq!(argv[4..], ["--store", "memory"]);
}

#[test]
fn an_entry_that_cannot_be_served_is_refused_at_its_line() {
    let entry = |body: &str| format!("store = \"memory\"\n\n[[upstream]]\nname = \"a\"\n{body}");
    let cases = [
        (
            "command = \"x\"\nurl = \"http://h/mcp\"\n",
            Some(3),
            "not both",
        ),
        ("\n", Some(3), "give `command`"),
        (
            "command = \"x\"\nheaders = { A = \"b\" }\n",
            Some(3),
            "`headers` apply to a `url`",
        ),
        (
            "command = \"x\"\nidentity = \"passthrough\"\n",
            Some(3),
            "a `url` upstream only",
        ),
        (
            "url = \"http://h/mcp\"\nidentity = \"label\"\n",
            Some(3),
            "needs `identity-header`",
        ),
        (
            "command = \"x\"\nidentity = \"me\"\n",
            Some(3),
            "unknown identity \"me\"",
        ),
        (
            "command = \"x\"\ncall-timeout = 0\n",
            Some(3),
            "more than 0",
        ),
        (
            "command = \"x\"\ntasks = { t = \"maybe\" }\n",
            Some(3),
            "unknown task policy",
        ),
        (
            "command = \"x\"\ncomand = \"y\"\n",
            Some(6),
            "unknown field `comand`",
        ),
        (
            "command = \"x\"\nconnections = \"four\"\n",
            Some(6),
            "invalid type",
        ),
        (
            "command = \"x\"\n[[upstream]]\nname = \"a\"\ncommand = \"y\"\n",
            None,
            "\"a\"",
        ),
    ];
    for (body, line, message) in cases {
        let text = entry(body);
        let (_dir, path) = file(&text);
        let error = read_gateway(&ConfigFile::read(&path).unwrap()).unwrap_err();
        assert_eq!(error.line, line, "{text}: {error}");
        assert!(
            error.to_string().contains(message),
            "{text}: {error} (wanted {message:?})"
        );
    }
}

#[test]
fn rerun_on_restart_is_true_false_or_glob_patterns() {
    let entry = |value: &str| {
        format!("[[upstream]]\nname = \"a\"\ncommand = \"x\"\nrerun-on-restart = {value}\n")
    };
    let (_dir, path) = file(&entry("false"));
    let config = read_gateway(&ConfigFile::read(&path).unwrap())
        .unwrap()
        .unwrap();
    assert!(config.upstreams[0].options.rerun_on_restart.is_empty());
    for (value, wanted) in [
        ("\"yes\"", "rerun-on-restart"),
        (
            "[\"a[\"]",
            "the rerun-on-restart pattern \"a[\" is not a glob",
        ),
    ] {
        let (_dir, path) = file(&entry(value));
        let error = read_gateway(&ConfigFile::read(&path).unwrap()).unwrap_err();
        assert!(error.to_string().contains(wanted), "{value}: {error}");
    }
}

#[test]
fn the_example_file_is_served_as_written() {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/gateway.toml"
    ));
    let config = read_gateway(&ConfigFile::read(path).unwrap())
        .unwrap()
        .unwrap();
    let names: Vec<&str> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["everything", "jobs"]);
    let argv = expanded(path, &[]).unwrap();
    assert!(argv.contains(&"--max-running".to_owned()), "{argv:?}");
}

#[test]
fn the_result_budget_is_bytes_or_a_size_with_its_unit() {
    for (value, arg) in [("\"16MiB\"", "16MiB"), ("65536", "65536"), ("0", "0")] {
        let (_dir, path) = file(&format!("max-result-bytes = {value}\n"));
        let argv = expanded(&path, &[]).unwrap();
        assert_eq!(
            argv[argv.len() - 2..],
            ["--max-result-bytes", arg],
            "{argv:?}"
        );
    }
    for value in ["\"16 MB\"", "\"lots\"", "\"99999999999999999999GiB\""] {
        let (_dir, path) = file(&format!("store = \"memory\"\nmax-result-bytes = {value}\n"));
        let error = expanded(&path, &[]).unwrap_err();
        assert_eq!(error.line, Some(2), "{value}: {error}");
        assert!(
            error
                .to_string()
                .contains("is not a size: give bytes, or N KiB, MiB or GiB"),
            "{value}: {error}"
        );
    }
}

#[test]
fn task_tools_are_on_for_true_a_list_or_a_string_and_off_for_false() {
    let flags = |text: &str| {
        let (_dir, path) = file(&format!("stdio = true\n{text}"));
        let argv = expanded(&path, &[]).unwrap();
        argv[4..].to_vec()
    };
    let want = |rest: &[&str]| -> Vec<String> {
        let mut want: Vec<String> = rest.iter().map(|arg| (*arg).to_owned()).collect();
        want.push("--stdio".to_owned());
        want.sort();
        want
    };
    let sorted = |mut argv: Vec<String>| {
        argv.sort();
        argv
    };
    assert_eq!(
        sorted(flags("task-tools = true\ntask-tools-wait = 2.5\n")),
        want(&["--task-tools", "--task-tools-wait", "2.5"])
    );
    assert_eq!(
        sorted(flags("task-tools = [\"sleep\", \"long_job\"]\n")),
        want(&["--task-tools=sleep,long_job"])
    );
    assert_eq!(
        sorted(flags("task-tools = \"sleep\"\n")),
        want(&["--task-tools=sleep"])
    );
    assert_eq!(sorted(flags("task-tools = false\n")), want(&[]));
    let (_dir, path) = file("stdio = true\ntask-tools = true\ntask-tools-wait = \"soon\"\n");
    let error = expanded(&path, &[]).unwrap_err().to_string();
    assert!(
        error.contains(":3:") && error.contains("seconds"),
        "{error}"
    );
}
