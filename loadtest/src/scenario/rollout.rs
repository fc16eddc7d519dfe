//! The rollout scenario: a new version of one app rendered, published and taken by the
//! clusters in waves.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_fixtures::rng::SplitMix64;
use fleetscope_model::{Health, Timestamp};
use fleetscope_renderer::RenderOutcome;
use fleetscope_runtime::clock;

use super::prober::Probe;
use super::{progress_bar, Ctx, RolloutReport, WaveReport};
use crate::sim::failure;

impl Ctx {
    /// A new version of one app: the platform repo is changed, rendered and published by the
    /// real renderer, then clusters take it in waves (by group), each wave first progressing,
    /// then healthy or (at `failure_rate`) failed.
    pub async fn rollout(
        &self,
        rng: &mut SplitMix64,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<u64> {
        let app = {
            let fleet = self.agents.fleet.lock().expect("fleet lock");
            match &self.knobs.rollout.app {
                Some(app) => app.clone(),
                None => fleet
                    .apps
                    .iter()
                    .find(|a| *a == "app-001")
                    .or_else(|| fleet.apps.first())
                    .cloned()
                    .unwrap_or_default(),
            }
        };
        self.rollout_of(&app, rng, notes).await
    }

    /// The rollout of a new version of `app` (see [`Ctx::rollout`]).
    pub async fn rollout_of(
        &self,
        app: &str,
        rng: &mut SplitMix64,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<u64> {
        let app = app.to_owned();
        let (from, to) = bump_version(&self.platform_dir, &app)?;
        fleetscope_renderer::git::commit_platform(&self.platform_dir, &format!("{app} {to}"))?;
        let release = self.render_and_publish().await?;
        let Taken {
            changed_pairs,
            targets,
            app_id,
        } = self.take_render(&release, &app)?;
        let outcome = &release.outcome;
        notes.push(format!(
            "{app} {from} → {to}: rendered in {:.2} s ({}), published in {:.2} s ({}); {changed_pairs} pairs changed, {} delivering clusters run it",
            release.render_seconds,
            outcome.summary,
            release.publish_seconds,
            release.publish_detail,
            targets.len()
        ));
        self.say(&format!(
            "new version {app} {from} → {to} in the platform repo: rendered, committed ({}) and published; {}",
            &outcome.commit.head[..12.min(outcome.commit.head.len())],
            outcome.summary
        ));
        let mut report = RolloutReport {
            app: app.clone(),
            from_version: from,
            to_version: to.clone(),
            render_seconds: release.render_seconds,
            publish_seconds: release.publish_seconds,
            render_summary: outcome.summary.clone(),
            changed_pairs,
            waves: Vec::new(),
        };
        let failure_rate = self.knobs.rollout.failure_rate;
        let changes = self
            .roll_out_in_waves(&app, &to, app_id, &targets, failure_rate, rng, &mut report)
            .await?;
        *self.live_status.lock().expect("status lock") = None;
        *self.rollout.lock().expect("rollout lock") = Some(report);
        Ok(changes)
    }

    /// Takes `app` back to `version` (the one its last rollout moved clusters from): the
    /// platform repo is changed back, rendered and published, and the clusters that take it
    /// run it again, in the same waves, without failures. Returns the changes made.
    pub async fn roll_back(
        &self,
        app: &str,
        version: &str,
        rng: &mut SplitMix64,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<u64> {
        let from = set_version(&self.platform_dir, app, |_| Ok(version.to_owned()))?;
        fleetscope_renderer::git::commit_platform(
            &self.platform_dir,
            &format!("{app} back to {version}"),
        )?;
        let release = self.render_and_publish().await?;
        let Taken {
            changed_pairs,
            targets,
            app_id,
        } = self.take_render(&release, app)?;
        notes.push(format!(
            "{app} {from} rolled back to {version}: {changed_pairs} pairs changed, {} delivering clusters run it again",
            targets.len()
        ));
        self.say(&format!(
            "{app} {from} rolled back to {version} in the platform repo: rendered and published; {}",
            release.outcome.summary
        ));
        let mut report = RolloutReport {
            app: app.to_owned(),
            from_version: from,
            to_version: version.to_owned(),
            render_seconds: release.render_seconds,
            publish_seconds: release.publish_seconds,
            render_summary: release.outcome.summary.clone(),
            changed_pairs,
            waves: Vec::new(),
        };
        let changes = self
            .roll_out_in_waves(app, version, app_id, &targets, 0.0, rng, &mut report)
            .await?;
        *self.live_status.lock().expect("status lock") = None;
        *self.rollout.lock().expect("rollout lock") = Some(report);
        Ok(changes)
    }

    /// Renders the changed platform repo and publishes its desired state, timing both.
    async fn render_and_publish(&self) -> anyhow::Result<Release> {
        let started = Instant::now();
        let (platform, gitops) = (self.platform_dir.clone(), self.gitops_dir.clone());
        let outcome =
            tokio::task::spawn_blocking(move || fleetscope_renderer::render(&platform, &gitops))
                .await??;
        let render_seconds = started.elapsed().as_secs_f64();
        let published_at = clock::now();
        let started = Instant::now();
        let published = fleetscope_renderer::desired::publish(
            &self.store,
            &outcome,
            published_at.seconds() as u64 * 1_000,
            published_at,
        )
        .await?;
        let publish_seconds = started.elapsed().as_secs_f64();
        let t = published.timings;
        let publish_detail = format!(
            "read {:.2} s, compare {:.2} s, write {:.2} s: {} desired, {} membership, {} inventory rows",
            t.read.as_secs_f64(),
            t.compare.as_secs_f64(),
            t.write.as_secs_f64(),
            published.desired_rows + published.removed_rows,
            published.membership_rows + published.reason_member_rows,
            published.cluster_rows
        );
        Ok(Release {
            outcome,
            published_at,
            render_seconds,
            publish_seconds,
            publish_detail,
        })
    }

    /// Gives the simulated fleet the new render: the pairs it changed and the clusters that take
    /// the new version of `app`.
    fn take_render(&self, release: &Release, app: &str) -> anyhow::Result<Taken> {
        let published_at = release.published_at;
        let mut fleet = self.agents.fleet.lock().expect("fleet lock");
        let changed = fleet.apply_render(&release.outcome, published_at)?;
        let app_id = fleet
            .app_index(app)
            .ok_or_else(|| anyhow::anyhow!("no app {app} in the fleet"))?;
        let mut targets: Vec<(String, usize)> = fleet
            .clusters
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                !c.never_seen
                    && !c.dark
                    && c.wants
                        .iter()
                        .any(|w| w.app == app_id && w.since == published_at.seconds())
                    && c.objects.iter().any(|o| o.app == app_id)
            })
            .map(|(i, c)| (c.group.clone(), i))
            .collect();
        targets.sort();
        Ok(Taken {
            changed_pairs: changed,
            targets,
            app_id,
        })
    }

    /// Takes the targets through the waves, each cluster failing at `failure_rate`, adding each
    /// wave's report to `report`; returns the changes made.
    #[allow(clippy::too_many_arguments)]
    async fn roll_out_in_waves(
        &self,
        app: &str,
        to: &str,
        app_id: u16,
        targets: &[(String, usize)],
        failure_rate: f64,
        rng: &mut SplitMix64,
        report: &mut RolloutReport,
    ) -> anyhow::Result<u64> {
        // Waves follow the group hierarchy: consecutive slices of the clusters sorted by group.
        let waves = self.knobs.rollout.waves.max(1);
        let per_wave = targets.len().div_ceil(waves).max(1);
        let plan = WavePlan {
            app,
            to,
            app_id,
            chunks: targets.len().div_ceil(per_wave),
            half: Duration::from_millis(self.knobs.rollout.wave_seconds * 500),
            failure_rate,
        };
        let mut changes = 0;
        let bar = if self.knobs.live {
            indicatif::ProgressBar::hidden()
        } else {
            progress_bar(waves as u64, "rollout", "waves")
        };
        for (wave, slice) in targets.chunks(per_wave).enumerate() {
            let (wave_report, made) = self.wave(&plan, wave, slice, rng).await?;
            changes += made;
            report.waves.push(wave_report);
            bar.inc(1);
        }
        bar.finish_and_clear();
        Ok(changes)
    }

    /// One wave: its clusters start applying the new version, then each becomes healthy or
    /// fails, and the hub's gate is read once that was delivered. Returns the wave's report and
    /// the changes made.
    async fn wave(
        &self,
        plan: &WavePlan<'_>,
        wave: usize,
        slice: &[(String, usize)],
        rng: &mut SplitMix64,
    ) -> anyhow::Result<(WaveReport, u64)> {
        let (app, to, chunks) = (plan.app, plan.to, plan.chunks);
        let groups = wave_groups(slice);
        let status = format!(
            "rollout of {app} {to}: wave {}/{chunks} ({} clusters in {})",
            wave + 1,
            slice.len(),
            groups.join(", ")
        );
        self.say(&format!("{status} starts applying {to}"));
        *self.live_status.lock().expect("status lock") = Some(status);
        self.start_applying(plan.app_id, slice);
        self.deliver(slice.iter().map(|(_, c)| *c));
        tokio::time::sleep(plan.half).await;
        let failed = self.settle(plan, slice, rng);
        self.deliver(slice.iter().map(|(_, c)| *c));
        tokio::time::sleep(plan.half).await;
        let gate = self.gate_after_wave(app, to).await?;
        let wave_report = WaveReport {
            wave: wave + 1,
            groups,
            clusters: slice.len() as u64,
            failed,
            gate_share_in_sync: gate["share_in_sync"].as_f64().unwrap_or(0.0),
            gate_verdict: gate["verdict"].as_str().unwrap_or_default().to_owned(),
        };
        self.say(&format!(
            "rollout of {app} {to}: wave {}/{chunks} done, {} of {} clusters failed; the hub's gate at 90% in sync says {} ({:.1}% of the targeted clusters in sync)",
            wave + 1,
            failed,
            slice.len(),
            wave_report.gate_verdict,
            wave_report.gate_share_in_sync * 100.0
        ));
        // Every cluster of the wave changed twice: to progressing, then to settled.
        Ok((wave_report, 2 * slice.len() as u64))
    }

    /// Every cluster of the wave starts applying the version it wants.
    fn start_applying(&self, app_id: u16, slice: &[(String, usize)]) {
        let mut fleet = self.agents.fleet.lock().expect("fleet lock");
        let now = clock::now();
        for &(_, c) in slice {
            let want = fleet.clusters[c]
                .wants
                .iter()
                .find(|w| w.app == app_id)
                .cloned()
                .expect("targets desire the app");
            fleet.change(c, app_id, now, |o| {
                o.version = want.version.clone();
                o.content_hash = want.content_hash.clone();
                o.health = Health::Progressing;
                o.reason = "Progressing";
                o.message = "";
                o.transitioned_at = now.seconds();
            });
        }
    }

    /// Each cluster of the wave either becomes healthy or (at `failure_rate`) fails, with a new
    /// revision, sampled for freshness; returns how many failed.
    fn settle(&self, plan: &WavePlan<'_>, slice: &[(String, usize)], rng: &mut SplitMix64) -> u64 {
        let app_id = plan.app_id;
        let probe_every = (slice.len() / self.knobs.freshness_samples.max(1)).max(1);
        let mut failed = 0;
        let mut fleet = self.agents.fleet.lock().expect("fleet lock");
        let now = clock::now();
        for (n, &(_, c)) in slice.iter().enumerate() {
            let fails = rng.chance(plan.failure_rate);
            failed += u64::from(fails);
            let version = fleet.clusters[c]
                .wants
                .iter()
                .find(|w| w.app == app_id)
                .map(|w| w.version.to_string())
                .unwrap_or_default();
            let revision = self.next_revision(&version);
            let rev: Arc<str> = Arc::from(revision.as_str());
            fleet.change(c, app_id, now, |o| {
                o.revision = rev;
                o.transitioned_at = now.seconds();
                if fails {
                    let (reason, message) = failure(o.kind);
                    o.health = Health::Degraded;
                    o.reason = reason;
                    o.message = message;
                } else {
                    o.health = Health::Healthy;
                    o.reason = "ReconciliationSucceeded";
                    o.message = "";
                }
            });
            if n % probe_every == 0 {
                self.prober.offer(Probe {
                    cluster: fleet.clusters[c].id.clone(),
                    app: plan.app.to_owned(),
                    revision,
                    health: if fails {
                        Health::Degraded
                    } else {
                        Health::Healthy
                    },
                    made: Instant::now(),
                });
            }
        }
        failed
    }

    /// The hub's rollout gate for the whole fleet, read once the wave's reports were
    /// acknowledged and the hub had a refresh to take them in: on a loaded machine half a wave
    /// may not be enough.
    async fn gate_after_wave(&self, app: &str, to: &str) -> anyhow::Result<serde_json::Value> {
        self.agents.drained(self.knobs.drain_timeout).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        self.hub
            .get(&format!(
                "/api/v1/gate?app={app}&version={to}&threshold=0.9"
            ))
            .await
    }
}

/// The new version of the rendered and published platform repo, with how long each step took.
struct Release {
    outcome: RenderOutcome,
    published_at: Timestamp,
    render_seconds: f64,
    publish_seconds: f64,
    /// The publication's steps and rows, for the phase's notes.
    publish_detail: String,
}

/// What the simulated fleet made of a new render.
struct Taken {
    /// (cluster, app) pairs whose desired state changed.
    changed_pairs: u64,
    /// The delivering clusters that now want the new version, as (group, cluster) sorted by
    /// group.
    targets: Vec<(String, usize)>,
    /// The rolled-out app's index in the fleet.
    app_id: u16,
}

/// What every wave of one rollout shares.
struct WavePlan<'a> {
    app: &'a str,
    /// The version rolled out.
    to: &'a str,
    app_id: u16,
    /// How many waves there are.
    chunks: usize,
    /// Half a wave: progressing for this long, then settled for this long.
    half: Duration,
    /// The share of the clusters on which the version fails.
    failure_rate: f64,
}

/// The groups of a wave's clusters, cut to their first two levels, in order.
fn wave_groups(slice: &[(String, usize)]) -> Vec<String> {
    let mut groups: Vec<String> = slice
        .iter()
        .map(|(g, _)| g.split('/').take(2).collect::<Vec<_>>().join("/"))
        .collect();
    groups.dedup();
    groups
}

/// Raises the version of `app` in the platform repo: the minor number goes up by one and the
/// patch number becomes 0. The app is looked for in every YAML file under `apps/` as a document
/// with `name: <app>` followed by `version: <major.minor.patch>`. Returns (old, new).
pub fn bump_version(platform_dir: &Path, app: &str) -> anyhow::Result<(String, String)> {
    let mut new = String::new();
    let old = set_version(platform_dir, app, |old| {
        let mut parts: Vec<u64> = old
            .split('.')
            .map(|p| p.parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|_| anyhow::anyhow!("version {old:?} of {app} is not major.minor.patch"))?;
        anyhow::ensure!(
            parts.len() == 3,
            "version {old:?} of {app} is not major.minor.patch"
        );
        parts[1] += 1;
        parts[2] = 0;
        new = format!("{}.{}.{}", parts[0], parts[1], parts[2]);
        Ok(new.clone())
    })?;
    Ok((old, new))
}

/// Sets the version of `app` in the platform repo to what `new` makes of the current one
/// (looked for as in [`bump_version`]); returns the version it had.
pub fn set_version(
    platform_dir: &Path,
    app: &str,
    new: impl FnOnce(&str) -> anyhow::Result<String>,
) -> anyhow::Result<String> {
    let apps = platform_dir.join("apps");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&apps)
        .map_err(|err| anyhow::anyhow!("cannot read {}: {err}", apps.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    let marker = format!("name: {app}\nversion: ");
    for path in files {
        let text = std::fs::read_to_string(&path)?;
        let Some(found) = text.find(&marker) else {
            continue;
        };
        let at = found + marker.len();
        let end = at + text[at..].find('\n').unwrap_or(text.len() - at);
        let old = text[at..end].trim().to_owned();
        let version = new(&old)?;
        std::fs::write(&path, format!("{}{version}{}", &text[..at], &text[end..]))?;
        return Ok(old);
    }
    anyhow::bail!("app {app} is not in any YAML file of {}", apps.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bump_raises_the_minor_version_of_that_app_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("apps")).unwrap();
        std::fs::write(
            dir.path().join("apps/apps.yaml"),
            "kind: Application\nname: app-000\nversion: 1.0.0\n---\nkind: Application\nname: app-001\nversion: 1.1.1\nnamespace: x\n",
        )
        .unwrap();
        let (old, new) = bump_version(dir.path(), "app-001").unwrap();
        assert_eq!((old.as_str(), new.as_str()), ("1.1.1", "1.2.0"));
        let text = std::fs::read_to_string(dir.path().join("apps/apps.yaml")).unwrap();
        assert!(text.contains("name: app-000\nversion: 1.0.0\n"));
        assert!(text.contains("name: app-001\nversion: 1.2.0\nnamespace: x\n"));
        assert!(bump_version(dir.path(), "app-404").is_err());
    }

    #[test]
    fn bump_finds_the_app_in_any_file_under_apps() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("apps")).unwrap();
        std::fs::write(
            dir.path().join("apps/platform.yaml"),
            "kind: Application\nname: metrics-agent\nversion: 0.9.3\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("apps/shop.yaml"),
            "kind: Application\nname: checkout\nversion: 1.4.0\nnamespace: shop\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("apps/notes.txt"),
            "name: checkout\nversion: 9.9.9\n",
        )
        .unwrap();
        let (old, new) = bump_version(dir.path(), "checkout").unwrap();
        assert_eq!((old.as_str(), new.as_str()), ("1.4.0", "1.5.0"));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("apps/shop.yaml")).unwrap(),
            "kind: Application\nname: checkout\nversion: 1.5.0\nnamespace: shop\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("apps/notes.txt")).unwrap(),
            "name: checkout\nversion: 9.9.9\n",
            "only YAML files are changed"
        );
        let err = bump_version(dir.path(), "app-404").unwrap_err().to_string();
        assert!(
            err.contains("app app-404 is not in any YAML file of"),
            "{err}"
        );
    }
}
