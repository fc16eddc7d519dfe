//! The demo's platform repo: the example platform repo (built into the binary, so the demo runs
//! from any directory) or one given on the command line, grown to the simulated fleet's size
//! with more sites like the ones it already has.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;

/// The example platform repo, file by file (`examples/platform/` in the source tree).
pub const EXAMPLE: &[(&str, &str)] = &[
    (
        "environments.yaml",
        include_str!("../../../examples/platform/environments.yaml"),
    ),
    (
        "gitops.yaml",
        include_str!("../../../examples/platform/gitops.yaml"),
    ),
    (
        "groups.yaml",
        include_str!("../../../examples/platform/groups.yaml"),
    ),
    (
        "apps/platform.yaml",
        include_str!("../../../examples/platform/apps/platform.yaml"),
    ),
    (
        "apps/shop.yaml",
        include_str!("../../../examples/platform/apps/shop.yaml"),
    ),
    (
        "clusters/amer.yaml",
        include_str!("../../../examples/platform/clusters/amer.yaml"),
    ),
    (
        "clusters/emea.yaml",
        include_str!("../../../examples/platform/clusters/emea.yaml"),
    ),
    (
        "policies/baseline.yaml",
        include_str!("../../../examples/platform/policies/baseline.yaml"),
    ),
];

/// The file the simulated clusters are written to.
pub const SIMULATED_FILE: &str = "clusters/simulated.yaml";

/// Clusters per simulated site: each site holds this many clusters made after one template.
const SITE_SIZE: usize = 20;

/// Writes the example platform repo into `dir` (created).
pub fn write_example(dir: &Path) -> anyhow::Result<()> {
    for (file, text) in EXAMPLE {
        let path = dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Copies the YAML files of a platform repo (and only those) from `from` into `to`.
pub fn copy_platform(from: &Path, to: &Path) -> anyhow::Result<usize> {
    let files = fleetscope_renderer::platform::yaml_file_list(from)
        .with_context(|| format!("cannot read the platform repo {}", from.display()))?;
    for file in &files {
        let relative = file.strip_prefix(from).unwrap_or(file);
        let target = to.join(relative);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(file, &target)
            .with_context(|| format!("copying {} to {}", file.display(), target.display()))?;
    }
    Ok(files.len())
}

/// Adds clusters to the platform repo in `dir` until it has `total`: each new cluster is made
/// after one of the repo's own clusters (same environment, reconciler, labels and values), in
/// a new site next to that cluster's site, [`SITE_SIZE`] clusters to a site. Returns how many
/// were added. Fails when the repo is invalid or already has more than `total` clusters.
pub fn grow(dir: &Path, total: usize) -> anyhow::Result<usize> {
    let (platform, _) = fleetscope_renderer::plan(dir)?;
    let templates: Vec<_> = platform.clusters.values().collect();
    anyhow::ensure!(
        !templates.is_empty(),
        "the platform repo {} has no clusters to make simulated ones after",
        dir.display()
    );
    anyhow::ensure!(
        total >= templates.len(),
        "--clusters must be at least {}, the clusters the platform repo already has",
        templates.len()
    );
    let added = total - templates.len();
    if added == 0 {
        return Ok(0);
    }
    let path = dir.join(SIMULATED_FILE);
    anyhow::ensure!(
        !path.exists(),
        "{} exists already; the demo writes its simulated clusters there",
        path.display()
    );
    let mut text = String::from(
        "# Simulated clusters, written by `fleetscope demo`: each is made after one of the clusters\n\
         # above, in sites next to its site. One JSON document (valid YAML) per cluster.\n",
    );
    for i in 0..added {
        let template = templates[i % templates.len()];
        let round = i / templates.len();
        let site = round / SITE_SIZE + 2;
        let document = serde_json::json!({
            "kind": "Cluster",
            "id": format!("{}-{:04}", template.id.as_str(), round + 1),
            "group": format!("{}-{site:02}", template.group.as_str()),
            "environment": template.environment.as_str(),
            "reconciler": template.reconciler.as_str(),
            "labels": template.labels,
            "values": template.values,
        });
        let _ = write!(text, "---\n{document}\n");
    }
    std::fs::create_dir_all(path.parent().unwrap_or(dir))?;
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_example_is_the_example_directory() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/platform");
        let on_disk: Vec<String> = fleetscope_renderer::platform::yaml_file_list(&root)
            .unwrap()
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        let mut bundled: Vec<String> = EXAMPLE.iter().map(|(f, _)| (*f).to_owned()).collect();
        bundled.sort();
        let mut on_disk_sorted = on_disk.clone();
        on_disk_sorted.sort();
        assert_eq!(bundled, on_disk_sorted, "every example file is bundled");
        for (file, text) in EXAMPLE {
            assert_eq!(
                std::fs::read_to_string(root.join(file)).unwrap(),
                *text,
                "{file}"
            );
        }
    }

    #[test]
    fn grows_the_example_into_a_valid_fleet_of_the_asked_size() {
        let dir = tempfile::tempdir().unwrap();
        write_example(dir.path()).unwrap();
        let (before, example) = fleetscope_renderer::plan(dir.path()).unwrap();
        let own = before.clusters.len();
        assert_eq!(grow(dir.path(), 300).unwrap(), 300 - own);
        let (after, assigned) = fleetscope_renderer::plan(dir.path()).unwrap();
        assert_eq!(after.clusters.len(), 300);
        // A simulated cluster is like its template, in a site next to the template's.
        let berlin = &after.clusters[&fleetscope_model::ClusterId::parse("berlin-01").unwrap()];
        let copy = &after.clusters[&fleetscope_model::ClusterId::parse("berlin-01-0001").unwrap()];
        assert_eq!(copy.group.as_str(), "emea/de/berlin-02");
        assert_eq!(copy.environment, berlin.environment);
        assert_eq!(copy.reconciler, berlin.reconciler);
        assert_eq!(copy.labels, berlin.labels);
        assert_eq!(copy.values, berlin.values);
        // Round 20 of a template starts the next site.
        let later = &after.clusters[&fleetscope_model::ClusterId::parse("berlin-01-0021").unwrap()];
        assert_eq!(later.group.as_str(), "emea/de/berlin-03");
        // The example's own render groups are what the simulated fleet falls into.
        assert_eq!(render_groups(assigned), render_groups(example));
    }

    /// Each render group's apps as `app@version` lists, sorted and without repeats.
    fn render_groups(assigned: fleetscope_renderer::assign::Assigned) -> Vec<Vec<String>> {
        let mut groups: Vec<Vec<String>> = assigned
            .groups
            .into_values()
            .map(|g| {
                g.assignments
                    .iter()
                    .map(|a| format!("{}@{}", a.app, a.version))
                    .collect()
            })
            .collect();
        groups.sort();
        groups.dedup();
        groups
    }

    #[test]
    fn refuses_a_fleet_smaller_than_the_repo_and_a_second_growth() {
        let dir = tempfile::tempdir().unwrap();
        write_example(dir.path()).unwrap();
        let err = grow(dir.path(), 3).unwrap_err().to_string();
        assert!(err.contains("--clusters must be at least 7"), "{err}");
        assert_eq!(grow(dir.path(), 7).unwrap(), 0);
        grow(dir.path(), 20).unwrap();
        let err = grow(dir.path(), 40).unwrap_err().to_string();
        assert!(err.contains("exists already"), "{err}");
    }
}
