//! The Markdown report (`report.md`): the design targets, then one section per measurement.

use std::fmt::Write as _;

use super::{ms, LoadtestReport};

/// The report as Markdown.
pub fn markdown(r: &LoadtestReport) -> String {
    let mut md = String::new();
    heading(&mut md, r);
    design_targets(&mut md, r);
    phases(&mut md, r);
    faults(&mut md, r);
    outages(&mut md, r);
    store_audit(&mut md, r);
    simulator(&mut md, r);
    ingest(&mut md, r);
    steady_state(&mut md, r);
    rollout(&mut md, r);
    freshness(&mut md, r);
    hub_latency(&mut md, r);
    processes(&mut md, r);
    clickhouse(&mut md, r);
    md
}

/// The title, the run in one sentence, and the ground truth's verdict.
fn heading(md: &mut String, r: &LoadtestReport) {
    let _ = writeln!(md, "# Load test report\n");
    let _ = writeln!(
        md,
        "{} clusters × {} apps ({} app instances; {} clusters deliver, the rest never report), {} concurrent agent requests, {} hub readers, seed {}; {:.0} s in all.\n",
        r.clusters, r.apps, r.app_instances, r.delivering_clusters, r.concurrency, r.readers, r.seed, r.seconds
    );
    if let Some(cluster) = &r.cluster {
        let _ = writeln!(md, "Cluster mode: {cluster}.\n");
    }
    let _ = writeln!(
        md,
        "Ground truth: **{}**.\n",
        if r.correctness_passed {
            "every check passed"
        } else {
            "FAILED"
        }
    );
    let bound: Vec<&str> = r
        .phases
        .iter()
        .filter(|p| p.load.as_ref().is_some_and(|l| l.simulator_bound.is_some()))
        .map(|p| p.name.as_str())
        .collect();
    if r.phases.iter().any(|p| p.load.is_some()) {
        if bound.is_empty() {
            let _ = writeln!(
                md,
                "Simulator: set the pace of no phase; the figures measure the services.\n"
            );
        } else {
            let _ = writeln!(
                md,
                "Simulator: **was the bottleneck** in {}; those phases' figures measure the simulator as much as the services (see [Simulator and services](#simulator-and-services)).\n",
                bound.join(", ")
            );
        }
    }
}

/// Each design target with its measured value and whether it was met.
fn design_targets(md: &mut String, r: &LoadtestReport) {
    let _ = writeln!(
        md,
        "## Against the design targets\n\n| what | target | measured | met |\n|---|---|---|---|"
    );
    for t in &r.targets {
        let met = match t.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "—",
        };
        let _ = writeln!(md, "| {} | {} | {} | {met} |", t.what, t.target, t.measured);
    }
}

/// Each outage of the collector: how long it was down, the backlog at its return, the requests
/// per second after it, and how long the backlog took to deliver.
fn outages(md: &mut String, r: &LoadtestReport) {
    if r.outages.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n## Collector outage\n\nThe collector killed (SIGKILL) while the fleet kept changing, then started again on its port. Its return is the first request it answered after it was started again; \"down\" runs from the kill to the return, and every count is of requests by the second they were sent in. \"Delivered\" runs from the return until every report spooled at the return was acknowledged.\n\n\
| agents' backoff | down | ready after start | spooled at the return | requests/s before | peak requests/s (second after the return) | requests in the window | answered 429/503 | no collector, while down / after | delivered |\n\
|---|---|---|---|---|---|---|---|---|---|"
    );
    for o in &r.outages {
        let _ = writeln!(
            md,
            "| {} | {:.1} s | {:.1} s | {} reports of {} clusters | {:.0} | {} ({}) | {} in {} s | {} ({:.1} %) | {} / {} | {:.1} s |",
            o.backoff,
            o.down_seconds,
            o.start_seconds,
            o.backlog_reports,
            o.backlog_clusters,
            o.before_requests_per_second,
            o.peak_requests_per_second,
            o.peak_second,
            o.requests,
            o.window_seconds,
            o.busy,
            o.busy_share * 100.0,
            o.unreachable_while_down,
            o.unreachable_after_return,
            o.drained_after_s,
        );
    }
    for (i, o) in r.outages.iter().enumerate() {
        let answered: Vec<String> = o
            .per_second
            .iter()
            .map(|s| s.answered.to_string())
            .collect();
        let _ = writeln!(
            md,
            "\nOutage {}, requests answered in each second after the return: {}.",
            i + 1,
            answered.join(", ")
        );
    }
}

/// Each fault: what it stopped and for how long, and what ingest, the readers, the hubs and
/// the store saw.
fn faults(md: &mut String, r: &LoadtestReport) {
    if r.faults.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n## Faults\n\nOne fault per phase, injected during the scenario named; \"down\" runs from the fault to its server being ready again, \"drained\" from the later of that and the scenario's end to every agent's outbox empty, \"hubs agreed\" from then to every hub showing the ground truth. Answers are the readers' requests through the hubs' balancer during the phase.\n\n\
| phase | fault | down | acknowledged (changes) | not acknowledged, sent again | longest without an acknowledgement | answers failed | longest failing | freshness p99 / max | drained | hubs agreed | store |\n\
|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for f in &r.faults {
        let store = if f.audit.holds() {
            format!("{} changes, none lost or twice", f.audit.stored_changes)
        } else {
            format!(
                "**{} lost, {} not acknowledged, {} twice**",
                f.audit.lost, f.audit.unacknowledged, f.audit.stored_twice
            )
        };
        let agreed = if f.check_passed {
            format!("{:.1} s", f.check_seconds)
        } else {
            "**no**".to_owned()
        };
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} s | {} ({}) | {} | {:.1} s | {} of {} | {:.1} s | {} / {} ms ({} samples) | {:.1} s | {agreed} | {store} |",
            f.phase,
            f.what,
            f.down_seconds,
            f.acknowledged_requests,
            f.acknowledged_changes,
            f.not_acknowledged,
            f.longest_without_acknowledgement_s,
            f.failed_answers,
            f.answers,
            f.longest_failing_s,
            ms(f.freshness_p99_ms),
            ms(f.freshness_max_ms),
            f.freshness_samples,
            f.drained_after_s,
        );
    }
}

/// The store against every change the collectors acknowledged, at the end of the run.
fn store_audit(md: &mut String, r: &LoadtestReport) {
    let Some(a) = &r.store_audit else {
        return;
    };
    let _ = writeln!(
        md,
        "\n## Store audit\n\nAt the end of the run, every cluster's changes in `observed_transitions` (after collapsing, every replica synced) against those the collectors acknowledged: {} clusters, {} changes acknowledged, {} stored; **{} lost, {} stored without an acknowledgement, {} held twice**. {} arrived rows were inserts of a report already stored (a retry after a lost acknowledgement; readers apply each change once).",
        a.clusters, a.acknowledged_changes, a.stored_changes, a.lost, a.unacknowledged, a.stored_twice, a.arrived_again
    );
    if !a.differences.is_empty() {
        let _ = writeln!(md);
    }
    for d in &a.differences {
        let _ = writeln!(md, "- {d}");
    }
}

/// Each phase: its timing, changes, check, the hub's refreshes, and notes.
fn phases(md: &mut String, r: &LoadtestReport) {
    let _ = writeln!(md, "\n## Phases\n\nHub refreshes: those that ended in the phase (its check included), how many took at most 0.512 s, and the bucket of the hub's own histogram their 99th percentile fell in.\n\n| phase | start s | seconds | changes | check | hub refreshes | notes |\n|---|---|---|---|---|---|---|");
    for p in &r.phases {
        let check = if p.check_passed {
            format!("pass ({:.1} s)", p.check_seconds)
        } else {
            format!(
                "**FAIL**: {}",
                p.check_mismatch.as_deref().unwrap_or_default()
            )
        };
        let refreshes = match &p.refreshes {
            None => "—".to_owned(),
            Some(r) => format!(
                "{}, {} within 0.512 s, p99 {}",
                r.count,
                r.within_512ms,
                match r.p99_at_most_s {
                    Some(bound) => format!("≤ {bound} s"),
                    None if r.count == 0 => "—".to_owned(),
                    None => "above the largest bucket".to_owned(),
                }
            ),
        };
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.1} | {} | {check} | {refreshes} | {} |",
            p.name,
            p.started_s,
            p.seconds,
            p.changes,
            p.notes.join("; ")
        );
    }
}

/// Per phase: the simulator's CPU beside the services' and the rest of the machine's, its
/// sends' wait for a worker, and whether it set the pace.
fn simulator(md: &mut String, r: &LoadtestReport) {
    if r.phases.iter().all(|p| p.load.is_none()) {
        return;
    }
    let _ = writeln!(
        md,
        "\n## Simulator and services\n\nMean CPU in cores over each phase (a full resync: its delivery, without the encoding before it), the simulator's own CPU seconds, and how long its heartbeats and deltas waited for one of its workers. The simulator sets the pace when its CPU reaches {:.0}% of the machine's cores, or exceeds the services' on a machine at least {:.0}% busy, or, outside a full resync (whose snapshots keep every worker busy), its sends wait {:.0} ms or more at p99.\n\n| phase | window s | simulator cores (CPU s) | collector | hub | clickhouse | other processes | sends | wait p50 / p99 ms | bottleneck |\n|---|---|---|---|---|---|---|---|---|---|",
        super::load::SIMULATOR_CORE_SHARE * 100.0,
        super::load::SATURATED_SHARE * 100.0,
        super::load::WAIT_P99_LIMIT_MS
    );
    for p in &r.phases {
        let Some(l) = &p.load else {
            continue;
        };
        let bottleneck = match &l.simulator_bound {
            Some(why) => format!("**the simulator**: {why}"),
            None => "the services".to_owned(),
        };
        let _ = writeln!(
            md,
            "| {} | {:.0}–{:.0} | {:.2} ({:.0}) | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} / {} | {bottleneck} |",
            p.name,
            l.from_s,
            l.to_s,
            l.simulator_cores,
            l.simulator_cpu_seconds,
            l.collector_cores,
            l.hub_cores,
            l.clickhouse_cores,
            l.other_cores(),
            l.sends,
            ms(l.wait_p50_ms),
            ms(l.wait_p99_ms)
        );
    }
}

/// The two full resyncs and each report kind's acknowledgement latency.
fn ingest(md: &mut String, r: &LoadtestReport) {
    let _ = writeln!(md, "\n## Ingest\n");
    let _ = writeln!(
        md,
        "First connection: {} snapshots, {} rows in {:.1} s = {:.0} rows/s.",
        r.connect.reports, r.connect.rows, r.connect.seconds, r.connect.rows_per_second
    );
    if let Some(s) = &r.storm {
        let _ = writeln!(
            md,
            "Resync storm: {} snapshots, {} rows in {:.1} s = {:.0} rows/s.",
            s.reports, s.rows, s.seconds, s.rows_per_second
        );
    }
    let _ = writeln!(
        md,
        "\n| report kind | requests | ack p50 ms | ack p99 ms | max ms | wait for a worker p50 / p99 / max ms |\n|---|---|---|---|---|---|"
    );
    for a in &r.ack_latency {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} / {} / {} |",
            a.kind,
            a.requests,
            ms(a.p50_ms),
            ms(a.p99_ms),
            ms(a.max_ms),
            ms(a.wait_p50_ms),
            ms(a.wait_p99_ms),
            ms(a.wait_max_ms)
        );
    }
    let _ = writeln!(
        md,
        "\nRetried answers (429/5xx): {}; refused: {}; unreachable: {}.",
        r.retried_answers,
        r.refused.len(),
        r.unreachable
    );
}

/// The steady phase's rates per delivering cluster, when it ran.
fn steady_state(md: &mut String, r: &LoadtestReport) {
    if let Some(s) = &r.steady {
        let _ = writeln!(md, "\n## Steady state\n");
        let _ = writeln!(md, "| measure | value |\n|---|---|");
        for (name, value) in [
            ("seconds", format!("{:.0}", s.seconds)),
            ("delivering clusters", s.delivering_clusters.to_string()),
            ("requests/s", format!("{:.0}", s.requests_per_second)),
            ("heartbeats/s", format!("{:.0}", s.heartbeats_per_second)),
            ("deltas/s", format!("{:.0}", s.deltas_per_second)),
            (
                "wire bytes per cluster per minute",
                format!("{:.0}", s.wire_bytes_per_cluster_per_minute),
            ),
            (
                "of which heartbeats",
                format!("{:.0}", s.idle_wire_bytes_per_cluster_per_minute),
            ),
            (
                "observed rows per cluster per day",
                format!("{:.0}", s.rows_per_cluster_per_day),
            ),
            (
                "observed bytes on disk per cluster per day",
                format!("{:.0}", s.disk_bytes_per_cluster_per_day),
            ),
            (
                "collector CPU (cores)",
                format!("{:.3}", s.collector_cpu_cores),
            ),
            ("hub CPU (cores)", format!("{:.3}", s.hub_cpu_cores)),
        ] {
            let _ = writeln!(md, "| {name} | {value} |");
        }
    }
}

/// The rollout's render, publication and waves, when it ran.
fn rollout(md: &mut String, r: &LoadtestReport) {
    if let Some(rollout) = &r.rollout {
        let _ = writeln!(
            md,
            "\n## Rollout\n\n{} {} → {}: render {:.2} s, publish {:.2} s, {} pairs changed. {}\n\n| wave | groups | clusters | failed | gate share in sync | verdict |\n|---|---|---|---|---|---|",
            rollout.app, rollout.from_version, rollout.to_version, rollout.render_seconds, rollout.publish_seconds, rollout.changed_pairs, rollout.render_summary
        );
        for w in &rollout.waves {
            let groups = if w.groups.len() > 6 {
                format!(
                    "{} … {} ({} groups)",
                    w.groups[0],
                    w.groups[w.groups.len() - 1],
                    w.groups.len()
                )
            } else {
                w.groups.join(", ")
            };
            let _ = writeln!(
                md,
                "| {} | {groups} | {} | {} | {:.3} | {} |",
                w.wave, w.clusters, w.failed, w.gate_share_in_sync, w.gate_verdict
            );
        }
    }
}

/// Freshness of sampled changes, in all and by phase.
fn freshness(md: &mut String, r: &LoadtestReport) {
    let _ = writeln!(
        md,
        "\n## Freshness\n\n{} samples: p50 {} ms, p99 {} ms, max {} ms; {} not seen within 60 s.",
        r.freshness.samples,
        ms(r.freshness.p50_ms),
        ms(r.freshness.p99_ms),
        ms(r.freshness.max_ms),
        r.freshness.not_seen_within_60_s
    );
    if !r.freshness.by_phase.is_empty() {
        let _ = writeln!(
            md,
            "\nBy the phase in which the change was made, with the p99 of the phase's deltas' wait for a simulator worker and acknowledgement:\n\n| phase | samples | p50 ms | p99 ms | max ms | delta wait p99 ms | delta ack p99 ms |\n|---|---|---|---|---|---|---|"
        );
        for f in &r.freshness.by_phase {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} |",
                f.phase,
                f.samples,
                ms(f.p50_ms),
                ms(f.p99_ms),
                ms(f.max_ms),
                ms(f.delta_wait_p99_ms),
                ms(f.delta_ack_p99_ms)
            );
        }
    }
}

/// The hub's latency per route under the concurrent readers.
fn hub_latency(md: &mut String, r: &LoadtestReport) {
    let _ = writeln!(md, "\n## Hub under {} concurrent readers\n\n| route | requests | errors | p50 ms | p95 ms | p99 ms | max ms |\n|---|---|---|---|---|---|---|", r.readers);
    for l in &r.hub_latency {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} |",
            l.route,
            l.requests,
            l.errors,
            ms(l.p50_ms),
            ms(l.p95_ms),
            ms(l.p99_ms),
            ms(l.max_ms)
        );
    }
}

/// CPU and memory per process.
fn processes(md: &mut String, r: &LoadtestReport) {
    let _ = writeln!(md, "\n## Processes\n\n| process | CPU cores mean | max | RSS MB max | at the end |\n|---|---|---|---|---|");
    for p in &r.processes {
        let _ = writeln!(
            md,
            "| {} | {:.2} | {:.2} | {:.0} | {:.0} |",
            p.process, p.cpu_cores_mean, p.cpu_cores_max, p.rss_mb_max, p.rss_mb_end
        );
    }
}

/// Rows and bytes on disk per table, and the plots' files.
fn clickhouse(md: &mut String, r: &LoadtestReport) {
    let _ = writeln!(
        md,
        "\n## ClickHouse\n\n| table | rows | bytes on disk |\n|---|---|---|"
    );
    for t in &r.clickhouse_tables {
        let _ = writeln!(md, "| {} | {} | {} |", t.table, t.rows, t.bytes_on_disk);
    }
    let _ = writeln!(
        md,
        "\n{:.0} bytes on disk per cluster in all.\n\nPlots: `throughput.png`, `freshness.png`, `ack_latency.png`, `ack_latency_over_time.png`, `hub_latency.png`, `hub_latency_over_time.png`, `cpu.png`, `memory.png`.",
        r.clickhouse_bytes_per_cluster
    );
}
