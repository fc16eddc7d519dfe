//! Fleetscope's renderer: reads the platform repo (clusters, groups, apps, namespaces,
//! assignment policies), decides which app runs on which cluster and why, groups clusters with
//! identical content into render groups, and writes the GitOps output and desired-state rows.
//!
//! **Boundary**: the renderer never talks to a cluster.

#![forbid(unsafe_code)]

pub mod assign;
pub mod cli;
pub mod desired;
pub mod explain;
pub mod generate;
pub mod git;
pub mod model;
pub mod output;
pub mod platform;

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
    pub platform: model::Platform,
    pub assigned: assign::Assigned,
    pub files: output::Files,
    /// (render group, app) → content hash.
    pub hashes: BTreeMap<(String, String), String>,
    pub commit: git::CommitOutcome,
    pub summary: String,
}

/// Loads, validates and assigns the platform repo at `platform_dir`.
pub fn plan(platform_dir: &Path) -> Result<(model::Platform, assign::Assigned), RenderError> {
    let docs = platform::load(platform_dir).map_err(RenderError::Invalid)?;
    let platform = model::build(&docs).map_err(RenderError::Invalid)?;
    let assigned = assign::assign(&platform).map_err(RenderError::Invalid)?;
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
            ["clusters", _] => entries += 1,
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

/// Renders `platform_dir` into the Git repository at `output` (created if needed). Nothing is
/// written when the platform repo is invalid; no commit is made when nothing changed.
pub fn render(platform_dir: &Path, output: &Path) -> Result<RenderOutcome, RenderError> {
    let (platform, assigned) = plan(platform_dir)?;
    let (files, hashes) = output::render_files(&platform, &assigned);
    let repo = git::open_or_init(output)?;
    let mut summary = String::new();
    let commit = git::commit_files(&repo, &files, |changed| {
        summary = summarize(changed, &assigned);
        format!(
            "{summary}\n\n{} render groups, {} clusters, {} files\n",
            assigned.groups.len(),
            assigned.members.len(),
            files.len()
        )
    })?;
    if commit.commit.is_none() {
        summary = "render: nothing changed".to_owned();
    }
    Ok(RenderOutcome {
        platform,
        assigned,
        files,
        hashes,
        commit,
        summary,
    })
}
