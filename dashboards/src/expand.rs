//! Turns a panel's SQL into the statement ClickHouse receives: template variables replaced the
//! way Grafana replaces them, then the ClickHouse plugin's macros replaced the way the plugin
//! does. The tests run the result; it is also handy to try a panel's query by hand.
//!
//! Supported: `${name}` and `${name:sqlstring}` for constant and query variables (a variable
//! set to "All" becomes its custom all value, unformatted, as Grafana does), and the macros
//! `$__timeFilter(column)`, `$__fromTime`, `$__toTime`, `$__timeInterval(column)` and
//! `$__interval_s`, in the two forms plugin versions 4.x have written them
//! ([`MacroStyle`]). Anything else that starts with `$` is an error.

use std::collections::BTreeMap;

use serde_json::Value;

/// What a query variable is set to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    All,
    Value(String),
}

/// How the ClickHouse plugin writes time macros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacroStyle {
    /// Versions 4.0.3 and later: whole seconds, `toDateTime(1800000000)`.
    Seconds,
    /// Versions 4.0.0 to 4.0.2: milliseconds, `toDateTime64(1800000000000/1000, 3)`.
    Milliseconds,
}

/// The dashboard state a query is expanded for.
#[derive(Debug, Clone)]
pub struct Context {
    /// The time range, in seconds since the epoch.
    pub from: i64,
    pub to: i64,
    /// The panel's interval in seconds.
    pub interval_seconds: u64,
    /// Values of query variables by name.
    pub choices: BTreeMap<String, Choice>,
    pub macros: MacroStyle,
}

/// Expands `sql` for `context`, with the variables of `dashboard` (its JSON).
pub fn expand(sql: &str, dashboard: &Value, context: &Context) -> Result<String, String> {
    let variables = substitute_variables(sql, dashboard, context)?;
    let expanded = substitute_macros(&variables, context)?;
    if let Some(at) = expanded.find('$') {
        return Err(format!(
            "unexpanded `{}` in {expanded}",
            &expanded[at..(at + 20).min(expanded.len())]
        ));
    }
    Ok(expanded)
}

fn variable<'a>(dashboard: &'a Value, name: &str) -> Option<&'a Value> {
    dashboard["templating"]["list"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == name)
}

fn value_of(dashboard: &Value, name: &str, context: &Context) -> Result<(String, bool), String> {
    let definition =
        variable(dashboard, name).ok_or_else(|| format!("the dashboard has no variable {name}"))?;
    match definition["type"].as_str() {
        Some("constant") => Ok((
            definition["query"]
                .as_str()
                .ok_or_else(|| format!("constant {name} has no value"))?
                .to_owned(),
            false,
        )),
        Some("query") => match context.choices.get(name) {
            Some(Choice::Value(value)) => Ok((value.clone(), false)),
            Some(Choice::All) => {
                if definition["includeAll"] != true {
                    return Err(format!("variable {name} has no All option"));
                }
                let all = definition["allValue"]
                    .as_str()
                    .ok_or_else(|| format!("variable {name} has no custom all value"))?;
                Ok((all.to_owned(), true))
            }
            None => Err(format!("no value chosen for variable {name}")),
        },
        other => Err(format!(
            "variable {name} of type {other:?} cannot be expanded"
        )),
    }
}

fn substitute_variables(sql: &str, dashboard: &Value, context: &Context) -> Result<String, String> {
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("unclosed variable in {sql}"))?;
        let reference = &after[..end];
        let (name, format) = match reference.split_once(':') {
            Some((name, format)) => (name, Some(format)),
            None => (reference, None),
        };
        let (value, is_all) = value_of(dashboard, name, context)?;
        let text = match (format, is_all) {
            // Grafana inserts a custom all value as it is, whatever the format.
            (_, true) | (None, false) => value,
            (Some("sqlstring"), false) => format!("'{}'", value.replace('\'', "''")),
            (Some(other), false) => return Err(format!("format {other} is not supported")),
        };
        out.push_str(&text);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn date_time(seconds: i64, style: MacroStyle) -> String {
    match style {
        MacroStyle::Seconds => format!("toDateTime({seconds})"),
        MacroStyle::Milliseconds => format!("toDateTime64({}/1000, 3)", seconds * 1000),
    }
}

/// The argument of a macro call at the start of `text` (`(column)`), and the text after it.
fn argument(text: &str) -> Result<(&str, &str), String> {
    let inner = text
        .strip_prefix('(')
        .ok_or_else(|| format!("macro without its argument before {text:?}"))?;
    let end = inner
        .find(')')
        .ok_or_else(|| format!("unclosed macro argument in {text:?}"))?;
    Ok((inner[..end].trim(), &inner[end + 1..]))
}

fn substitute_macros(sql: &str, context: &Context) -> Result<String, String> {
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(at) = rest.find("$__") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 3..];
        let name_end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let (name, tail) = after.split_at(name_end);
        rest = match name {
            "timeFilter" => {
                let (column, tail) = argument(tail)?;
                out.push_str(&format!(
                    "{column} >= {} AND {column} <= {}",
                    date_time(context.from, context.macros),
                    date_time(context.to, context.macros)
                ));
                tail
            }
            "timeInterval" => {
                let (column, tail) = argument(tail)?;
                out.push_str(&format!(
                    "toStartOfInterval(toDateTime({column}), INTERVAL {} second)",
                    context.interval_seconds.max(1)
                ));
                tail
            }
            "fromTime" => {
                out.push_str(&date_time(context.from, context.macros));
                tail
            }
            "toTime" => {
                out.push_str(&date_time(context.to, context.macros));
                tail
            }
            "interval_s" => {
                out.push_str(&context.interval_seconds.max(1).to_string());
                tail
            }
            other => return Err(format!("macro $__{other} is not supported")),
        };
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dashboard() -> Value {
        json!({"templating": {"list": [
            {"name": "group", "type": "query", "includeAll": true, "allValue": "''"},
            {"name": "app", "type": "query", "includeAll": false},
            {"name": "grace_seconds", "type": "constant", "query": "900"},
        ]}})
    }

    fn context(group: Choice) -> Context {
        Context {
            from: 100,
            to: 200,
            interval_seconds: 60,
            choices: [
                ("group".to_owned(), group),
                ("app".to_owned(), Choice::Value("it's".to_owned())),
            ]
            .into_iter()
            .collect(),
            macros: MacroStyle::Seconds,
        }
    }

    #[test]
    fn variables_and_macros_expand_like_grafana_and_the_plugin() {
        // Expansion is textual, so any text around the references will do.
        let text = "[${group:sqlstring}, ${app:sqlstring}, ${grace_seconds}] $__timeFilter(t) \
AND x < $__toTime AND y > $__fromTime; $__timeInterval(t), intDiv(t, $__interval_s)";
        assert_eq!(
            expand(text, &dashboard(), &context(Choice::All)).unwrap(),
            "['', 'it''s', 900] t >= toDateTime(100) AND t <= toDateTime(200) \
AND x < toDateTime(200) AND y > toDateTime(100); toStartOfInterval(toDateTime(t), INTERVAL 60 second), intDiv(t, 60)"
        );
        assert_eq!(
            expand(
                "${group:sqlstring}",
                &dashboard(),
                &context(Choice::Value("emea/de".into()))
            )
            .unwrap(),
            "'emea/de'"
        );
        let early = Context {
            macros: MacroStyle::Milliseconds,
            ..context(Choice::All)
        };
        assert_eq!(
            expand("$__timeFilter(t) AND $__toTime", &dashboard(), &early).unwrap(),
            "t >= toDateTime64(100000/1000, 3) AND t <= toDateTime64(200000/1000, 3) AND toDateTime64(200000/1000, 3)"
        );
    }

    #[test]
    fn what_cannot_be_expanded_is_an_error() {
        let all = context(Choice::All);
        assert!(expand("${nope}", &dashboard(), &all)
            .unwrap_err()
            .contains("no variable nope"));
        assert!(expand("$__unknown", &dashboard(), &all)
            .unwrap_err()
            .contains("not supported"));
        assert!(expand("${app:csv}", &dashboard(), &all)
            .unwrap_err()
            .contains("format csv"));
        let mut no_all = all.clone();
        no_all.choices.insert("app".into(), Choice::All);
        assert!(expand("${app}", &dashboard(), &no_all)
            .unwrap_err()
            .contains("no All option"));
    }
}
