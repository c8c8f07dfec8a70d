//! RFC 3339 timestamps read, with `Z` or a numeric offset: the one parser every layer uses
//! (A2A's `ListTasks` filter, a legacy upstream's `sunset`).

use std::time::SystemTime;

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// An RFC 3339 date-time (`2026-01-02T03:04:05Z`, `…+02:00`, fractions of a second allowed).
pub(crate) fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    OffsetDateTime::parse(s.trim(), &Rfc3339)
        .ok()
        .map(SystemTime::from)
}

/// An RFC 3339 full-date (`2026-01-02`, midnight UTC) or date-time.
pub(crate) fn parse_date_or_time(s: &str) -> Option<SystemTime> {
    let s = s.trim();
    if s.len() == 10 {
        return parse_rfc3339(&format!("{s}T00:00:00Z"));
    }
    parse_rfc3339(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn offsets_and_fractions_read_as_one_instant() {
        let z = parse_rfc3339("2026-01-02T03:04:05Z").unwrap();
        assert_eq!(parse_rfc3339("2026-01-02T05:04:05+02:00"), Some(z));
        assert_eq!(parse_rfc3339("2026-01-02T01:04:05-02:00"), Some(z));
        assert_eq!(parse_rfc3339("2026-01-02T03:04:05.000000+00:00"), Some(z));
        assert_eq!(
            parse_rfc3339("2026-01-02T03:04:05.25Z"),
            Some(z + Duration::from_millis(250))
        );
        assert_eq!(
            z.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs(),
            1_767_323_045
        );
    }

    #[test]
    fn a_date_is_midnight_utc_and_garbage_is_none() {
        assert_eq!(
            parse_date_or_time("2026-01-02"),
            parse_rfc3339("2026-01-02T00:00:00Z")
        );
        assert_eq!(parse_rfc3339("2026-01-02"), None);
        assert_eq!(parse_date_or_time("someday"), None);
        assert_eq!(parse_rfc3339("2026-13-02T00:00:00Z"), None);
    }
}
