//! The plots' data, drawn from what the run recorded.

use std::collections::BTreeMap;

use super::{kind_name, sorted};
use crate::agents::Ack;
use crate::plot::Series;
use crate::procs::{ProcSample, MACHINE};
use crate::readers::Timings;

/// The raw series behind the plots.
#[derive(Debug)]
pub struct PlotData {
    pub throughput: Vec<Series>,
    /// (seconds since start, seconds until visible) per sampled change.
    pub freshness: Vec<(f64, f64)>,
    pub ack_latency: Vec<(String, Vec<f64>)>,
    /// (seconds since start, milliseconds) per acknowledged request, every kind.
    pub ack_latency_over_time: Vec<(f64, f64)>,
    pub hub_latency: Vec<(String, Vec<f64>)>,
    /// (seconds since start, milliseconds) per answer, every route.
    pub hub_latency_over_time: Vec<(f64, f64)>,
    pub cpu: Vec<Series>,
    pub memory: Vec<Series>,
}

/// At most `n` values spread over the sorted sample, so a CDF of a million points stays cheap.
fn thin(values: Vec<f64>, n: usize) -> Vec<f64> {
    let values = sorted(values);
    if values.len() <= n {
        return values;
    }
    (0..n)
        .map(|i| values[i * (values.len() - 1) / (n - 1)])
        .collect()
}

/// The series of every plot.
pub(super) fn plot_data(
    acks: &[Ack],
    freshness: Vec<(f64, f64)>,
    timings: &Timings,
    samples: &[ProcSample],
) -> PlotData {
    let mut rows: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for a in acks {
        let e = rows.entry(a.at_ms / 1_000).or_default();
        e.0 += f64::from(a.rows);
        e.1 += 1.0;
    }
    let throughput = vec![
        Series {
            name: "observed rows acknowledged per second".into(),
            points: rows.iter().map(|(s, (r, _))| (*s as f64, *r)).collect(),
        },
        Series {
            name: "requests acknowledged per second".into(),
            points: rows.iter().map(|(s, (_, q))| (*s as f64, *q)).collect(),
        },
    ];
    let mut by_kind: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    for a in acks {
        by_kind
            .entry(kind_name(a.kind))
            .or_default()
            .push(f64::from(a.latency_us) / 1_000.0);
    }
    // The whole machine's CPU is drawn beside the processes' (what else ran shows as the gap);
    // it has no memory of its own.
    let per_process = |f: fn(&ProcSample) -> f64, with_machine: bool| {
        let mut by: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        for s in samples
            .iter()
            .filter(|s| with_machine || s.process != MACHINE)
        {
            by.entry(s.process.as_str())
                .or_default()
                .push((s.at_s, f(s)));
        }
        by.into_iter()
            .map(|(name, points)| Series {
                name: name.to_owned(),
                points,
            })
            .collect()
    };
    PlotData {
        throughput,
        freshness: freshness.iter().map(|(t, ms)| (*t, ms / 1_000.0)).collect(),
        ack_latency: by_kind
            .into_iter()
            .map(|(k, v)| (k.to_owned(), thin(v, 2_000)))
            .collect(),
        ack_latency_over_time: acks
            .iter()
            .map(|a| (a.at_ms as f64 / 1_000.0, f64::from(a.latency_us) / 1_000.0))
            .collect(),
        hub_latency: timings
            .by_route
            .iter()
            .map(|(r, (v, _))| {
                let ms = v.iter().map(|(_, ms)| *ms).collect();
                ((*r).to_owned(), thin(ms, 2_000))
            })
            .collect(),
        hub_latency_over_time: timings
            .by_route
            .values()
            .flat_map(|(v, _)| v.iter().copied())
            .collect(),
        cpu: per_process(|s| s.cpu_cores, true),
        memory: per_process(|s| s.rss_mb, false),
    }
}
