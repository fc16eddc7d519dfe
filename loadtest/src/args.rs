//! The options of `fleetscope loadtest` and their checks.

use std::path::PathBuf;

use crate::agents::Backoff;
use crate::cluster::ClusterShape;
use crate::faults::Fault;
use crate::scenario::Scenario;

/// Options of `fleetscope loadtest`.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadtestArgs {
    /// Simulated clusters.
    #[arg(long, default_value_t = 30_000)]
    pub clusters: usize,
    /// Apps in the generated platform repo (most clusters run nearly all of them).
    #[arg(long, default_value_t = 100)]
    pub apps: usize,
    /// Scenarios after the initial connection, in order (repeat or comma-separate).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Scenario::Steady, Scenario::Rollout, Scenario::Flap, Scenario::Dark, Scenario::Storm])]
    pub scenarios: Vec<Scenario>,
    /// Simulated agents' requests in flight at once. Real agents never wait for each other;
    /// too few workers turn any slowdown of the collector into a queue in the simulator.
    #[arg(long, default_value_t = 256)]
    pub concurrency: usize,
    /// Concurrent readers of the hub's API while the scenarios run.
    #[arg(long, default_value_t = 4)]
    pub readers: usize,
    /// Agents report their objects without Fleetscope's stamps: the generated platform repo
    /// gives every app a match rule (by name, the version from the label
    /// `app.kubernetes.io/version`), and the collector resolves each object by it.
    #[arg(long)]
    pub unstamped: bool,
    /// Seed of the simulated fleet and its events.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Directory for the report (JSON, Markdown, PNG plots) and the services' logs.
    #[arg(long, default_value = "loadtest-report")]
    pub out: PathBuf,
    /// Seconds between an idle agent's heartbeats.
    #[arg(long, default_value_t = 30)]
    pub heartbeat_seconds: u64,
    /// Seconds without a heartbeat after which the hub calls a cluster stale (the dark
    /// scenario waits this long and 15 s more).
    #[arg(long, default_value_t = 120)]
    pub stale_after: i64,
    /// Length of the steady phase.
    #[arg(long, default_value_t = 120)]
    pub steady_seconds: u64,
    /// Share of app instances changing status per minute in the steady phase.
    #[arg(long, default_value_t = 0.01)]
    pub change_rate: f64,
    /// App whose new version the rollout scenario renders and rolls out (default app-001).
    #[arg(long)]
    pub rollout_app: Option<String>,
    #[arg(long, default_value_t = 3)]
    pub waves: usize,
    /// Seconds per rollout wave (half progressing, half settled).
    #[arg(long, default_value_t = 20)]
    pub wave_seconds: u64,
    /// Share of a wave's clusters on which the new version fails.
    #[arg(long, default_value_t = 0.05)]
    pub failure_rate: f64,
    /// Share of clusters flapping in the flap scenario.
    #[arg(long, default_value_t = 0.02)]
    pub flap_share: f64,
    #[arg(long, default_value_t = 60)]
    pub flap_seconds: u64,
    #[arg(long, default_value_t = 5)]
    pub flap_period_seconds: u64,
    /// Share of clusters going dark in the dark scenario.
    #[arg(long, default_value_t = 0.05)]
    pub dark_share: f64,
    /// How long the ground-truth check after each phase waits for the hub to agree (the time it
    /// took is reported per phase); a larger fleet needs longer for the hub to catch up.
    #[arg(long, default_value_t = 60)]
    pub check_seconds: u64,
    /// At most this many freshness samples per phase.
    #[arg(long, default_value_t = 100)]
    pub freshness_samples: usize,
    /// The fleetscope binary the collector and hub are started from (default: this one).
    #[arg(long)]
    pub fleetscope_binary: Option<PathBuf>,
    /// Cluster mode: ClickHouse as SHARDSxREPLICAS servers (say 2x2) with ZooKeeper, two
    /// collectors and two hubs, each kind behind HAProxy, all on loopback. Without it: one
    /// ClickHouse server, one collector, one hub.
    #[arg(long, value_name = "SHARDSxREPLICAS")]
    pub clickhouse_cluster: Option<ClusterShape>,
    /// Faults to inject one at a time in cluster mode, each during every scenario of
    /// --fault-scenarios, after the scenarios of --scenarios (repeat or comma-separate).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub faults: Vec<Fault>,
    /// The scenarios each fault is injected during.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Scenario::Steady, Scenario::Rollout])]
    pub fault_scenarios: Vec<Scenario>,
    /// Seconds of a fault phase before its fault is injected.
    #[arg(long, default_value_t = 5)]
    pub fault_lead_seconds: u64,
    /// How long a killed ClickHouse replica stays down before it is started again on its data.
    #[arg(long, default_value_t = 10)]
    pub replica_down_seconds: u64,
    /// How long ZooKeeper stays stopped (SIGSTOP; replicated inserts are refused meanwhile).
    #[arg(long, default_value_t = 60)]
    pub zookeeper_stop_seconds: u64,
    /// How long a killed collector or hub stays down before it is started again.
    #[arg(long, default_value_t = 5)]
    pub service_down_seconds: u64,
    /// How long the outage scenario keeps the collector down (killed, then started again).
    #[arg(long, default_value_t = 60)]
    pub outage_seconds: u64,
    /// How long after the collector's return the outage scenario goes on changing the fleet
    /// and counting the requests per second.
    #[arg(long, default_value_t = 120)]
    pub outage_after_seconds: u64,
    /// How the simulated agents wait before sending a report again: `spread` as the agent
    /// does, or `plain`, the same backoff and Retry-After without the spread.
    #[arg(long, value_enum, default_value_t = Backoff::Spread)]
    pub agent_backoff: Backoff,
}

impl LoadtestArgs {
    /// Checks the options that clap cannot: shares between 0 and 1, positive counts, and a
    /// stale threshold above two heartbeat intervals.
    pub(crate) fn validate(&self) -> anyhow::Result<()> {
        let share = |name: &str, v: f64| {
            anyhow::ensure!(
                (0.0..=1.0).contains(&v),
                "--{name} must be between 0 and 1, got {v}"
            );
            Ok(())
        };
        anyhow::ensure!(self.clusters > 0, "--clusters must be positive");
        anyhow::ensure!(
            (1..=999).contains(&self.apps),
            "--apps must be between 1 and 999"
        );
        anyhow::ensure!(self.concurrency > 0, "--concurrency must be positive");
        anyhow::ensure!(
            self.heartbeat_seconds > 0,
            "--heartbeat-seconds must be positive"
        );
        anyhow::ensure!(
            self.stale_after > 2 * self.heartbeat_seconds as i64,
            "--stale-after ({}) must exceed two heartbeat intervals ({} s), or delivering clusters would look stale",
            self.stale_after,
            2 * self.heartbeat_seconds
        );
        anyhow::ensure!(self.waves > 0, "--waves must be positive");
        share("change-rate", self.change_rate)?;
        share("failure-rate", self.failure_rate)?;
        share("flap-share", self.flap_share)?;
        share("dark-share", self.dark_share)?;
        match self.clickhouse_cluster {
            None => anyhow::ensure!(
                self.faults.is_empty(),
                "--faults needs --clickhouse-cluster: one server of each kind has no other to \
                 take over"
            ),
            Some(shape) => anyhow::ensure!(
                shape.replicas >= 2 || !self.faults.contains(&Fault::Replica),
                "--faults replica needs at least two replicas per shard (--clickhouse-cluster {}x2)",
                shape.shards
            ),
        }
        anyhow::ensure!(
            self.clickhouse_cluster.is_none() || !self.scenarios.contains(&Scenario::Outage),
            "--scenarios outage takes down the only collector; with --clickhouse-cluster, use \
             --faults collector"
        );
        anyhow::ensure!(
            self.outage_after_seconds > 0,
            "--outage-after-seconds must be positive"
        );
        if let Some(other) = self
            .fault_scenarios
            .iter()
            .find(|s| !matches!(s, Scenario::Steady | Scenario::Rollout))
        {
            anyhow::bail!(
                "--fault-scenarios takes steady and rollout, not {}",
                other.name()
            );
        }
        anyhow::ensure!(
            self.faults.is_empty() || !self.fault_scenarios.is_empty(),
            "--faults needs at least one of --fault-scenarios"
        );
        Ok(())
    }
}
