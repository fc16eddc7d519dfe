//! Fleetscope's renderer: reads the platform repo (clusters, groups, apps, namespaces,
//! assignment policies), decides which app runs on which cluster and why, groups clusters with
//! identical content into render groups, and writes the GitOps output and desired-state rows.
//!
//! **Boundary**: the renderer never talks to a cluster.

#![forbid(unsafe_code)]

pub mod args;
pub mod assign;
pub mod cache;
pub mod changes;
pub mod desired;
pub mod explain;
pub mod generate;
pub mod git;
pub mod import;
pub mod output;
pub mod platform;
pub mod validate;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub use platform::PlatformError;

/// Why a render did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("the platform repo has {} problem(s):\n  {}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    Invalid(Vec<PlatformError>),
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

/// What a render produced.
#[derive(Debug, Clone)]
pub struct RenderOutcome {
    pub platform: validate::Platform,
    pub assigned: assign::Assigned,
    /// The files this render wrote; render group folders whose inputs did not change since
    /// the last commit are kept from it and not in here (see `kept_groups`).
    pub files: output::Files,
    /// Render groups kept as they were from the previous commit.
    pub kept_groups: usize,
    /// (render group, app) → content hash.
    pub hashes: BTreeMap<(String, String), String>,
    pub commit: git::CommitOutcome,
    pub summary: String,
    /// Things that render but may not do what the author meant (see [`warnings`]).
    pub warnings: Vec<String>,
    /// The platform repo's commit the render read, when the platform directory is in a Git
    /// repository (see [`git::platform_commit`]).
    pub platform_commit: Option<git::PlatformCommit>,
}

fn uses_substitution(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(text) => text.contains("${"),
        serde_json::Value::Array(items) => items.iter().any(uses_substitution),
        serde_json::Value::Object(map) => map.values().any(uses_substitution),
        _ => false,
    }
}

/// Apps whose values use `${VAR}` substitution on Argo CD clusters. Argo CD has no
/// counterpart of Flux's post-build substitution, so the text would reach the cluster as it
/// is: the render goes ahead (the objects are valid) but says so, per app.
pub fn warnings(assigned: &assign::Assigned) -> Vec<String> {
    let mut clusters_per_group: BTreeMap<&str, usize> = BTreeMap::new();
    for group in assigned.members.values() {
        *clusters_per_group.entry(group.as_str()).or_default() += 1;
    }
    let mut per_app: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (name, content) in &assigned.groups {
        if content.reconciler != fleetscope_model::Reconciler::ArgoCd {
            continue;
        }
        let clusters = clusters_per_group.get(name.as_str()).copied().unwrap_or(0);
        for a in &content.assignments {
            if a.values.values().any(uses_substitution) {
                let entry = per_app.entry(a.app.as_str()).or_default();
                entry.0 += 1;
                entry.1 += clusters;
            }
        }
    }
    per_app
        .into_iter()
        .map(|(app, (groups, clusters))| {
            format!("app {app}: its values use ${{VAR}} substitution, which Argo CD does not perform; {clusters} Argo CD cluster(s) in {groups} render group(s) get the text unchanged")
        })
        .collect()
}

/// Loads, validates and assigns the platform repo at `platform_dir`.
pub fn plan(platform_dir: &Path) -> Result<(validate::Platform, assign::Assigned), RenderError> {
    let started = std::time::Instant::now();
    let docs = platform::load(platform_dir).map_err(RenderError::Invalid)?;
    tracing::debug!(elapsed = ?started.elapsed(), documents = docs.documents.len(), "parsed");
    let platform = validate::build(&docs).map_err(RenderError::Invalid)?;
    tracing::debug!(elapsed = ?started.elapsed(), "validated");
    let assigned = assign::assign(&platform).map_err(RenderError::Invalid)?;
    tracing::debug!(elapsed = ?started.elapsed(), groups = assigned.groups.len(), "assigned");
    Ok((platform, assigned))
}

/// A one-line account of what changed, from the changed paths.
pub fn summarize(changed: &[String], assigned: &assign::Assigned) -> String {
    let mut apps = BTreeSet::new();
    let mut groups = BTreeSet::new();
    let mut entries = 0;
    let mut removed_groups = 0;
    for path in changed {
        let parts: Vec<&str> = path.split('/').collect();
        match parts.as_slice() {
            ["render-groups", group, "apps", file] => {
                apps.insert(file.trim_end_matches(".yaml").to_owned());
                groups.insert((*group).to_owned());
            }
            ["render-groups", group, ..] => {
                groups.insert((*group).to_owned());
            }
            ["clusters", _, "entry.yaml"] => entries += 1,
            _ => {}
        }
    }
    for group in &groups {
        if !assigned.groups.contains_key(group) {
            removed_groups += 1;
        }
    }
    let clusters: usize = assigned
        .members
        .values()
        .filter(|g| groups.contains(*g))
        .count();
    let app_list: Vec<&str> = apps.iter().map(String::as_str).take(8).collect();
    let more = if apps.len() > 8 {
        format!(" and {} more", apps.len() - 8)
    } else {
        String::new()
    };
    format!(
        "render: {} app(s) changed ({}{more}) in {} render group(s) reaching {clusters} cluster(s); {entries} cluster entry file(s) changed; {removed_groups} render group(s) removed",
        apps.len(),
        if app_list.is_empty() { "none".to_owned() } else { app_list.join(", ") },
        groups.len() - removed_groups,
    )
}

/// Identifies the renderer's output format: part of every input digest, so a renderer that
/// renders differently never mistakes an old commit for up to date. Format 2: content hashes
/// leave out the render group annotation (see [`output::canonical_object`]).
pub const OUTPUT_FORMAT: &str = concat!("fleetscope-render/2/", env!("CARGO_PKG_VERSION"));

/// The trailer that records, in each render commit, the digest of the inputs it came from.
pub const DIGEST_TRAILER: &str = "Platform-Digest: ";

/// SHA-256 over the output format and every platform file's path and bytes, in load order.
pub fn platform_digest(platform_dir: &Path) -> std::io::Result<String> {
    Ok(files_digest(&platform::read_files(platform_dir)?))
}

/// [`platform_digest`] of files already read.
fn files_digest(files: &[platform::SourceFile]) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(OUTPUT_FORMAT.as_bytes());
    for file in files {
        hasher.update([0]);
        hasher.update(file.relative.as_bytes());
        hasher.update([0]);
        hasher.update(&file.bytes);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every platform file and their digest, or the render's error when one cannot be read.
fn read_platform(platform_dir: &Path) -> Result<(Vec<platform::SourceFile>, String), RenderError> {
    let files = platform::read_files(platform_dir).map_err(|err| unreadable(platform_dir, err))?;
    let digest = files_digest(&files);
    Ok((files, digest))
}

/// Like [`render`], but first compares the inputs' digest with the one recorded in the
/// output's last commit: when they are equal, nothing is loaded or rendered and `None` comes
/// back. A render whose inputs did not change costs one read of the platform repo.
pub fn render_if_changed(
    platform_dir: &Path,
    output: &Path,
) -> Result<Option<RenderOutcome>, RenderError> {
    let (files, digest) = read_platform(platform_dir)?;
    if let Ok(repo) = git2::Repository::open(output) {
        let head = repo
            .find_reference(git::BRANCH)
            .ok()
            .and_then(|r| r.peel_to_commit().ok());
        if head
            .as_ref()
            .and_then(|c| c.message().ok().map(str::to_owned))
            .is_some_and(|m| m.lines().any(|l| l == format!("{DIGEST_TRAILER}{digest}")))
        {
            return Ok(None);
        }
    }
    render_with_digest(platform_dir, &files, output, &digest).map(Some)
}

/// Renders `platform_dir` into the Git repository at `output` (created if needed). Nothing is
/// written when the platform repo is invalid; no commit is made when nothing changed.
pub fn render(platform_dir: &Path, output: &Path) -> Result<RenderOutcome, RenderError> {
    let (files, digest) = read_platform(platform_dir)?;
    render_with_digest(platform_dir, &files, output, &digest)
}

/// The prefix of the commit a publication without GitOps output records: `published:` and the
/// first 16 hex digits of the platform repo's digest.
pub const PUBLISHED_PREFIX: &str = "published:";

/// The desired state of `platform_dir` with no GitOps output (`render --publish-only`), for a
/// fleet whose manifests come from elsewhere: validated and assigned as a render would, every
/// app without a content hash (no object is rendered, so none carries one), and as its commit
/// [`PUBLISHED_PREFIX`] and the platform digest, so that publishing the same files again is
/// known to change nothing.
pub fn publish_only(platform_dir: &Path) -> Result<RenderOutcome, RenderError> {
    let (_, digest) = read_platform(platform_dir)?;
    let (platform, assigned) = plan(platform_dir)?;
    let hashes = assigned
        .groups
        .iter()
        .flat_map(|(group, content)| {
            content
                .assignments
                .iter()
                .map(move |a| ((group.clone(), a.app.to_string()), String::new()))
        })
        .collect();
    let clusters = assigned.members.len();
    let summary = format!(
        "publish: {} clusters, {} apps, {} policies → {} render groups (no GitOps output)",
        platform.clusters.len(),
        platform.apps.len(),
        platform.policies.len(),
        assigned.groups.len()
    );
    debug_assert!(clusters <= platform.clusters.len());
    Ok(RenderOutcome {
        kept_groups: 0,
        warnings: Vec::new(),
        platform,
        assigned,
        files: output::Files::new(),
        hashes,
        commit: git::CommitOutcome {
            commit: None,
            head: format!("{PUBLISHED_PREFIX}{}", &digest[..16.min(digest.len())]),
            changed: Vec::new(),
        },
        summary,
        platform_commit: git::platform_commit(platform_dir),
    })
}

fn unreadable(platform_dir: &Path, err: std::io::Error) -> RenderError {
    RenderError::Invalid(vec![PlatformError {
        file: platform_dir.display().to_string(),
        document: 0,
        field: String::new(),
        message: format!("cannot read: {err}"),
    }])
}

/// [`render`] of the platform `files` (read from `platform_dir` in load order), whose digest
/// goes into the commit message. Parsed, validated and matched inputs come from the output repository's render
/// cache where their files did not change (see [`cache`]), and the cache is brought up to date
/// after the commit.
fn render_with_digest(
    platform_dir: &Path,
    files: &[platform::SourceFile],
    output: &Path,
    digest: &str,
) -> Result<RenderOutcome, RenderError> {
    let started = std::time::Instant::now();
    let planned = cache::plan(files, cache::RenderCache::of_output(output).as_ref())
        .map_err(RenderError::Invalid)?;
    tracing::debug!(
        elapsed = ?started.elapsed(),
        cached_files = planned.cached_files,
        parsed_files = planned.parsed_files,
        clusters = planned.platform.clusters.len(),
        groups = planned.assigned.groups.len(),
        "loaded, validated and assigned"
    );
    let (platform, assigned) = (&planned.platform, &planned.assigned);
    let repo = git::open_or_init(output)?;
    let render_cache = cache::RenderCache::in_git_dir(repo.path());
    let checked = render_cache.folders();
    let group_inputs: BTreeMap<&String, String> = assigned
        .groups
        .iter()
        .map(|(name, content)| (name, output::group_inputs_digest(platform, name, content)))
        .collect();
    let entries_inputs = output::entries_inputs_digest(platform, assigned);
    tracing::debug!(elapsed = ?started.elapsed(), "inputs digests computed");
    // Render group folders whose inputs did not change are kept from the last commit as they
    // are: a one-app change costs the render groups it touches, not all of them.
    let mut kept = BTreeMap::new();
    let mut kept_hashes = output::ContentHashes::new();
    let head = git::head_tree(&repo);
    if let Some(head) = &head {
        for (name, inputs) in &group_inputs {
            let path = format!("render-groups/{name}");
            if let Some((tree, hashes)) = kept_folder(&repo, head, &path, inputs, &checked) {
                kept_hashes.extend(
                    hashes
                        .into_iter()
                        .map(|(app, hash)| (((*name).clone(), app), hash)),
                );
                kept.insert(path, tree);
            }
        }
    }
    tracing::debug!(elapsed = ?started.elapsed(), kept = kept.len(), "render group folders checked");
    let skip: BTreeSet<String> = kept
        .keys()
        .map(|p| p.trim_start_matches("render-groups/").to_owned())
        .collect();
    // Likewise the entry files, as one folder: they change only when clusters do.
    let mut skip_entries = false;
    if let Some(head) = &head {
        if let Some((tree, _)) = kept_folder(&repo, head, "clusters", &entries_inputs, &checked) {
            kept.insert("clusters".to_owned(), tree);
            skip_entries = true;
        }
    }
    tracing::debug!(elapsed = ?started.elapsed(), skip_entries, "entry folder checked");
    // In the render groups rendered again, the files of apps whose inputs did not change are
    // taken from the last commit as they are: a one-app change renders one app per group.
    let app_digests: BTreeMap<&String, BTreeMap<String, String>> = assigned
        .groups
        .iter()
        .filter(|(name, _)| !skip.contains(*name))
        .map(|(name, content)| {
            let digests = content
                .assignments
                .iter()
                .map(|a| {
                    let digest = output::app_inputs_digest(platform, content, a, name);
                    (a.app.to_string(), digest)
                })
                .collect();
            (name, digests)
        })
        .collect();
    let reused = match &head {
        Some(head) => reusable_apps(&repo, head, &app_digests, &checked),
        None => BTreeMap::new(),
    };
    drop(head);
    tracing::debug!(
        elapsed = ?started.elapsed(),
        reused = reused.values().map(BTreeMap::len).sum::<usize>(),
        "app files to reuse found"
    );
    let (files, mut hashes) =
        output::render_files_reusing(platform, assigned, &skip, skip_entries, &reused);
    hashes.extend(kept_hashes);
    tracing::debug!(elapsed = ?started.elapsed(), files = files.len(), kept = kept.len(), "rendered");
    let mut summary = String::new();
    let kept_groups = kept.len() - usize::from(skip_entries);
    let commit = git::commit_files(&repo, &files, &kept, |changed| {
        summary = summarize(changed, assigned);
        format!(
            "{summary}\n\n{} render groups ({} rendered, {kept_groups} unchanged and kept), {} clusters\n\n{DIGEST_TRAILER}{digest}\n",
            assigned.groups.len(),
            assigned.groups.len() - kept_groups,
            assigned.members.len(),
        )
    })?;
    tracing::debug!(elapsed = ?started.elapsed(), changed = commit.changed.len(), "committed");
    if commit.commit.is_none() {
        summary = "render: nothing changed".to_owned();
    }
    let folders = checked_folders(
        &repo,
        &group_inputs,
        &entries_inputs,
        &hashes,
        &app_digests,
        &checked,
    );
    render_cache.store(&planned, &folders);
    tracing::debug!(elapsed = ?started.elapsed(), "render cache written");
    let warnings = warnings(assigned);
    let cache::Planned {
        platform, assigned, ..
    } = planned;
    Ok(RenderOutcome {
        kept_groups,
        warnings,
        platform,
        assigned,
        files,
        hashes,
        commit,
        summary,
        platform_commit: git::platform_commit(platform_dir),
    })
}

/// The head's folder `path`, if it holds what inputs with digest `inputs` render to: known from
/// the render cache when the folder's tree id and inputs are the ones recorded there, checked
/// against the folder's record otherwise (see [`git::reusable_folder`]). Its tree id and each
/// app's content hash.
fn kept_folder(
    repo: &git2::Repository,
    head: &git2::Tree<'_>,
    path: &str,
    inputs: &str,
    checked: &cache::CheckedFolders,
) -> Option<(git2::Oid, BTreeMap<String, String>)> {
    let tree = head.get_path(Path::new(path)).ok()?.id();
    if let Some(folder) = checked.get(path) {
        if folder.inputs == inputs && folder.tree == tree.to_string() {
            return Some((tree, folder.hashes.clone()));
        }
    }
    git::reusable_folder(repo, head, path, inputs).map(|(tree, record)| (tree, record.hashes))
}

/// The head's render group folders and entry folder as the render cache records them: each
/// folder's tree id, the digest of the inputs it was rendered from, and its apps' content
/// hashes. Every folder here holds, by construction, exactly what its record lists; tests (debug
/// builds) check it with [`git::reusable_folder`].
///
/// A render group rendered now records each app's inputs digest (`app_digests`); one kept
/// keeps those the cache had for it (`previous`) when it is the same tree.
fn checked_folders(
    repo: &git2::Repository,
    group_inputs: &BTreeMap<&String, String>,
    entries_inputs: &str,
    hashes: &output::ContentHashes,
    app_digests: &BTreeMap<&String, BTreeMap<String, String>>,
    previous: &cache::CheckedFolders,
) -> cache::CheckedFolders {
    let mut folders = cache::CheckedFolders::new();
    let Some(head) = git::head_tree(repo) else {
        return folders;
    };
    let mut add = |path: String,
                   inputs: &str,
                   hashes: BTreeMap<String, String>,
                   apps: Option<&BTreeMap<String, String>>| {
        let Ok(entry) = head.get_path(Path::new(&path)) else {
            return;
        };
        let apps = match apps {
            Some(apps) => apps.clone(),
            None => previous
                .get(&path)
                .filter(|folder| folder.tree == entry.id().to_string())
                .map(|folder| folder.apps.clone())
                .unwrap_or_default(),
        };
        if cfg!(debug_assertions) {
            let record = git::reusable_folder(repo, &head, &path, inputs);
            assert!(
                record
                    .as_ref()
                    .is_some_and(|(tree, record)| *tree == entry.id() && record.hashes == hashes),
                "{path} does not hold what its record says"
            );
        }
        let folder = cache::CheckedFolder {
            tree: entry.id().to_string(),
            inputs: inputs.to_owned(),
            hashes,
            apps,
        };
        folders.insert(path, folder);
    };
    for (name, inputs) in group_inputs {
        let group_hashes = hashes
            .range(((*name).clone(), String::new())..)
            .take_while(|((group, _), _)| group == *name)
            .map(|((_, app), hash)| (app.clone(), hash.clone()))
            .collect();
        let apps = app_digests.get(name);
        add(format!("render-groups/{name}"), inputs, group_hashes, apps);
    }
    add("clusters".to_owned(), entries_inputs, BTreeMap::new(), None);
    folders
}

/// Per render group about to be rendered again, the app files it can take from the head as
/// they are: those whose inputs digest (`app_digests`) is the one the render cache recorded
/// for the file in this very folder tree, with the content hash recorded with it.
fn reusable_apps(
    repo: &git2::Repository,
    head: &git2::Tree<'_>,
    app_digests: &BTreeMap<&String, BTreeMap<String, String>>,
    checked: &cache::CheckedFolders,
) -> BTreeMap<String, output::ReusedApps> {
    let mut reused = BTreeMap::new();
    for (name, digests) in app_digests {
        let path = format!("render-groups/{name}");
        let Some(folder) = checked.get(&path) else {
            continue;
        };
        let Ok(entry) = head.get_path(Path::new(&path)) else {
            continue;
        };
        let Ok(tree) = repo.find_tree(entry.id()) else {
            continue;
        };
        if folder.tree != tree.id().to_string() {
            continue;
        }
        let mut apps = output::ReusedApps::new();
        for (app, digest) in digests {
            let (Some(recorded), Some(hash)) = (folder.apps.get(app), folder.hashes.get(app))
            else {
                continue;
            };
            if recorded != digest {
                continue;
            }
            let text = tree
                .get_path(Path::new(&format!("apps/{app}.yaml")))
                .ok()
                .and_then(|file| repo.find_blob(file.id()).ok())
                .and_then(|blob| String::from_utf8(blob.content().to_vec()).ok());
            if let Some(text) = text {
                apps.insert(app.clone(), (text, hash.clone()));
            }
        }
        if !apps.is_empty() {
            reused.insert((*name).clone(), apps);
        }
    }
    reused
}
