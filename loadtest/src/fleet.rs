//! A generated fleet: clusters in a three-level group hierarchy (region/country/site), apps with
//! versions, render groups, heartbeats and observed state with a chosen share of drift,
//! failures, rollouts in progress and stale clusters, and the ground truth for every pair as the
//! model classifies it.
//!
//! Clusters are produced one at a time ([`GeneratedFleet::cluster`]) so a fleet of any size can
//! be streamed into the store without holding it in memory.

use std::collections::BTreeMap;

use fleetscope_model::state::ObjectKind;
use fleetscope_model::{
    classify, DesiredForDrift, DriftInput, DriftPolicy, DriftState, GroupPath, Health,
    ObservedForDrift, SyncStatus, Timestamp,
};
use fleetscope_store::{
    ClusterRow, DesiredRow, GroupRollup, HeartbeatRow, MembershipRow, ObservedRow, RenderRow,
};
use sha2::{Digest, Sha256};

use crate::rng::SplitMix64;

const REGIONS: &[(&str, &[&str])] = &[
    ("emea", &["de", "fr", "uk", "es", "it", "nl"]),
    ("amer", &["us", "ca", "br", "mx"]),
    ("apac", &["jp", "au", "sg", "in", "kr"]),
];
const SITES: &[&str] = &[
    "north",
    "south",
    "east",
    "west",
    "central",
    "harbor",
    "airport",
    "old-town",
    "riverside",
    "hills",
    "lakeside",
    "market",
];
const APPS: &[&str] = &[
    "checkout",
    "payments",
    "inventory",
    "pricing",
    "loyalty",
    "pos-gateway",
    "receipts",
    "scales",
    "cameras",
    "signage",
    "label-printer",
    "stock-sync",
    "order-pickup",
    "returns",
    "customer-wifi",
    "energy-monitor",
    "fridge-telemetry",
    "music",
    "staff-clock",
    "promotions",
    "search",
    "recommendations",
    "kiosk",
    "self-scan",
    "fraud-check",
    "vouchers",
    "delivery-slots",
    "audit-log",
    "metrics-agent",
    "log-shipper",
    "cert-manager",
    "ingress",
    "dns-cache",
    "backup",
    "vpn-edge",
    "printer-spool",
    "door-access",
    "hvac",
    "shelf-sensors",
    "queue-counter",
    "coupon-engine",
    "catalog",
    "price-tags",
    "smart-carts",
    "parking",
    "pharmacy",
    "bakery-ovens",
    "deli-scale",
    "security-scan",
    "edge-cache",
];

/// The app that is mid-rollout in the demo fleet: a new version desired minutes ago in `stage`.
const ROLLOUT_APP_INDEX: usize = 1;
/// Apps whose index ends in 9 run only in EMEA, so desired sets differ across regions.
fn regional_only(app_index: usize) -> bool {
    app_index % 10 == 9
}

/// What to generate. Shares are fractions in `[0, 1]`.
#[derive(Debug, Clone)]
pub struct FleetSpec {
    pub clusters: usize,
    pub apps: usize,
    pub seed: u64,
    pub now: Timestamp,
    pub policy: DriftPolicy,
    /// Clusters that have never sent a heartbeat.
    pub never_seen_share: f64,
    /// Clusters last seen well past the stale threshold.
    pub stale_share: f64,
    /// Pairs whose reconciler reports an error.
    pub failed_share: f64,
    /// Pairs running another version than desired long after the grace period.
    pub drifted_share: f64,
    /// Pairs desired but never reported.
    pub missing_share: f64,
    /// Clusters running an app nobody desired there.
    pub unexpected_share: f64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FleetSpecError {
    #[error("clusters must be between 1 and 10,000,000, got {0}")]
    Clusters(usize),
    #[error("apps must be between 1 and 1,000, got {0}")]
    Apps(usize),
    #[error("{name} must be a share between 0 and 1, got {value}")]
    Share { name: &'static str, value: f64 },
}

impl Default for FleetSpec {
    fn default() -> Self {
        FleetSpec {
            clusters: 2_000,
            apps: 50,
            seed: 1,
            now: Timestamp(1_800_000_000),
            policy: DriftPolicy::default(),
            never_seen_share: 0.01,
            stale_share: 0.03,
            failed_share: 0.015,
            drifted_share: 0.01,
            missing_share: 0.005,
            unexpected_share: 0.02,
        }
    }
}

impl FleetSpec {
    pub fn validate(&self) -> Result<(), FleetSpecError> {
        if !(1..=10_000_000).contains(&self.clusters) {
            return Err(FleetSpecError::Clusters(self.clusters));
        }
        if !(1..=1_000).contains(&self.apps) {
            return Err(FleetSpecError::Apps(self.apps));
        }
        for (name, value) in [
            ("never-seen share", self.never_seen_share),
            ("stale share", self.stale_share),
            ("failed share", self.failed_share),
            ("drifted share", self.drifted_share),
            ("missing share", self.missing_share),
            ("unexpected share", self.unexpected_share),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(FleetSpecError::Share { name, value });
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
struct AppDef {
    name: String,
    version: String,
    /// The version prod runs: one minor behind for every third app.
    prod_version: String,
    /// The version the rollout app is moving to in stage.
    next_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct RenderGroupKey {
    environment: &'static str,
    region: &'static str,
    reconciler: &'static str,
}

impl RenderGroupKey {
    fn name(&self) -> String {
        format!(
            "rg-{}-{}-{}",
            self.environment, self.region, self.reconciler
        )
    }
}

/// One simulated cluster: its rows and the ground truth for its pairs.
#[derive(Debug, Clone)]
pub struct SimCluster {
    pub cluster: ClusterRow,
    pub heartbeat: Option<HeartbeatRow>,
    pub membership: MembershipRow,
    pub observed: Vec<ObservedRow>,
    /// (app, drift state) for every pair of this cluster, as the model classifies it.
    pub truth: Vec<(String, DriftState)>,
    pub stale: bool,
}

/// A fleet ready to be generated cluster by cluster.
#[derive(Debug, Clone)]
pub struct GeneratedFleet {
    spec: FleetSpec,
    apps: Vec<AppDef>,
    commit: String,
}

const RENDER_ID: u64 = 1;

fn content_hash(render_group: &str, app: &str, version: &str) -> String {
    let digest = Sha256::digest(format!("{render_group}\0{app}\0{version}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}{hex}", fleetscope_model::stamps::CONTENT_HASH_PREFIX)
}

impl GeneratedFleet {
    pub fn new(spec: FleetSpec) -> Result<GeneratedFleet, FleetSpecError> {
        spec.validate()?;
        let apps = (0..spec.apps)
            .map(|i| {
                let name = APPS
                    .get(i)
                    .map(|s| (*s).to_owned())
                    .unwrap_or_else(|| format!("app-{i:03}"));
                let (major, minor) = (1 + i % 3, 2 + i % 7);
                AppDef {
                    name,
                    version: format!("{major}.{minor}.{}", i % 5),
                    prod_version: if i % 3 == 0 {
                        format!("{major}.{}.{}", minor - 1, i % 5)
                    } else {
                        format!("{major}.{minor}.{}", i % 5)
                    },
                    next_version: (i == ROLLOUT_APP_INDEX)
                        .then(|| format!("{major}.{}.0", minor + 1)),
                }
            })
            .collect();
        let commit = format!("{:040x}", u128::from(spec.seed) * 0x1000_0000_0000_0001);
        Ok(GeneratedFleet { spec, apps, commit })
    }

    pub fn spec(&self) -> &FleetSpec {
        &self.spec
    }

    fn placement(&self, index: usize) -> (GroupPath, &'static str, &'static str, &'static str) {
        let mut rng = SplitMix64::for_item(self.spec.seed, index as u64);
        let (region, countries) = REGIONS[index % REGIONS.len()];
        let country = countries[(index / REGIONS.len()) % countries.len()];
        let site = SITES[(index / 7) % 4 + (rng.below(2) as usize) * 4];
        let path = GroupPath::parse(&format!("{region}/{country}/{site}"))
            .expect("generated group paths are valid");
        let environment = match rng.below(100) {
            0..=84 => "prod",
            85..=94 => "stage",
            _ => "dev",
        };
        let reconciler = if rng.chance(0.3) { "argocd" } else { "flux" };
        (path, region, environment, reconciler)
    }

    fn desired_version(&self, app_index: usize, environment: &str) -> &str {
        let app = &self.apps[app_index];
        match (environment, &app.next_version) {
            ("stage", Some(next)) => next,
            ("prod", _) => &app.prod_version,
            _ => &app.version,
        }
    }

    fn desired_since(&self, app_index: usize, environment: &str) -> Timestamp {
        if app_index == ROLLOUT_APP_INDEX && environment == "stage" {
            self.spec.now.plus_seconds(-180)
        } else {
            self.spec.now.plus_seconds(-3 * 86_400)
        }
    }

    fn apps_for(&self, region: &str) -> impl Iterator<Item = usize> + '_ {
        let emea = region == "emea";
        (0..self.apps.len()).filter(move |i| emea || !regional_only(*i))
    }

    /// The render row of this fleet's single render.
    pub fn render(&self) -> RenderRow {
        RenderRow {
            render_id: RENDER_ID,
            commit: self.commit.clone(),
            platform_commit: self.commit.chars().rev().collect(),
            rendered_at: fleetscope_store::to_datetime(self.spec.now.plus_seconds(-3 * 86_400)),
            summary: format!(
                "generated fleet: {} apps for {} clusters",
                self.apps.len(),
                self.spec.clusters
            ),
            render_groups: self.render_group_keys().len() as u32,
            clusters: self.spec.clusters as u32,
            changed_items: 0,
        }
    }

    fn render_group_keys(&self) -> Vec<RenderGroupKey> {
        let mut keys = Vec::new();
        for environment in ["dev", "stage", "prod"] {
            for (region, _) in REGIONS {
                for reconciler in ["argocd", "flux"] {
                    keys.push(RenderGroupKey {
                        environment,
                        region,
                        reconciler,
                    });
                }
            }
        }
        keys
    }

    /// Desired rows of every render group (apps × distinct configurations, not × clusters).
    pub fn desired(&self) -> Vec<DesiredRow> {
        let mut rows = Vec::new();
        for key in self.render_group_keys() {
            let group = key.name();
            for app_index in self.apps_for(key.region) {
                let app = &self.apps[app_index];
                let version = self.desired_version(app_index, key.environment);
                rows.push(DesiredRow {
                    render_group: group.clone(),
                    app: app.name.clone(),
                    render_id: RENDER_ID,
                    version: version.to_owned(),
                    content_hash: content_hash(&group, &app.name, version),
                    kind: if key.reconciler == "argocd" {
                        "argocd-application"
                    } else if app_index % 2 == 0 {
                        "flux-kustomization"
                    } else {
                        "flux-helmrelease"
                    }
                    .to_owned(),
                    namespace: app.name.clone(),
                    reasons: vec![
                        format!("policy/{}-baseline", key.environment),
                        if regional_only(app_index) {
                            "policy/emea-only".to_owned()
                        } else {
                            "policy/all-stores".to_owned()
                        },
                    ],
                    commit: self.commit.clone(),
                    desired_since: fleetscope_store::to_datetime(
                        self.desired_since(app_index, key.environment),
                    ),
                    removed: 0,
                });
            }
        }
        rows
    }

    /// The cluster with index `index` (0-based, below `spec.clusters`).
    pub fn cluster(&self, index: usize) -> SimCluster {
        let spec = &self.spec;
        let now = spec.now;
        let (group, region, environment, reconciler) = self.placement(index);
        let site = group.as_str().rsplit('/').next().unwrap_or("site");
        let cluster_id = format!(
            "{}-{}-{index:05}",
            group.segments().nth(1).unwrap_or("xx"),
            site
        );
        let mut rng = SplitMix64::for_item(spec.seed ^ 0x5eed, index as u64);
        let key = RenderGroupKey {
            environment,
            region,
            reconciler,
        };
        let render_group = key.name();

        let labels = [
            ("environment", environment),
            ("region", region),
            ("reconciler", reconciler),
            (
                "tier",
                if index % 5 == 0 {
                    "flagship"
                } else {
                    "standard"
                },
            ),
        ];
        let cluster = ClusterRow {
            cluster_id: cluster_id.clone(),
            group_path: group.to_string(),
            group_prefixes: group.prefixes().into_iter().map(String::from).collect(),
            environment: environment.to_owned(),
            reconciler: reconciler.to_owned(),
            label_keys: labels.iter().map(|(k, _)| (*k).to_owned()).collect(),
            label_values: labels.iter().map(|(_, v)| (*v).to_owned()).collect(),
            updated_at: fleetscope_store::to_datetime(now.plus_seconds(-3 * 86_400)),
            version: RENDER_ID,
            removed: 0,
        };
        let roll = rng.unit();
        let last_seen = if roll < spec.never_seen_share {
            None
        } else if roll < spec.never_seen_share + spec.stale_share {
            Some(now.plus_seconds(
                -(spec.policy.stale_after_seconds + 60 + rng.below(3 * 86_400) as i64),
            ))
        } else {
            Some(now.plus_seconds(-(rng.below(45) as i64)))
        };
        let heartbeat = last_seen.map(|seen| HeartbeatRow {
            cluster_id: cluster_id.clone(),
            seen_at: fleetscope_store::to_datetime(seen),
            agent_version: "0.1.0".into(),
            reconciler_names: vec![reconciler.to_owned()],
            reconciler_versions: vec![if reconciler == "flux" {
                "v2.4.0"
            } else {
                "v2.13.1"
            }
            .to_owned()],
        });
        let membership = MembershipRow {
            cluster_id: cluster_id.clone(),
            render_group: render_group.clone(),
            render_id: RENDER_ID,
            removed: 0,
        };

        let mut observed = Vec::new();
        let mut truth = Vec::new();
        let mut seq = 0u64;
        let namespace = if reconciler == "flux" {
            "flux-system"
        } else {
            "argocd"
        };
        let mut push = |observed: &mut Vec<ObservedRow>,
                        kind: ObjectKind,
                        name: &str,
                        app: &str,
                        version: &str,
                        hash: &str,
                        health: Health,
                        sync: SyncStatus,
                        reason: &str,
                        message: &str,
                        transitioned_at: Timestamp| {
            seq += 1;
            observed.push(ObservedRow {
                cluster_id: cluster_id.clone(),
                object_kind: kind.as_str().to_owned(),
                object_namespace: namespace.to_owned(),
                object_name: name.to_owned(),
                app: app.to_owned(),
                version: version.to_owned(),
                content_hash: hash.to_owned(),
                applied_revision: if version.is_empty() {
                    "main@sha1:4d3c2b1a".to_owned()
                } else {
                    format!("{version}@sha1:{:08x}", seq * 2_654_435_761 % 0xffff_ffff)
                },
                health: health.as_str().to_owned(),
                sync: sync.as_str().to_owned(),
                reason: reason.to_owned(),
                message: message.to_owned(),
                transitioned_at: fleetscope_store::to_datetime(transitioned_at),
                observed_at: fleetscope_store::to_datetime(last_seen.unwrap_or(now).min(now)),
                received_at: fleetscope_store::to_datetime(last_seen.unwrap_or(now).min(now)),
                seq,
                deleted: 0,
            });
        };

        if last_seen.is_some() && reconciler == "flux" {
            // The platform's own source and root Kustomization: reported, never part of drift.
            push(
                &mut observed,
                ObjectKind::GitRepository,
                "platform",
                "",
                "",
                "",
                Health::Healthy,
                SyncStatus::Unknown,
                "Succeeded",
                "stored artifact for revision 'main@sha1:4d3c2b1a'",
                now.plus_seconds(-600),
            );
            push(
                &mut observed,
                ObjectKind::Kustomization,
                "flux-system",
                "",
                "",
                "",
                Health::Healthy,
                SyncStatus::Unknown,
                "ReconciliationSucceeded",
                "Applied revision: main@sha1:4d3c2b1a",
                now.plus_seconds(-600),
            );
        }

        let stale = last_seen.is_none_or(|seen| seen.age_at(now) > spec.policy.stale_after_seconds);
        for app_index in self.apps_for(region) {
            let app = &self.apps[app_index];
            let want = self.desired_version(app_index, environment);
            let want_hash = content_hash(&render_group, &app.name, want);
            let since = self.desired_since(app_index, environment);
            let kind = match (reconciler, app_index % 2) {
                ("argocd", _) => ObjectKind::Application,
                (_, 0) => ObjectKind::Kustomization,
                _ => ObjectKind::HelmRelease,
            };
            let pair = rng.unit();
            let (missing_until, failed_until) =
                (spec.missing_share, spec.missing_share + spec.failed_share);
            let drifted_until = failed_until + spec.drifted_share;
            let mut report: Option<(String, String, Health, SyncStatus, &str, String, Timestamp)> =
                None;
            let settled = now.plus_seconds(-(3_600 + rng.below(9 * 86_400) as i64));
            if last_seen.is_none() {
                // Never reported: nothing observed.
            } else if app_index == ROLLOUT_APP_INDEX && environment == "stage" {
                if rng.chance(0.6) {
                    report = Some((
                        want.to_owned(),
                        want_hash.clone(),
                        Health::Healthy,
                        SyncStatus::Synced,
                        "UpgradeSucceeded",
                        format!("Helm upgrade to {want} succeeded"),
                        now.plus_seconds(-60),
                    ));
                } else {
                    let previous = &app.version;
                    report = Some((
                        previous.clone(),
                        content_hash(&render_group, &app.name, previous),
                        Health::Healthy,
                        SyncStatus::Synced,
                        "ReconciliationSucceeded",
                        "waiting for the next reconciliation".to_owned(),
                        settled,
                    ));
                }
            } else if pair < missing_until {
                // Desired, never arrived.
            } else if pair < failed_until {
                let message = match kind {
                    ObjectKind::HelmRelease => format!("Helm upgrade failed for release {}/{}: timed out waiting for the condition", app.name, app.name),
                    ObjectKind::Application => "one or more objects failed to apply: Deployment is invalid: spec.template.spec.containers[0].image: Required value".to_owned(),
                    _ => "kustomize build failed: accumulating resources: open overlays/store/patch.yaml: no such file or directory".to_owned(),
                };
                report = Some((
                    want.to_owned(),
                    want_hash.clone(),
                    Health::Degraded,
                    SyncStatus::Synced,
                    "ReconciliationFailed",
                    message,
                    now.plus_seconds(-(300 + rng.below(7_200) as i64)),
                ));
            } else if pair < drifted_until {
                let old = format!("{}-hotfix", app.version);
                let sync = if reconciler == "argocd" {
                    SyncStatus::OutOfSync
                } else {
                    SyncStatus::Unknown
                };
                report = Some((
                    old.clone(),
                    content_hash(&render_group, &app.name, &old),
                    Health::Healthy,
                    sync,
                    "ManualChange",
                    "live version differs from the rendered one".to_owned(),
                    settled,
                ));
            } else {
                report = Some((
                    want.to_owned(),
                    want_hash.clone(),
                    Health::Healthy,
                    SyncStatus::Synced,
                    "ReconciliationSucceeded",
                    format!("Applied revision: {want}"),
                    settled,
                ));
            }
            let observed_for_drift =
                report
                    .as_ref()
                    .map(|(version, hash, health, sync, _, _, at)| ObservedForDrift {
                        version,
                        content_hash: hash,
                        health: *health,
                        sync: *sync,
                        transitioned_at: *at,
                    });
            let state = classify(
                &DriftInput {
                    now,
                    last_seen,
                    desired: Some(DesiredForDrift {
                        version: want,
                        content_hash: &want_hash,
                        since,
                    }),
                    observed: observed_for_drift,
                },
                &spec.policy,
            );
            truth.push((app.name.clone(), state));
            if let Some((version, hash, health, sync, reason, message, at)) = report {
                push(
                    &mut observed,
                    kind,
                    &app.name,
                    &app.name,
                    &version,
                    &hash,
                    health,
                    sync,
                    reason,
                    &message,
                    at,
                );
            }
        }
        if last_seen.is_some() && rng.chance(spec.unexpected_share) {
            let (version, hash) = (
                "0.9.0",
                content_hash("hand-installed", "legacy-agent", "0.9.0"),
            );
            let kind = if reconciler == "argocd" {
                ObjectKind::Application
            } else {
                ObjectKind::HelmRelease
            };
            push(
                &mut observed,
                kind,
                "legacy-agent",
                "legacy-agent",
                version,
                &hash,
                Health::Healthy,
                SyncStatus::Synced,
                "InstallSucceeded",
                "installed by hand",
                now.plus_seconds(-86_400),
            );
            let state = classify(
                &DriftInput {
                    now,
                    last_seen,
                    desired: None,
                    observed: Some(ObservedForDrift {
                        version,
                        content_hash: &hash,
                        health: Health::Healthy,
                        sync: SyncStatus::Synced,
                        transitioned_at: now.plus_seconds(-86_400),
                    }),
                },
                &spec.policy,
            );
            truth.push(("legacy-agent".to_owned(), state));
        }
        SimCluster {
            cluster,
            heartbeat,
            membership,
            observed,
            truth,
            stale,
        }
    }
}

/// The rollup the generated fleet must produce, built from the model's verdicts.
#[derive(Debug, Default, Clone)]
pub struct GroundTruth {
    rollups: BTreeMap<String, GroupRollup>,
}

impl GroundTruth {
    pub fn add(&mut self, sim: &SimCluster) {
        let keys = std::iter::once(String::new()).chain(sim.cluster.group_prefixes.iter().cloned());
        for key in keys {
            let depth = if key.is_empty() {
                0
            } else {
                key.split('/').count()
            };
            let rollup = self
                .rollups
                .entry(key.clone())
                .or_insert_with(|| GroupRollup {
                    group_path: key,
                    depth,
                    clusters: 0,
                    stale_clusters: 0,
                    pairs: BTreeMap::new(),
                });
            rollup.clusters += 1;
            rollup.stale_clusters += u64::from(sim.stale);
            for (_, state) in &sim.truth {
                *rollup.pairs.entry(*state).or_default() += 1;
            }
        }
    }

    /// Group rollups in the order the store returns them (the fleet first, then by path).
    pub fn rollups(&self) -> Vec<GroupRollup> {
        self.rollups.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_is_deterministic_and_reaches_every_interesting_state() {
        let fleet = GeneratedFleet::new(FleetSpec {
            clusters: 600,
            ..FleetSpec::default()
        })
        .unwrap();
        let again = GeneratedFleet::new(FleetSpec {
            clusters: 600,
            ..FleetSpec::default()
        })
        .unwrap();
        let mut truth = GroundTruth::default();
        for i in 0..600 {
            let sim = fleet.cluster(i);
            assert_eq!(
                sim.observed,
                again.cluster(i).observed,
                "same seed, same fleet"
            );
            fleetscope_model::ClusterId::parse(&sim.cluster.cluster_id).unwrap();
            truth.add(&sim);
        }
        let fleet_rollup = &truth.rollups()[0];
        assert_eq!(fleet_rollup.group_path, "");
        assert_eq!(fleet_rollup.clusters, 600);
        for state in [
            DriftState::InSync,
            DriftState::Progressing,
            DriftState::Failed,
            DriftState::OutOfSync,
            DriftState::Missing,
            DriftState::Unexpected,
            DriftState::Stale,
        ] {
            assert!(
                fleet_rollup.count(state) > 0,
                "{state} appears in the demo fleet: {:?}",
                fleet_rollup.pairs
            );
        }
        let in_sync_share =
            fleet_rollup.count(DriftState::InSync) as f64 / fleet_rollup.total_pairs() as f64;
        assert!(
            in_sync_share > 0.85,
            "most of the fleet is in sync: {in_sync_share}"
        );
        let groups = truth.rollups().iter().filter(|r| r.depth == 3).count();
        assert!(groups > 20, "a real three-level hierarchy: {groups} sites");
    }

    #[test]
    fn output_grows_with_render_groups_not_clusters() {
        let small = GeneratedFleet::new(FleetSpec {
            clusters: 10,
            ..FleetSpec::default()
        })
        .unwrap();
        let large = GeneratedFleet::new(FleetSpec {
            clusters: 100_000,
            ..FleetSpec::default()
        })
        .unwrap();
        assert_eq!(small.desired().len(), large.desired().len());
    }

    #[test]
    fn bad_specs_are_refused() {
        let err = GeneratedFleet::new(FleetSpec {
            clusters: 0,
            ..FleetSpec::default()
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "clusters must be between 1 and 10,000,000, got 0"
        );
        let err = GeneratedFleet::new(FleetSpec {
            stale_share: 1.5,
            ..FleetSpec::default()
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "stale share must be a share between 0 and 1, got 1.5"
        );
    }
}
