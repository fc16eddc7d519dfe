//! The selection flags every command about clusters shares.

use clap::Args;

/// The selection flags of the hub's routes (each a query parameter of the same name).
#[derive(Debug, Clone, Args)]
pub struct Selection {
    /// Only clusters within this group subtree (`emea/de`).
    #[arg(long, env = "FLEETSCOPE_GROUP")]
    pub group: Option<String>,
    /// Only clusters of this environment.
    #[arg(long, env = "FLEETSCOPE_ENVIRONMENT")]
    pub environment: Option<String>,
    /// Only clusters with this label, `key=value`; repeatable, all must match.
    #[arg(long, env = "FLEETSCOPE_LABEL", value_delimiter = ',')]
    pub label: Vec<String>,
}

impl Selection {
    pub(crate) fn query(&self) -> Vec<(&'static str, String)> {
        let mut query = Vec::new();
        if let Some(group) = &self.group {
            query.push(("group", group.clone()));
        }
        if let Some(environment) = &self.environment {
            query.push(("environment", environment.clone()));
        }
        for label in &self.label {
            query.push(("label", label.clone()));
        }
        query
    }
}
