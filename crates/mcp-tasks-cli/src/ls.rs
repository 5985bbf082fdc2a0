//! `mcp-tasks ls`: the tasks of the journal, newest first, with their
//! status as last seen or, with `--refresh`, as their servers say now.

use std::process::ExitCode;

use serde_json::Value;

use crate::connect::{self, Target};
use crate::layout::{self, Fit};
use crate::output::code;
use crate::{LsArgs, headers_of, inapplicable, journal, signin, usage};

/// `mcp-tasks ls`.
pub(crate) async fn run(args: LsArgs) -> ExitCode {
    if let Err(why) = inapplicable::ls_flags(&args) {
        return usage(why);
    }
    let opened = match args.journal.open().await {
        Ok(Some(opened)) => opened,
        Ok(None) => return usage("ls lists the journal, and --no-journal turns it off"),
        Err(error) => return usage(error),
    };
    let options = match headers_of(&args.headers) {
        Ok(headers) => args.journal.beside(connect::HttpOptions {
            headers,
            resolve: Vec::new(),
            // The kept OAuth tokens: no sign-in while listing.
            oauth: signin::OAuthOptions::kept_only().ok(),
        }),
        Err(exit) => return exit,
    };
    let entries = match mcp_tasks::client::journal::Journal::list(&*opened).await {
        Ok(entries) => entries,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(code::PROTOCOL);
        }
    };
    let mut shown = Vec::new();
    for mut entry in entries {
        if args.refresh && !entry.is_finished() {
            entry.status = refreshed(&entry, &options, &opened).await;
        }
        if args.all || !entry.is_finished() {
            shown.push(entry);
        }
    }
    let now = mcp_tasks::UnixMillis::now();
    if args.json {
        let rows: Vec<Value> = shown
            .iter()
            .map(|entry| {
                serde_json::json!({
                    "taskId": entry.task_id.expose(),
                    "server": entry.server.to_string(),
                    "tool": entry.tool,
                    "status": journal::status_of(entry),
                    "createdAt": entry.created_at.as_millis(),
                })
            })
            .collect();
        println!("{}", Value::Array(rows));
    } else if shown.is_empty() {
        eprintln!(
            "no {}tasks in the journal",
            if args.all { "" } else { "unfinished " }
        );
    } else {
        let header = ["STATUS", "AGE", "TOOL", "SERVER", "TASK"].map(str::to_owned);
        let rows = std::iter::once(header.to_vec()).chain(shown.iter().map(|entry| {
            vec![
                journal::status_of(entry).to_string(),
                journal::age(entry.created_at, now),
                entry.tool.clone(),
                entry.server.to_string(),
                entry.task_id.expose().to_owned(),
            ]
        }));
        // The id last and whole (to be copied); a tool or a server past
        // any sensible width is cut (`--json` has them whole).
        let fits = [Fit::Cut(16), Fit::Cut(6), Fit::Cut(40), Fit::Cut(60)];
        for line in layout::columns(&rows.collect::<Vec<_>>(), &fits) {
            println!("{line}");
        }
    }
    ExitCode::SUCCESS
}

/// The status of `entry` as its server says now (recorded in the journal),
/// or as last seen when the server cannot be asked.
async fn refreshed(
    entry: &mcp_tasks::client::journal::TaskRef,
    options: &connect::HttpOptions,
    journal: &std::sync::Arc<mcp_tasks_sqlite::SqliteJournal>,
) -> mcp_tasks::TaskStatus {
    let Some(target) = journal::target_of(&entry.server) else {
        return entry.status.clone();
    };
    // The headers are for the servers reached by URL: a child process has none.
    let child = connect::HttpOptions::default();
    let options = match target {
        Target::Url(_) => options,
        Target::Stdio(_) => &child,
    };
    let Ok(client) = connect::connect(&target, options, Some(journal.clone())).await else {
        return entry.status.clone();
    };
    let status = match client.get(&entry.task_id).await {
        Ok(state) => state.status,
        // Expired and purged, or not this caller's (another --header).
        Err(error) if error.is_unknown_task() => mcp_tasks::TaskStatus::from_wire("gone"),
        Err(_) => entry.status.clone(),
    };
    client.close().await;
    status
}
