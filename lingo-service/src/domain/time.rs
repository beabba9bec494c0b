//! Timestamps as the contract writes them: RFC 3339, UTC, whole seconds, with a `Z` (serde
//! helpers for the resources of this module tree).

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serializer;

pub fn rfc3339(at: &DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

pub fn serialize<S: Serializer>(at: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&rfc3339(at))
}

pub mod option {
    use super::*;

    pub fn serialize<S: Serializer>(
        at: &Option<DateTime<Utc>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match at {
            Some(at) => serializer.serialize_str(&rfc3339(at)),
            None => serializer.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_with_z_and_whole_seconds() {
        let at = DateTime::parse_from_rfc3339("2026-11-21T10:30:00.123456+01:00")
            .expect("valid")
            .with_timezone(&Utc);
        assert_eq!(rfc3339(&at), "2026-11-21T09:30:00Z");
    }
}
