//! Files reloaded while the process runs: token files, TLS certificates and keys.
//!
//! The files are read again every few seconds and on SIGHUP. When their contents changed, the
//! new contents are checked as a whole: valid, they replace what was in force at once; invalid,
//! every problem is logged and what was in force stays (a bad edit never locks everyone out).
//! Reading contents rather than modification times also follows the symlink swaps Kubernetes
//! makes when it updates a mounted Secret.
//!
//! The version of a file set is the first 12 hex digits of the SHA-256 of its files' contents,
//! one after the other (`cat FILES | sha256sum | cut -c1-12`). Each file set has two metrics:
//! `<name>_version{version}` (1 for the version in force) and `<name>_reloads_total{outcome}`
//! (`applied` or `refused`).

use std::path::PathBuf;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sha2::{Digest, Sha256};

/// How often watched files are read again.
pub const POLL_INTERVAL: Duration = Duration::from_secs(5);

/// The contents of a file set, and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contents {
    /// One entry per file, in the order given.
    pub files: Vec<Vec<u8>>,
    pub version: String,
}

/// Reads every file of the set.
pub fn read(paths: &[PathBuf]) -> Result<Contents, String> {
    let mut files = Vec::with_capacity(paths.len());
    let mut digest = Sha256::new();
    for path in paths {
        let bytes =
            std::fs::read(path).map_err(|err| format!("reading {}: {err}", path.display()))?;
        digest.update(&bytes);
        files.push(bytes);
    }
    let version: String = digest
        .finalize()
        .iter()
        .take(6)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    Ok(Contents { files, version })
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    version: String,
}

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
enum Outcome {
    Applied,
    Refused,
}

impl EncodeLabelValue for Outcome {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder<'_>,
    ) -> Result<(), std::fmt::Error> {
        let text = match self {
            Outcome::Applied => "applied",
            Outcome::Refused => "refused",
        };
        std::fmt::Write::write_str(encoder, text)
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: Outcome,
}

/// The metrics of one reloaded file set.
#[derive(Debug, Clone)]
pub struct ReloadMetrics {
    version: Family<VersionLabels, Gauge>,
    reloads: Family<OutcomeLabels, Counter>,
}

impl ReloadMetrics {
    /// Registers `<name>_version` and `<name>_reloads_total` in `registry`.
    pub fn register(registry: &mut Registry, name: &str, what: &str) -> ReloadMetrics {
        let metrics = ReloadMetrics {
            version: Family::default(),
            reloads: Family::default(),
        };
        registry.register(
            format!("{name}_version"),
            format!("The version of the {what} in force (first 12 hex digits of its SHA-256)"),
            metrics.version.clone(),
        );
        registry.register(
            format!("{name}_reloads"),
            format!("Changes of the {what} seen, by whether they were applied or refused"),
            metrics.reloads.clone(),
        );
        metrics
    }

    /// Records `version` as the one in force.
    pub fn in_force(&self, version: &str) {
        self.version.clear();
        self.version
            .get_or_create(&VersionLabels {
                version: version.to_owned(),
            })
            .set(1);
    }

    fn count(&self, outcome: Outcome) {
        self.reloads.get_or_create(&OutcomeLabels { outcome }).inc();
    }
}

/// A file set to watch.
#[derive(Debug, Clone)]
pub struct Watch {
    /// What the files are, for logs (`agent token file`).
    pub what: &'static str,
    pub paths: Vec<PathBuf>,
    pub interval: Duration,
    pub metrics: ReloadMetrics,
}

impl Watch {
    /// Watches the files until the process ends, starting from `in_force` (the version loaded
    /// at start). `parse` checks new contents, returning every problem; `apply` puts a valid
    /// result in force.
    pub fn spawn<T, P, A>(self, in_force: String, parse: P, apply: A) -> tokio::task::JoinHandle<()>
    where
        T: Send + 'static,
        P: Fn(&[Vec<u8>]) -> Result<T, Vec<String>> + Send + 'static,
        A: Fn(T) + Send + 'static,
    {
        self.metrics.in_force(&in_force);
        tracing::info!(what = self.what, version = %in_force, "in force");
        // Listening before this returns: a SIGHUP sent from then on is not lost.
        let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        {
            Ok(signal) => Some(signal),
            Err(err) => {
                tracing::warn!(what = self.what, %err, "cannot listen for SIGHUP; files are only polled");
                None
            }
        };
        tokio::spawn(async move {
            let mut in_force = in_force;
            // The last contents refused, so that an unchanged bad file is reported once.
            let mut refused: Option<String> = None;
            loop {
                let forced = tokio::select! {
                    _ = tokio::time::sleep(self.interval) => false,
                    Some(()) = async {
                        match hangup.as_mut() {
                            Some(signal) => signal.recv().await,
                            None => std::future::pending().await,
                        }
                    } => true,
                };
                let contents = match read(&self.paths) {
                    Ok(contents) => contents,
                    Err(err) => {
                        if forced || refused.as_deref() != Some(err.as_str()) {
                            tracing::warn!(what = self.what, error = %err, version = %in_force, "cannot read the file; the version in force stays");
                            self.metrics.count(Outcome::Refused);
                            refused = Some(err);
                        }
                        continue;
                    }
                };
                if contents.version == in_force {
                    if forced {
                        tracing::info!(what = self.what, version = %in_force, "reload asked: unchanged");
                    }
                    refused = None;
                    continue;
                }
                if !forced && refused.as_deref() == Some(contents.version.as_str()) {
                    continue;
                }
                match parse(&contents.files) {
                    Ok(value) => {
                        apply(value);
                        tracing::info!(what = self.what, version = %contents.version, previous = %in_force, "reloaded; the new version is in force");
                        self.metrics.in_force(&contents.version);
                        self.metrics.count(Outcome::Applied);
                        in_force = contents.version;
                        refused = None;
                    }
                    Err(problems) => {
                        for problem in &problems {
                            tracing::warn!(what = self.what, version = %contents.version, %problem, "problem in the changed file");
                        }
                        tracing::warn!(what = self.what, refused = %contents.version, version = %in_force, problems = problems.len(), "changed file refused; the version in force stays");
                        self.metrics.count(Outcome::Refused);
                        refused = Some(contents.version);
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_the_digest_of_the_contents_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::write(&a, "abc").unwrap();
        std::fs::write(&b, "").unwrap();
        // SHA-256 of "abc".
        assert_eq!(
            read(std::slice::from_ref(&a)).unwrap().version,
            "ba7816bf8f01"
        );
        assert_eq!(
            read(&[a.clone(), b.clone()]).unwrap().version,
            "ba7816bf8f01"
        );
        let missing = read(&[dir.path().join("c")]).unwrap_err();
        assert!(missing.starts_with("reading "), "{missing}");
    }
}
