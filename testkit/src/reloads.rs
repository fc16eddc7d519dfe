//! What the services say about a reloaded file (token file, certificate), read back in tests:
//! the version a file's contents should get, and the version in force and reload counts in a
//! `/metrics` text.

use sha2::{Digest, Sha256};

/// The version of a file holding `text`: the first 12 hex digits of its SHA-256, computed here
/// independently of the services.
pub fn file_version(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .take(6)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// From a `/metrics` text, for the metrics named `<name>_version` and `<name>_reloads_total`:
/// the version in force (empty when none), and the applied and refused reloads. Panics when two
/// versions are in force.
pub fn reload_state(metrics: &str, name: &str) -> (String, u64, u64) {
    let version_prefix = format!("{name}_version{{version=\"");
    let applied_prefix = format!("{name}_reloads_total{{outcome=\"applied\"}} ");
    let refused_prefix = format!("{name}_reloads_total{{outcome=\"refused\"}} ");
    let count = |value: &str| {
        value
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("not a count: {value:?}"))
    };
    let mut version = String::new();
    let (mut applied, mut refused) = (0, 0);
    for line in metrics.lines() {
        if let Some(rest) = line.strip_prefix(&version_prefix) {
            assert!(version.is_empty(), "two versions in force:\n{metrics}");
            version = rest.split('"').next().unwrap_or_default().to_owned();
        } else if let Some(value) = line.strip_prefix(&applied_prefix) {
            applied = count(value);
        } else if let Some(value) = line.strip_prefix(&refused_prefix) {
            refused = count(value);
        }
    }
    (version, applied, refused)
}
