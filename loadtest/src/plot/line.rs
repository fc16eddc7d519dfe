//! Line charts: several named series over a shared x axis (usually seconds since start).

use std::path::Path;

use plotters::prelude::*;

use super::axes::{legend, mesh, no_data, pad, title_style, PALETTE};
use super::canvas::render;
use super::stats::bounds;

/// One named series of (x, y) points.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A line chart (x usually "seconds since start"), several series, legend, axis labels, title.
/// Points with a NaN or infinite coordinate are skipped; with no points left it says "no data".
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> anyhow::Result<()> {
    let series: Vec<(&str, Vec<(f64, f64)>)> = series
        .iter()
        .map(|s| {
            let mut points: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            (s.name.as_str(), points)
        })
        .collect();
    let all = || series.iter().flat_map(|(_, p)| p.iter());
    let (Some(xs), Some(ys)) = (bounds(all().map(|p| p.0)), bounds(all().map(|p| p.1))) else {
        return render(path, |root| no_data(root, title));
    };
    let x_range = pad(xs, 0.0, 0.0, false);
    // Room above the data for the legend, which sits in the upper left corner.
    let y_range = pad(ys, 0.05 + 0.045 * series.len() as f64, 0.05, true);
    render(path, |root| {
        let area = root.titled(title, title_style())?;
        let mut chart = ChartBuilder::on(&area)
            .margin(20)
            .x_label_area_size(55)
            .y_label_area_size(85)
            .build_cartesian_2d(x_range, y_range)?;
        mesh(&mut chart, x_label, y_label)?;
        for (i, (name, points)) in series.iter().enumerate() {
            let style = PALETTE[i % PALETTE.len()].stroke_width(2);
            let label = if points.is_empty() {
                format!("{name} (no data)")
            } else {
                (*name).to_owned()
            };
            // A lone point draws no line, so mark it.
            let marker = if points.len() == 1 { 4 } else { 0 };
            chart
                .draw_series(LineSeries::new(points.iter().copied(), style).point_size(marker))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}
