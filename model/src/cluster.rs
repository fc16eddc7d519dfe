//! Clusters, environments, reconcilers and groups, with label inheritance down the hierarchy.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::group::GroupPath;
use crate::ids::{check_dns_label, ClusterId, IdError};
use crate::selector::Labels;

/// An environment name (`dev`, `stage`, `prod`…): a DNS-1123 label.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Environment(String);

impl Environment {
    pub fn parse(value: &str) -> Result<Environment, IdError> {
        check_dns_label("environment", value, 63)?;
        Ok(Environment(value.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Environment {
    type Error = IdError;
    fn try_from(value: String) -> Result<Self, IdError> {
        Environment::parse(&value)
    }
}

impl From<Environment> for String {
    fn from(value: Environment) -> String {
        value.0
    }
}

impl fmt::Display for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

crate::string_enum::string_enum!(
    /// The GitOps reconciler running on a cluster.
    Reconciler {
        Flux = "flux",
        ArgoCd = "argocd",
    }
);

/// A node of the business hierarchy. Its labels are inherited by every group and cluster below it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    pub path: GroupPath,
    #[serde(default)]
    pub labels: Labels,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    pub id: ClusterId,
    pub group: GroupPath,
    pub environment: Environment,
    pub reconciler: Reconciler,
    #[serde(default)]
    pub labels: Labels,
}

impl Cluster {
    /// The labels selectors see: those of every ancestor group from the root down, each level
    /// overriding the one above, and the cluster's own labels last.
    pub fn effective_labels(&self, groups: &BTreeMap<GroupPath, Group>) -> Labels {
        let mut labels = Labels::new();
        for prefix in self.group.prefixes() {
            if let Some(group) = groups.get(&prefix) {
                labels.extend(group.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        labels.extend(self.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        labels
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_inherit_down_the_tree() {
        let path = |s: &str| GroupPath::parse(s).unwrap();
        let labels = |pairs: &[(&str, &str)]| -> Labels {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let groups: BTreeMap<GroupPath, Group> = [
            Group {
                path: path("emea"),
                labels: labels(&[("region", "emea"), ("tier", "bronze")]),
            },
            Group {
                path: path("emea/de"),
                labels: labels(&[("tier", "silver"), ("country", "de")]),
            },
        ]
        .into_iter()
        .map(|g| (g.path.clone(), g))
        .collect();
        let cluster = Cluster {
            id: ClusterId::parse("berlin-1").unwrap(),
            group: path("emea/de/berlin"),
            environment: Environment::parse("prod").unwrap(),
            reconciler: Reconciler::Flux,
            labels: labels(&[("country", "de-be")]),
        };
        assert_eq!(
            cluster.effective_labels(&groups),
            labels(&[("country", "de-be"), ("region", "emea"), ("tier", "silver")])
        );
    }

    #[test]
    fn cluster_from_yaml_like_json_validates_every_field() {
        let err = serde_json::from_str::<Cluster>(
            r#"{"id": "berlin-1", "group": "emea/de", "environment": "Prod", "reconciler": "flux"}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(r#"environment "Prod""#), "{err}");
        let err = serde_json::from_str::<Cluster>(
            r#"{"id": "berlin-1", "group": "emea/de", "environment": "prod", "reconciler": "fleet"}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown variant `fleet`"), "{err}");
    }
}
