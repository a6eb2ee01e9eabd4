//! Finding a TrueType font for plot text and registering it with plotters.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::style::FontStyle;

/// The font family name fonts are registered under.
pub const FAMILY: &str = "sans-serif";

/// True if a font is registered for plot text (looked for once, on the first call).
pub fn font_available() -> bool {
    static FOUND: OnceLock<bool> = OnceLock::new();
    *FOUND.get_or_init(register_system_font)
}

/// Finds a TrueType font and registers it with plotters; false if there is none.
fn register_system_font() -> bool {
    // plotters keeps `&'static` font bytes, so the registered file is leaked (once per
    // process); a file that is not a font is leaked too, hence the cap on attempts.
    font_candidates().into_iter().take(8).any(|path| match fs::read(&path) {
        Ok(bytes) => {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font(FAMILY, FontStyle::Normal, bytes).is_ok()
        }
        Err(_) => false,
    })
}

/// Font files to try, best first.
fn font_candidates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::env::var_os("TRACKGNN_FONT").map(PathBuf::from).into_iter().collect();
    for p in [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    ] {
        out.push(PathBuf::from(p));
    }
    let mut found = Vec::new();
    for root in ["/usr/share/fonts", "/usr/local/share/fonts"] {
        find_ttf(Path::new(root), 0, &mut found);
    }
    // Regular sans faces first, then the rest, each in path order.
    let plain = |p: &PathBuf| {
        let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("").to_ascii_lowercase();
        n.contains("sans") && !["bold", "italic", "oblique", "mono", "condensed", "light"].iter().any(|w| n.contains(w))
    };
    found.sort_by_key(|p| (!plain(p), p.clone()));
    out.extend(found);
    out.retain(|p| p.is_file());
    out
}

/// Collects `.ttf` files under `dir`, a few levels deep.
fn find_ttf(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() && depth < 4 {
            find_ttf(&p, depth + 1, out);
        } else if p.extension().is_some_and(|x| x.eq_ignore_ascii_case("ttf")) {
            out.push(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_exist_and_regular_sans_faces_come_first() {
        let c = font_candidates();
        assert!(c.iter().all(|p| p.is_file()));
        let plain = c.iter().position(|p| p.to_string_lossy().contains("DejaVuSans.ttf"));
        let bold = c.iter().position(|p| p.to_string_lossy().contains("DejaVuSans-Bold.ttf"));
        if let (Some(a), Some(b)) = (plain, bold) {
            assert!(a < b, "{c:?}");
        }
        // Registration is idempotent and agrees with the search.
        assert_eq!(font_available(), font_available());
        if !c.is_empty() {
            assert!(font_available());
        }
    }
}
