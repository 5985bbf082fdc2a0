//! The guides' commands against the real binary, so a guide cannot show a
//! command that does not exist: every `mcp-tasks` command line in a `sh`
//! block of the README, of `docs/` and of the CLI crate's README must name
//! a subcommand that `mcp-tasks --help` lists and only flags that
//! `mcp-tasks SUBCOMMAND --help` lists (a `--stdio 'mcp-tasks serve ...'`
//! value is checked the same way). And the CLI guide's first session runs
//! as it is written: its `serve` line, then its client block with `sh -e`
//! against it. (The deployment guide's nginx recipe runs in `deploy.rs`.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};

use mcp_tasks_testkit::serve::Served;

use crate::support::BIN;

/// Each guide that shows commands, with the fewest it shows (so a change
/// that stops this test from finding them fails too).
const GUIDES: &[(&str, &str, usize)] = &[
    ("README.md", include_str!("../../../../README.md"), 5),
    ("docs/cli.md", include_str!("../../../../docs/cli.md"), 15),
    (
        "docs/gateway.md",
        include_str!("../../../../docs/gateway.md"),
        4,
    ),
    (
        "docs/task-tools.md",
        include_str!("../../../../docs/task-tools.md"),
        3,
    ),
    (
        "docs/deployment.md",
        include_str!("../../../../docs/deployment.md"),
        1,
    ),
    (
        "docs/operator.md",
        include_str!("../../../../docs/operator.md"),
        1,
    ),
    (
        "crates/mcp-tasks-cli/README.md",
        include_str!("../../README.md"),
        5,
    ),
];

/// The `sh` blocks of a guide, in order.
fn sh_blocks(guide: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in guide.lines() {
        match &mut current {
            None if line.trim_start() == "```sh" => current = Some(String::new()),
            None => {}
            Some(_) if line.trim_start().starts_with("```") => {
                blocks.extend(current.take());
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    blocks
}

/// One piece of a shell line: a word (quotes removed; `quoted` when it was
/// in quotes) or what separates commands (`;`, `|`, `&`, `&&`, `$(`, `)`).
#[derive(Debug, PartialEq)]
enum Piece {
    Word { text: String, quoted: bool },
    Separator,
}

/// Splits a block into pieces as `sh` would, for what the guides show:
/// quotes, `#` comments, line continuations, and the separators above.
fn pieces(block: &str) -> Vec<Piece> {
    let mut words = Words::default();
    let mut chars = block.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'\n') => {
                chars.next();
            }
            '\'' | '"' => {
                words.open = true;
                words.quoted = true;
                for inner in chars.by_ref() {
                    if inner == c {
                        break;
                    }
                    words.text.push(inner);
                }
            }
            '#' if !words.open => {
                for rest in chars.by_ref() {
                    if rest == '\n' {
                        break;
                    }
                }
                words.separate();
            }
            '$' if chars.peek() == Some(&'(') => {
                chars.next();
                words.separate();
            }
            ';' | '|' | '&' | ')' | '\n' => words.separate(),
            c if c.is_whitespace() => words.end(),
            c => {
                words.open = true;
                words.text.push(c);
            }
        }
    }
    words.end();
    words.pieces
}

/// The pieces read so far and the word being read.
#[derive(Default)]
struct Words {
    pieces: Vec<Piece>,
    text: String,
    open: bool,
    quoted: bool,
}

impl Words {
    fn end(&mut self) {
        if self.open {
            self.pieces.push(Piece::Word {
                text: std::mem::take(&mut self.text),
                quoted: self.quoted,
            });
        }
        self.open = false;
        self.quoted = false;
    }

    fn separate(&mut self) {
        self.end();
        self.pieces.push(Piece::Separator);
    }
}

/// The `mcp-tasks` command lines of a block, as their words after
/// `mcp-tasks`, those inside quoted words (`--stdio 'mcp-tasks serve'`)
/// included.
fn commands(block: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut command: Vec<String> = Vec::new();
    for piece in pieces(block).into_iter().chain([Piece::Separator]) {
        match piece {
            Piece::Separator => {
                if command.first().is_some_and(|first| first == "mcp-tasks") {
                    found.push(command[1..].to_vec());
                }
                command.clear();
            }
            Piece::Word { text, quoted } => {
                if quoted && text.starts_with("mcp-tasks ") {
                    found.extend(commands(&text));
                }
                command.push(text);
            }
        }
    }
    found
}

/// The flags an option line of `--help` output names: `-v, --verbose...`
/// gives `-v` and `--verbose`.
fn flags_of_help(help: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    for line in help.lines() {
        let line = line.trim_start();
        if !line.starts_with('-') {
            continue;
        }
        let names = line.split("  ").next().unwrap_or_default();
        for name in names.split([',', ' ']) {
            // `--task-tools[=<TOOL,...>]`: a value that may be left out.
            let name = name.trim_end_matches("...");
            let name = name.split(['[', '=']).next().unwrap_or_default();
            if name.starts_with('-') {
                flags.insert(name.to_owned());
            }
        }
    }
    flags
}

fn help(args: &[&str]) -> String {
    let output = Command::new(BIN)
        .args(args)
        .arg("--help")
        .output()
        .expect("the binary runs");
    assert!(output.status.success(), "mcp-tasks {args:?} --help failed");
    String::from_utf8(output.stdout).expect("help is UTF-8")
}

/// The subcommands `mcp-tasks --help` lists.
fn subcommands() -> BTreeSet<String> {
    commands_of_help(&help(&[])).expect("mcp-tasks --help lists its commands")
}

/// The commands a `--help` output lists, if it lists any (`mcp-tasks
/// admin --help` lists `ls`, `show`, ...).
fn commands_of_help(help: &str) -> Option<BTreeSet<String>> {
    let listed = help
        .split("Commands:")
        .nth(1)
        .and_then(|rest| rest.split("Options:").next())?;
    Some(
        listed
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .map(str::to_owned)
            .collect(),
    )
}

#[test]
fn every_command_a_guide_shows_exists_with_the_flags_it_shows() {
    let known = subcommands();
    let global = flags_of_help(&help(&[]));
    let mut flags_of: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut wrong = Vec::new();
    for (name, guide, fewest) in GUIDES {
        let shown: Vec<Vec<String>> = sh_blocks(guide)
            .iter()
            .flat_map(|block| commands(block))
            .collect();
        assert!(
            shown.len() >= *fewest,
            "{name}: {} mcp-tasks commands found, at least {fewest} expected: {shown:?}",
            shown.len()
        );
        for words in shown {
            let mut words = words.iter().skip_while(|word| global.contains(*word));
            let Some(subcommand) = words.next() else {
                wrong.push(format!("{name}: `mcp-tasks` with no command"));
                continue;
            };
            if !known.contains(subcommand) {
                wrong.push(format!("{name}: `mcp-tasks {subcommand}`: no such command"));
                continue;
            }
            // A command with commands of its own (`admin ls`): its flags
            // are the inner command's.
            let mut path = vec![subcommand.as_str()];
            let mut words = words.peekable();
            while let Some(inner) = commands_of_help(&help(&path))
                && let Some(next) = words.peek()
                && inner.contains(*next)
            {
                path.push(words.next().expect("peeked").as_str());
            }
            let flags = flags_of
                .entry(path.join(" "))
                .or_insert_with(|| flags_of_help(&help(&path)));
            for word in words.take_while(|word| *word != "--") {
                let flag = word.split('=').next().unwrap_or(word);
                let is_flag = flag.starts_with('-') && flag != "-" && !flag.starts_with("-$");
                if is_flag && !flags.contains(flag) {
                    wrong.push(format!(
                        "{name}: `mcp-tasks {} {flag}`: no such flag",
                        path.join(" ")
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the guides show what the binary does not have:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_parser_of_guides_finds_commands_where_sh_would() {
    let found = commands(
        "id=$(mcp-tasks call --url URL sleep --no-wait)   # a comment, mcp-tasks ls\n\
         mcp-tasks get \"$id\"; echo \"$id\" | mcp-tasks cancel -\n\
         mcp-tasks serve --http 127.0.0.1:8080 \\\n  --store memory &\n\
         mcp-tasks call --stdio 'mcp-tasks serve --stdio' confirm_action\n",
    );
    let words = |line: &str| line.split(' ').map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        found,
        [
            words("call --url URL sleep --no-wait"),
            words("get $id"),
            words("cancel -"),
            words("serve --http 127.0.0.1:8080 --store memory"),
            words("serve --stdio"),
            vec![
                "call".to_owned(),
                "--stdio".to_owned(),
                "mcp-tasks serve --stdio".to_owned(),
                "confirm_action".to_owned(),
            ],
        ]
    );
    // A flag no command has is found wanting.
    assert!(!flags_of_help(&help(&["call"])).contains("--no-such-flag"));
    assert!(flags_of_help(&help(&["call"])).contains("--no-wait"));
}

/// The CLI guide's first session, as written: its server block (on a free
/// port instead of 8080, with the user's data directory in a temp dir, so
/// the default SQLite store is a fresh file), then its client block under
/// `sh -e`, with `mcp-tasks` on the PATH and a journal of its own.
#[test]
fn the_first_session_of_the_cli_guide_runs_as_written() {
    let guide = GUIDES[1].1;
    let start = guide
        .find("## A first session")
        .expect("docs/cli.md has a first session");
    let blocks = sh_blocks(&guide[start..]);
    let (server_block, client_block) = (&blocks[0], &blocks[1]);
    let shown_address = "127.0.0.1:8080";
    let server = commands(server_block);
    assert_eq!(server.len(), 1, "one serve line: {server_block}");
    assert!(
        server[0].contains(&shown_address.to_owned()),
        "{server_block}"
    );

    let home = tempfile::tempdir().expect("a temp dir");
    let args = server[0].iter().map(|word| {
        if word == shown_address {
            "127.0.0.1:0"
        } else {
            word.as_str()
        }
    });
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env("HOME", home.path())
        .env("XDG_DATA_HOME", home.path().join("data"));
    let serve = Served::command(command, None);
    let url = serve.url.as_str();
    // Its default store: a SQLite file in the (temporary) data directory.
    assert!(
        walk(&home.path().join("data"))
            .iter()
            .any(|file| file.ends_with("mcp-tasks/tasks.db")),
        "serve made no SQLite file in the data directory: {:?}",
        walk(&home.path().join("data"))
    );

    let shown_url = format!("http://{shown_address}/mcp");
    assert!(client_block.contains(&shown_url), "{client_block}");
    let script = client_block.replace(&shown_url, url);
    let bin_dir = Path::new(BIN).parent().expect("the binary's folder");
    let path = std::env::join_paths(std::iter::once(bin_dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("a PATH");
    let output = Command::new("sh")
        .args(["-e", "-c", &script])
        .env("PATH", path)
        .env("HOME", home.path())
        .env("XDG_DATA_HOME", home.path().join("data"))
        .env("MCP_TASKS_JOURNAL", home.path().join("journal.sqlite3"))
        .stdin(Stdio::null())
        .output()
        .expect("sh runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Every line ran (`sh -e` stops at the first that fails), and the last,
    // the cancel, says the task was cancelled: exit 3.
    assert_eq!(
        output.status.code(),
        Some(3),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    // The tools, long_job's result, the form answered, the sleeping task
    // (get's state line, then the journal's list), the cancel's outcome:
    // all on stdout, each a result.
    for shown in [
        "long_job",
        "done: 3 steps",
        "confirmed: ",
        "\nworking\n",
        "STATUS",
        "sleep",
        url,
        "\ncancelled by the caller\n",
    ] {
        assert!(
            stdout.contains(shown),
            "{shown:?} not in stdout: {stdout}\nstderr: {stderr}"
        );
    }
}

/// The files under `dir`, as paths.
fn walk(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path.display().to_string());
        }
    }
    files
}
