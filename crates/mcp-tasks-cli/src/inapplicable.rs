//! The client commands' flags that cannot apply to the command as given,
//! refused before anything is sent (exit 64) with a sentence naming the
//! flag and why: a flag that parsed and then did nothing would let its
//! author believe it did something (a header meant for the server, a
//! sign-in option). Contradictions clap can state alone are its own
//! (`conflicts_with`, `requires`); these need the values, or the server a
//! task was found on in the journal. `serve` has its own list
//! (`serve/command.rs`, `refuse_inapplicable`), `admin` its own
//! (`admin/mod.rs`); docs/cli.md lists them all, and `tests/it/flags.rs`
//! runs each.

use std::net::IpAddr;

use crate::connect::Target;
use crate::{CallArgs, LsArgs, ServerArgs};

/// Refuses what of `server` cannot reach the server of `target` (given
/// with `--url` or `--stdio`, or found in the journal): HTTP and sign-in
/// flags for a child process, a `--resolve` for a host the URL does not
/// name, sign-in flags beside a token given as a header, and a browser
/// option for a machine's sign-in. `resolve` is `--resolve`, parsed.
pub(crate) fn server_flags(
    server: &ServerArgs,
    target: &Target,
    resolve: &[(String, IpAddr)],
) -> Result<(), String> {
    let sign_in = server.oauth.given();
    match target {
        Target::Stdio(_) => {
            let http = [
                (
                    !server.headers.is_empty(),
                    "--header",
                    "has no HTTP headers",
                ),
                (
                    !server.resolve.is_empty(),
                    "--resolve",
                    "is not connected to by name",
                ),
            ];
            let refused = http
                .into_iter()
                .filter(|(given, _, _)| *given)
                .map(|(_, flag, why)| (flag, why))
                .chain(sign_in.iter().map(|&flag| (flag, "is not signed in to")))
                .next();
            if let Some((flag, why)) = refused {
                return Err(format!(
                    "{flag} applies to a server reached by URL (--url); this server is a command \
                     run on stdio, which {why}"
                ));
            }
        }
        Target::Url(url) => {
            if let Some(host) = host_of(url)
                && let Some((name, address)) = resolve
                    .iter()
                    .find(|(name, _)| !name.eq_ignore_ascii_case(&host))
            {
                return Err(format!(
                    "--resolve {name}={address} names a host that {url} does not (its host is \
                     {host}): no connection would use it"
                ));
            }
            let own_token = server.headers.iter().any(|header| {
                header
                    .split_once(':')
                    .is_some_and(|(name, _)| name.trim().eq_ignore_ascii_case("authorization"))
            });
            if let (true, Some(flag)) = (own_token, sign_in.first()) {
                return Err(format!(
                    "{flag} is for signing in, and --header 'Authorization: ...' gives the token \
                     itself, so no sign-in happens: give one or the other"
                ));
            }
        }
    }
    if server.oauth.machine() && sign_in.contains(&"--oauth-timeout") {
        return Err("--oauth-timeout bounds a sign-in in the browser, and \
                    --oauth-client-credentials signs in without one"
            .to_owned());
    }
    Ok(())
}

/// The host of `url`, in lower case.
fn host_of(url: &str) -> Option<String> {
    reqwest::Url::parse(url)
        .ok()?
        .host_str()
        .map(str::to_ascii_lowercase)
}

/// Refuses what of `call`'s own flags cannot apply: how to wait, without a
/// wait. (`--input` and `--answer` apply all the same: they answer the
/// input a server asks for before it makes the task.)
pub(crate) fn call_flags(args: &CallArgs) -> Result<(), String> {
    let wait_only = [
        (args.detach, "--detach", "says what Ctrl-C does to a wait"),
        (
            args.input.listen,
            "--listen",
            "chooses how a wait hears its task",
        ),
        (
            args.input.poll,
            "--poll",
            "chooses how a wait hears its task",
        ),
    ];
    match wait_only.iter().find(|(given, _, _)| *given) {
        Some((_, flag, what)) if args.no_wait => Err(format!(
            "{flag} {what}, and --no-wait does not wait: it prints the task id once the task \
             exists"
        )),
        _ => Ok(()),
    }
}

/// Refuses what of `ls`'s flags cannot apply: headers for requests that
/// are not made.
pub(crate) fn ls_flags(args: &LsArgs) -> Result<(), String> {
    if !args.headers.is_empty() && !args.refresh {
        return Err(
            "--header goes with the requests of --refresh; without it ls reads the \
                    journal alone and asks no server"
                .to_owned(),
        );
    }
    Ok(())
}
