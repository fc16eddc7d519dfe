//! Fleetscope's ClickHouse store: the schema and its migrations, typed rows, the batch writer,
//! retention, every read query the services need, and the SQL of the dashboards' panels.
//!
//! **Boundary**: this is the only crate that contains SQL. Values from outside reach a query
//! only as bound parameters (`?`), escaped by the client; identifiers come from constants or
//! are validated first.
//!
//! Everything here runs on ClickHouse 18.16 (the oldest server we test against) and on current
//! ClickHouse; `tests/current_clickhouse.rs` proves the second on an embedded current engine.

#![forbid(unsafe_code)]

pub mod audit;
pub mod catalog;
pub mod clickhouse_cluster;
pub mod drift_sql;
pub mod panel_sql;
pub mod past;
pub mod queries;
pub mod retention;
pub mod rows;
pub mod schema;
pub mod sizes;
pub mod synthetic_releases;
pub mod thinning;
pub mod writer;

use std::time::Duration;

pub use audit::StoredChanges;
pub use clickhouse_cluster::ClusterConfig;
pub use queries::{ClusterCountsRow, GroupRollup, LiveObjectRow, PairCountRow};
pub use rows::{
    ArrivalWriterRow, ClusterRow, DesiredRow, DesiredVersionChangeRow, HeartbeatRow, MatchRulesRow,
    MemberSinceRow, MembershipRow, ObservedRef, ObservedRow, PlatformCommitRow, ReasonMemberRow,
    ReasonSetRow, RenderChangeCountRow, RenderContentsRow, RenderRow, RolloutClusterRow,
    RolloutRecordRow, RollupSnapshotRow, SinceSetRow,
};
pub use sizes::TableSize;
pub use writer::{BatchOutcome, BatchWriter, BatchWriterConfig, Receipt, WriteError};

/// Errors from the store. Messages say what was being done.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database name {0:?} is invalid: use 1 to 64 characters of a-z, 0-9 and '_', starting with a letter")]
    BadDatabaseName(String),
    #[error("clickhouse url {0:?} is invalid: expected http://host:port or https://host:port")]
    BadUrl(String),
    #[error("clickhouse cluster name {0:?} is invalid: use 1 to 128 letters, digits, '_', '-' and '.', starting with a letter or digit")]
    BadClusterName(String),
    #[error("zookeeper path {0:?} is invalid: expected an absolute path like /clickhouse/fleetscope (letters, digits, '_', '-', '.', '/' and {{macros}}, no trailing '/')")]
    BadZooKeeperPath(String),
    #[error("{what}: {source}")]
    ClickHouse {
        what: String,
        source: clickhouse::error::Error,
    },
    #[error("migration {version} ({name}) was changed after it was applied: applied checksum {applied}, current {current}")]
    MigrationChanged {
        version: u32,
        name: String,
        applied: String,
        current: String,
    },
    #[error("the database has migration {version}, newer than this build knows (latest {latest}); upgrade fleetscope")]
    SchemaTooNew { version: u32, latest: u32 },
    #[error("the thread for a bulk read could not run: {0}")]
    Runtime(String),
    #[error("database {database} was migrated {migrated}, but the store is configured {configured}; use the same cluster setting (--clickhouse-cluster) everywhere, or migrate a new database")]
    SchemaModeMismatch {
        database: String,
        migrated: String,
        configured: String,
    },
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Attaches a description of the operation to a ClickHouse error.
pub(crate) trait Context<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> Context<T> for std::result::Result<T, clickhouse::error::Error> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| StoreError::ClickHouse {
            what: what(),
            source,
        })
    }
}

/// Where the store lives: a ClickHouse HTTP endpoint, credentials and a database.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub url: String,
    pub user: Option<String>,
    pub password: Option<String>,
    pub database: String,
    /// Per-request timeout for queries and inserts.
    pub timeout: Duration,
    /// Compress inserts and results with LZ4 (saves bandwidth to a remote server; costs CPU).
    pub compression: bool,
    /// Run on a ClickHouse cluster: `migrate` creates sharded and replicated tables `ON CLUSTER`
    /// (see [`cluster`]); `None` is a single server.
    pub cluster: Option<ClusterConfig>,
}

impl StoreConfig {
    pub fn new(url: impl Into<String>, database: impl Into<String>) -> StoreConfig {
        StoreConfig {
            url: url.into(),
            user: None,
            password: None,
            database: database.into(),
            timeout: Duration::from_secs(30),
            compression: true,
            cluster: None,
        }
    }

    /// The same configuration in cluster mode.
    pub fn with_cluster(self, cluster: ClusterConfig) -> StoreConfig {
        StoreConfig {
            cluster: Some(cluster),
            ..self
        }
    }
}

/// A handle on the store. Cheap to clone; clones share the HTTP connection pool.
#[derive(Clone)]
pub struct Store {
    client: clickhouse::Client,
    /// The same client without a database, for creating the database itself.
    server: clickhouse::Client,
    database: String,
    cluster: Option<ClusterConfig>,
    /// What it was connected with, for a handle with connections of its own
    /// ([`Store::read_in_bulk`]).
    config: std::sync::Arc<StoreConfig>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("database", &self.database)
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

/// Checks a database name before it is ever used as an identifier.
pub fn validate_database_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(StoreError::BadDatabaseName(name.to_owned()))
    }
}

impl Store {
    pub fn connect(config: &StoreConfig) -> Result<Store> {
        validate_database_name(&config.database)?;
        let url = config.url.trim_end_matches('/');
        let valid_url = (url.starts_with("http://") || url.starts_with("https://"))
            && url
                .split("://")
                .nth(1)
                .is_some_and(|rest| !rest.is_empty() && !rest.contains(char::is_whitespace));
        if !valid_url {
            return Err(StoreError::BadUrl(config.url.clone()));
        }
        if let Some(cluster) = &config.cluster {
            cluster.validate()?;
        }
        let mut server = clickhouse::Client::default()
            .with_url(url)
            // ClickHouse 18.16 lacks RowBinaryWithNamesAndTypes, which validation needs.
            .with_validation(false)
            .with_compression(if config.compression {
                clickhouse::Compression::Lz4
            } else {
                clickhouse::Compression::None
            })
            .with_setting(
                "max_execution_time",
                config.timeout.as_secs().max(1).to_string(),
            );
        if let Some(user) = &config.user {
            server = server.with_user(user);
        }
        if let Some(password) = &config.password {
            server = server.with_password(password);
        }
        if config.cluster.is_some() {
            // An insert into a Distributed table returns once every shard has its rows, not
            // when they are queued on the node that received them: an acknowledged report is
            // stored on its shard, and readers see it.
            server = server.with_setting("insert_distributed_sync", "1");
            // Reads go to one replica of each shard. One that lags by more than this is passed
            // over while a fresher one is up: the hub's incremental reads look back 60 s, so
            // rows that reach the answering replica later than that would be missed.
            server = server.with_setting("max_replica_delay_for_distributed_queries", "30");
            // A replicated table skips a block it already has, and then writes nothing into
            // its materialized views either: an insert cut short after the source table took
            // its rows (ZooKeeper stopped, a timeout) and sent again would never reach
            // `observed_arrivals` or `observed_latest`. Every table is a ReplacingMergeTree
            // keyed on its rows' identity, so a block written twice collapses; it is written
            // again whole, views included.
            server = server.with_setting("insert_deduplicate", "0");
        }
        let client = server.clone().with_database(&config.database);
        Ok(Store {
            client,
            server,
            database: config.database.clone(),
            cluster: config.cluster.clone(),
            config: std::sync::Arc::new(config.clone()),
        })
    }

    /// Runs `read` (a read of millions of rows) on a thread of its own, in a single-threaded
    /// runtime, with connections of its own; returns its result (an error only when the
    /// thread or its runtime could not run).
    ///
    /// A multi-threaded runtime hands every chunk of a large answer from the task that owns
    /// the connection to the task that decodes it across threads, which made streaming millions
    /// of rows several times slower than both tasks on one thread (docs/benchmarks.md has the
    /// figures). The connections are made inside
    /// that runtime and closed with it, so none is left bound to a runtime that is gone.
    pub async fn read_in_bulk<T, F, Fut>(&self, read: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Store) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = T>,
    {
        let store = Store::connect(&self.config)?;
        tokio::task::spawn_blocking(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|err| StoreError::Runtime(err.to_string()))?;
            Ok(runtime.block_on(read(store)))
        })
        .await
        .map_err(|err| StoreError::Runtime(err.to_string()))?
    }

    pub fn database(&self) -> &str {
        &self.database
    }

    /// The cluster the store spreads its tables over, in cluster mode.
    pub fn cluster(&self) -> Option<&ClusterConfig> {
        self.cluster.as_ref()
    }

    pub(crate) fn client(&self) -> &clickhouse::Client {
        &self.client
    }

    /// Answers when ClickHouse answers a trivial query (readiness checks).
    pub async fn ping(&self) -> Result<()> {
        self.server
            .query("SELECT 1")
            .execute()
            .await
            .context(|| "pinging clickhouse".to_owned())
    }

    /// Drops the whole database (on every node in cluster mode). For tests and the demo's
    /// clean-up only.
    pub async fn drop_database(&self) -> Result<()> {
        let query = match &self.cluster {
            None => self
                .server
                .query("DROP DATABASE IF EXISTS ?")
                .bind(clickhouse::sql::Identifier(&self.database)),
            Some(cluster) => self
                .server
                .query(&clickhouse_cluster::drop_database(cluster, &self.database))
                .with_setting("wait_end_of_query", "1"),
        };
        query
            .execute()
            .await
            .context(|| format!("dropping database {}", self.database))
    }
}

/// Seconds since the epoch as ClickHouse `DateTime` stores them, saturating at its range.
pub fn to_datetime(timestamp: fleetscope_model::Timestamp) -> u32 {
    timestamp.seconds().clamp(0, i64::from(u32::MAX)) as u32
}

pub fn from_datetime(seconds: u32) -> fleetscope_model::Timestamp {
    fleetscope_model::Timestamp(i64::from(seconds))
}

impl Store {
    /// The server's version string, for example `18.16.1`.
    pub async fn server_version(&self) -> Result<String> {
        self.server
            .query("SELECT version()")
            .fetch_one::<String>()
            .await
            .context(|| "asking clickhouse for its version".to_owned())
    }
}
