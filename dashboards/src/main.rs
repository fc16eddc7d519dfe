//! Writes every dashboard into `dashboards/grafana/` (or the folder given as the only
//! argument) and removes dashboard files that are no longer generated.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = match args.as_slice() {
        [] => fleetscope_dashboards::output_dir(),
        [dir] if !dir.starts_with('-') => PathBuf::from(dir),
        _ => {
            eprintln!("usage: fleetscope-dashboards [output folder]");
            return ExitCode::from(2);
        }
    };
    match write(&dir) {
        Ok(written) => {
            for name in written {
                println!("{}", dir.join(name).display());
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("writing dashboards into {}: {err}", dir.display());
            ExitCode::FAILURE
        }
    }
}

fn write(dir: &std::path::Path) -> std::io::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    let dashboards = fleetscope_dashboards::all();
    let names: Vec<String> = dashboards.iter().map(|d| d.file_name.clone()).collect();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        if name.ends_with(".json") && !names.contains(&name) {
            std::fs::remove_file(&path)?;
        }
    }
    for dashboard in &dashboards {
        std::fs::write(
            dir.join(&dashboard.file_name),
            fleetscope_dashboards::to_text(&dashboard.json),
        )?;
    }
    Ok(names)
}
