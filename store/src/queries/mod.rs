//! The read queries the services need. Each is built by a `*_query` function (so the SQL
//! conformance test can render it with sample parameters) and run by a method on [`Store`].
//!
//! The texts the dashboards' panels share with these queries are written once, by `*_sql`
//! functions that take each input as a SQL expression: here always `?` (or `toDateTime(?)`),
//! with the value bound; in a panel's statement the expression Grafana fills in.
//!
//! Tables fed by `ReplacingMergeTree` may still hold superseded or duplicate rows until a
//! merge; every query here reads through them (`argMax` by version, `LIMIT 1 BY`), so results
//! never depend on when ClickHouse merged.
//!
//! One file per family of reads: `pairs` (the classified pairs), `rollups` (counts per group
//! and their snapshots), `clusters` (the inventory and the clusters' liveness), `observed`
//! (observed state and transitions), `desired` (desired state), `membership` (render groups,
//! since sets and reason sets), `renders` (renders and change markers) and `arrivals` (what
//! arrived since a moment, for the hub's index).

#[cfg(doc)]
use crate::Store;

mod arrivals;
mod clusters;
mod desired;
mod membership;
mod observed;
mod pairs;
mod renders;
mod rollups;

pub use arrivals::{
    arrival_horizons_query, heartbeats_between_query, heartbeats_since_query,
    observed_arrivals_between_query, observed_arrivals_per_second_query, observed_arrivals_query,
    observed_objects_query, ArrivalHorizon, ArrivalSecondRow, ObservedSource,
    HEARTBEAT_WRITER_PREFIX,
};
pub use clusters::{
    inventory_rows_query, known_clusters_query, latest_heartbeats_query, stale_clusters_query,
    LastSeenRow,
};
pub(crate) use clusters::{stale_clusters_sql, INVENTORY_CURRENT};
pub(crate) use desired::desired_history_sql;
pub use desired::{
    current_desired_query, desired_for_cluster_query, desired_history_query, desired_rows_query,
    CurrentDesiredRow,
};
pub use membership::{
    current_member_since_query, current_members_query, current_reason_members_query,
    reason_set_rows_query, since_set_rows_query, CurrentMemberRow, CurrentReasonMemberRow,
};
pub(crate) use membership::{members_sql, newest_since_rows_sql, with_since_sets, CURRENT_MEMBERS};
pub use observed::{
    live_objects_query, observed_for_cluster_query, observed_for_clusters_query,
    observed_history_query, observed_transitions_query, recent_history_query, LiveObjectRow,
    OBSERVED_ORDER,
};
pub(crate) use observed::{
    observed_for_cluster_sql, observed_history_sql, observed_transitions_sql,
};
pub(crate) use pairs::classified_pairs_sql;
pub use pairs::{all_pair_states_query, cluster_pair_states_query, PairStateRow};
pub(crate) use renders::renders_between_sql;
pub use renders::{
    app_version_changes_query, change_markers_query, changed_apps_query,
    desired_version_changes_query, last_render_query, latest_match_rules_query,
    newest_render_rows_query, platform_commit_query, render_change_counts_query,
    render_commit_times_query, render_contents_query, render_origins_query, renders_between_query,
    rollout_clusters_query, rollout_records_query, stored_change_counts_query, ChangeMarkers,
    LastRenderRow, NewestRenderRows, RenderOriginRow,
};
pub use rollups::{
    cluster_counts_query, pair_counts_query, rollup_trend_query, ClusterCountsRow, GroupRollup,
    PairCountRow,
};
pub(crate) use rollups::{cluster_counts_sql, pair_counts_sql, rollup_trend_sql};
