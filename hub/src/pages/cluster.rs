//! The cluster page: its apps with desired and actual version and state since when, its
//! labels and render group, why each app is desired there (explain), and its recent
//! transitions.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use maud::{html, Markup};

use super::answers::{Cluster, Explain, ExplainedApp};
use super::lists::Params;
use super::view::{self, Page};
use super::{api_moment, segment, PageError, Query, Ui};

/// Transitions shown, newest first.
const TRANSITIONS_SHOWN: usize = 50;

/// `GET /ui/clusters/{id}?at=`.
pub async fn page(
    State(ui): State<Arc<Ui>>,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    params: Params,
) -> Response {
    let at = params.get("at");
    let page = ui.page(format!("Cluster {id}"), at, &uri);
    let content = async {
        let caller = ui.caller(&headers)?;
        let at = api_moment(at);
        let cluster: Cluster = ui
            .ask(
                &caller,
                &Query::new(format!("/api/v1/clusters/{}", segment(&id)))
                    .with("at", at.clone())
                    .build(),
            )
            .await?;
        let explain: Explain = ui
            .ask(
                &caller,
                &Query::new("/api/v1/explain")
                    .with("cluster", Some(id.as_str()))
                    .build(),
            )
            .await?;
        Ok::<Markup, PageError>(content(&page, &cluster, &explain, at.is_some()))
    };
    page.answer(&uri, content.await)
}

fn content(page: &Page, cluster: &Cluster, explain: &Explain, past: bool) -> Markup {
    let why: BTreeMap<&str, &ExplainedApp> =
        explain.apps.iter().map(|a| (a.app.as_str(), a)).collect();
    html! {
        section class="facts" aria-label="The cluster" {
            dl class="figures" {
                div { dt { "Group" } dd id="cluster-group" {
                    @if let Some(g) = &cluster.group { a href=(page.link("/ui/fleet").with("group", Some(g.clone())).build()) { (g) } } @else { "—" }
                } }
                div { dt { "Environment" } dd { (cluster.environment.as_deref().unwrap_or("—")) } }
                div { dt { "Reconciler" } dd { (cluster.reconciler.as_deref().unwrap_or("—")) } }
                div { dt { "Render group" } dd id="cluster-render-group" { (cluster.render_group.as_deref().unwrap_or("—")) } }
                div { dt { "Last seen" } dd id="cluster-last-seen" {
                    (view::time(cluster.last_seen.as_deref()))
                    @if cluster.stale { " " (view::state_label("stale")) }
                } }
                div { dt { "Agent" } dd { (cluster.agent_version.as_deref().unwrap_or("—")) } }
            }
            @if !cluster.labels.is_empty() {
                h2 { "Labels" }
                ul class="labels" {
                    @for (k, v) in &cluster.labels { li { code { (k) "=" (v) } } }
                }
            }
        }
        section aria-labelledby="apps" {
            h2 id="apps" { "Apps" }
            @if cluster.apps.is_empty() {
                p { "No app is desired or running here." }
            } @else {
                div class="scroll" {
                    table class="pairs" {
                        thead {
                            tr {
                                th scope="col" { "App" }
                                th scope="col" { "Desired" }
                                th scope="col" { "Running" }
                                th scope="col" { "State" }
                                th scope="col" { "Since" }
                                th scope="col" { "Why desired" }
                                th scope="col" { "Reconciler says" }
                            }
                        }
                        tbody {
                            @for pair in &cluster.apps {
                                tr data-app=(pair.app) {
                                    th scope="row" { a href=(page.link(format!("/ui/apps/{}", segment(&pair.app))).build()) { (pair.app) } }
                                    td class="desired" { span class="version" { (pair.desired_version.as_deref().unwrap_or("—")) } }
                                    td class="running" { span class="version" { (pair.observed_version.as_deref().unwrap_or("—")) } }
                                    td class="state-cell" data-state=(pair.state) { (view::state_label(&pair.state)) }
                                    td { (view::time(pair.since.as_deref())) }
                                    td class="why" { (reasons(why.get(pair.app.as_str()).copied())) }
                                    td class="message" {
                                        (pair.reason.as_deref().unwrap_or(""))
                                        @if let Some(m) = pair.message.as_deref().filter(|m| !m.is_empty()) { ": " (m) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if past { p class="note" { "Why each app is desired is as of now: the render in force now." } }
        }
        section aria-labelledby="history" {
            h2 id="history" { "Recent transitions" }
            @if cluster.history.is_empty() {
                p { "No transition is kept for this cluster." }
            } @else {
                ol class="history" {
                    @for t in cluster.history.iter().take(TRANSITIONS_SHOWN) {
                        li {
                            time { (view::time(t.at.as_deref())) } " "
                            strong { (t.app) } " "
                            @if t.deleted { "deleted" } @else {
                                span class="version" { (t.version) } " " (t.health) " " (t.reason)
                                @if !t.message.is_empty() { ": " (t.message) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Why an app is desired: the assignment policies that select it, or the pin.
fn reasons(app: Option<&ExplainedApp>) -> Markup {
    html! {
        @match app {
            None => "—",
            Some(a) if !a.desired => (a.explanation.as_deref().unwrap_or("not desired")),
            Some(a) => {
                @if let Some(pin) = &a.pinned_by { "pinned by " code { (pin) } } @else {
                    @for (i, r) in a.reasons.iter().enumerate() {
                        @if i > 0 { ", " }
                        code { (r) }
                    }
                }
                @if let Some(v) = &a.version { " → " span class="version" { (v) } }
                @if let Some(c) = &a.commit { " (commit " code { (c.chars().take(12).collect::<String>()) } ")" }
                @if let Some(s) = &a.desired_since { " since " (view::time(Some(s))) }
            }
        }
    }
}
