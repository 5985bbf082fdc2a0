//! `mcp-tasks tools` and `mcp-tasks discover`: what a server offers (its
//! tools; its version, capabilities and task era), read once and printed.

use std::process::ExitCode;

use crate::layout::{self, Fit};
use crate::output::code;
use crate::{ServerArgs, connect_or_exit};

/// `tools`: the server's tools, one line each (or `--json`).
pub(crate) async fn tools(args: ServerArgs) -> ExitCode {
    let client = match connect_or_exit(&args).await {
        Ok(client) => client,
        Err(exit) => return exit,
    };
    let listed = client.running().list_all_tools().await;
    client.close().await;
    match listed {
        Ok(tools) => {
            if args.json {
                println!("{}", serde_json::json!({"tools": tools}));
            } else {
                // Names as wide as the longest (a gateway's prefixed ones
                // run past 30); a name is never cut, it is to be typed.
                let rows: Vec<Vec<String>> = tools
                    .iter()
                    .map(|tool| {
                        let description = tool.description.as_deref().unwrap_or("");
                        let first = description.lines().next().unwrap_or("");
                        vec![tool.name.to_string(), first.to_owned()]
                    })
                    .collect();
                for line in layout::columns(&rows, &[Fit::Whole(48)]) {
                    println!("{line}");
                }
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: tools/list failed: {error}");
            ExitCode::from(code::PROTOCOL)
        }
    }
}

/// `discover`: what the server says of itself and of tasks.
pub(crate) async fn discover(args: ServerArgs) -> ExitCode {
    let client = match connect_or_exit(&args).await {
        Ok(client) => client,
        Err(exit) => return exit,
    };
    let Some(info) = client.running().peer_info() else {
        eprintln!("error: the server sent no information about itself");
        return ExitCode::from(code::PROTOCOL);
    };
    let tasks = client.server_supports();
    let era = client.era();
    let methods = client.task_methods();
    let keys = client.server_honours_idempotency();
    client.close().await;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "protocolVersion": info.protocol_version,
                "capabilities": info.capabilities,
                "serverInfo": info.server_info,
                "instructions": info.instructions,
                "tasks": tasks,
                "taskEra": era.as_str(),
                "taskMethods": methods,
                "idempotencyKeys": keys,
            })
        );
    } else {
        if let Some(server) = &info.server_info {
            println!("server:           {} {}", server.name, server.version);
        }
        println!("protocol version: {}", info.protocol_version);
        let capabilities = serde_json::to_value(&info.capabilities).unwrap_or_default();
        println!("capabilities:     {capabilities}");
        println!(
            "tasks extension:  {}",
            if tasks { "supported" } else { "not supported" }
        );
        let era = match era {
            mcp_tasks::Era::Legacy => "2025-11-25 (experimental tasks, after initialize)",
            _ => "2026-07-28 (the Tasks extension)",
        };
        println!("task era:         {era}");
        let methods = match methods {
            Some(methods) if methods.is_empty() => "none".to_owned(),
            Some(methods) => methods.join(" "),
            None => "unknown".to_owned(),
        };
        println!("task methods:     {methods}");
        println!(
            "idempotency keys: {}",
            if keys {
                "honoured (a call whose answer was lost is sent again, and runs once)"
            } else {
                "not declared (a call whose answer was lost is not sent again)"
            }
        );
    }
    ExitCode::SUCCESS
}
