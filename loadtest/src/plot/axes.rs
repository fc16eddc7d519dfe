//! What every chart shares around its data: the palette, the title, axes with their ticks and
//! light grid, the legend, the axis ranges, and the chart that says "no data".

use std::ops::Range;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::canvas::Area;

/// Category colours, cycled through by the series.
pub(super) const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];
const LIGHT_GRID: RGBColor = RGBColor(235, 235, 235);

pub(super) fn title_style() -> TextStyle<'static> {
    ("sans-serif", 26).into_font().color(&BLACK)
}

/// Axes, labels and the light grid, alike on every chart.
pub(super) fn mesh<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    x_label: &str,
    y_label: &str,
) -> anyhow::Result<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    X: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .light_line_style(LIGHT_GRID)
        .max_light_lines(4)
        .draw()?;
    Ok(())
}

pub(super) fn no_data(root: &Area<'_>, title: &str) -> anyhow::Result<()> {
    let area = root.titled(title, title_style())?;
    let (w, h) = area.dim_in_pixel();
    let style = ("sans-serif", 32)
        .into_font()
        .color(&RGBColor(120, 120, 120))
        .pos(Pos::new(HPos::Center, VPos::Center));
    area.draw_text("no data", &style, (w as i32 / 2, h as i32 / 2))?;
    Ok(())
}

pub(super) fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> anyhow::Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .margin(12)
        .label_font(("sans-serif", 16))
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(190, 190, 190))
        .draw()
        .map_err(|e| anyhow::anyhow!("drawing the legend: {e}"))
}

/// An axis range around the data's `lo..=hi`: `top` and `bottom` are the shares of the height
/// left free above and below the data; non-negative data starts at zero if `from_zero`. A
/// zero-width range is widened. Both ends and the span are finite.
pub(super) fn pad((lo, hi): (f64, f64), top: f64, bottom: f64, from_zero: bool) -> Range<f64> {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        let d = (hi.abs() * 0.1).max(1.0);
        (lo - d, hi + d)
    };
    let (lo, bottom) = if from_zero && lo >= 0.0 {
        (0.0, 0.0)
    } else {
        (lo, bottom)
    };
    let top = top.clamp(0.0, 0.5);
    let bottom = bottom.clamp(0.0, 0.25);
    // Half the axis' span, computed from halves so it stays finite near f64::MAX.
    let half = (hi / 2.0 - lo / 2.0) / (1.0 - top - bottom);
    let new_lo = lo - 2.0 * half * bottom;
    let new_hi = hi + 2.0 * half * top;
    let new_lo = if new_lo.is_finite() { new_lo } else { lo };
    let new_hi = if new_hi.is_finite() { new_hi } else { hi };
    // plotters' tick placement never ends for an infinite span.
    if (new_hi - new_lo).is_finite() {
        new_lo..new_hi
    } else {
        new_lo.max(f64::MIN / 2.0)..new_hi.min(f64::MAX / 2.0)
    }
}

/// Axis tick: about four significant digits, k/M/G for large values.
pub(super) fn tick(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{}G", sig(v / 1e9, 4))
    } else if a >= 1e6 {
        format!("{}M", sig(v / 1e6, 4))
    } else if a >= 1e4 {
        format!("{}k", sig(v / 1e3, 4))
    } else {
        sig(v, 4)
    }
}

/// `v` with `digits` significant digits (more left of the point are kept), no trailing zeros.
pub(super) fn sig(v: f64, digits: i32) -> String {
    if v == 0.0 {
        return "0".to_owned();
    }
    if !v.is_finite() {
        return v.to_string();
    }
    let decimals = (digits - 1 - v.abs().log10().floor() as i32).clamp(0, 12) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}
