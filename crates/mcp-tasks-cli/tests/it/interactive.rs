//! A person at a terminal: the binary prompts for an elicitation form in a
//! pseudo-terminal, and `--input accept|decline` answer without one.

use crate::support::{bin, json_of, run, stdio_server};

/// Types `text` (rexpect buffers until a flush; Enter is "\r").
fn keys(pty: &mut rexpect::session::PtySession, text: &str) {
    pty.send(text).expect("type");
    pty.flush().expect("flush");
}

#[test]
fn a_form_is_answered_at_the_terminal() {
    let server = stdio_server();
    let mut command = bin();
    command
        .args([
            "call",
            "--stdio",
            &server,
            "confirm_action",
            "--arg",
            "action=ship it",
        ])
        .env("NO_COLOR", "1");
    let mut pty = rexpect::session::spawn_command(command, Some(30_000)).expect("a pty");
    pty.exp_string("Confirm: ship it?")
        .expect("the server's message is shown");
    keys(&mut pty, "\r"); // fill in the form
    pty.exp_string("Confirm")
        .expect("the boolean field is asked");
    keys(&mut pty, "y\r");
    pty.exp_string("confirmed: ship it")
        .expect("the task completes with the answer");
    pty.exp_eof().expect("the command ends");
}

#[test]
fn accept_and_decline_without_a_terminal() {
    let server = stdio_server();
    let base = ["call", "--stdio", server.as_str()];
    let with = |rest: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(rest);
        json_of(&run(&args))
    };
    // --answer implies --input accept.
    let (exit, value) = with(&[
        "confirm_action",
        "--arg",
        "action=ship",
        "--answer",
        "confirm=true",
        "--json",
    ]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["result"]["content"][0]["text"], "confirmed: ship");
    let (exit, value) = with(&["confirm_action", "--input", "decline", "--json"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["result"]["content"][0]["text"], "not confirmed");
    // An --answer that names no field of any form is a usage error.
    let output = run(&[&base[..], &["confirm_action", "--answer", "nope=1"]].concat());
    assert_eq!(output.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&output.stderr).contains("nope"));
}
