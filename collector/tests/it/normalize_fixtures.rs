//! Normalizes every object under `testdata/` (real Flux and Argo CD objects and the synthetic
//! stamped ones) and holds every field of every result against `expect/normalized.txt`.
//! Regenerate with `UPDATE_EXPECT=1 cargo test -p fleetscope-collector --test normalize_fixtures`,
//! then read the diff against the fixtures.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use expect_test::expect_file;
use fleetscope_collector::normalize::{normalize, NormalizeError, NormalizedObject};
use fleetscope_model::{ClusterId, ObservedItem, Timestamp};

/// The kind directories under `testdata/objects/`; each must hold at least one file.
const KINDS: &[&str] = &[
    "application",
    "applicationset",
    "gitrepository",
    "helmrelease",
    "kustomization",
    "ocirepository",
];

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata")
}

/// The files of a directory, sorted; fails on a missing or empty directory.
fn files_in(dir: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("cannot read fixture directory {}: {err}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "fixture directory {} is empty",
        dir.display()
    );
    files
}

/// Every fixture file: the kind directories in order, any other directory under `objects/`
/// (so a new one is not skipped), then `synthetic/`.
fn fixture_files() -> Vec<PathBuf> {
    let objects = testdata().join("objects");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&objects)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", objects.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    for kind in KINDS {
        assert!(
            dirs.contains(&objects.join(kind)),
            "fixture directory objects/{kind} is missing"
        );
    }
    dirs.push(testdata().join("synthetic"));
    dirs.iter().flat_map(|dir| files_in(dir)).collect()
}

fn time(at: Option<Timestamp>) -> String {
    match at {
        None => "-".to_owned(),
        Some(at) => {
            let utc = jiff::Timestamp::from_second(at.seconds()).unwrap();
            format!("{utc} ({})", at.seconds())
        }
    }
}

fn optional(value: Option<impl std::fmt::Display>) -> String {
    value.map_or_else(|| "-".to_owned(), |value| value.to_string())
}

fn render(out: &mut String, normalized: &NormalizedObject) {
    let NormalizedObject {
        object,
        api_version,
        app,
        version,
        content_hash,
        applied_revision,
        attempted_revision,
        health,
        sync,
        reason,
        message,
        transitioned_at,
        reconciled_at,
        operation_phase,
        images,
        revisions,
        labels,
        target_revision,
        warnings,
    } = normalized;
    let lines = [
        ("kind", object.kind.to_string()),
        ("namespace", format!("{:?}", object.namespace)),
        ("name", format!("{:?}", object.name)),
        ("api_version", api_version.clone()),
        ("app", optional(app.as_ref())),
        ("version", optional(version.as_ref())),
        ("content_hash", optional(content_hash.as_ref())),
        ("applied_revision", format!("{applied_revision:?}")),
        ("attempted_revision", format!("{attempted_revision:?}")),
        ("health", health.to_string()),
        ("sync", sync.to_string()),
        ("reason", format!("{reason:?}")),
        ("message", format!("{message:?}")),
        ("transitioned_at", time(*transitioned_at)),
        ("reconciled_at", time(*reconciled_at)),
        ("operation_phase", optional(operation_phase.as_ref())),
        ("images", format!("{images:?}")),
        ("revisions", format!("{revisions:?}")),
        ("labels", format!("{labels:?}")),
        ("target_revision", format!("{target_revision:?}")),
    ];
    for (key, value) in lines {
        writeln!(out, "  {key}: {value}").unwrap();
    }
    if warnings.is_empty() {
        writeln!(out, "  warnings: []").unwrap();
    } else {
        writeln!(out, "  warnings:").unwrap();
        for warning in warnings {
            writeln!(out, "    - {warning}").unwrap();
        }
    }
}

/// What the store would get: the checks `into_observed` must keep for every object.
fn check_observed(file: &str, normalized: &NormalizedObject) {
    let item = normalized.clone().into_observed(
        ClusterId::parse("fixture-cluster").unwrap(),
        1,
        Timestamp(1_800_000_000),
        false,
    );
    assert_eq!(item.object, normalized.object, "{file}");
    assert_eq!(item.health, normalized.health, "{file}");
    assert_eq!(item.applied_revision, normalized.applied_revision, "{file}");
    assert!(
        item.message.len() <= ObservedItem::MAX_MESSAGE_BYTES,
        "{file}"
    );
    assert_eq!(
        item.transitioned_at,
        normalized.transitioned_at.unwrap_or(Timestamp::EPOCH),
        "{file}"
    );
}

#[test]
fn every_fixture_normalizes_as_expected() {
    let root = testdata();
    let files = fixture_files();
    let mut out = String::new();
    let mut stamped = 0;
    for path in &files {
        let file = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|err| panic!("cannot read {file}: {err}"));
        let object: serde_json::Value = serde_yaml_ng::from_str(&text)
            .unwrap_or_else(|err| panic!("{file} is not a YAML object: {err}"));
        writeln!(out, "== {file}").unwrap();
        match normalize(&object) {
            Ok(normalized) => {
                check_observed(&file, &normalized);
                stamped += usize::from(normalized.app.is_some());
                render(&mut out, &normalized);
            }
            Err(err) => {
                if file.starts_with("objects/applicationset/") {
                    assert!(
                        matches!(err, NormalizeError::Unsupported { ref kind, .. } if kind == "ApplicationSet"),
                        "{file}: {err}"
                    );
                }
                writeln!(out, "  error: {err}").unwrap();
            }
        }
        out.push('\n');
    }
    assert!(files.len() >= 63, "only {} fixture files", files.len());
    assert_eq!(stamped, 3, "the three synthetic objects with valid stamps");
    writeln!(out, "== {} fixture files", files.len()).unwrap();
    expect_file!["expect/normalized.txt"].assert_eq(&out);
}
