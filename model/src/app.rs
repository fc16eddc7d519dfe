//! Applications, namespaces as a service and assignment policies: the platform repo's vocabulary.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::{AppName, Version};
use crate::selector::{validate_labels, ClusterSelector, LabelRequirement, Labels};

crate::string_enum::string_enum!(
    /// The reconciler object an application becomes on a cluster.
    ReconcilerKind {
        FluxKustomization = "flux-kustomization",
        FluxHelmRelease = "flux-helmrelease",
        ArgoApplication = "argocd-application",
    }
);

/// Where an application's manifests come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum AppSource {
    Git {
        url: String,
        path: String,
        #[serde(rename = "ref")]
        reference: String,
    },
    Helm {
        repository: String,
        chart: String,
    },
    Oci {
        url: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Application {
    pub name: AppName,
    pub version: Version,
    pub source: AppSource,
    pub kind: ReconcilerKind,
    pub namespace: String,
    #[serde(default)]
    pub depends_on: Vec<AppName>,
    #[serde(default)]
    pub labels: Labels,
}

impl Application {
    /// Problems visible from the application alone (references to other apps are checked by the
    /// renderer, which sees the whole repo).
    pub fn validate(&self) -> Vec<String> {
        let mut errors: Vec<String> = validate_labels(&self.labels)
            .iter()
            .map(ToString::to_string)
            .collect();
        if self.depends_on.contains(&self.name) {
            errors.push(format!("app {:?} depends on itself", self.name.as_str()));
        }
        if let Err(err) = crate::ids::check_dns_label("namespace", &self.namespace, 63) {
            errors.push(err.to_string());
        }
        let source_fits = matches!(
            (&self.source, self.kind),
            (AppSource::Helm { .. }, ReconcilerKind::FluxHelmRelease)
                | (
                    AppSource::Git { .. } | AppSource::Oci { .. },
                    ReconcilerKind::FluxKustomization
                )
                | (_, ReconcilerKind::ArgoApplication)
        );
        if !source_fits {
            errors.push(format!(
                "app {:?}: kind {} cannot use a {} source",
                self.name.as_str(),
                self.kind,
                match self.source {
                    AppSource::Git { .. } => "git",
                    AppSource::Helm { .. } => "helm",
                    AppSource::Oci { .. } => "oci",
                }
            ));
        }
        errors
    }
}

/// A namespace offered as a service: quota, limits, owners and the apps that live in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NamespaceSpec {
    pub name: String,
    pub owners: Vec<String>,
    /// ResourceQuota `spec.hard`, for example `requests.cpu` → `4`.
    #[serde(default)]
    pub quota: BTreeMap<String, String>,
    /// LimitRange default limits per resource, for example `memory` → `512Mi`.
    #[serde(default)]
    pub default_limits: BTreeMap<String, String>,
    pub apps: Vec<AppName>,
}

/// Which apps a policy is about: by name, by label expression, or both (AND).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AppSelector {
    #[serde(default)]
    pub names: Vec<AppName>,
    #[serde(default)]
    pub match_expressions: Vec<LabelRequirement>,
}

impl AppSelector {
    pub fn matches(&self, app: &Application) -> bool {
        (self.names.is_empty() || self.names.contains(&app.name))
            && self
                .match_expressions
                .iter()
                .all(|r| r.matches(&app.labels))
    }
}

/// Which apps go to which clusters, at which version, with which overlays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AssignmentPolicy {
    pub name: String,
    pub apps: AppSelector,
    pub clusters: ClusterSelector,
    /// Pins the matched apps to this version instead of their default.
    #[serde(default)]
    pub version: Option<Version>,
    /// Helm values or substitution variables merged over the app's defaults.
    #[serde(default)]
    pub values: serde_json::Map<String, serde_json::Value>,
    /// Higher wins when two policies set the same thing; ties are broken by policy name.
    #[serde(default)]
    pub priority: i32,
}

impl AssignmentPolicy {
    pub fn validate(&self) -> Vec<String> {
        let mut errors: Vec<String> = self
            .clusters
            .validate()
            .iter()
            .map(ToString::to_string)
            .collect();
        for requirement in &self.apps.match_expressions {
            errors.extend(requirement.validate().iter().map(ToString::to_string));
        }
        if self.name.trim().is_empty() {
            errors.push("policy name is empty".to_owned());
        }
        errors
    }
}
