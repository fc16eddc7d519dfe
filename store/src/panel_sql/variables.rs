//! The dashboards' variables: one column each, the values offered.

use super::filters::{in_environment, in_group};
use super::{inventory, Slots};

/// Every group path of the current inventory, at every level.
pub fn group_values() -> String {
    format!(
        "SELECT DISTINCT arrayJoin(group_prefixes) AS group_path FROM ({}) ORDER BY group_path",
        inventory()
    )
}

/// Every environment of the current inventory.
pub fn environment_values() -> String {
    format!(
        "SELECT DISTINCT environment FROM ({}) ORDER BY environment",
        inventory()
    )
}

/// Apps desired anywhere or reported by any cluster.
pub fn app_values() -> String {
    "SELECT DISTINCT app FROM (SELECT app FROM desired_latest UNION ALL \
SELECT app FROM observed_latest WHERE app != '') ORDER BY app"
        .to_owned()
}

/// Versions of the selected app, desired or reported, newest first.
pub fn version_values(slots: &Slots) -> String {
    format!(
        "SELECT DISTINCT version FROM (SELECT version FROM desired_latest WHERE app = {a} UNION ALL \
SELECT version FROM observed_latest WHERE app = {a}) WHERE version != '' ORDER BY version DESC",
        a = slots.app
    )
}

/// Current clusters within the selected group and environment.
pub fn cluster_values(slots: &Slots) -> String {
    format!(
        "SELECT cluster_id FROM ({}) WHERE {} AND {} ORDER BY cluster_id",
        inventory(),
        in_group(slots, "group_prefixes"),
        in_environment(slots, "environment")
    )
}
