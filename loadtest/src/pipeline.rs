//! The running pipeline the load test and the demo share: the real collector and hub started as
//! child processes over one ClickHouse, the simulated fleet's agents delivering through the
//! collector, the freshness prober polling the hub, and the scenario context over all of it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fleetscope_store::Store;
use tokio::task::JoinHandle;

use crate::agents::Agents;
use crate::hubcheck::HubClient;
use crate::procs::{self, Service};
use crate::scenario::{Ctx, Knobs, Prober};
use crate::sim::SimFleet;

/// A reader token written into the hub's token file.
#[derive(Debug, Clone)]
pub struct HubReader {
    pub name: &'static str,
    pub token: &'static str,
    /// The group subtree the token is confined to (none: the whole fleet).
    pub scope: Option<&'static str>,
}

/// How to start the pipeline.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// The fleetscope binary the collector and hub are started from.
    pub exe: PathBuf,
    pub clickhouse_url: String,
    /// Where the token files go.
    pub dir: PathBuf,
    /// Where the services' logs go.
    pub logs: PathBuf,
    /// Ports of the collector and the hub (taken: another free port; 0: any free port).
    pub collector_port: u16,
    pub hub_port: u16,
    /// Seconds without a heartbeat after which the hub calls a cluster stale.
    pub stale_after: i64,
    /// Seconds between an idle agent's heartbeats.
    pub heartbeat: Duration,
    /// The agents' requests in flight at once.
    pub concurrency: usize,
    /// How long the hub client waits for an answer.
    pub hub_timeout: Duration,
    /// The hub's tokens; the first is the one the scenarios, checks and probes read with.
    pub readers: Vec<HubReader>,
    pub knobs: Knobs,
    /// The platform repo the scenarios change, and the GitOps repo they render into.
    pub platform_dir: PathBuf,
    pub gitops_dir: PathBuf,
    /// When the run started: the agents' and the prober's clock counts from here.
    pub started: Instant,
}

/// The running pipeline. [`Pipeline::stop`] stops the agents and the prober; dropping the
/// pipeline stops them too (at once, without waiting: an interrupted run), and its services
/// stop the collector and the hub.
pub struct Pipeline {
    pub collector: Service,
    pub hub: Service,
    pub ctx: Ctx,
    /// Set by [`Pipeline::stop`] to stop the prober.
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    probing: JoinHandle<()>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("collector", &self.collector.url)
            .field("hub", &self.hub.url)
            .finish_non_exhaustive()
    }
}

impl Pipeline {
    /// Writes the token files, starts the collector and the hub, then the agents' workers and
    /// the prober. The agents send nothing until a scenario gives them something to deliver.
    pub async fn start(
        config: PipelineConfig,
        fleet: SimFleet,
        store: &Store,
    ) -> anyhow::Result<Pipeline> {
        anyhow::ensure!(
            !config.readers.is_empty(),
            "the hub needs at least one reader token"
        );
        let (agent_tokens, hub_tokens) = write_token_files(&config.dir, &fleet, &config.readers)?;
        let clickhouse = [
            "--clickhouse-url".to_owned(),
            config.clickhouse_url.clone(),
            "--clickhouse-compression".into(),
            "false".into(),
        ];
        let mut collector_args = vec![
            "collector".to_owned(),
            "--agent-tokens".into(),
            agent_tokens.display().to_string(),
        ];
        collector_args.extend(clickhouse.iter().cloned());
        let port = procs::port_or_free(config.collector_port)?;
        let collector = procs::start_on(
            "collector",
            &config.exe,
            &collector_args,
            &config.logs,
            port,
        )
        .await?;
        let mut hub_args = vec![
            "hub".to_owned(),
            "--tokens".into(),
            hub_tokens.display().to_string(),
            "--stale-after".into(),
            config.stale_after.to_string(),
        ];
        hub_args.extend(clickhouse.iter().cloned());
        let port = procs::port_or_free(config.hub_port)?;
        let hub = procs::start_on("hub", &config.exe, &hub_args, &config.logs, port).await?;

        let agents = Agents::new(fleet, &collector.url, config.heartbeat, config.started)?;
        let workers = agents.spawn_workers(config.concurrency);
        let hub_client = HubClient {
            url: hub.url.clone(),
            token: config.readers[0].token.to_owned(),
            http: reqwest::Client::builder()
                .timeout(config.hub_timeout)
                .build()?,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let prober = Prober::new();
        let probing = prober.spawn(hub_client.clone(), config.started, stop.clone());
        let ctx = Ctx {
            agents,
            hub: hub_client,
            store: store.clone(),
            prober,
            knobs: config.knobs,
            started: config.started,
            platform_dir: config.platform_dir,
            gitops_dir: config.gitops_dir,
            revision_counter: AtomicU64::new(1),
            rollout: Mutex::new(None),
            steady: Mutex::new(None),
            live_status: Mutex::new(None),
        };
        Ok(Pipeline {
            collector,
            hub,
            ctx,
            stop,
            workers,
            probing,
        })
    }

    /// Fails when the collector or the hub has exited.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        self.collector.check_alive()?;
        self.hub.check_alive()
    }

    /// Stops the prober and the agents and waits for their tasks; the services keep running
    /// until the pipeline is dropped.
    pub async fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.ctx.agents.stop();
        for worker in self.workers.drain(..) {
            let _ = worker.await;
        }
        let _ = (&mut self.probing).await;
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.ctx.agents.stop();
        for worker in &self.workers {
            worker.abort();
        }
        self.probing.abort();
    }
}

/// The collector's token file (one token per cluster) and the hub's (the readers).
fn write_token_files(
    dir: &Path,
    fleet: &SimFleet,
    readers: &[HubReader],
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let mut agents = String::from("agents:\n");
    for c in &fleet.clusters {
        agents.push_str(&format!("  - cluster: {}\n    token: {}\n", c.id, c.token));
    }
    let agent_tokens = dir.join("agent-tokens.yaml");
    std::fs::write(&agent_tokens, agents)?;
    let mut hub = String::from("tokens:\n");
    for reader in readers {
        hub.push_str(&format!(
            "  - name: {}\n    token: {}\n    role: read\n",
            reader.name, reader.token
        ));
        if let Some(scope) = reader.scope {
            hub.push_str(&format!("    scope: {scope}\n"));
        }
    }
    let hub_tokens = dir.join("hub-tokens.yaml");
    std::fs::write(&hub_tokens, hub)?;
    Ok((agent_tokens, hub_tokens))
}
