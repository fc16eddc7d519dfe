//! Failure insights: what the clusters where the selected app fails share.

use fleetscope_model::DriftState;

use super::filters::{in_environment, in_group, state_literal};
use super::{classified_pairs, PanelQuery, Slots};

/// Columns of [`failure_insights`], in order.
pub const INSIGHT_COLUMNS: [&str; 7] = [
    "attribute",
    "value",
    "failing_with",
    "in_sync_with",
    "failure_rate_with",
    "failure_rate_without",
    "z_score",
];

/// The fewest failing clusters an attribute value must be on to be listed by
/// [`failure_insights`].
pub const INSIGHT_MIN_FAILING_WITH: u64 = 2;

/// What the clusters where the selected app fails share: the attribute values (each label
/// `key=value`, the group at every level, the environment, the reconciler, the agent version of
/// the last heartbeat) over-represented among the clusters of the selected group and
/// environment where the app is failed or out of sync ("failing"), against those where it is in
/// sync; clusters in any other state are on neither side. The comparison of the hub's
/// `/api/v1/insights/failures`, from the classified pairs, ranked by the two-proportion
/// z-score instead of Fisher's exact test ([`INSIGHT_COLUMNS`], strongest first).
///
/// The z-score compares the failure rate with the value, `a / (a + b)`, with the rate without
/// it, `c / (c + d)`, over the pooled rate: with `n` clusters with the value, `m` without,
/// `F = a + c` failing and `N = n + m` considered, `z = (a·N − F·n) · √(N / (n·m·F·(N − F)))`,
/// the signed square root of Pearson's χ² of the 2×2 table. Listed are the values on at least
/// [`INSIGHT_MIN_FAILING_WITH`] failing clusters, not on every considered cluster, with a
/// higher failure rate with them than without.
///
/// Every considered cluster also carries an entry with an empty attribute, so that one pass
/// over the exploded values counts the totals (`F` and `N − F`) too.
pub fn failure_insights(slots: &Slots) -> PanelQuery {
    let failing_states = [DriftState::Failed, DriftState::OutOfSync]
        .iter()
        .map(|state| state_literal(*state))
        .collect::<Vec<_>>()
        .join(", ");
    let considered = format!(
        "SELECT cluster_id, group_prefixes, environment, toUInt8(state IN ({failing_states})) AS failing \
FROM ({pairs}) WHERE app = {app} AND {in_group} AND {in_env} AND state IN ({failing_states}, {in_sync})",
        pairs = classified_pairs(slots),
        app = slots.app,
        in_group = in_group(slots, "group_prefixes"),
        in_env = in_environment(slots, "environment"),
        in_sync = state_literal(DriftState::InSync),
    );
    let placed = format!(
        "SELECT cluster_id, failing, group_prefixes, environment, reconciler, label_keys, label_values FROM (\
{considered}) AS considered ALL INNER JOIN (\
SELECT cluster_id, argMax(reconciler, version) AS reconciler, argMax(label_keys, version) AS label_keys, \
argMax(label_values, version) AS label_values FROM clusters GROUP BY cluster_id\
) AS inventory USING cluster_id"
    );
    let attributes =
        "arrayConcat([('', ''), ('environment', environment), ('reconciler', reconciler), \
('agent_version', agent_version)], arrayMap(p -> ('group', p), group_prefixes), \
arrayMap((k, v) -> ('label', concat(k, '=', v)), label_keys, label_values))";
    let sql = format!(
        "SELECT attribute, value, failing_with, in_sync_with, \
round(failing_with / (failing_with + in_sync_with), 4) AS failure_rate_with, \
round(failing_without / (failing_without + in_sync_without), 4) AS failure_rate_without, \
round((toFloat64(failing_with) * (failing_total + in_sync_total) - toFloat64(failing_total) * (failing_with + in_sync_with)) \
* sqrt((failing_total + in_sync_total) / (toFloat64(failing_with + in_sync_with) * (failing_without + in_sync_without) \
* failing_total * in_sync_total)), 3) AS z_score \
FROM (\
SELECT tupleElement(entry, 1) AS attribute, tupleElement(entry, 2) AS value, tupleElement(entry, 3) AS failing_with, \
tupleElement(entry, 4) AS in_sync_with, failing_total, in_sync_total, \
toUInt64(failing_total - failing_with) AS failing_without, toUInt64(in_sync_total - in_sync_with) AS in_sync_without FROM (\
SELECT groupArray((attribute, value, failing_with, in_sync_with)) AS counted, sumIf(failing_with, attribute = '') AS failing_total, \
sumIf(in_sync_with, attribute = '') AS in_sync_total FROM (\
SELECT attribute, value, countIf(failing = 1) AS failing_with, countIf(failing = 0) AS in_sync_with FROM (\
SELECT failing, tupleElement(entry, 1) AS attribute, tupleElement(entry, 2) AS value FROM (\
SELECT failing, has_heartbeat, arrayJoin({attributes}) AS entry FROM (\
SELECT * FROM ({placed}) AS placed ALL LEFT JOIN (\
SELECT cluster_id, argMax(agent_version, seen_at) AS agent_version, toUInt8(1) AS has_heartbeat FROM heartbeats GROUP BY cluster_id\
) AS heartbeat USING cluster_id)\
) WHERE has_heartbeat = 1 OR tupleElement(entry, 1) != 'agent_version'\
) GROUP BY attribute, value)\
) ARRAY JOIN counted AS entry\
) WHERE attribute != '' AND failing_with >= {min_failing} AND failing_without + in_sync_without > 0 \
AND failing_with * (failing_without + in_sync_without) > failing_without * (failing_with + in_sync_with) \
ORDER BY z_score DESC, failing_with DESC, attribute, value LIMIT {rows}",
        min_failing = INSIGHT_MIN_FAILING_WITH,
        rows = slots.table_rows,
    );
    PanelQuery::new(sql, &INSIGHT_COLUMNS)
}
