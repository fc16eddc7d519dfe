//! SQL literals for test data (`VALUES` lists), so the same rows can be sent to engines that
//! the Rust client cannot reach. Test-only: the store itself never builds SQL from values.

/// A value that can be written as a ClickHouse literal.
pub trait Literal {
    fn literal(&self) -> String;
}

impl Literal for str {
    fn literal(&self) -> String {
        let mut out = String::with_capacity(self.len() + 2);
        out.push('\'');
        for c in self.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\'' => out.push_str("\\'"),
                '\n' => out.push_str("\\n"),
                other => out.push(other),
            }
        }
        out.push('\'');
        out
    }
}

impl Literal for String {
    fn literal(&self) -> String {
        self.as_str().literal()
    }
}

macro_rules! number_literal {
    ($($t:ty),*) => {$(
        impl Literal for $t {
            fn literal(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
number_literal!(u8, u32, u64, i64);

impl Literal for Vec<u32> {
    fn literal(&self) -> String {
        format!(
            "[{}]",
            self.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

impl Literal for Vec<String> {
    fn literal(&self) -> String {
        format!(
            "[{}]",
            self.iter()
                .map(|s| s.literal())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// `INSERT INTO table (columns) VALUES (…), (…)`; values in column order.
pub fn insert_statement(table: &str, columns: &[&str], rows: &[Vec<String>]) -> String {
    let values: Vec<String> = rows
        .iter()
        .map(|row| format!("({})", row.join(", ")))
        .collect();
    format!(
        "INSERT INTO {table} ({}) VALUES {}",
        columns.join(", "),
        values.join(", ")
    )
}

/// A store row written as SQL values, in the order of its table's columns.
pub trait SqlRow: clickhouse::Row {
    fn values(&self) -> Vec<String>;
}

/// `INSERT … VALUES` statements for `rows` into `table`, a few thousand rows each so that every
/// statement stays well below the servers' query size limits.
pub fn table_inserts<T: SqlRow>(table: &str, rows: &[T]) -> Vec<String> {
    rows.chunks(2_000)
        .map(|chunk| {
            insert_statement(
                table,
                T::COLUMN_NAMES,
                &chunk.iter().map(SqlRow::values).collect::<Vec<_>>(),
            )
        })
        .collect()
}

use fleetscope_store::{
    ArrivalWriterRow, ClusterRow, DesiredRow, DesiredVersionChangeRow, HeartbeatRow,
    MemberSinceRow, MembershipRow, ObservedRow, PlatformCommitRow, ReasonMemberRow, ReasonSetRow,
    RenderChangeCountRow, RenderContentsRow, RenderRow, RolloutClusterRow, RolloutRecordRow,
    RollupSnapshotRow, SinceSetRow,
};

impl SqlRow for ClusterRow {
    fn values(&self) -> Vec<String> {
        let r = self;
        vec![
            r.cluster_id.literal(),
            r.group_path.literal(),
            r.group_prefixes.literal(),
            r.environment.literal(),
            r.reconciler.literal(),
            r.label_keys.literal(),
            r.label_values.literal(),
            r.updated_at.literal(),
            r.version.literal(),
            r.removed.literal(),
        ]
    }
}

impl SqlRow for ArrivalWriterRow {
    fn values(&self) -> Vec<String> {
        let r = self;
        vec![
            r.writer.literal(),
            r.first_stamp.literal(),
            r.visible_before.literal(),
        ]
    }
}

impl SqlRow for HeartbeatRow {
    fn values(&self) -> Vec<String> {
        let r = self;
        vec![
            r.cluster_id.literal(),
            r.seen_at.literal(),
            r.agent_version.literal(),
            r.reconciler_names.literal(),
            r.reconciler_versions.literal(),
        ]
    }
}

impl SqlRow for MembershipRow {
    fn values(&self) -> Vec<String> {
        let r = self;
        vec![
            r.cluster_id.literal(),
            r.render_group.literal(),
            r.render_id.literal(),
            r.removed.literal(),
        ]
    }
}

impl SqlRow for ReasonSetRow {
    fn values(&self) -> Vec<String> {
        let r = self;
        vec![
            r.reason_set.literal(),
            r.app.literal(),
            r.render_id.literal(),
            r.reasons.literal(),
            r.pinned_by.literal(),
            r.removed.literal(),
        ]
    }
}

impl SqlRow for SinceSetRow {
    fn values(&self) -> Vec<String> {
        let r = self;
        vec![
            r.since_set.literal(),
            r.app.literal(),
            r.desired_since.literal(),
        ]
    }
}

impl SqlRow for MemberSinceRow {
    fn values(&self) -> Vec<String> {
        let r = self;
        vec![
            r.cluster_id.literal(),
            r.render_id.literal(),
            r.since_set.literal(),
        ]
    }
}

impl SqlRow for ReasonMemberRow {
    fn values(&self) -> Vec<String> {
        let r = self;
        vec![
            r.cluster_id.literal(),
            r.reason_set.literal(),
            r.render_id.literal(),
            r.removed.literal(),
        ]
    }
}

impl SqlRow for DesiredRow {
    fn values(&self) -> Vec<String> {
        let r = self;
        vec![
            r.render_group.literal(),
            r.app.literal(),
            r.render_id.literal(),
            r.version.literal(),
            r.content_hash.literal(),
            r.kind.literal(),
            r.namespace.literal(),
            r.reasons.literal(),
            r.commit.literal(),
            r.desired_since.literal(),
            r.removed.literal(),
        ]
    }
}

impl SqlRow for ObservedRow {
    fn values(&self) -> Vec<String> {
        let r = self;
        vec![
            r.cluster_id.literal(),
            r.object_kind.literal(),
            r.object_namespace.literal(),
            r.object_name.literal(),
            r.app.literal(),
            r.version.literal(),
            r.content_hash.literal(),
            r.applied_revision.literal(),
            r.health.literal(),
            r.sync.literal(),
            r.reason.literal(),
            r.message.literal(),
            r.transitioned_at.literal(),
            r.observed_at.literal(),
            r.received_at.literal(),
            r.change_seq.literal(),
            r.deleted.literal(),
        ]
    }
}

impl SqlRow for RenderRow {
    fn values(&self) -> Vec<String> {
        let r = self;
        vec![
            r.render_id.literal(),
            r.commit.literal(),
            r.platform_commit.literal(),
            r.rendered_at.literal(),
            r.summary.literal(),
            r.render_groups.literal(),
            r.clusters.literal(),
            r.changed_items.literal(),
        ]
    }
}

impl SqlRow for fleetscope_store::MatchRulesRow {
    fn values(&self) -> Vec<String> {
        vec![
            self.render_id.literal(),
            self.digest.literal(),
            self.rules.literal(),
        ]
    }
}

impl SqlRow for RenderContentsRow {
    fn values(&self) -> Vec<String> {
        vec![
            self.render_id.literal(),
            self.desired.literal(),
            self.members.literal(),
        ]
    }
}

impl SqlRow for RolloutRecordRow {
    fn values(&self) -> Vec<String> {
        let r = self;
        vec![
            r.app.literal(),
            r.render_id.literal(),
            r.version.literal(),
            r.started_at.literal(),
            r.platform_commit.literal(),
            r.committed_at.literal(),
            r.status.literal(),
            r.from_versions.literal(),
            r.from_counts.literal(),
            r.targeted_at_start.literal(),
            r.joined.literal(),
            r.rolled_back.literal(),
            r.superseded.literal(),
            r.removed.literal(),
            r.rolled_back_by.literal(),
            r.superseded_by.literal(),
            r.superseded_before_complete.literal(),
            r.targeted.literal(),
            r.in_sync.literal(),
            r.failed.literal(),
            r.stale.literal(),
            r.reached.literal(),
            r.failed_before_reaching.literal(),
            r.reached_50.literal(),
            r.reached_90.literal(),
            r.reached_99.literal(),
            r.reached_100.literal(),
            r.completed_at.literal(),
            r.last_reached_at.literal(),
            r.written_ms.literal(),
        ]
    }
}

impl SqlRow for RolloutClusterRow {
    fn values(&self) -> Vec<String> {
        vec![
            self.app.literal(),
            self.cluster_id.literal(),
            self.render_id.literal(),
            self.version.literal(),
            self.reached_at.literal(),
            self.failed_at.literal(),
            self.written_ms.literal(),
        ]
    }
}

impl SqlRow for RenderChangeCountRow {
    fn values(&self) -> Vec<String> {
        vec![self.render_id.literal(), self.version_changes.literal()]
    }
}

impl SqlRow for DesiredVersionChangeRow {
    fn values(&self) -> Vec<String> {
        vec![
            self.app.literal(),
            self.render_id.literal(),
            self.cluster_id.literal(),
            self.from_version.literal(),
            self.to_version.literal(),
        ]
    }
}

impl SqlRow for PlatformCommitRow {
    fn values(&self) -> Vec<String> {
        vec![self.platform_commit.literal(), self.committed_at.literal()]
    }
}

impl SqlRow for RollupSnapshotRow {
    fn values(&self) -> Vec<String> {
        let r = self;
        vec![
            r.taken_at.literal(),
            r.group_path.literal(),
            r.depth.literal(),
            r.clusters.literal(),
            r.stale_clusters.literal(),
            r.in_sync.literal(),
            r.progressing.literal(),
            r.failed.literal(),
            r.out_of_sync.literal(),
            r.missing.literal(),
            r.unexpected.literal(),
            r.stale.literal(),
            r.unknown.literal(),
        ]
    }
}
