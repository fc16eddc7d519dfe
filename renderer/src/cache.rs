//! The render cache: what earlier renders parsed, validated and matched, kept on disk in the
//! output repository's Git directory (`<git dir>/fleetscope-render-cache/`, never part of the
//! committed tree), so that a render parses only the platform files that changed and does not
//! validate or match the clusters of the files that did not.
//!
//! ```text
//! fleetscope-render-cache/files/<key>   one per platform file, named by a hash of the cache
//!                                       format, the output format, the file's path and the
//!                                       SHA-256 of its bytes
//! fleetscope-render-cache/folders       output folders already checked: tree id and inputs
//! ```
//!
//! Every cache file starts with a line naming the cache format, the renderer's output format
//! and the SHA-256 of the rest; the rest is JSON. A file that is missing, truncated, corrupt,
//! of another format, or that does not describe the file it is looked up for is ignored: the
//! platform file is parsed again (or the folder checked again), so a bad cache costs time,
//! never a wrong render and never an error.
//!
//! Why a cached file gives what parsing it would:
//! - a file's entry is found by its path and the hash of its bytes, and repeats both; parsing
//!   is a pure function of those two;
//! - its clusters are kept as validated entries, written only after a render in which the
//!   whole platform repo was valid, so each passed every check of its own document; the checks
//!   that read other documents (its environment exists, its id is unique, Argo CD clusters
//!   need a GitOps repository) run on every render (see [`crate::validate::build_inputs`]);
//! - which policies select each of its clusters is kept with the digest of everything that
//!   matching reads besides the cluster itself (the groups' labels and each policy's name,
//!   priority and cluster selector, in precedence order), and used only when that digest is
//!   the current one;
//! - a folder is taken as checked only when its tree id (a hash of all of its content) and the
//!   digest of its inputs are both the ones recorded when it was checked or written.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use fleetscope_model::selector::validate_labels;
use fleetscope_model::{ClusterId, Environment, GroupPath, Labels, Reconciler};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::assign::{self, Assigned};
use crate::platform::{self, Document, Origin, Parsed, PlatformError, SourceFile};
use crate::validate::{self, ClusterEntry, Input, Platform};

/// The cache's own format; part of every cache file's first line and of every entry's name.
/// Raise it whenever what is cached, or how it is derived, changes: what parsing, a cluster's
/// own checks or policy matching make of the same input.
pub const CACHE_FORMAT: u32 = 2;

/// The cache's folder inside the output repository's Git directory.
pub const CACHE_DIR: &str = "fleetscope-render-cache";

const FILES_DIR: &str = "files";
const FOLDERS_FILE: &str = "folders";

/// The first word of every cache file.
const MAGIC: &str = "fleetscope-render-cache";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The hex SHA-256 of a platform file's bytes.
pub fn file_digest(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// What a cache file must have been written by: the cache format, the renderer's output format
/// and version, and a digest of the platform documents' JSON Schema, so that a renderer whose
/// documents read differently (a field added, a default changed) does not take another's
/// parse results even when the version number was not raised.
fn identity() -> &'static str {
    static IDENTITY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    IDENTITY.get_or_init(|| {
        let schema =
            serde_json::to_vec(&schemars::schema_for!(Document)).expect("schemas serialize");
        format!(
            "{MAGIC}/{CACHE_FORMAT} {} schema:{}",
            crate::OUTPUT_FORMAT,
            &file_digest(&schema)[..16]
        )
    })
}

/// The first line of a cache file for `payload`.
fn header(payload: &[u8]) -> String {
    format!("{} sha256:{}\n", identity(), file_digest(payload))
}

/// The payload of a cache file, if its first line is this renderer's and the rest is whole.
fn checked_payload(bytes: &[u8]) -> Option<&[u8]> {
    let end = bytes.iter().position(|b| *b == b'\n')?;
    let (first, rest) = (&bytes[..end + 1], &bytes[end + 1..]);
    (first == header(rest).as_bytes()).then_some(rest)
}

/// Writes `payload` with its header to `path`, through a temporary file renamed into place so
/// a reader sees the old file or the new one, never half of one.
fn write_cache_file(path: &Path, payload: &[u8]) -> std::io::Result<()> {
    let folder = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(folder)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = folder.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut bytes = header(payload).into_bytes();
    bytes.extend_from_slice(payload);
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)
}

/// One cluster of a cached file: its validated entry (without its origin's file, which is the
/// cached file's) and the policies that select it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CachedCluster {
    document: usize,
    id: ClusterId,
    group: GroupPath,
    environment: Environment,
    reconciler: Reconciler,
    labels: Labels,
    values: BTreeMap<String, String>,
    /// Indices into the platform's policies in precedence order, ascending; valid only under
    /// the entry's `matching` digest.
    matched: Vec<usize>,
}

/// What one platform file gave a valid render.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileEntry {
    path: String,
    digest: String,
    /// Its documents other than clusters, with their document numbers.
    documents: Vec<(usize, Document)>,
    clusters: Vec<CachedCluster>,
    /// The [`matching_digest`] under which the clusters' `matched` lists were computed.
    matching: String,
}

/// The name of the cache file of the platform file at `path` with bytes hashing to `digest`.
fn entry_name(path: &str, digest: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(identity().as_bytes());
    hasher.update([0]);
    hasher.update(path.as_bytes());
    hasher.update([0]);
    hasher.update(digest.as_bytes());
    hex(&hasher.finalize())
}

/// A digest of everything that decides which policies select a cluster, apart from the
/// cluster's own entry: the labels of every group, and each policy's name, priority and
/// cluster selector in precedence order (see [`assign::matching_policies`] and
/// [`Platform::effective_labels`]).
pub fn matching_digest(platform: &Platform) -> String {
    let mut hasher = Sha256::new();
    hasher.update(format!("{MAGIC}/{CACHE_FORMAT}").as_bytes());
    let groups = serde_json::to_vec(&platform.group_labels).expect("labels serialize");
    hasher.update([0]);
    hasher.update(&groups);
    for policy in &platform.policies {
        let part = serde_json::to_vec(&(&policy.name, policy.priority, &policy.clusters))
            .expect("selectors serialize");
        hasher.update([0]);
        hasher.update(&part);
    }
    hex(&hasher.finalize())
}

/// One platform file as the plan got it: from the cache, or parsed.
#[derive(Debug)]
enum Source {
    Cached {
        documents: Vec<(Origin, Document)>,
        /// Validated clusters, each with the policies that select it under `matching`.
        clusters: Vec<(ClusterEntry, Vec<usize>)>,
        matching: String,
    },
    Parsed(Parsed),
}

/// Reads and checks the cached entry of `file`, or says why there is none usable.
fn read_entry(files_dir: &Path, file: &SourceFile, digest: &str) -> Result<Source, String> {
    let path = files_dir.join(entry_name(&file.relative, digest));
    let bytes = std::fs::read(&path).map_err(|err| format!("not read: {err}"))?;
    let payload = checked_payload(&bytes).ok_or("header or checksum does not match")?;
    let entry: FileEntry =
        serde_json::from_slice(payload).map_err(|err| format!("not readable: {err}"))?;
    if entry.path != file.relative || entry.digest != digest {
        return Err("describes another file".into());
    }
    let mut numbers: Vec<usize> = entry.documents.iter().map(|(n, _)| *n).collect();
    numbers.extend(entry.clusters.iter().map(|c| c.document));
    numbers.sort_unstable();
    if numbers.first() == Some(&0) || numbers.windows(2).any(|w| w[0] == w[1]) {
        return Err("document numbers are not distinct and positive".into());
    }
    let origin = |document| Origin {
        file: entry.path.clone(),
        document,
    };
    let documents = entry
        .documents
        .iter()
        .map(|(number, document)| (origin(*number), document.clone()))
        .collect();
    let mut clusters = Vec::with_capacity(entry.clusters.len());
    for cluster in entry.clusters {
        // The cache is outside input: what a cluster's own checks would have rejected is
        // rejected here too (identifiers already were, by their types).
        let values_ok = cluster
            .values
            .keys()
            .all(|key| validate::is_substitution_variable(key));
        let matched_ok = cluster.matched.windows(2).all(|w| w[0] < w[1]);
        if !values_ok || !matched_ok || !validate_labels(&cluster.labels).is_empty() {
            return Err(format!("cluster {} is not valid", cluster.id));
        }
        let entry = ClusterEntry {
            id: cluster.id,
            group: cluster.group,
            environment: cluster.environment,
            reconciler: cluster.reconciler,
            labels: cluster.labels,
            values: cluster.values,
            origin: origin(cluster.document),
        };
        clusters.push((entry, cluster.matched));
    }
    Ok(Source::Cached {
        documents,
        clusters,
        matching: entry.matching,
    })
}

/// The render cache of one output repository.
#[derive(Debug, Clone)]
pub struct RenderCache {
    dir: PathBuf,
}

impl RenderCache {
    /// The cache of the Git repository whose Git directory is `git_dir`.
    pub fn in_git_dir(git_dir: &Path) -> RenderCache {
        RenderCache {
            dir: git_dir.join(CACHE_DIR),
        }
    }

    /// The cache of the output repository at `output`, if there is a repository there.
    pub fn of_output(output: &Path) -> Option<RenderCache> {
        git2::Repository::open(output)
            .ok()
            .map(|repo| RenderCache::in_git_dir(repo.path()))
    }

    /// Where the cache lives.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn files_dir(&self) -> PathBuf {
        self.dir.join(FILES_DIR)
    }
}

/// What [`plan`] gives: the platform and its assignment, and what to keep for the next render.
#[derive(Debug)]
pub struct Planned {
    /// The validated platform, as [`crate::plan`] gives it.
    pub platform: Platform,
    /// Its assignment, as [`crate::plan`] gives it.
    pub assigned: Assigned,
    /// Cache entries to write: one for every file that was parsed or whose clusters were
    /// matched again, by entry name.
    fresh: Vec<(String, FileEntry)>,
    /// The entry name of every current platform file.
    names: Vec<String>,
    /// Platform files taken from the cache.
    pub cached_files: usize,
    /// Platform files parsed (not in the cache, or their entry not usable).
    pub parsed_files: usize,
}

/// Loads, validates and assigns `files` (every platform file in load order, as
/// [`platform::read_files`] reads them), taking from `cache` what it holds for unchanged files.
/// The result, errors included, is the one [`crate::plan`] gives for the same files.
pub fn plan(
    files: &[SourceFile],
    cache: Option<&RenderCache>,
) -> Result<Planned, Vec<PlatformError>> {
    let files_dir = cache.map(RenderCache::files_dir);
    let mut sources: Vec<(String, Source)> = platform::in_parallel(files, |file| {
        let digest = file_digest(&file.bytes);
        let source = match &files_dir {
            Some(dir) => read_entry(dir, file, &digest).unwrap_or_else(|why| {
                tracing::trace!(file = %file.relative, why, "not from the cache");
                Source::Parsed(file.parse())
            }),
            None => Source::Parsed(file.parse()),
        };
        (digest, source)
    });
    let parse_errors: Vec<PlatformError> = sources
        .iter()
        .filter_map(|(_, source)| match source {
            Source::Parsed((_, errors)) => Some(errors.iter().cloned()),
            Source::Cached { .. } => None,
        })
        .flatten()
        .collect();
    if !parse_errors.is_empty() {
        return Err(parse_errors);
    }
    // The cached clusters move into the platform; their matches wait, by cluster id.
    let mut cached_matches: HashMap<ClusterId, (usize, Vec<usize>)> = HashMap::new();
    let mut checked: Vec<Vec<ClusterEntry>> = Vec::with_capacity(sources.len());
    for (index, (_, source)) in sources.iter_mut().enumerate() {
        let mut entries = Vec::new();
        if let Source::Cached { clusters, .. } = source {
            for (entry, matched) in std::mem::take(clusters) {
                cached_matches.insert(entry.id.clone(), (index, matched));
                entries.push(entry);
            }
        }
        checked.push(entries);
    }
    let mut inputs = Vec::new();
    for ((_, source), entries) in sources.iter().zip(checked) {
        match source {
            Source::Parsed((documents, _)) => {
                inputs.extend(documents.iter().map(|(o, d)| Input::Document(o, d)));
            }
            Source::Cached { documents, .. } => {
                inputs.extend(in_document_order(documents, entries));
            }
        }
    }
    let platform = validate::build_inputs(inputs)?;
    let matching = matching_digest(&platform);
    let policies = platform.policies.len();
    // Files whose clusters are matched again get a new entry.
    let mut rematched = vec![false; sources.len()];
    let matcher = assign::PolicyMatcher::new(&platform);
    let matches: Vec<Vec<usize>> = platform
        .clusters
        .keys()
        .map(|id| {
            let cached = cached_matches.remove(id);
            match cached {
                Some((index, matched)) => match &sources[index].1 {
                    Source::Cached { matching: key, .. }
                        if *key == matching
                            && matched.last().is_none_or(|last| *last < policies) =>
                    {
                        matched
                    }
                    _ => {
                        rematched[index] = true;
                        matcher.matching(&platform, id)
                    }
                },
                None => matcher.matching(&platform, id),
            }
        })
        .collect();
    let assigned = assign::assign_with_matches(&platform, &matches)?;
    let matched_of: HashMap<&ClusterId, &Vec<usize>> =
        platform.clusters.keys().zip(&matches).collect();
    let mut fresh = Vec::new();
    let mut names = Vec::with_capacity(files.len());
    let (mut cached_files, mut parsed_files) = (0, 0);
    for (index, (file, (digest, source))) in files.iter().zip(&sources).enumerate() {
        let name = entry_name(&file.relative, digest);
        names.push(name.clone());
        let documents: Vec<(&Origin, &Document)> = match source {
            Source::Cached { documents, .. } => {
                cached_files += 1;
                if !rematched[index] {
                    continue;
                }
                documents.iter().map(|(o, d)| (o, d)).collect()
            }
            Source::Parsed((documents, _)) => {
                parsed_files += 1;
                documents
                    .iter()
                    .filter(|(_, d)| !matches!(d, Document::Cluster(_)))
                    .map(|(o, d)| (o, d))
                    .collect()
            }
        };
        // The file's clusters as the valid platform holds them (each one's origin names it).
        let clusters: Vec<&ClusterEntry> = platform
            .clusters
            .values()
            .filter(|entry| entry.origin.file == file.relative)
            .collect();
        let expected = match source {
            Source::Parsed((documents, _)) => documents
                .iter()
                .filter(|(_, d)| matches!(d, Document::Cluster(_)))
                .count(),
            Source::Cached { .. } => clusters.len(),
        };
        if clusters.len() != expected {
            continue;
        }
        if let Some(entry) = file_entry(file, digest, &documents, &clusters, &matched_of, &matching)
        {
            fresh.push((name, entry));
        }
    }
    Ok(Planned {
        platform,
        assigned,
        fresh,
        names,
        cached_files,
        parsed_files,
    })
}

/// A cached file's documents and checked clusters as inputs, in document order.
fn in_document_order(
    documents: &[(Origin, Document)],
    clusters: Vec<ClusterEntry>,
) -> Vec<Input<'_>> {
    let mut numbered: Vec<(usize, Input<'_>)> = documents
        .iter()
        .map(|(origin, document)| (origin.document, Input::Document(origin, document)))
        .collect();
    numbered.extend(
        clusters
            .into_iter()
            .map(|entry| (entry.origin.document, Input::CheckedCluster(entry))),
    );
    numbered.sort_by_key(|(number, _)| *number);
    numbered.into_iter().map(|(_, input)| input).collect()
}

/// The cache entry of one file of a valid platform, or `None` when it could not stand for the
/// file (a document that would not read back equal, a cluster missing from the platform).
fn file_entry(
    file: &SourceFile,
    digest: &str,
    documents: &[(&Origin, &Document)],
    clusters: &[&ClusterEntry],
    matched_of: &HashMap<&ClusterId, &Vec<usize>>,
    matching: &str,
) -> Option<FileEntry> {
    let documents: Vec<(usize, Document)> = documents
        .iter()
        .map(|(origin, document)| (origin.document, (*document).clone()))
        .collect();
    // Documents are read back as they will be on the next render: a value JSON cannot carry
    // exactly is not cached, and its file is parsed every time.
    let text = serde_json::to_vec(&documents).ok()?;
    let back: Vec<(usize, Document)> = serde_json::from_slice(&text).ok()?;
    if back != documents {
        return None;
    }
    let mut cached = Vec::with_capacity(clusters.len());
    for entry in clusters {
        cached.push(CachedCluster {
            document: entry.origin.document,
            id: entry.id.clone(),
            group: entry.group.clone(),
            environment: entry.environment.clone(),
            reconciler: entry.reconciler,
            labels: entry.labels.clone(),
            values: entry.values.clone(),
            matched: (*matched_of.get(&entry.id)?).clone(),
        });
    }
    Some(FileEntry {
        path: file.relative.clone(),
        digest: digest.to_owned(),
        documents,
        clusters: cached,
        matching: matching.to_owned(),
    })
}

/// An output folder as last checked or written: its tree id and the digest of its inputs, and
/// for a render group each app's content hash (from its record) and, where known, the digest
/// of the inputs of each app's file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckedFolder {
    /// The folder's Git tree id (hex).
    pub tree: String,
    /// The digest of the inputs it holds the rendering of (as its record says).
    pub inputs: String,
    /// App → content hash (render groups only).
    pub hashes: BTreeMap<String, String>,
    /// For a render group, app → the [`crate::output::app_inputs_digest`] its file in this
    /// tree was rendered from (empty when not known).
    pub apps: BTreeMap<String, String>,
}

/// Output folder path → how it was last checked or written.
pub type CheckedFolders = BTreeMap<String, CheckedFolder>;

impl RenderCache {
    /// The folders recorded by the last render; empty when there is no usable record.
    pub fn folders(&self) -> CheckedFolders {
        let read = || -> Option<CheckedFolders> {
            let bytes = std::fs::read(self.dir.join(FOLDERS_FILE)).ok()?;
            serde_json::from_slice(checked_payload(&bytes)?).ok()
        };
        read().unwrap_or_default()
    }

    /// Keeps what a render learned: an entry for every platform file parsed or matched again,
    /// and the output folders as the new head has them. Entries of files that are no longer
    /// current are removed. Failing to write the cache fails nothing (the next render is
    /// slower), so problems are only logged.
    pub fn store(&self, planned: &Planned, folders: &CheckedFolders) {
        if let Err(err) = self.try_store(planned, folders) {
            tracing::warn!(dir = %self.dir.display(), error = %err, "render cache not written");
        }
    }

    fn try_store(&self, planned: &Planned, folders: &CheckedFolders) -> std::io::Result<()> {
        let files_dir = self.files_dir();
        std::fs::create_dir_all(&files_dir)?;
        for (name, entry) in &planned.fresh {
            let payload = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
            write_cache_file(&files_dir.join(name), &payload)?;
        }
        let current: std::collections::HashSet<&str> =
            planned.names.iter().map(String::as_str).collect();
        for item in std::fs::read_dir(&files_dir)? {
            let item = item?;
            let name = item.file_name().to_string_lossy().into_owned();
            if !current.contains(name.as_str()) {
                std::fs::remove_file(item.path())?;
            }
        }
        let payload = serde_json::to_vec(folders).map_err(std::io::Error::other)?;
        write_cache_file(&self.dir.join(FOLDERS_FILE), &payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_file_is_used_only_whole_and_of_this_format() {
        let payload = br#"{"a":1}"#;
        let mut bytes = header(payload).into_bytes();
        bytes.extend_from_slice(payload);
        assert_eq!(checked_payload(&bytes), Some(&payload[..]));
        assert_eq!(
            checked_payload(&bytes[..bytes.len() - 1]),
            None,
            "truncated"
        );
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() = b']';
        assert_eq!(checked_payload(&flipped), None, "corrupt");
        let foreign = String::from_utf8(bytes.clone()).unwrap().replace(
            &format!("/{CACHE_FORMAT} "),
            &format!("/{} ", CACHE_FORMAT + 1),
        );
        assert_eq!(checked_payload(foreign.as_bytes()), None, "another format");
        assert_eq!(checked_payload(b""), None);
    }
}
