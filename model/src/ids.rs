//! Validated identifiers: cluster ids, application names, versions, and the DNS-label rule they share.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why an identifier was rejected. The message always quotes the offending value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{what} is empty")]
    Empty { what: &'static str },
    #[error("{what} {value:?} is too long: {len} characters, at most {max}")]
    TooLong {
        what: &'static str,
        value: String,
        len: usize,
        max: usize,
    },
    #[error("{what} {value:?} has {found:?} at position {position}; allowed are {allowed}")]
    BadCharacter {
        what: &'static str,
        value: String,
        found: char,
        position: usize,
        allowed: &'static str,
    },
    #[error("{what} {value:?} must start and end with a lowercase letter or digit")]
    BadEdge { what: &'static str, value: String },
}

const DNS_ALLOWED: &str = "lowercase letters a-z, digits 0-9 and '-'";
const ID_ALLOWED: &str = "lowercase letters a-z, digits 0-9, '-' and '.'";

/// Checks a Kubernetes DNS-1123 label (namespaces, object names): 1 to 63 characters of
/// `[a-z0-9-]`, starting and ending alphanumeric. `what` names the value in the error.
pub fn validate_dns_label(what: &'static str, value: &str) -> Result<(), IdError> {
    check_dns_label(what, value, 63)
}

/// Checks the Kubernetes DNS-1123 label rule (also used for group path segments and
/// environments): 1 to `max` characters of `[a-z0-9-]`, starting and ending alphanumeric.
pub(crate) fn check_dns_label(what: &'static str, value: &str, max: usize) -> Result<(), IdError> {
    check_token(
        what,
        value,
        max,
        |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-',
        DNS_ALLOWED,
    )
}

/// The first 40 characters of a value and `…`, so an error about a huge value stays readable.
pub(crate) fn abbreviate(value: &str) -> String {
    match value.char_indices().nth(40) {
        Some((at, _)) => format!("{}…", &value[..at]),
        None => value.to_owned(),
    }
}

fn check_token(
    what: &'static str,
    value: &str,
    max: usize,
    allowed: impl Fn(char) -> bool,
    allowed_text: &'static str,
) -> Result<(), IdError> {
    if value.is_empty() {
        return Err(IdError::Empty { what });
    }
    let len = value.chars().count();
    if len > max {
        return Err(IdError::TooLong {
            what,
            value: abbreviate(value),
            len,
            max,
        });
    }
    if let Some((position, found)) = value.chars().enumerate().find(|(_, c)| !allowed(*c)) {
        return Err(IdError::BadCharacter {
            what,
            value: value.to_owned(),
            found,
            position,
            allowed: allowed_text,
        });
    }
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !edge_ok(value.chars().next()) || !edge_ok(value.chars().last()) {
        return Err(IdError::BadEdge {
            what,
            value: value.to_owned(),
        });
    }
    Ok(())
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(value: String) -> Result<Self, IdError> {
                Self::parse(&value)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl std::str::FromStr for $name {
            type Err = IdError;
            fn from_str(value: &str) -> Result<Self, IdError> {
                Self::parse(value)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

string_id!(
    /// A cluster's unique id: 1 to 128 characters of `[a-z0-9.-]`, starting and ending
    /// alphanumeric (a DNS-1123 subdomain, so it can name Kubernetes objects and files).
    ClusterId
);

impl ClusterId {
    pub const MAX_LEN: usize = 128;

    pub fn parse(value: &str) -> Result<Self, IdError> {
        check_token(
            "cluster id",
            value,
            Self::MAX_LEN,
            |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.',
            ID_ALLOWED,
        )?;
        Ok(ClusterId(value.to_owned()))
    }
}

string_id!(
    /// An application's name: a DNS-1123 label (1 to 63 characters of `[a-z0-9-]`), because it
    /// names the reconciler objects the renderer emits.
    AppName
);

impl AppName {
    pub const MAX_LEN: usize = 63;

    pub fn parse(value: &str) -> Result<Self, IdError> {
        check_dns_label("app name", value, Self::MAX_LEN)?;
        Ok(AppName(value.to_owned()))
    }
}

string_id!(
    /// An application version as the platform repo states it (`1.4.2`, `v2.0.0-rc.1`, a commit):
    /// 1 to 128 printable ASCII characters without spaces.
    Version
);

impl Version {
    pub const MAX_LEN: usize = 128;

    pub fn parse(value: &str) -> Result<Self, IdError> {
        check_token(
            "version",
            value,
            Self::MAX_LEN,
            |c| c.is_ascii_graphic(),
            "printable ASCII characters without spaces",
        )
        .or_else(|err| match err {
            // A version may start or end with any printable character (`v1`, `1.0+build`).
            IdError::BadEdge { .. } => Ok(()),
            other => Err(other),
        })?;
        Ok(Version(value.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use expect_test::{expect, Expect};

    use super::*;

    fn check_cluster(input: &str, expect: Expect) {
        let actual = match ClusterId::parse(input) {
            Ok(id) => format!("ok {id}"),
            Err(err) => format!("error: {err}"),
        };
        expect.assert_eq(&actual);
    }

    #[test]
    fn cluster_ids() {
        check_cluster("store-berlin-0042", expect!["ok store-berlin-0042"]);
        check_cluster("ship.north-sea.7", expect!["ok ship.north-sea.7"]);
        check_cluster("a", expect!["ok a"]);
        check_cluster("", expect!["error: cluster id is empty"]);
        check_cluster(
            "Store-1",
            expect![[
                r#"error: cluster id "Store-1" has 'S' at position 0; allowed are lowercase letters a-z, digits 0-9, '-' and '.'"#
            ]],
        );
        check_cluster(
            "bérlin",
            expect![[
                r#"error: cluster id "bérlin" has 'é' at position 1; allowed are lowercase letters a-z, digits 0-9, '-' and '.'"#
            ]],
        );
        check_cluster(
            "store 1",
            expect![[
                r#"error: cluster id "store 1" has ' ' at position 5; allowed are lowercase letters a-z, digits 0-9, '-' and '.'"#
            ]],
        );
        check_cluster(
            "-edge",
            expect![[
                r#"error: cluster id "-edge" must start and end with a lowercase letter or digit"#
            ]],
        );
        check_cluster(
            "edge.",
            expect![[
                r#"error: cluster id "edge." must start and end with a lowercase letter or digit"#
            ]],
        );
        check_cluster(
            &"x".repeat(129),
            expect![[
                r#"error: cluster id "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…" is too long: 129 characters, at most 128"#
            ]],
        );
    }

    #[test]
    fn app_names_are_dns_labels() {
        assert!(AppName::parse("payments-api").is_ok());
        assert_eq!(
            AppName::parse("payments.api").unwrap_err().to_string(),
            r#"app name "payments.api" has '.' at position 8; allowed are lowercase letters a-z, digits 0-9 and '-'"#
        );
        assert!(AppName::parse(&"a".repeat(64)).is_err());
    }

    #[test]
    fn versions() {
        assert!(Version::parse("v2.0.0-rc.1+build.7").is_ok());
        assert!(Version::parse("-weird-").is_ok());
        assert_eq!(
            Version::parse("").unwrap_err().to_string(),
            "version is empty"
        );
        assert_eq!(
            Version::parse("1.0 beta").unwrap_err().to_string(),
            r#"version "1.0 beta" has ' ' at position 3; allowed are printable ASCII characters without spaces"#
        );
    }

    #[test]
    fn serde_rejects_invalid_ids() {
        let err = serde_json::from_str::<ClusterId>("\"NOPE\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains(r#"cluster id "NOPE""#), "{err}");
        let ok: ClusterId = serde_json::from_str("\"edge-1\"").unwrap();
        assert_eq!(ok.as_str(), "edge-1");
    }
}
