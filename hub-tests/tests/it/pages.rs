//! The hub's pages (`/ui`) in headless Chromium, driven over WebDriver, against a hub on a
//! generated fleet with a token file: signing in and out, every page loading without a console
//! error, the numbers each page shows equal to the API's answer for the same selection and
//! moment, a scoped token's pages holding nothing outside its subtree, keyboard focus, a phone's
//! width, and each page's weight. A second hub, on the rollouts fleet, shows an app's rollouts
//! and the newest one's progress. Screenshots are kept under the target's `tmp/pages`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use fleetscope_hub::{router, Auth, MetricsConfig};
use fleetscope_model::Timestamp;
use fleetscope_testkit::browser::Browser;
use serde_json::{json, Value};

use crate::common;

const READER: &str = "reader-token-0123456789";
const SCOPED: &str = "emea-de-token-0123456789";
const SCOPE: &str = "emea/de";

/// How long a page may take to come after a click that loads it.
const WAIT: Duration = Duration::from_secs(10);

/// The heaviest a page may be, as the pages' documentation promises.
const PAGE_WEIGHT_LIMIT: usize = 200 * 1024;

/// Where the screenshots go: kept after the run, as the test's artifacts.
fn artifacts() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pages");
    std::fs::create_dir_all(&dir).expect("create the screenshot directory");
    dir
}

struct Api {
    base: String,
    client: reqwest::Client,
}

impl Api {
    async fn get(&self, token: &str, path: &str) -> Value {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        response.json().await.unwrap()
    }

    /// The page at `path` as a signed-in browser gets it: its status and size in bytes.
    async fn page_weight(&self, token: &str, path: &str) -> (u16, usize) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .header("cookie", format!("fleetscope_session={token}"))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.bytes().await.unwrap().len())
    }
}

/// Loads `path`, fails on any console error, and keeps a screenshot named `name`.
async fn visit(browser: &Browser, base: &str, path: &str, name: &str) {
    browser.goto(&format!("{base}{path}")).await;
    settle(browser, path).await;
    browser
        .save_screenshot(&artifacts().join(format!("{name}.png")))
        .await;
}

/// Fails on any console error of the page loaded (its icon, fetched a moment after, included).
async fn settle(browser: &Browser, what: &str) {
    tokio::time::sleep(Duration::from_millis(150)).await;
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "{what}: console errors {errors:?}");
}

/// Counts by state as the element `css` shows them (`.count` spans with a `.n` number).
async fn counts_in(browser: &Browser, css: &str) -> Value {
    let js = "return Object.fromEntries([...document.querySelector(arguments[0]).querySelectorAll('.count')].map(c => [c.dataset.state, Number(c.querySelector('.n').textContent)]));";
    browser.execute(js, &[json!(css)]).await
}

/// The group rows of a fleet page: group, clusters, stale, counts by state.
async fn group_rows(browser: &Browser) -> Vec<Value> {
    let js = "return [...document.querySelectorAll('tr[data-group]')].map(r => ({\
        group: r.dataset.group, \
        clusters: Number(r.querySelector('.clusters').textContent), \
        stale: Number(r.querySelector('.stale').textContent), \
        counts: Object.fromEntries([...r.querySelectorAll('.count')].map(c => [c.dataset.state, Number(c.querySelector('.n').textContent)]))}));";
    browser.execute(js, &[]).await.as_array().cloned().unwrap()
}

/// An API rollup's pairs by state without the states it has none of, as a page lists them.
fn nonzero(by_state: &Value) -> Value {
    let map: BTreeMap<String, Value> = by_state
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, n)| n.as_u64() != Some(0))
        .map(|(k, n)| (k.clone(), n.clone()))
        .collect();
    json!(map)
}

/// The fleet page's totals and group rows against `summary` of the same selection.
async fn fleet_page_equals_summary(browser: &Browser, summary: &Value, level: u64) {
    let total = &summary["total"];
    assert_eq!(
        browser.text("#total-clusters").await,
        total["clusters"].to_string()
    );
    assert_eq!(
        browser.text("#total-stale").await,
        total["stale_clusters"].to_string()
    );
    let shown = counts_in(browser, "#total-counts").await;
    assert_eq!(shown, nonzero(&total["app_instances_by_state"]));
    let rows = group_rows(browser).await;
    let expected: Vec<&Value> = summary["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["depth"].as_u64() == Some(level + 1))
        .collect();
    assert_eq!(
        rows.len(),
        expected.len(),
        "one row per group one level down"
    );
    for row in &rows {
        let api = expected
            .iter()
            .find(|g| g["group"] == row["group"])
            .unwrap_or_else(|| panic!("a row for a group the API does not list: {row}"));
        assert_eq!(row["clusters"], api["clusters"], "{row}");
        assert_eq!(row["stale"], api["stale_clusters"], "{row}");
        assert_eq!(
            row["counts"],
            nonzero(&api["app_instances_by_state"]),
            "{row}"
        );
    }
    // Worst first: the share in sync never falls down the table.
    let share = |row: &Value| {
        let counts = row["counts"].as_object().unwrap();
        let all: u64 = counts.values().map(|n| n.as_u64().unwrap()).sum();
        let in_sync = counts.get("in_sync").and_then(Value::as_u64).unwrap_or(0);
        if all == 0 {
            1.0
        } else {
            in_sync as f64 / all as f64
        }
    };
    for pair in rows.windows(2) {
        assert!(share(&pair[0]) <= share(&pair[1]), "{pair:?}");
    }
}

/// A hub on a generated fleet of 60 clusters × 4 apps, with a checkpoint an hour before its
/// now (so that moments after it can be asked), a reader's token and one scoped to `emea/de`.
async fn hub() -> (fleetscope_testkit::TestStore, Api, i64) {
    let (test, fleet) = common::simulated_fleet(60, 4).await;
    let now = fleet.spec().now.seconds();
    test.store
        .take_checkpoint(Timestamp(now - 3600))
        .await
        .expect("a checkpoint");
    let state = common::hub_state(&test, &fleet, MetricsConfig::default()).await;
    let auth = Auth::parse(&format!(
        "tokens:\n  - name: readers\n    token: {READER}\n    role: read\n  - name: team-de\n    token: {SCOPED}\n    role: read\n    scope: {SCOPE}\n"
    ))
    .unwrap();
    let base = common::serve(router(Arc::new(state), Arc::new(auth), false)).await;
    let api = Api {
        base,
        client: reqwest::Client::new(),
    };
    (test, api, now)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_show_the_apis_answers_to_whoever_signed_in() {
    let (_test, api, now) = hub().await;
    let base = api.base.clone();
    let browser = Browser::start().await;

    // Not signed in: to the sign-in page, and back to the page asked for after.
    visit(&browser, &base, "/ui/apps/checkout", "sign-in").await;
    assert!(
        browser
            .current_url()
            .await
            .contains("/ui/sign-in?next=/ui/apps/checkout"),
        "{}",
        browser.current_url().await
    );
    // The token field has the focus, and Tab goes on to the button that signs in.
    assert_eq!(
        browser.active_element_attribute("id").await.as_deref(),
        Some("token")
    );
    browser.tab().await;
    assert_eq!(browser.active_element_text().await, "Sign in");
    browser.fill("#token", "not-a-token").await;
    browser.click("form.sign-in button").await;
    browser.wait_for("#sign-in-problem", WAIT).await;
    assert!(browser
        .text("#sign-in-problem")
        .await
        .contains("not admitted"));
    assert!(browser.cookies().await.is_empty());
    browser.fill("#token", READER).await;
    browser.click("form.sign-in button").await;
    browser.wait_for("#versions", WAIT).await;
    settle(&browser, "after signing in").await;
    assert!(browser.current_url().await.ends_with("/ui/apps/checkout"));
    let cookies = browser.cookies().await;
    assert_eq!(cookies.len(), 1, "{cookies:?}");
    let session = &cookies[0];
    assert_eq!(session.name, "fleetscope_session");
    assert!(session.http_only && !session.secure, "{session:?}");
    assert_eq!(
        (session.same_site.as_str(), session.path.as_str()),
        ("Strict", "/ui")
    );
    assert!(
        !browser.current_url().await.contains(READER),
        "no token in a URL"
    );
    // On every page the first Tab reaches the link that skips to the content.
    browser.tab().await;
    assert_eq!(browser.active_element_text().await, "Skip to content");
    // The hub's own address leads to its pages.
    visit(&browser, &base, "/", "root").await;
    assert!(
        browser.current_url().await.ends_with("/ui/fleet"),
        "{}",
        browser.current_url().await
    );

    fleet_pages(&browser, &api, now).await;
    other_pages(&browser, &api).await;

    // A phone's width: nothing wider than the screen but the tables that scroll on their own.
    browser.set_window_size(390, 800).await;
    let versions = api.get(READER, "/api/v1/apps/checkout/versions").await;
    let version = versions["desired"][0]["version"]
        .as_str()
        .unwrap()
        .to_owned();
    let summary = api.get(READER, "/api/v1/summary?depth=1").await;
    let group = summary["groups"][0]["group"].as_str().unwrap().to_owned();
    for (path, name) in [
        ("/ui/fleet".to_owned(), "fleet-phone"),
        (format!("/ui/fleet?group={group}"), "group-phone"),
        ("/ui/apps/checkout".to_owned(), "app-phone"),
        ("/ui/stale".to_owned(), "stale-phone"),
        (
            format!("/ui/gate?app=checkout&version={version}"),
            "gate-phone",
        ),
    ] {
        visit(&browser, &base, &path, name).await;
        let overflow = browser
            .execute(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth;",
                &[],
            )
            .await;
        assert_eq!(overflow, json!(0), "{path} is wider than a phone");
    }
    browser.set_window_size(1280, 900).await;

    // Signing out ends the session: the pages ask to sign in again.
    browser.click("form.sign-out button").await;
    browser.wait_for("form.sign-in", WAIT).await;
    settle(&browser, "after signing out").await;
    assert!(browser.current_url().await.contains("/ui/sign-in"));
    assert!(browser.cookies().await.is_empty());
    visit(&browser, &base, "/ui/fleet", "signed-out").await;
    assert!(browser
        .current_url()
        .await
        .contains("/ui/sign-in?next=/ui/fleet"));

    scoped_pages(&browser, &api).await;
    browser.quit().await;
}

/// The fleet page at the top, one level down, at a past moment set with the time picker.
async fn fleet_pages(browser: &Browser, api: &Api, now: i64) {
    visit(browser, &api.base, "/ui/fleet", "fleet").await;
    let summary = api.get(READER, "/api/v1/summary?depth=1").await;
    fleet_page_equals_summary(browser, &summary, 0).await;
    let worst = group_rows(browser).await[0]["group"]
        .as_str()
        .unwrap()
        .to_owned();
    browser
        .click(&format!("tr[data-group='{worst}'] th a"))
        .await;
    browser.wait_for("#clusters", WAIT).await;
    settle(browser, "a group's page").await;
    let summary = api
        .get(READER, &format!("/api/v1/summary?group={worst}&depth=2"))
        .await;
    fleet_page_equals_summary(browser, &summary, 1).await;
    // Its clusters: every pair of the group's clusters counted by state, as drift lists them.
    let pairs = api
        .get(
            READER,
            &format!("/api/v1/drift?group={worst}&state=in_sync,progressing,out_of_sync,failed,missing,unexpected,stale,unknown&limit=300"),
        )
        .await;
    let mut expected: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for pair in pairs["items"].as_array().unwrap() {
        *expected
            .entry(pair["cluster"].as_str().unwrap().to_owned())
            .or_default()
            .entry(pair["state"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    let shown = browser
        .execute(
            "return Object.fromEntries([...document.querySelectorAll('tr[data-cluster]')].map(r => [r.dataset.cluster, Object.fromEntries([...r.querySelectorAll('.count')].map(c => [c.dataset.state, Number(c.querySelector('.n').textContent)]))]));",
            &[],
        )
        .await;
    assert_eq!(shown, json!(expected));

    // Ten minutes ago, set with the time picker on the fleet page.
    visit(browser, &api.base, "/ui/fleet", "fleet").await;
    let moment = jiff::Timestamp::from_second(now - 600).unwrap().to_string();
    let picked = &moment[..16];
    browser
        .execute(
            "document.getElementById('at').value = arguments[0];",
            &[json!(picked)],
        )
        .await;
    browser.click("form.moment-picker button").await;
    browser.wait_for("p.moment", WAIT).await;
    settle(browser, "the fleet ten minutes ago").await;
    assert!(browser.current_url().await.contains("at="));
    assert!(browser
        .text("p.moment")
        .await
        .contains(&format!("{}:00 UTC", moment[..16].replace('T', " "))));
    let past = api
        .get(READER, &format!("/api/v1/summary?depth=1&at={picked}:00Z"))
        .await;
    fleet_page_equals_summary(browser, &past, 0).await;
    browser
        .save_screenshot(&artifacts().join("fleet-at-a-moment.png"))
        .await;
}

/// An app's page, a cluster's page, the stale clusters and the gate, against their routes.
async fn other_pages(browser: &Browser, api: &Api) {
    // The app: every version's desired and running clusters.
    visit(browser, &api.base, "/ui/apps/checkout", "app").await;
    let versions = api
        .get(READER, "/api/v1/apps/checkout/versions?depth=1")
        .await;
    for (kind, list) in [
        ("desired", &versions["desired"]),
        ("running", &versions["running"]),
    ] {
        for v in list.as_array().unwrap() {
            let version = v["version"].as_str().unwrap();
            let cell = browser
                .text(&format!("tr[data-version='{version}'] td.{kind}"))
                .await;
            assert_eq!(cell, v["clusters"].to_string(), "{kind} {version}");
        }
    }
    // Its instances in sync of all, and the first clusters holding their version back.
    let counts = api
        .get(READER, "/api/v1/summary?app=checkout&depth=0")
        .await;
    let by_state = &counts["total"]["app_instances_by_state"];
    assert_eq!(
        browser.text("#app-in-sync").await,
        by_state["in_sync"].to_string()
    );
    assert_eq!(
        browser.text("#app-instances").await,
        counts["total"]["app_instances"].to_string()
    );
    assert_eq!(counts_in(browser, "#app-pairs").await, nonzero(by_state));
    let drift = api.get(READER, "/api/v1/drift?app=checkout&limit=20").await;
    let held: Vec<String> = browser
        .execute(
            "return [...document.querySelectorAll('#app-pairs tr[data-cluster]')].map(r => r.dataset.cluster);",
            &[],
        )
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    let expected: Vec<String> = drift["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["cluster"].as_str().unwrap().to_owned())
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(held, expected);
    let version = versions["desired"]
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|v| v["clusters"].as_u64())
        .unwrap()["version"]
        .as_str()
        .unwrap()
        .to_owned();
    let version = version.as_str();

    // A cluster: each app's desired and running version and state.
    let cluster = expected[0].clone();
    visit(
        browser,
        &api.base,
        &format!("/ui/clusters/{cluster}"),
        "cluster",
    )
    .await;
    let answer = api
        .get(READER, &format!("/api/v1/clusters/{cluster}"))
        .await;
    for pair in answer["apps"].as_array().unwrap() {
        let app = pair["app"].as_str().unwrap();
        let row = format!("tr[data-app='{app}']");
        let state = browser
            .attribute(&format!("{row} td.state-cell"), "data-state")
            .await;
        assert_eq!(state.as_deref(), pair["state"].as_str(), "{cluster} {app}");
        let or_dash = |v: &Value| v.as_str().unwrap_or("—").to_owned();
        assert_eq!(
            browser.text(&format!("{row} td.desired")).await,
            or_dash(&pair["desired_version"])
        );
        assert_eq!(
            browser.text(&format!("{row} td.running")).await,
            or_dash(&pair["observed_version"])
        );
    }
    assert_eq!(
        browser.text("#cluster-group").await,
        answer["group"].as_str().unwrap()
    );

    // The stale clusters.
    visit(browser, &api.base, "/ui/stale", "stale").await;
    let stale = api.get(READER, "/api/v1/stale?limit=100").await;
    assert_eq!(
        browser.text("#stale-total").await,
        stale["total"].to_string()
    );
    let listed = browser.count("table.stale tbody tr").await;
    assert_eq!(listed, stale["items"].as_array().unwrap().len());

    // The gate, through its form.
    visit(browser, &api.base, "/ui/gate", "gate-form").await;
    browser.fill("#gate-app", "checkout").await;
    browser.fill("#gate-version", version).await;
    browser.fill("#gate-threshold", "0.5").await;
    browser.click("form.gate button").await;
    browser.wait_for("#gate-reason", WAIT).await;
    settle(browser, "the gate's verdict").await;
    let verdict = api
        .get(
            READER,
            &format!("/api/v1/gate?app=checkout&version={version}&threshold=0.5"),
        )
        .await;
    assert_eq!(
        browser.text("#gate-reason").await,
        verdict["reason"].as_str().unwrap()
    );
    assert_eq!(
        browser.text("#gate-targeted").await,
        verdict["targeted_clusters"].to_string()
    );
    browser.save_screenshot(&artifacts().join("gate.png")).await;

    // Every cluster's page is shown (unexpected apps, deleted objects, never seen clusters).
    let everything = api
        .get(
            READER,
            "/api/v1/drift?state=in_sync,progressing,out_of_sync,failed,missing,unexpected,stale,unknown&limit=1000",
        )
        .await;
    let clusters: std::collections::BTreeSet<&str> = everything["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["cluster"].as_str().unwrap())
        .collect();
    assert!(clusters.len() > 50, "{} clusters", clusters.len());
    for cluster in clusters {
        let (status, _) = api
            .page_weight(READER, &format!("/ui/clusters/{cluster}"))
            .await;
        assert_eq!(status, 200, "{cluster}");
    }

    // Every page weighs less than the limit.
    for path in [
        "/ui/fleet".to_owned(),
        "/ui/apps/checkout".to_owned(),
        format!("/ui/clusters/{cluster}"),
        "/ui/stale".to_owned(),
        format!("/ui/gate?app=checkout&version={version}"),
    ] {
        let (status, weight) = api.page_weight(READER, &path).await;
        assert_eq!(status, 200, "{path}");
        assert!(weight < PAGE_WEIGHT_LIMIT, "{path}: {weight} bytes");
    }
}

/// A token scoped to `emea/de` sees that subtree only, on every page.
async fn scoped_pages(browser: &Browser, api: &Api) {
    browser.fill("#token", SCOPED).await;
    browser.click("form.sign-in button").await;
    browser.wait_for("#total-clusters", WAIT).await;
    settle(browser, "signed in with the scoped token").await;
    let summary = api.get(SCOPED, "/api/v1/summary?depth=1").await;
    fleet_page_equals_summary(browser, &summary, 0).await;
    let fleet = api.get(READER, "/api/v1/summary").await;
    assert!(
        summary["total"]["clusters"].as_u64() < fleet["total"]["clusters"].as_u64(),
        "the scope is a part of the fleet"
    );
    for row in group_rows(browser).await {
        let group = row["group"].as_str().unwrap();
        assert!(group.starts_with(SCOPE), "{group} is outside {SCOPE}");
    }
    browser
        .save_screenshot(&artifacts().join("fleet-scoped.png"))
        .await;
    // A cluster outside the scope is not found, as on the API.
    let outside = api
        .get(
            READER,
            "/api/v1/drift?state=in_sync,failed,stale,missing,out_of_sync&limit=1000",
        )
        .await["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| !p["group"].as_str().unwrap_or("").starts_with(SCOPE))
        .map(|p| p["cluster"].as_str().unwrap().to_owned())
        .expect("a cluster outside the scope");
    browser
        .goto(&format!("{}/ui/clusters/{outside}", api.base))
        .await;
    assert!(browser.text("div.error").await.contains("404"));
    let errors = browser.console_errors().await;
    assert!(
        errors.iter().all(|e| e.contains("404")),
        "only the page's own 404: {errors:?}"
    );
    // The stale clusters of the scope only.
    visit(browser, &api.base, "/ui/stale", "stale-scoped").await;
    let stale = api.get(SCOPED, "/api/v1/stale?limit=100").await;
    assert_eq!(
        browser.text("#stale-total").await,
        stale["total"].to_string()
    );
    for group in browser.texts("table.stale tbody td:nth-child(2)").await {
        assert!(group.starts_with(SCOPE), "{group}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apps_page_shows_its_rollouts_and_the_newest_ones_progress() {
    let (_fleet, _state, base) = crate::rollouts::built(false, None).await;
    let client = reqwest::Client::new();
    let get = |path: String| {
        let client = client.clone();
        let url = format!("{base}{path}");
        async move {
            client
                .get(url)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let browser = Browser::start().await;
    // A hub without a token file shows its pages without signing in, and offers no sign-out.
    visit(&browser, &base, "/ui/apps/web", "app-rollouts").await;
    assert_eq!(browser.count("form.sign-out").await, 0);
    let list = get("/api/v1/rollouts?app=web&limit=5".to_owned()).await;
    let rows: Vec<String> = browser
        .execute(
            "return [...document.querySelectorAll('tr[data-rollout]')].map(r => r.dataset.rollout);",
            &[],
        )
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let ids: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(!ids.is_empty());
    assert_eq!(rows, ids);
    let newest = get(format!("/api/v1/rollouts/{}?limit=10", ids[0])).await;
    let last = newest["curve"].as_array().unwrap().last().unwrap().clone();
    let label = browser
        .attribute("figure.curve svg", "aria-label")
        .await
        .unwrap();
    assert!(
        label.ends_with(&format!(
            "{} in sync, {} failed, {} waiting at the end",
            last["in_sync"], last["failed"], last["waiting"]
        )),
        "{label}"
    );
    let stragglers: Vec<Value> = browser
        .execute(
            "return [...document.querySelectorAll('figure.curve ~ ul li[data-cluster]')].map(l => l.dataset.cluster);",
            &[],
        )
        .await
        .as_array()
        .unwrap()
        .clone();
    let expected: Vec<Value> = newest["stragglers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["cluster"].clone())
        .collect();
    assert_eq!(stragglers, expected);
    browser.quit().await;
}
