//! How much the store holds: rows and bytes on disk per table, from ClickHouse's own record of
//! its active data parts. The load test reports it per cluster.

use clickhouse::query::Query;
use clickhouse::Row;
use serde::{Deserialize, Serialize};

use crate::{Context as _, Result, Store};

/// One table's active parts, summed.
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct TableSize {
    pub table: String,
    /// Rows in active parts: rows a ReplacingMergeTree has not collapsed yet count.
    pub rows: u64,
    pub bytes_on_disk: u64,
}

pub fn table_sizes_query(store: &Store) -> Query {
    match store.cluster() {
        None => store.client().query(
            "SELECT table, sum(rows) AS rows, sum(bytes_on_disk) AS bytes_on_disk FROM system.parts \
WHERE database = ? AND active GROUP BY table ORDER BY table",
        )
        .bind(store.database()),
        // Sharded tables: their local parts on every shard (one replica each), under the
        // table's own name; tables copied to every node: this node's copy.
        Some(cluster) => store.client().query(
            "SELECT logical_table AS table, sum(part_rows) AS rows, sum(part_bytes) AS bytes_on_disk FROM (\
SELECT replaceRegexpOne(table, '_local$', '') AS logical_table, rows AS part_rows, bytes_on_disk AS part_bytes \
FROM cluster(?, system.parts) WHERE database = ? AND active AND endsWith(table, '_local') \
UNION ALL \
SELECT table AS logical_table, rows AS part_rows, bytes_on_disk AS part_bytes \
FROM system.parts WHERE database = ? AND active AND NOT endsWith(table, '_local')\
) GROUP BY logical_table ORDER BY logical_table",
        )
        .bind(cluster.name.as_str())
        .bind(store.database())
        .bind(store.database()),
    }
}

impl Store {
    /// Rows and bytes on disk of every table of the store's database, by table name. In cluster
    /// mode a sharded table counts every shard once (not every replica), and a table copied
    /// to every node counts one copy.
    pub async fn table_sizes(&self) -> Result<Vec<TableSize>> {
        table_sizes_query(self)
            .fetch_all()
            .await
            .context(|| "reading table sizes".to_owned())
    }
}
