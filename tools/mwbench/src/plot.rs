//! PNG plots of a run (plotters, bitmap backend): one value per message
//! size for every op and baseline, log-log, one line each.
//!
//! Text is drawn with a TrueType font read at run time (ab_glyph), so
//! nothing depends on a system font service: `MWBENCH_FONT` names the file,
//! else the first of a few usual DejaVu / Liberation paths is used (Debian's
//! fonts-dejavu-core, which `make bench` installs). Owns the drawing; must
//! not choose what is plotted (that is `report`).

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

/// Where a sans-serif TrueType font is looked for.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
];

/// Registers the font once for the whole process.
pub fn load_font() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let chosen = std::env::var("MWBENCH_FONT").ok();
            let candidates: Vec<&str> = chosen.as_deref().into_iter().chain(FONT_PATHS.iter().copied()).collect();
            let path = candidates.iter().find(|p| Path::new(p).is_file()).ok_or_else(|| {
                format!(
                    "no TrueType font for the plots: install fonts-dejavu-core (make bench does) or set \
                     MWBENCH_FONT to a .ttf file (looked in {})",
                    candidates.join(", ")
                )
            })?;
            let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
            // The font table of plotters keeps 'static references: the font
            // lives as long as the process, loaded once.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| format!("{path} is not a usable TrueType font"))
        })
        .clone()
}

/// One line of a plot.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    /// (size in bytes, value), sizes ascending.
    pub points: Vec<(f64, f64)>,
    /// Baselines are drawn dashed.
    pub baseline: bool,
}

/// `8 B`, `64 KiB`, `1 MiB`.
pub fn size_label(bytes: f64) -> String {
    let b = bytes.round() as u64;
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{} MiB", b >> 20)
    } else if b >= 1024 && b % 1024 == 0 {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

fn bounds(values: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let lo = values.clone().fold(f64::INFINITY, f64::min);
    let hi = values.fold(0.0, f64::max);
    if !lo.is_finite() || hi <= 0.0 {
        return (1.0, 10.0);
    }
    (lo / 1.6, hi * 1.6)
}

/// Draws `series` into a PNG at `path`: x message size, y `y_desc`, both log.
pub fn draw(path: &Path, title: &str, y_desc: &str, series: &[Series]) -> Result<(), String> {
    load_font()?;
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (x0, x1) = bounds(xs);
    let (y0, y1) = bounds(ys);
    let root = BitMapBackend::new(path, (1000, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
        .map_err(|e| err(&e))?;
    let x_fmt = |v: &f64| size_label(*v);
    let y_fmt = |v: &f64| if *v >= 100.0 { format!("{v:.0}") } else { format!("{v:.2}") };
    chart
        .configure_mesh()
        .x_desc("message size")
        .y_desc(y_desc)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let style = color.stroke_width(if s.baseline { 2 } else { 3 });
        let anno = if s.baseline {
            chart.draw_series(DashedLineSeries::new(s.points.iter().copied(), 8, 5, style)).map_err(|e| err(&e))?
        } else {
            chart.draw_series(LineSeries::new(s.points.iter().copied(), style)).map_err(|e| err(&e))?
        };
        anno.label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3)));
        chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 4, color.filled()))).map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_renders_with_the_loaded_font() {
        load_font().expect("a TrueType font (fonts-dejavu-core)");
        let (w, h) = (200u32, 60u32);
        let mut buf = vec![255u8; (w * h * 3) as usize];
        {
            let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
            root.draw_text("8 KiB", &("sans-serif", 30).into_text_style(&root), (10, 10)).unwrap();
            root.present().unwrap();
        }
        let dark = buf.chunks_exact(3).filter(|px| px.iter().all(|&c| c < 128)).count();
        assert!(dark > 100, "only {dark} dark pixels: the text did not render");
    }

    #[test]
    fn sizes_are_labelled_in_binary_units() {
        assert_eq!(size_label(8.0), "8 B");
        assert_eq!(size_label(65536.0), "64 KiB");
        assert_eq!(size_label(1048576.0), "1 MiB");
        assert_eq!(size_label(1000.0), "1000 B");
    }
}
