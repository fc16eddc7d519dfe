//! Bearer-token files: what the collector's agent tokens and the hub's API tokens have in
//! common. Each service decides what an entry of its file means (a cluster an agent may report
//! for, a caller's role and scope); this module reads the file, keeps tokens as their SHA-256,
//! and reports problems the same way in both, at start and on every reload.
//!
//! A presented token is hashed and the digest looked up, so no comparison ever runs over the
//! token itself and none needs to be constant-time: the time a lookup takes depends only on the
//! digest, which a caller cannot steer towards a stored one. Tokens and digests never appear in
//! errors.

use std::path::{Path, PathBuf};
use std::time::Duration;

use fleetscope_serve::reload::{self, ReloadMetrics, Watch};
use sha2::{Digest, Sha256};

/// The shortest plain token accepted: shorter ones are guessable.
pub const MIN_TOKEN_LEN: usize = 16;

/// A token as it is kept and looked up: its SHA-256.
pub type TokenDigest = [u8; 32];

/// The SHA-256 of `token`.
pub fn digest(token: &str) -> TokenDigest {
    Sha256::digest(token.as_bytes()).into()
}

/// Why a `tokenSha256` value is not a digest. The value itself is not quoted: a file may put a
/// plain token there by mistake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HexDigestError {
    #[error("expected 64 hex digits, found {0} characters")]
    Length(usize),
    #[error("expected 64 hex digits, found another character at position {0}")]
    Character(usize),
}

/// Reads a SHA-256 written as 64 hex digits, in either case (`sha256sum` writes lower case,
/// other tools upper case).
pub fn parse_hex_digest(hex: &str) -> Result<TokenDigest, HexDigestError> {
    if hex.len() != 64 {
        return Err(HexDigestError::Length(hex.chars().count()));
    }
    if let Some(position) = hex.bytes().position(|b| !b.is_ascii_hexdigit()) {
        return Err(HexDigestError::Character(position));
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
        *byte = (hex_value(pair[0]) << 4) | hex_value(pair[1]);
    }
    Ok(out)
}

/// The value of one hex digit, already checked to be one.
fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        _ => digit - b'A' + 10,
    }
}

/// Why a token file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("reading token file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Every problem found in the file, each naming its entry and field.
    #[error("token file {}:\n  {}", path.display(), problems.join("\n  "))]
    Invalid {
        path: PathBuf,
        problems: Vec<String>,
    },
}

/// A token file's contents as text. A file that is not UTF-8 is one problem of the file, so it
/// is reported like the others.
pub fn text(bytes: &[u8]) -> Result<&str, Vec<String>> {
    std::str::from_utf8(bytes).map_err(|err| vec![format!("the file is not UTF-8: {err}")])
}

/// Reads the token file at `path` with `parse`, which returns every problem it finds.
pub fn load<T>(
    path: &Path,
    parse: impl FnOnce(&str) -> Result<T, Vec<String>>,
) -> Result<T, TokenFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(&text).map_err(|problems| TokenFileError::Invalid {
        path: path.to_owned(),
        problems,
    })
}

/// Like [`load`], with the version of the file read (see `fleetscope_serve::reload`), for
/// [`watch`]ing it from there on.
pub fn load_versioned<T>(
    path: &Path,
    parse: impl FnOnce(&str) -> Result<T, Vec<String>>,
) -> Result<(T, String), String> {
    let contents = reload::read(&[path.to_owned()]).map_err(|err| format!("token file: {err}"))?;
    let value = text(&contents.files[0])
        .and_then(parse)
        .map_err(|problems| {
            TokenFileError::Invalid {
                path: path.to_owned(),
                problems,
            }
            .to_string()
        })?;
    Ok((value, contents.version))
}

/// Reloads the token file at `path` when it changes or on SIGHUP, starting from `version` (what
/// [`load_versioned`] returned at start): a changed file that `parse` accepts is handed to
/// `apply`; one it refuses is logged, counted in `metrics`, and the tokens in force stay.
/// `what` names the file in logs.
pub fn watch<T, P, A>(
    what: &'static str,
    path: PathBuf,
    version: String,
    interval: Duration,
    metrics: ReloadMetrics,
    parse: P,
    apply: A,
) -> tokio::task::JoinHandle<()>
where
    T: Send + 'static,
    P: Fn(&str) -> Result<T, Vec<String>> + Send + 'static,
    A: Fn(T) + Send + 'static,
{
    Watch {
        what,
        paths: vec![path],
        interval,
        metrics,
    }
    .spawn(
        version,
        move |files| text(&files[0]).and_then(&parse),
        apply,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Accepts lines `name=token`, the least a parser needs to be one.
    fn parse_lines(text: &str) -> Result<Vec<(String, TokenDigest)>, Vec<String>> {
        let mut problems = Vec::new();
        let mut entries = Vec::new();
        for (index, line) in text.lines().enumerate() {
            match line.split_once('=') {
                Some((name, token)) => entries.push((name.to_owned(), digest(token))),
                None => problems.push(format!("line {}: expected name=token", index + 1)),
            }
        }
        if problems.is_empty() {
            Ok(entries)
        } else {
            Err(problems)
        }
    }

    #[test]
    fn hex_digests_are_read_in_either_case_and_refused_by_position() {
        // SHA-256 of "test".
        let lower = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        assert_eq!(parse_hex_digest(lower), Ok(digest("test")));
        assert_eq!(
            parse_hex_digest(&lower.to_ascii_uppercase()),
            Ok(digest("test"))
        );
        let short = parse_hex_digest("abc").unwrap_err();
        assert_eq!(
            short.to_string(),
            "expected 64 hex digits, found 3 characters"
        );
        let signed = format!("+f{}", &lower[2..]);
        assert_eq!(
            parse_hex_digest(&signed),
            Err(HexDigestError::Character(0)),
            "a sign is not a digit"
        );
        let wide = format!("é{}", &lower[2..]);
        assert_eq!(parse_hex_digest(&wide), Err(HexDigestError::Character(0)));
        let counted = format!("{}é", &lower[..61]);
        assert_eq!(
            parse_hex_digest(&counted).unwrap_err().to_string(),
            "expected 64 hex digits, found 62 characters"
        );
    }

    #[test]
    fn load_names_the_file_and_every_problem() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, "a=first-token-0123456789\nno separator\nalso none\n").unwrap();
        let err = load(&path, parse_lines).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "token file {}:\n  line 2: expected name=token\n  line 3: expected name=token",
                path.display()
            )
        );

        let missing = dir.path().join("absent");
        let err = load(&missing, parse_lines).unwrap_err();
        assert!(matches!(err, TokenFileError::Read { .. }), "{err:?}");
        assert!(
            err.to_string()
                .starts_with(&format!("reading token file {}: ", missing.display())),
            "{err}"
        );
    }

    #[test]
    fn load_versioned_gives_the_version_reload_computes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, "a=first-token-0123456789\n").unwrap();
        let (entries, version) = load_versioned(&path, parse_lines).unwrap();
        assert_eq!(
            entries,
            [("a".to_owned(), digest("first-token-0123456789"))]
        );
        assert_eq!(
            version,
            reload::read(std::slice::from_ref(&path)).unwrap().version
        );

        std::fs::write(&path, "bad\n").unwrap();
        assert_eq!(
            load_versioned(&path, parse_lines).unwrap_err(),
            format!(
                "token file {}:\n  line 1: expected name=token",
                path.display()
            )
        );
        std::fs::write(&path, b"a=\xff\n").unwrap();
        let err = load_versioned(&path, parse_lines).unwrap_err();
        assert!(
            err.starts_with(&format!(
                "token file {}:\n  the file is not UTF-8: ",
                path.display()
            )),
            "{err}"
        );
        let missing = dir.path().join("absent");
        let err = load_versioned(&missing, parse_lines).unwrap_err();
        assert!(
            err.starts_with(&format!("token file: reading {}: ", missing.display())),
            "{err}"
        );
    }
}
