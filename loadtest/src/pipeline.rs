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
    /// Ports of the collector's and the hub's copies, one each unless several run behind a
    /// balancer (taken: another free port; 0: any free port).
    pub collector_ports: Vec<u16>,
    pub hub_ports: Vec<u16>,
    /// Arguments both services take besides the ClickHouse URL (cluster mode's).
    pub service_args: Vec<String>,
    /// Where the agents deliver and the readers ask when a balancer stands in front of the
    /// copies (default: the first copy).
    pub collector_endpoint: Option<String>,
    pub hub_endpoint: Option<String>,
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
/// stop the collectors and the hubs.
pub struct Pipeline {
    pub collectors: Vec<Service>,
    pub hubs: Vec<Service>,
    /// Where the agents deliver (the only collector, or the collectors' balancer).
    pub collector_url: String,
    /// Where the readers ask (the only hub, or the hubs' balancer).
    pub hub_url: String,
    /// The processes the sampler watches: the services by kind (`collector`, `hub`), and
    /// whatever the caller adds.
    pub watched: procs::Watched,
    pub ctx: Ctx,
    /// Set by [`Pipeline::stop`] to stop the prober.
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    probing: JoinHandle<()>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("collector", &self.collector_url)
            .field("hub", &self.hub_url)
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
        let mut clickhouse = vec![
            "--clickhouse-url".to_owned(),
            config.clickhouse_url.clone(),
            "--clickhouse-compression".into(),
            "false".into(),
        ];
        clickhouse.extend(config.service_args.iter().cloned());
        let mut collector_args = vec![
            "collector".to_owned(),
            "--agent-tokens".into(),
            agent_tokens.display().to_string(),
        ];
        collector_args.extend(clickhouse.iter().cloned());
        let mut hub_args = vec![
            "hub".to_owned(),
            "--tokens".into(),
            hub_tokens.display().to_string(),
            "--stale-after".into(),
            config.stale_after.to_string(),
        ];
        hub_args.extend(clickhouse.iter().cloned());
        let collectors = start_copies(
            "collector",
            &config.exe,
            &collector_args,
            &config.logs,
            &config.collector_ports,
        )
        .await?;
        let hubs = start_copies(
            "hub",
            &config.exe,
            &hub_args,
            &config.logs,
            &config.hub_ports,
        )
        .await?;
        let collector_url = config
            .collector_endpoint
            .clone()
            .unwrap_or_else(|| collectors[0].url.clone());
        let hub_url = config
            .hub_endpoint
            .clone()
            .unwrap_or_else(|| hubs[0].url.clone());
        let watched: procs::Watched = Arc::new(Mutex::new(
            collectors
                .iter()
                .map(|s| ("collector".to_owned(), s.pid()))
                .chain(hubs.iter().map(|s| ("hub".to_owned(), s.pid())))
                .collect(),
        ));

        // A balancer takes a copy into rotation after its health checks pass.
        for url in [&config.collector_endpoint, &config.hub_endpoint]
            .into_iter()
            .flatten()
        {
            procs::wait_ready_at(url).await?;
        }
        let agents = Agents::new(fleet, &collector_url, config.heartbeat, config.started)?;
        let workers = agents.spawn_workers(config.concurrency);
        let client = |url: &str| -> anyhow::Result<HubClient> {
            Ok(HubClient {
                url: url.to_owned(),
                token: config.readers[0].token.to_owned(),
                http: reqwest::Client::builder()
                    .timeout(config.hub_timeout)
                    .build()?,
            })
        };
        let hub_client = client(&hub_url)?;
        // Behind a balancer, the checks ask every copy directly.
        let hub_copies = if hubs.len() > 1 {
            hubs.iter()
                .map(|h| client(&h.url))
                .collect::<anyhow::Result<_>>()?
        } else {
            Vec::new()
        };
        let stop = Arc::new(AtomicBool::new(false));
        let prober = Prober::new();
        let probing = prober.spawn(hub_client.clone(), config.started, stop.clone());
        let ctx = Ctx {
            agents,
            hub: hub_client,
            hub_copies,
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
            collectors,
            hubs,
            collector_url,
            hub_url,
            watched,
            ctx,
            stop,
            workers,
            probing,
        })
    }

    /// Fails when a collector or a hub has exited.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        for service in self.collectors.iter_mut().chain(&mut self.hubs) {
            service.check_alive()?;
        }
        Ok(())
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

/// Starts one copy of a service per port (`<name>.log` for one copy, `<name>-1.log`… for
/// several).
async fn start_copies(
    name: &str,
    exe: &Path,
    args: &[String],
    logs: &Path,
    ports: &[u16],
) -> anyhow::Result<Vec<Service>> {
    anyhow::ensure!(!ports.is_empty(), "no port for the {name}");
    let mut copies = Vec::with_capacity(ports.len());
    for (i, &port) in ports.iter().enumerate() {
        let label = if ports.len() == 1 {
            name.to_owned()
        } else {
            format!("{name}-{}", i + 1)
        };
        let port = procs::port_or_free(port)?;
        copies.push(procs::start_on(&label, exe, args, logs, port).await?);
    }
    Ok(copies)
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
