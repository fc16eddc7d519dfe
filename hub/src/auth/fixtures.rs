//! Tokens and a token file shared by the tests of the token file and of the middleware.

use sha2::{Digest, Sha256};

/// The token of `platform-admins` (role admin), given in the file by its digest.
pub(super) const ADMIN_TOKEN: &str = "admin-token-0123456789";
/// The token of `viewers` (role read), given in the file as itself.
pub(super) const READ_TOKEN: &str = "read-token-0123456789";
/// The token of `team-de` (role read, scope `emea/de`), given by its digest in capitals.
pub(super) const SCOPED_TOKEN: &str = "scoped-token-0123456789";

/// The SHA-256 of `token` as 64 lowercase hex digits.
pub(super) fn hex(token: &str) -> String {
    format!("{:x}", Sha256::digest(token.as_bytes()))
}

/// A token file with the three callers above.
pub(super) fn sample_file() -> String {
    format!(
        "tokens:
  - name: platform-admins
    tokenSha256: {}
    role: admin
  - name: viewers
    token: {READ_TOKEN}
    role: read
  - name: team-de
    tokenSha256: {}
    role: read
    scope: emea/de
",
        hex(ADMIN_TOKEN),
        hex(SCOPED_TOKEN).to_uppercase(),
    )
}
