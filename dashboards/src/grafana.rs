//! Building blocks of Grafana dashboard JSON: data source references, template variables,
//! panels with their queries, field overrides and data links, and a layout that places panels
//! left to right in rows of the 24-column grid.

use fleetscope_model::DriftState;
use fleetscope_store::panel_sql::PanelQuery;
use serde_json::{json, Map, Value};

/// The ClickHouse data source plugin the SQL panels are written for.
pub const CLICKHOUSE_PLUGIN: &str = "grafana-clickhouse-datasource";
/// Plugin version recorded in each ClickHouse query. Queries without one (or older than 4.0.0)
/// are migrated by the plugin as if they came from its version 3.
pub const CLICKHOUSE_PLUGIN_VERSION: &str = "4.0.0";
pub const PROMETHEUS_PLUGIN: &str = "prometheus";
/// Data source variables every dashboard chooses its data sources by.
pub const CLICKHOUSE_VARIABLE: &str = "ds_clickhouse";
pub const PROMETHEUS_VARIABLE: &str = "ds_prometheus";
/// The data sources `provisioning/datasources.yaml` creates; the variables select them first.
pub const CLICKHOUSE_UID: &str = "fleetscope-clickhouse";
pub const CLICKHOUSE_NAME: &str = "Fleetscope ClickHouse";
pub const PROMETHEUS_UID: &str = "fleetscope-prometheus";
pub const PROMETHEUS_NAME: &str = "Fleetscope Prometheus";
/// Dashboard JSON schema version of Grafana 13.
pub const SCHEMA_VERSION: u32 = 42;
/// Tag every Fleetscope dashboard carries; the dashboards' link menu lists them by it.
pub const TAG: &str = "fleetscope";
/// The custom "All" value of group, environment and app variables: an empty SQL string, which
/// the queries read as "no filter" (for the group: the whole fleet).
pub const ALL_VALUE: &str = "''";

const GRID_COLUMNS: u32 = 24;

fn clickhouse_ref() -> Value {
    json!({"type": CLICKHOUSE_PLUGIN, "uid": format!("${{{CLICKHOUSE_VARIABLE}}}")})
}

fn prometheus_ref() -> Value {
    json!({"type": PROMETHEUS_PLUGIN, "uid": format!("${{{PROMETHEUS_VARIABLE}}}")})
}

/// How the ClickHouse plugin turns a result into frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    TimeSeries,
}

/// One query of a panel.
#[derive(Debug, Clone)]
pub enum Query {
    ClickHouse {
        sql: String,
        format: Format,
        /// The columns the query must return, in order (checked by the tests).
        columns: Vec<String>,
    },
    Prometheus {
        expr: String,
        legend: String,
    },
}

impl Query {
    /// A ClickHouse query drawn as a table: one of the store's panel queries.
    pub fn table(panel: PanelQuery) -> Query {
        Query::clickhouse(panel, Format::Table)
    }

    /// A ClickHouse query drawn as time series (a `time` column first).
    pub fn series(panel: PanelQuery) -> Query {
        Query::clickhouse(panel, Format::TimeSeries)
    }

    fn clickhouse(panel: PanelQuery, format: Format) -> Query {
        Query::ClickHouse {
            sql: panel.sql,
            format,
            columns: panel.columns.iter().map(|c| (*c).to_owned()).collect(),
        }
    }

    pub fn prometheus(expr: impl Into<String>, legend: impl Into<String>) -> Query {
        Query::Prometheus {
            expr: expr.into(),
            legend: legend.into(),
        }
    }

    fn json(&self, ref_id: &str) -> Value {
        match self {
            Query::ClickHouse { sql, format, .. } => {
                let (format, query_type) = match format {
                    Format::Table => (1, "table"),
                    Format::TimeSeries => (0, "timeseries"),
                };
                json!({
                    "datasource": clickhouse_ref(),
                    "editorType": "sql",
                    "format": format,
                    "pluginVersion": CLICKHOUSE_PLUGIN_VERSION,
                    "queryType": query_type,
                    "rawSql": sql,
                    "refId": ref_id,
                })
            }
            Query::Prometheus { expr, legend } => json!({
                "datasource": prometheus_ref(),
                "editorMode": "code",
                "expr": expr,
                "legendFormat": legend,
                "range": true,
                "refId": ref_id,
            }),
        }
    }
}

/// A ClickHouse statement of a dashboard with where it sits and the columns it must return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlQuery {
    /// `panel "<title>" <refId>` or `variable <name>`.
    pub location: String,
    pub sql: String,
    pub columns: Vec<String>,
}

/// A data link: a relative URL into another Fleetscope dashboard (never a host).
#[derive(Debug, Clone)]
pub struct Link {
    pub title: String,
    pub url: String,
}

/// A link to dashboard `uid` setting variable `variable` to the clicked value, keeping the
/// time range.
pub fn drill(title: &str, uid: &str, variable: &str) -> Link {
    Link {
        title: title.to_owned(),
        url: format!("/d/{uid}?var-{variable}=${{__value.raw}}&${{__url_time_range}}"),
    }
}

/// The color each drift state is drawn in.
pub fn state_color(state: DriftState) -> &'static str {
    match state {
        DriftState::InSync => "green",
        DriftState::Progressing => "blue",
        DriftState::Failed => "red",
        DriftState::OutOfSync => "orange",
        DriftState::Missing => "purple",
        DriftState::Unexpected => "yellow",
        DriftState::Stale => "#8e8e8e",
        DriftState::Unknown => "text",
    }
}

/// A panel under construction.
#[derive(Debug, Clone)]
pub struct Panel {
    kind: &'static str,
    title: String,
    description: String,
    width: u32,
    height: u32,
    queries: Vec<Query>,
    defaults: Map<String, Value>,
    overrides: Vec<Value>,
    options: Value,
    transformations: Vec<Value>,
}

impl Panel {
    fn new(kind: &'static str, title: &str, description: &str, options: Value) -> Panel {
        Panel {
            kind,
            title: title.to_owned(),
            description: description.to_owned(),
            width: 12,
            height: 8,
            queries: Vec::new(),
            defaults: Map::new(),
            overrides: Vec::new(),
            options,
            transformations: Vec::new(),
        }
    }

    /// A table: sortable, filterable columns.
    pub fn table(title: &str, description: &str) -> Panel {
        let mut panel = Panel::new(
            "table",
            title,
            description,
            json!({
                "cellHeight": "sm",
                "footer": {"countRows": false, "fields": "", "reducer": ["sum"], "show": false},
                "showHeader": true,
            }),
        );
        panel.defaults.insert(
            "custom".into(),
            json!({"align": "auto", "cellOptions": {"type": "auto"}, "filterable": true, "inspect": false}),
        );
        panel
    }

    /// Big numbers, one per numeric field of the first row.
    pub fn stat(title: &str, description: &str) -> Panel {
        Panel::new(
            "stat",
            title,
            description,
            json!({
                "colorMode": "value",
                "graphMode": "none",
                "justifyMode": "auto",
                "orientation": "auto",
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": false},
                "showPercentChange": false,
                "textMode": "value_and_name",
                "wideLayout": true,
            }),
        )
        .size(24, 4)
    }

    /// Lines over time.
    pub fn timeseries(title: &str, description: &str) -> Panel {
        let mut panel = Panel::new(
            "timeseries",
            title,
            description,
            json!({
                "legend": {"calcs": [], "displayMode": "list", "placement": "bottom", "showLegend": true},
                "tooltip": {"mode": "multi", "sort": "desc"},
            }),
        );
        panel.defaults.insert(
            "custom".into(),
            json!({
                "drawStyle": "line",
                "fillOpacity": 10,
                "lineWidth": 1,
                "showPoints": "never",
                "spanNulls": false,
                "stacking": {"group": "A", "mode": "none"},
            }),
        );
        panel
    }

    /// Bars over a category field of a table result.
    pub fn barchart(title: &str, description: &str, x_field: &str) -> Panel {
        Panel::new(
            "barchart",
            title,
            description,
            json!({
                "barWidth": 0.8,
                "groupWidth": 0.7,
                "legend": {"calcs": [], "displayMode": "list", "placement": "bottom", "showLegend": true},
                "orientation": "auto",
                "showValue": "auto",
                "stacking": "none",
                "tooltip": {"mode": "multi", "sort": "none"},
                "xField": x_field,
                "xTickLabelRotation": 0,
            }),
        )
    }

    pub fn size(mut self, width: u32, height: u32) -> Panel {
        assert!((1..=GRID_COLUMNS).contains(&width), "panel width {width}");
        self.width = width;
        self.height = height;
        self
    }

    pub fn query(mut self, query: Query) -> Panel {
        self.queries.push(query);
        self
    }

    pub fn unit(mut self, unit: &str) -> Panel {
        self.defaults.insert("unit".into(), json!(unit));
        self
    }

    /// Every field's name in the legend and tooltip (Grafana's display name template, such as
    /// `${__field.labels.version}` for the series the plugin makes of a long result).
    pub fn display_name(mut self, template: &str) -> Panel {
        self.defaults.insert("displayName".into(), json!(template));
        self
    }

    /// A point at every value: for series whose values are sparse samples (checkpoints).
    pub fn points(mut self) -> Panel {
        if let Some(custom) = self.defaults.get_mut("custom") {
            custom["showPoints"] = json!("always");
        }
        self
    }

    /// Stacked areas instead of lines.
    pub fn stacked(mut self) -> Panel {
        if let Some(custom) = self.defaults.get_mut("custom") {
            custom["stacking"]["mode"] = json!("normal");
            custom["fillOpacity"] = json!(60);
        }
        self
    }

    /// Bars instead of lines.
    pub fn bars(mut self) -> Panel {
        if let Some(custom) = self.defaults.get_mut("custom") {
            custom["drawStyle"] = json!("bars");
            custom["fillOpacity"] = json!(80);
        }
        self
    }

    /// Property `id` set to `value` on the field named `field`.
    pub fn field(mut self, field: &str, id: &str, value: Value) -> Panel {
        let existing = self
            .overrides
            .iter_mut()
            .find(|o| o["matcher"]["id"] == "byName" && o["matcher"]["options"] == field);
        let property = json!({"id": id, "value": value});
        match existing {
            Some(found) => found["properties"]
                .as_array_mut()
                .expect("override properties are an array")
                .push(property),
            None => self.overrides.push(json!({
                "matcher": {"id": "byName", "options": field},
                "properties": [property],
            })),
        }
        self
    }

    pub fn field_unit(self, field: &str, unit: &str) -> Panel {
        self.field(field, "unit", json!(unit))
    }

    /// Data links on a field (a menu when there are several).
    pub fn links(self, field: &str, links: &[Link]) -> Panel {
        let value: Vec<Value> = links
            .iter()
            .map(|l| json!({"targetBlank": false, "title": l.title, "url": l.url}))
            .collect();
        self.field(field, "links", Value::Array(value))
    }

    /// Fields named after drift states (and the in-sync share) drawn in the states' colors.
    pub fn state_colors(mut self) -> Panel {
        for state in fleetscope_store::panel_sql::STATE_ORDER {
            self = self.field(
                state.as_str(),
                "color",
                json!({"fixedColor": state_color(state), "mode": "fixed"}),
            );
            if self.kind == "table" {
                // Table cells show a field's color only when told to.
                self = self.field(
                    state.as_str(),
                    "custom.cellOptions",
                    json!({"type": "color-text"}),
                );
            }
        }
        self.field_unit("in_sync_share", "percentunit")
    }

    /// A text column holding drift state names, each shown in its state's color.
    pub fn state_column(self, field: &str) -> Panel {
        let mut options = Map::new();
        for (index, state) in fleetscope_store::panel_sql::STATE_ORDER.iter().enumerate() {
            options.insert(
                state.as_str().to_owned(),
                json!({"color": state_color(*state), "index": index}),
            );
        }
        self.field(
            field,
            "mappings",
            json!([{"options": Value::Object(options), "type": "value"}]),
        )
        .field(field, "custom.cellOptions", json!({"type": "color-text"}))
    }

    /// Grafana's "grouping to matrix": one row per `rows` value, one column per `columns` value.
    pub fn matrix(mut self, rows: &str, columns: &str, values: &str) -> Panel {
        self.transformations.push(json!({
            "id": "groupingToMatrix",
            "options": {"columnField": columns, "emptyValue": "empty", "rowField": rows, "valueField": values},
        }));
        self
    }

    fn datasource(&self) -> Value {
        match self.queries.first() {
            Some(Query::Prometheus { .. }) => prometheus_ref(),
            _ => clickhouse_ref(),
        }
    }

    fn json(&self, id: u32, x: u32, y: u32) -> Value {
        let targets: Vec<Value> = self
            .queries
            .iter()
            .enumerate()
            .map(|(i, q)| q.json(&ref_id(i)))
            .collect();
        let mut defaults = self.defaults.clone();
        defaults.insert(
            "color".into(),
            json!({"mode": if self.kind == "table" { "thresholds" } else { "palette-classic" }}),
        );
        defaults.insert("mappings".into(), json!([]));
        defaults.insert(
            "thresholds".into(),
            json!({"mode": "absolute", "steps": [{"color": "green", "value": null}]}),
        );
        json!({
            "datasource": self.datasource(),
            "description": self.description,
            "fieldConfig": {"defaults": Value::Object(defaults), "overrides": self.overrides},
            "gridPos": {"h": self.height, "w": self.width, "x": x, "y": y},
            "id": id,
            "options": self.options,
            "targets": targets,
            "title": self.title,
            "transformations": self.transformations,
            "type": self.kind,
        })
    }
}

fn ref_id(index: usize) -> String {
    char::from(b'A' + u8::try_from(index).expect("fewer than 26 queries per panel")).to_string()
}

/// A template variable.
#[derive(Debug, Clone)]
pub enum Variable {
    /// Picks a data source of `plugin`, the provisioned one (`uid`, `name`) first.
    DataSource {
        name: &'static str,
        label: &'static str,
        plugin: &'static str,
        uid: &'static str,
        default_name: &'static str,
    },
    /// Values from a ClickHouse query; `all` adds an "All" option worth [`ALL_VALUE`].
    ClickHouse {
        name: &'static str,
        label: &'static str,
        description: &'static str,
        sql: String,
        all: bool,
        /// Grafana's sort code: 1 alphabetical, 8 natural descending.
        sort: u8,
    },
    /// A hidden value the queries read.
    Constant {
        name: &'static str,
        description: &'static str,
        value: String,
    },
}

impl Variable {
    pub fn clickhouse_source() -> Variable {
        Variable::DataSource {
            name: CLICKHOUSE_VARIABLE,
            label: "ClickHouse",
            plugin: CLICKHOUSE_PLUGIN,
            uid: CLICKHOUSE_UID,
            default_name: CLICKHOUSE_NAME,
        }
    }

    pub fn prometheus_source() -> Variable {
        Variable::DataSource {
            name: PROMETHEUS_VARIABLE,
            label: "Prometheus",
            plugin: PROMETHEUS_PLUGIN,
            uid: PROMETHEUS_UID,
            default_name: PROMETHEUS_NAME,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Variable::DataSource { name, .. }
            | Variable::ClickHouse { name, .. }
            | Variable::Constant { name, .. } => name,
        }
    }

    fn json(&self) -> Value {
        match self {
            Variable::DataSource {
                name,
                label,
                plugin,
                uid,
                default_name,
            } => json!({
                "current": {"text": default_name, "value": uid},
                "hide": 0,
                "includeAll": false,
                "label": label,
                "multi": false,
                "name": name,
                "options": [],
                "query": plugin,
                "refresh": 1,
                "regex": "",
                "type": "datasource",
            }),
            Variable::ClickHouse {
                name,
                label,
                description,
                sql,
                all,
                sort,
            } => {
                let mut variable = json!({
                    "datasource": clickhouse_ref(),
                    "description": description,
                    "hide": 0,
                    "includeAll": all,
                    "label": label,
                    "multi": false,
                    "name": name,
                    "options": [],
                    "query": sql,
                    "refresh": 1,
                    "regex": "",
                    "sort": sort,
                    "type": "query",
                });
                if *all {
                    variable["allValue"] = json!(ALL_VALUE);
                    variable["current"] = json!({"text": "All", "value": "$__all"});
                }
                variable
            }
            Variable::Constant {
                name,
                description,
                value,
            } => json!({
                "current": {"text": value, "value": value},
                "description": description,
                "hide": 2,
                "name": name,
                "query": value,
                "skipUrlSync": true,
                "type": "constant",
            }),
        }
    }
}

/// A generated dashboard: its file name, JSON, and every ClickHouse statement in it.
#[derive(Debug, Clone)]
pub struct Dashboard {
    pub file_name: String,
    pub uid: String,
    pub title: String,
    pub json: Value,
    pub sql: Vec<SqlQuery>,
}

/// Lays out panels and collects the ClickHouse statements.
#[derive(Debug)]
pub struct Builder {
    file_name: &'static str,
    uid: &'static str,
    title: &'static str,
    description: &'static str,
    time_from: &'static str,
    refresh: &'static str,
    variables: Vec<Variable>,
    panels: Vec<Value>,
    sql: Vec<SqlQuery>,
    next_id: u32,
    x: u32,
    y: u32,
    line_height: u32,
}

impl Builder {
    /// `file_name` without its `.json`.
    pub fn new(
        file_name: &'static str,
        uid: &'static str,
        title: &'static str,
        description: &'static str,
    ) -> Builder {
        Builder {
            file_name,
            uid,
            title,
            description,
            time_from: "now-7d",
            refresh: "5m",
            variables: Vec::new(),
            panels: Vec::new(),
            sql: Vec::new(),
            next_id: 1,
            x: 0,
            y: 0,
            line_height: 0,
        }
    }

    pub fn time_from(mut self, from: &'static str) -> Builder {
        self.time_from = from;
        self
    }

    pub fn refresh(mut self, refresh: &'static str) -> Builder {
        self.refresh = refresh;
        self
    }

    pub fn variable(mut self, variable: Variable) -> Builder {
        if let Variable::ClickHouse { name, sql, .. } = &variable {
            self.sql.push(SqlQuery {
                location: format!("variable {name}"),
                sql: sql.clone(),
                columns: vec![],
            });
        }
        self.variables.push(variable);
        self
    }

    /// The two drift policy constants, at the store's defaults.
    pub fn drift_policy(self) -> Builder {
        let policy = fleetscope_model::DriftPolicy::default();
        self.variable(Variable::Constant {
            name: "stale_after_seconds",
            description: "Seconds without a heartbeat after which a cluster is stale; keep equal to the hub's --stale-after",
            value: policy.stale_after_seconds.to_string(),
        })
        .variable(Variable::Constant {
            name: "grace_seconds",
            description: "Seconds a new desired state may take to arrive before it counts as drift; keep equal to the hub's --grace",
            value: policy.progress_grace_seconds.to_string(),
        })
    }

    fn new_line(&mut self) {
        if self.x > 0 {
            self.y += self.line_height;
            self.x = 0;
            self.line_height = 0;
        }
    }

    /// A full-width row header; the panels after it start on a new line.
    pub fn row(mut self, title: &str) -> Builder {
        self.new_line();
        let id = self.next_id;
        self.next_id += 1;
        self.panels.push(json!({
            "collapsed": false,
            "gridPos": {"h": 1, "w": GRID_COLUMNS, "x": 0, "y": self.y},
            "id": id,
            "panels": [],
            "title": title,
            "type": "row",
        }));
        self.y += 1;
        self
    }

    pub fn panel(mut self, panel: Panel) -> Builder {
        if self.x + panel.width > GRID_COLUMNS {
            self.new_line();
        }
        let id = self.next_id;
        self.next_id += 1;
        for (index, query) in panel.queries.iter().enumerate() {
            if let Query::ClickHouse { sql, columns, .. } = query {
                self.sql.push(SqlQuery {
                    location: format!("panel {:?} {}", panel.title, ref_id(index)),
                    sql: sql.clone(),
                    columns: columns.clone(),
                });
            }
        }
        self.panels.push(panel.json(id, self.x, self.y));
        self.x += panel.width;
        self.line_height = self.line_height.max(panel.height);
        self
    }

    /// Places `panels` one after the other, as [`Builder::panel`] each.
    pub fn panels(self, panels: Vec<Panel>) -> Builder {
        panels.into_iter().fold(self, Builder::panel)
    }

    pub fn build(self) -> Dashboard {
        let json = json!({
            "annotations": {"list": [{
                "builtIn": 1,
                "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                "enable": true,
                "hide": true,
                "iconColor": "rgba(0, 211, 255, 1)",
                "name": "Annotations & Alerts",
                "target": {"limit": 100, "matchAny": false, "tags": [], "type": "dashboard"},
                "type": "dashboard",
            }]},
            "description": self.description,
            "editable": true,
            "fiscalYearStartMonth": 0,
            "graphTooltip": 1,
            "links": [{
                "asDropdown": true,
                "icon": "external link",
                "includeVars": true,
                "keepTime": true,
                "tags": [TAG],
                "targetBlank": false,
                "title": "Fleetscope",
                "tooltip": "Other Fleetscope dashboards, with the same filters and time range",
                "type": "dashboards",
                "url": "",
            }],
            "panels": self.panels,
            "refresh": self.refresh,
            "schemaVersion": SCHEMA_VERSION,
            "tags": [TAG],
            "templating": {"list": self.variables.iter().map(Variable::json).collect::<Vec<_>>()},
            "time": {"from": self.time_from, "to": "now"},
            "timepicker": {},
            "timezone": "browser",
            "title": self.title,
            "uid": self.uid,
            "version": 1,
            "weekStart": "",
        });
        Dashboard {
            file_name: format!("{}.json", self.file_name),
            uid: self.uid.to_owned(),
            title: self.title.to_owned(),
            json,
            sql: self.sql,
        }
    }
}

/// The same value with every object's keys in sorted order, so the text does not depend on
/// which map type serde_json was built with.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for key in keys {
                out.insert(key.clone(), sorted(&map[key]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The text a dashboard is committed as: pretty JSON, sorted keys, a final newline.
pub fn to_text(json: &Value) -> String {
    let mut text = serde_json::to_string_pretty(&sorted(json)).expect("JSON values serialize");
    text.push('\n');
    text
}
