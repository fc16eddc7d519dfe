//! Every Fleetscope container's arguments and environment are what `fleetscope <subcommand>`
//! accepts, checked by the binary built from this workspace.
//!
//! The binary is run as `fleetscope <args> <flags from env> --help` with an empty environment:
//! clap reads every argument before it reaches `--help`, so an unknown flag, a value that does
//! not parse (a port, a number out of range) or a flag given twice ends it with status 2,
//! while a clean parse prints the help and ends with 0. Environment variables are turned into
//! the flags they stand for (from the help's `[env: ...]`), so their values are checked the
//! same way and a setting given both as a flag and a variable counts as given twice. What
//! `--help` skips (required flags, conflicts between flags) is checked from the help's usage
//! line and explicitly.

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;

use common::{build, containers, data_value, fleetscope_binary, BUILDS, IMAGE};
use serde_json::Value;

/// What `fleetscope <subcommand> --help` says.
#[derive(Debug, Default)]
struct Help {
    /// Every flag, and whether it takes a value.
    flags: BTreeMap<String, bool>,
    /// Environment variable → flag.
    env: BTreeMap<String, String>,
    /// Flags the usage line requires.
    required: Vec<String>,
}

fn help(subcommand: &str) -> Help {
    let output = Command::new(fleetscope_binary())
        .args([subcommand, "--help"])
        .env_clear()
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "fleetscope {subcommand} --help failed"
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let flag_line = regex::Regex::new(r"^\s+(?:-[a-zA-Z], )?(--[a-z0-9-]+)(?: <[^>]+>)?").unwrap();
    let env = regex::Regex::new(r"\[env: ([A-Za-z0-9_]+)[=\]]").unwrap();
    let usage_flag = regex::Regex::new(r"(--[a-z0-9-]+) <").unwrap();
    let bracketed = regex::Regex::new(r"\[[^\]]*\]").unwrap();
    let mut help = Help::default();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(usage) = line.strip_prefix("Usage: ") {
            let optional = bracketed.replace_all(usage, "");
            help.required = usage_flag
                .captures_iter(&optional)
                .map(|c| c[1].to_owned())
                .collect();
        }
        if let Some(captures) = flag_line.captures(line) {
            let flag = captures[1].to_owned();
            help.flags.insert(flag.clone(), captures[0].contains('<'));
            current = Some(flag);
        }
        if let (Some(flag), Some(captures)) = (&current, env.captures(line)) {
            help.env.insert(captures[1].to_owned(), flag.clone());
        }
    }
    assert!(
        help.flags.contains_key("--log"),
        "could not read the help of {subcommand}:\n{text}"
    );
    help
}

/// The flags a container's arguments give (`--flag=value` or `--flag value`).
fn given_flags(args: &[String]) -> Vec<String> {
    args.iter()
        .filter(|a| a.starts_with("--"))
        .map(|a| a.split('=').next().unwrap().to_owned())
        .collect()
}

#[test]
fn every_container_runs_a_command_line_fleetscope_accepts() {
    let binary = fleetscope_binary();
    let mut helps: BTreeMap<String, Help> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut checked = 0;
    for name in BUILDS {
        let objects = &build(name).objects;
        for (at, workload, container) in containers(objects) {
            if container["image"] != IMAGE {
                continue;
            }
            let at = format!("{name}: {at}");
            let args: Vec<String> = container["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect();
            let subcommand = args[0].clone();
            let help = helps
                .entry(subcommand.clone())
                .or_insert_with(|| help(&subcommand));
            let namespace = workload["metadata"]["namespace"].as_str().unwrap();

            let mut extra = Vec::new();
            let mut given = given_flags(&args[1..]);
            for env in container["env"].as_array().into_iter().flatten() {
                let env_name = env["name"].as_str().unwrap();
                let Some(flag) = help.env.get(env_name) else {
                    problems.push(format!(
                        "{at}: fleetscope {subcommand} does not read {env_name}"
                    ));
                    continue;
                };
                given.push(flag.clone());
                let value = match (&env["value"], &env["valueFrom"]["configMapKeyRef"]) {
                    (Value::String(value), _) => Some(value.as_str()),
                    (_, reference) if reference.is_object() => {
                        let found = objects
                            .iter()
                            .find(|o| {
                                o["kind"] == "ConfigMap"
                                    && o["metadata"]["namespace"] == namespace
                                    && o["metadata"]["name"] == reference["name"]
                            })
                            .and_then(|_| {
                                data_value(
                                    objects,
                                    "ConfigMap",
                                    reference["name"].as_str().unwrap(),
                                    reference["key"].as_str().unwrap(),
                                )
                            });
                        if found.is_none() {
                            problems
                                .push(format!("{at}: {env_name} names a missing ConfigMap key"));
                        }
                        found
                    }
                    // A Secret's value: a placeholder here, so only the name is checked.
                    _ => None,
                };
                match (value, help.flags[flag]) {
                    (Some(value), true) => extra.push(format!("{flag}={value}")),
                    (Some("true"), false) => extra.push(flag.clone()),
                    (Some("false") | None, false) => {}
                    (Some(other), false) => problems.push(format!(
                        "{at}: {env_name}={other:?}: {flag} is a switch (true or false)"
                    )),
                    (None, true) => {}
                }
            }
            for flag in &help.required {
                if !given.contains(flag) {
                    problems.push(format!(
                        "{at}: fleetscope {subcommand} requires {flag} (or its variable)"
                    ));
                }
            }
            for (forbidden, why) in [
                ("--insecure", "turns authentication off"),
                ("--dry-run", "writes nothing"),
                ("--watch", "needs kubeconfig files the pod does not have"),
                ("--metrics-listen", "starts no listener in this version"),
            ] {
                if given.iter().any(|g| g == forbidden) {
                    problems.push(format!("{at}: {forbidden} {why}"));
                }
            }

            let output = Command::new(binary)
                .args(&args)
                .args(&extra)
                .arg("--help")
                .env_clear()
                .output()
                .unwrap();
            checked += 1;
            if !output.status.success() {
                problems.push(format!(
                    "{at}: fleetscope {} {} refuses it:\n{}",
                    args.join(" "),
                    extra.join(" "),
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
    // hub + migrate, collector, renderer in each of the three central builds; the agent.
    assert_eq!(checked, 3 * 4 + 1);
}

#[test]
fn the_check_catches_a_bad_flag_a_bad_value_and_a_flag_given_twice() {
    let binary = fleetscope_binary();
    for bad in [
        &["hub", "--listen=0.0.0.0:8080", "--refresh=5"][..],
        &["hub", "--listen=0.0.0.0"],
        &["render", "--every=0"],
        &["collector", "--retention-days=30", "--retention-days=7"],
    ] {
        let output = Command::new(binary)
            .args(bad)
            .arg("--help")
            .env_clear()
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{bad:?} was accepted");
    }
    let agent = help("agent");
    assert_eq!(agent.required, ["--cluster", "--collector-url"]);
    assert_eq!(agent.env["FLEETSCOPE_CLUSTER"], "--cluster");
    assert!(!agent.flags["--help"]);
    let hub = help("hub");
    assert_eq!(
        hub.env["FLEETSCOPE_CLICKHOUSE_PASSWORD"],
        "--clickhouse-password"
    );
    assert!(hub.flags["--tokens"] && !hub.flags["--open-metrics"]);
}
