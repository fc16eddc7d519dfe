//! The drift classification as a ClickHouse expression: the same rules as
//! [`fleetscope_model::classify`], written with the model's own state names, for queries that
//! classify millions of pairs where they are stored. `tests/drift_definition.rs` runs both on the
//! same inputs and requires equal answers.

use std::sync::OnceLock;

use fleetscope_model::{DriftState, Health, SyncStatus};

/// The columns the expression reads, all in one `SELECT` below it:
///
/// | column | type | meaning |
/// |---|---|---|
/// | `has_desired`, `has_observed` | UInt8 | which sides of the pair exist |
/// | `last_seen_s` | Int64 | cluster last seen, seconds; 0 = never |
/// | `d_version`, `d_hash` | String | desired version and content hash |
/// | `d_since_s` | Int64 | when the desired state became desired |
/// | `o_version`, `o_hash`, `o_health`, `o_sync` | String | observed stamps and status |
/// | `o_transitioned_s` | Int64 | the reconciler's last transition (reporter's clock) |
/// | `now_s`, `grace_s`, `stale_s` | Int64 | now and the [`fleetscope_model::DriftPolicy`] |
pub fn drift_state_expression() -> &'static str {
    static EXPRESSION: OnceLock<String> = OnceLock::new();
    EXPRESSION.get_or_init(|| {
        let state = |s: DriftState| format!("'{}'", s.as_str());
        let health = |h: Health| format!("'{}'", h.as_str());
        format!(
            "multiIf(\
has_desired = 0 AND has_observed = 0, {unknown}, \
last_seen_s = 0 OR now_s - last_seen_s > stale_s, {stale}, \
has_desired = 0, {unexpected}, \
has_observed = 0, if(now_s - d_since_s <= grace_s, {progressing}, {missing}), \
o_health = {degraded}, {failed}, \
d_version != o_version OR (d_hash != '' AND o_hash != '' AND d_hash != o_hash), \
if(now_s - d_since_s <= grace_s, {progressing}, {out_of_sync}), \
o_sync = '{sync_out}', {out_of_sync}, \
o_health = {healthy}, {in_sync}, \
o_health IN ({h_progressing}, {h_unknown}) \
AND now_s - greatest(d_since_s, if(o_transitioned_s > now_s, 0, o_transitioned_s)) <= grace_s, {progressing}, \
{unknown})",
            unknown = state(DriftState::Unknown),
            stale = state(DriftState::Stale),
            unexpected = state(DriftState::Unexpected),
            missing = state(DriftState::Missing),
            failed = state(DriftState::Failed),
            out_of_sync = state(DriftState::OutOfSync),
            progressing = state(DriftState::Progressing),
            in_sync = state(DriftState::InSync),
            degraded = health(Health::Degraded),
            healthy = health(Health::Healthy),
            h_progressing = health(Health::Progressing),
            h_unknown = health(Health::Unknown),
            sync_out = SyncStatus::OutOfSync.as_str(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expression_uses_the_model_names() {
        let sql = drift_state_expression();
        for state in DriftState::ALL {
            assert!(
                sql.contains(&format!("'{}'", state.as_str())),
                "{state} missing from {sql}"
            );
        }
        assert_eq!(sql.matches('(').count(), sql.matches(')').count());
    }
}
