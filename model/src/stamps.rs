//! The stamps the renderer puts on every object it emits and the collector reads back:
//! together they tie an object running on a cluster to the desired item it came from.

/// Label with the application name (a label, so objects can be selected by app).
pub const LABEL_APP: &str = "fleetscope.io/app";
/// Label marking objects Fleetscope rendered.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`LABEL_MANAGED_BY`] on rendered objects.
pub const MANAGED_BY_VALUE: &str = "fleetscope";
/// Annotation with the application version (an annotation: versions like `1.0+build` are not
/// valid label values).
pub const ANNOTATION_VERSION: &str = "fleetscope.io/version";
/// Annotation with the content hash of everything rendered for this app in its render group.
pub const ANNOTATION_CONTENT_HASH: &str = "fleetscope.io/content-hash";
/// Annotation with the render group the object was rendered for.
pub const ANNOTATION_RENDER_GROUP: &str = "fleetscope.io/render-group";

/// Prefix of every content hash: the renderer hashes with SHA-256.
pub const CONTENT_HASH_PREFIX: &str = "sha256:";

/// Checks a content hash stamp: `sha256:` and 64 lowercase hex digits.
pub fn validate_content_hash(hash: &str) -> Result<(), String> {
    let hex = hash
        .strip_prefix(CONTENT_HASH_PREFIX)
        .ok_or_else(|| format!("content hash {hash:?} must start with {CONTENT_HASH_PREFIX:?}"))?;
    if hex.len() != 64
        || !hex
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    {
        return Err(format!(
            "content hash {hash:?} must be {CONTENT_HASH_PREFIX:?} and 64 lowercase hex digits"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_hashes() {
        assert!(validate_content_hash(&format!("sha256:{}", "ab".repeat(32))).is_ok());
        assert_eq!(
            validate_content_hash("md5:abc").unwrap_err(),
            r#"content hash "md5:abc" must start with "sha256:""#
        );
        assert!(validate_content_hash(&format!("sha256:{}", "AB".repeat(32))).is_err());
        assert!(validate_content_hash("sha256:abc").is_err());
    }
}
