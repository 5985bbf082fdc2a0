//! What a checked token says: whose it is and which scopes it carries.

use crate::server::auth::principal::Principal;

/// A token found good.
#[derive(Debug, Clone)]
pub(super) struct Verified {
    /// `oauth:` + issuer + `#` + subject.
    pub(super) principal: Principal,
    /// The scopes it carries.
    pub(super) scopes: Vec<String>,
    /// When it stops being good, in seconds since the epoch.
    pub(super) expires_at: u64,
}

/// The principal of the subject `sub` of `issuer`: the same for every token
/// the issuer gives that subject (so a user's tasks stay theirs across
/// refreshes and devices), and never a token-file label (those have no `:`).
pub(super) fn principal_of(issuer: &str, sub: &str) -> Principal {
    let mut name = String::with_capacity(7 + issuer.len() + sub.len());
    name.push_str("oauth:");
    name.push_str(issuer);
    name.push('#');
    name.push_str(sub);
    Principal::new(name)
}

/// The scopes of a `scope` claim (space-separated) or an `scp` one (a
/// list, as some providers send).
pub(super) fn scopes_of(scope: Option<&str>, scp: Option<&[String]>) -> Vec<String> {
    let mut scopes: Vec<String> = scope
        .map(|text| text.split_ascii_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    if let Some(list) = scp {
        scopes.extend(list.iter().cloned());
    }
    scopes
}

/// Seconds since the epoch now.
pub(super) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}
