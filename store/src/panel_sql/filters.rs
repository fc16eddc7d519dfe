//! The pieces the panels' statements are built from: the conditions of the selected group,
//! environment and app, literals, time buckets and the counts per drift state.

use fleetscope_model::state::ObjectKind;
use fleetscope_model::DriftState;

use super::{Slots, STATE_ORDER};

/// A string literal.
pub(super) fn quoted(text: &str) -> String {
    format!("'{text}'")
}

/// The selected group, or every group when it is `''`, among the group prefixes `prefixes`.
pub(super) fn in_group(slots: &Slots, prefixes: &str) -> String {
    format!("({g} = '' OR has({prefixes}, {g}))", g = slots.group)
}

/// The selected environment in `column`, or every environment when it is `''`.
pub(super) fn in_environment(slots: &Slots, column: &str) -> String {
    format!("({e} = '' OR {column} = {e})", e = slots.environment)
}

/// The selected app in `column`, or every app when it is `''`.
pub(super) fn is_app_or_all(slots: &Slots, column: &str) -> String {
    format!("({a} = '' OR {column} = {a})", a = slots.app)
}

/// Groups one level below the selected group (regions when the fleet is selected).
pub(super) fn child_of_group(slots: &Slots, path: &str) -> String {
    format!(
        "({path} != '' AND arrayStringConcat(arrayPopBack(splitByChar('/', {path})), '/') = {})",
        slots.group
    )
}

/// A cluster's own group: the last of its prefixes.
pub(super) fn group_path_of(prefixes: &str) -> String {
    format!("arrayElement({prefixes}, -1)")
}

/// A drift state as the string literal the drift expression gives.
pub(super) fn state_literal(state: DriftState) -> String {
    quoted(state.as_str())
}

/// The kinds of app objects, as a list of string literals.
pub(super) fn app_object_kinds() -> String {
    ObjectKind::ALL
        .iter()
        .filter(|kind| kind.is_app_object())
        .map(|kind| quoted(kind.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A time bucket of the panel's interval (what the plugin's `$__timeInterval` does, written so
/// that ClickHouse 18.16 runs it too).
pub(super) fn bucket(slots: &Slots, column: &str) -> String {
    format!(
        "toDateTime(intDiv(toUInt32({column}), {i}) * {i})",
        i = slots.interval_seconds
    )
}

/// `count() AS instances`, the in-sync share and one count per drift state over classified
/// pairs.
pub(super) fn state_count_columns() -> String {
    let mut columns = vec![
        "count() AS instances".to_owned(),
        format!(
            "if(instances = 0, 0, round(countIf(state = {}) / instances, 4)) AS in_sync_share",
            state_literal(DriftState::InSync)
        ),
    ];
    for state in STATE_ORDER {
        columns.push(format!(
            "countIf(state = {}) AS {}",
            state_literal(state),
            state.as_str()
        ));
    }
    columns.join(", ")
}

/// Names of the columns [`state_count_columns`] makes.
pub(super) fn state_count_names() -> Vec<&'static str> {
    let mut names = vec!["instances", "in_sync_share"];
    names.extend(STATE_ORDER.iter().map(|state| state.as_str()));
    names
}
