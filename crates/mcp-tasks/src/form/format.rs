//! The string formats a form field may declare (`email`, `uri`, `date`,
//! `date-time`), checked without a regex engine.

use rmcp::model::StringFormat;

use super::ValueError;

/// Whether `text` is in `format`. A format this module does not know
/// (rmcp may add some) accepts every text.
pub(super) fn check(format: StringFormat, text: &str) -> Result<(), ValueError> {
    let ok = match format {
        StringFormat::Email => is_email(text),
        StringFormat::Uri => is_uri(text),
        StringFormat::Date => is_date(text),
        StringFormat::DateTime => is_date_time(text),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(ValueError::Format { format })
    }
}

/// `local@domain`: no spaces, a dotted domain of letters, digits and
/// hyphens (or an `[address literal]`).
fn is_email(text: &str) -> bool {
    let Some((local, domain)) = text.rsplit_once('@') else {
        return false;
    };
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && local.chars().all(|c| c.is_ascii_graphic() || !c.is_ascii())
        && !local.contains('@');
    let domain_ok = if let Some(literal) = domain.strip_prefix('[') {
        literal.ends_with(']') && literal.len() > 1
    } else {
        !domain.is_empty()
            && domain.len() <= 255
            && domain.split('.').all(|label| {
                !label.is_empty()
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label.chars().all(|c| c.is_alphanumeric() || c == '-')
            })
    };
    local_ok && domain_ok
}

/// An absolute URI (RFC 3986): `scheme:rest`, printable ASCII, valid
/// percent-escapes.
fn is_uri(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else {
        return false;
    };
    let mut scheme_chars = scheme.chars();
    let scheme_ok = scheme_chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && scheme_chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok || rest.is_empty() {
        return false;
    }
    let bytes = rest.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'%' => {
                let hex = |at: usize| bytes.get(at).is_some_and(u8::is_ascii_hexdigit);
                if !(hex(index + 1) && hex(index + 2)) {
                    return false;
                }
                index += 3;
                continue;
            }
            b if b.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=".contains(&b) => {}
            _ => return false,
        }
        index += 1;
    }
    // Not just an empty authority ("http://").
    rest != "//"
}

fn digits(text: &str, count: usize) -> Option<u32> {
    (text.len() == count && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// `YYYY-MM-DD` naming a real day.
fn is_date(text: &str) -> bool {
    let mut parts = text.split('-');
    let (Some(year), Some(month), Some(day), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let (Some(year), Some(month), Some(day)) = (digits(year, 4), digits(month, 2), digits(day, 2))
    else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// RFC 3339 `date-time`: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)`.
fn is_date_time(text: &str) -> bool {
    let Some((date, time)) = text.split_once(['T', 't']) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let (clock, offset) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, None)
    } else {
        let Some(at) = time.rfind(['+', '-']) else {
            return false;
        };
        (&time[..at], Some(&time[at + 1..]))
    };
    let (clock, fraction) = match clock.split_once('.') {
        Some((clock, fraction)) => (clock, Some(fraction)),
        None => (clock, None),
    };
    if fraction.is_some_and(|f| f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    let hms: Vec<&str> = clock.split(':').collect();
    let [hours, minutes, seconds] = hms[..] else {
        return false;
    };
    let clock_ok = digits(hours, 2).is_some_and(|h| h <= 23)
        && digits(minutes, 2).is_some_and(|m| m <= 59)
        && digits(seconds, 2).is_some_and(|s| s <= 60);
    let offset_ok = offset.is_none_or(|offset| {
        offset.split_once(':').is_some_and(|(hours, minutes)| {
            digits(hours, 2).is_some_and(|h| h <= 23) && digits(minutes, 2).is_some_and(|m| m <= 59)
        })
    });
    clock_ok && offset_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        for good in [
            "a@b.co",
            "first.last+tag@sub.example.org",
            "x@[127.0.0.1]",
            "ü@bücher.de",
        ] {
            assert!(is_email(good), "{good}");
        }
        for bad in [
            "", "a", "@b.c", "a@", "a b@c.d", "a@b..c", ".a@b.c", "a@-b.c", "a@b_c.d",
        ] {
            assert!(!is_email(bad), "{bad}");
        }
        for good in [
            "https://example.com",
            "mailto:a@b.c",
            "urn:isbn:0451450523",
            "file:///tmp/x",
            "http://h/%41",
        ] {
            assert!(is_uri(good), "{good}");
        }
        for bad in [
            "",
            "example.com",
            "1http://x",
            "http://",
            "http:",
            "http://x/%4",
            "http://x/ y",
            "http://x/ü",
        ] {
            assert!(!is_uri(bad), "{bad}");
        }
        for good in ["2024-02-29", "2000-02-29", "1999-12-31", "0001-01-01"] {
            assert!(is_date(good), "{good}");
        }
        for bad in [
            "1900-02-29",
            "2023-13-01",
            "2023-00-10",
            "2023-04-31",
            "23-01-01",
            "2023-01-01x",
            "2023/01/01",
        ] {
            assert!(!is_date(bad), "{bad}");
        }
        for good in [
            "2026-07-28T09:30:00Z",
            "2026-07-28t09:30:00.123z",
            "2026-07-28T23:59:60-05:30",
            "2026-07-28T00:00:00+00:00",
        ] {
            assert!(is_date_time(good), "{good}");
        }
        for bad in [
            "2026-07-28",
            "2026-07-28T09:30Z",
            "2026-07-28T09:30:00",
            "2026-07-28T09:30:00.Z",
            "2026-07-28T24:00:00Z",
            "2026-07-28T09:30:00+0200",
            "2026-02-30T09:30:00Z",
        ] {
            assert!(!is_date_time(bad), "{bad}");
        }
    }
}
