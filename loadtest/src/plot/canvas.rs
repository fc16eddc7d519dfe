//! The surface every chart is drawn on: a white bitmap of [`SIZE`] with the embedded font, its
//! own text drawing, and the PNG file it is written to.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::OnceLock;

use ab_glyph::{point, Font as _, FontRef, ScaleFont as _};
use anyhow::Context as _;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::register_font;
use plotters::style::text_anchor::{HPos, VPos};
use plotters_backend::{BackendColor, BackendCoord, BackendTextStyle, DrawingErrorKind};

/// Width and height in pixels of every chart.
pub const SIZE: (u32, u32) = (1200, 700);

/// The embedded font, parsed and registered with plotters (for text layout) once per process
/// under the name `sans-serif`.
fn chart_font() -> anyhow::Result<&'static FontRef<'static>> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| {
        let bytes = ttf_noto_sans::REGULAR;
        register_font("sans-serif", FontStyle::Normal, bytes).ok()?;
        FontRef::try_from_slice(bytes).ok()
    })
    .as_ref()
    .context("the embedded chart font could not be parsed")
}

/// A chart's drawing area: the whole canvas, or a part of it.
pub(super) type Area<'a> = DrawingArea<Canvas<'a>, Shift>;

/// Draws onto a white canvas of [`SIZE`] and writes it to `path` as an RGB PNG.
pub(super) fn render(
    path: &Path,
    draw: impl FnOnce(&Area<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let font = chart_font()?;
    let (w, h) = SIZE;
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let inner = BitMapBackend::with_buffer(&mut rgb, SIZE);
        let root = Canvas { inner, font }.into_drawing_area();
        root.fill(&WHITE)?;
        draw(&root).with_context(|| format!("drawing {}", path.display()))?;
        root.present()?;
    }
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut encoder = png::Encoder::new(BufWriter::new(file), w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Fast);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&rgb)?;
    writer
        .finish()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The bitmap backend with its own text drawing: plotters' `ab_glyph` renderer drops each
/// glyph's left side bearing ("1 0.9 ms"). Layout sizes still come from plotters.
pub(super) struct Canvas<'a> {
    inner: BitMapBackend<'a>,
    font: &'static FontRef<'static>,
}

type BitMapError = <BitMapBackend<'static> as DrawingBackend>::ErrorType;
type DrawResult = Result<(), DrawingErrorKind<BitMapError>>;

impl DrawingBackend for Canvas<'_> {
    type ErrorType = BitMapError;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> DrawResult {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> DrawResult {
        self.inner.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> DrawResult {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: plotters_backend::BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> DrawResult {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: plotters_backend::BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> DrawResult {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn blit_bitmap(&mut self, pos: BackendCoord, size: (u32, u32), src: &[u8]) -> DrawResult {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn draw_text<T: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &T,
        pos: BackendCoord,
    ) -> DrawResult {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        // Anchor the text's layout box at `pos` as plotters' default implementation does.
        let ((x0, y0), (x1, y1)) = style
            .layout_box(text)
            .map_err(|e| DrawingErrorKind::FontError(Box::new(e)))?;
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Center => -(x1 - x0) / 2,
            HPos::Right => -(x1 - x0),
        } - x0;
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -(y1 - y0) / 2,
            VPos::Bottom => -(y1 - y0),
        } - y0;
        let font = self.font.as_scaled(style.size() as f32);
        // The baseline sits so that capital letters are centred in the layout box.
        let cap = font
            .outline_glyph(font.scaled_glyph('H'))
            .map_or(0.7 * font.height(), |g| -g.px_bounds().min.y);
        let baseline = ((y1 - y0) as f32 + cap) / 2.0;
        let transform = style.transform();
        let mut caret = 0.0;
        let mut previous = None;
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = previous {
                caret += font.kern(p, id);
            }
            previous = Some(id);
            let glyph = id.with_scale_and_position(font.scale(), point(caret, baseline));
            caret += font.h_advance(id);
            let Some(outline) = font.outline_glyph(glyph) else {
                continue;
            };
            let bounds = outline.px_bounds();
            let mut result = Ok(());
            outline.draw(|gx, gy, coverage| {
                if result.is_err() || coverage <= 0.0 {
                    return;
                }
                let (x, y) = transform.transform(
                    bounds.min.x as i32 + gx as i32 + dx,
                    bounds.min.y as i32 + gy as i32 + dy,
                );
                let alpha = color.alpha * f64::from(coverage.min(1.0));
                result = self.inner.draw_pixel(
                    (pos.0 + x, pos.1 + y),
                    BackendColor {
                        alpha,
                        rgb: color.rgb,
                    },
                );
            });
            result?;
        }
        Ok(())
    }
}
