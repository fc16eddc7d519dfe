//! Watching Flux and Argo CD objects with kube-rs. One watcher per kind; each turns the API
//! server's events into [`SourceEvent`]s for the agent (or the central collector's direct mode).
//!
//! A kind whose CRD is not installed (no Argo CD on a Flux cluster, or the other way round) is
//! skipped quietly and looked for again every `retry` interval, so installing it later is picked
//! up without a restart. Several API versions are tried for each kind, newest first, so older
//! Flux installations are read too. The API server's own discovery is not used: some API
//! servers (and proxies in front of them) do not serve it.

use std::time::Duration;

use fleetscope_model::ObjectKind;
use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use tokio::sync::mpsc;

use crate::agent::SourceEvent;

/// A kind the collector reads, and where the API server serves it.
#[derive(Debug, Clone, Copy)]
pub struct WatchedKind {
    pub kind: ObjectKind,
    pub group: &'static str,
    pub api_kind: &'static str,
    pub plural: &'static str,
    /// Newest first.
    pub versions: &'static [&'static str],
}

pub const WATCHED_KINDS: &[WatchedKind] = &[
    WatchedKind {
        kind: ObjectKind::Kustomization,
        group: "kustomize.toolkit.fluxcd.io",
        api_kind: "Kustomization",
        plural: "kustomizations",
        versions: &["v1", "v1beta2"],
    },
    WatchedKind {
        kind: ObjectKind::HelmRelease,
        group: "helm.toolkit.fluxcd.io",
        api_kind: "HelmRelease",
        plural: "helmreleases",
        versions: &["v2", "v2beta2", "v2beta1"],
    },
    WatchedKind {
        kind: ObjectKind::GitRepository,
        group: "source.toolkit.fluxcd.io",
        api_kind: "GitRepository",
        plural: "gitrepositories",
        versions: &["v1", "v1beta2"],
    },
    WatchedKind {
        kind: ObjectKind::OciRepository,
        group: "source.toolkit.fluxcd.io",
        api_kind: "OCIRepository",
        plural: "ocirepositories",
        versions: &["v1", "v1beta2"],
    },
    WatchedKind {
        kind: ObjectKind::Application,
        group: "argoproj.io",
        api_kind: "Application",
        plural: "applications",
        versions: &["v1alpha1"],
    },
];

impl WatchedKind {
    fn resource(&self, version: &str) -> ApiResource {
        ApiResource {
            group: self.group.to_owned(),
            version: version.to_owned(),
            api_version: format!("{}/{version}", self.group),
            kind: self.api_kind.to_owned(),
            plural: self.plural.to_owned(),
        }
    }
}

fn not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 404)
}

/// Finds the newest served version of `kind`, or `None` when the API server serves none.
async fn served_version(
    client: &Client,
    kind: &WatchedKind,
) -> Result<Option<&'static str>, kube::Error> {
    for version in kind.versions {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.resource(version));
        match api.list_metadata(&ListParams::default().limit(1)).await {
            Ok(_) => return Ok(Some(version)),
            Err(err) if not_found(&err) => continue,
            Err(err) => return Err(err),
        }
    }
    Ok(None)
}

fn to_json(object: DynamicObject, resource: &ApiResource) -> serde_json::Value {
    let mut value = serde_json::to_value(&object).unwrap_or(serde_json::Value::Null);
    // Watch events may leave out apiVersion and kind; normalization needs them.
    if let Some(map) = value.as_object_mut() {
        map.entry("apiVersion")
            .or_insert_with(|| resource.api_version.clone().into());
        map.entry("kind")
            .or_insert_with(|| resource.kind.clone().into());
    }
    value
}

/// Watches one kind until `events` closes. Never returns an error: failures are logged and
/// retried with backoff.
pub async fn watch_kind(
    client: Client,
    kind: WatchedKind,
    events: mpsc::Sender<SourceEvent>,
    retry: Duration,
) {
    let mut announced_absent = false;
    loop {
        let version = match served_version(&client, &kind).await {
            Ok(Some(version)) => version,
            Ok(None) => {
                if !announced_absent {
                    tracing::info!(
                        kind = kind.api_kind,
                        group = kind.group,
                        "not installed on this cluster; will look again"
                    );
                    announced_absent = true;
                    // Whatever was known of this kind is gone with its CRD.
                    if events
                        .send(SourceEvent::Listed {
                            kind: kind.kind,
                            objects: vec![],
                        })
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                tokio::time::sleep(retry).await;
                continue;
            }
            Err(err) => {
                tracing::warn!(kind = kind.api_kind, error = %err, "cannot reach the api server; retrying");
                tokio::time::sleep(retry).await;
                continue;
            }
        };
        announced_absent = false;
        tracing::info!(kind = kind.api_kind, version, "watching");
        let resource = kind.resource(version);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let mut stream = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut listed: Vec<serde_json::Value> = Vec::new();
        while let Some(event) = stream.next().await {
            let message = match event {
                Ok(Event::Init) => {
                    listed.clear();
                    None
                }
                Ok(Event::InitApply(object)) => {
                    listed.push(to_json(object, &resource));
                    None
                }
                Ok(Event::InitDone) => Some(SourceEvent::Listed {
                    kind: kind.kind,
                    objects: std::mem::take(&mut listed),
                }),
                Ok(Event::Apply(object)) => Some(SourceEvent::Applied(to_json(object, &resource))),
                Ok(Event::Delete(object)) => Some(SourceEvent::Deleted(to_json(object, &resource))),
                Err(watcher::Error::InitialListFailed(err))
                | Err(watcher::Error::WatchStartFailed(err))
                    if not_found(&err) =>
                {
                    tracing::info!(
                        kind = kind.api_kind,
                        version,
                        "no longer served; looking for it again"
                    );
                    break;
                }
                Err(err) => {
                    tracing::warn!(kind = kind.api_kind, error = %err, "watch failed; retrying with backoff");
                    None
                }
            };
            if let Some(message) = message {
                if events.send(message).await.is_err() {
                    return;
                }
            }
        }
        tokio::time::sleep(retry).await;
    }
}

/// Starts a watcher for every kind; they stop when `events` closes.
pub fn watch_all(
    client: Client,
    events: mpsc::Sender<SourceEvent>,
    retry: Duration,
) -> Vec<tokio::task::JoinHandle<()>> {
    WATCHED_KINDS
        .iter()
        .map(|kind| tokio::spawn(watch_kind(client.clone(), *kind, events.clone(), retry)))
        .collect()
}
