//! What the store holds of each cluster's reported changes, for checking a delivery against
//! what its sender had acknowledged: the load test counts, per cluster, the changes the
//! collector acknowledged and compares them with these counts after every fault.

use clickhouse::Row;
use serde::{Deserialize, Serialize};

use crate::{Context as _, Result, Store};

/// One cluster's stored changes, read with `FINAL` (a change delivered twice and collapsed by
/// its key counts once).
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct StoredChanges {
    pub cluster_id: String,
    /// Rows after collapsing: more than `changes` means a change is held twice (say on two
    /// shards), which the key's merge would never collapse.
    pub rows: u64,
    /// Distinct (object, change number) pairs.
    pub changes: u64,
    /// The highest change number stored.
    pub high: u64,
}

impl Store {
    /// Every cluster's stored changes in `observed_transitions`, by cluster id.
    pub async fn stored_changes(&self) -> Result<Vec<StoredChanges>> {
        self.client()
            .query(
                "SELECT cluster_id, count() AS rows, \
                 uniqExact(object_kind, object_namespace, object_name, seq) AS changes, \
                 max(seq) AS high FROM observed_transitions FINAL \
                 GROUP BY cluster_id ORDER BY cluster_id",
            )
            .fetch_all()
            .await
            .context(|| "counting the stored changes per cluster".to_owned())
    }

    /// Rows of `observed_arrivals` beyond the first of each change: a report inserted again
    /// after its acknowledgement was lost (readers apply a change once, by its number).
    pub async fn arrivals_beyond_first(&self) -> Result<u64> {
        self.client()
            .query(
                "SELECT count() - uniqExact(cluster_id, object_kind, object_namespace, object_name, seq) \
                 FROM observed_arrivals",
            )
            .fetch_one::<u64>()
            .await
            .context(|| "counting arrivals received more than once".to_owned())
    }

    /// Waits until this server's replica of every replicated table of the store's database has
    /// fetched what its peers hold (`SYSTEM SYNC REPLICA`), so that a read does not depend on
    /// which replica answers. Connect to each server of a cluster directly to call it.
    pub async fn sync_replicas(&self) -> Result<()> {
        let tables: Vec<String> = self
            .client()
            .query("SELECT table FROM system.replicas WHERE database = ? ORDER BY table")
            .bind(self.database())
            .fetch_all()
            .await
            .context(|| "listing the replicated tables".to_owned())?;
        for table in tables {
            self.client()
                .query("SYSTEM SYNC REPLICA ?.?")
                .bind(clickhouse::sql::Identifier(self.database()))
                .bind(clickhouse::sql::Identifier(&table))
                .execute()
                .await
                .context(|| format!("syncing the replica of {table}"))?;
        }
        Ok(())
    }
}
