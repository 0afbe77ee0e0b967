//! `/static/…`: the stylesheet and the vendored htmx, compiled into the binary so a release is
//! one file.

use actix_web::http::header;
use actix_web::{HttpResponse, web};

use crate::error::PageError;

const HTMX: &[u8] = include_bytes!("../../../static/htmx.min.js");
const CSS: &[u8] = include_bytes!("../../../static/hookd.css");
const DARK: &[u8] = include_bytes!("../../../static/dark.css");
const ICON: &[u8] = include_bytes!("../../../static/favicon.svg");
const PORTAL: &[u8] = include_bytes!("../../../static/portal.js");
const UI: &[u8] = include_bytes!("../../../static/ui.js");

pub async fn serve(file: web::Path<String>) -> Result<HttpResponse, PageError> {
    let (body, content_type) = match file.as_str() {
        "htmx.min.js" => (HTMX, "text/javascript; charset=utf-8"),
        "hookd.css" => (CSS, "text/css; charset=utf-8"),
        "dark.css" => (DARK, "text/css; charset=utf-8"),
        "favicon.svg" => (ICON, "image/svg+xml"),
        "portal.js" => (PORTAL, "text/javascript; charset=utf-8"),
        "ui.js" => (UI, "text/javascript; charset=utf-8"),
        _ => return Err(PageError::NotFound),
    };
    Ok(HttpResponse::Ok()
        .content_type(content_type)
        // Short enough that a new release's stylesheet is picked up within the hour.
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .body(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::portal::{DARK_SURFACES, LIGHT_SURFACES, MIN_CONTRAST, contrast, rgb};

    /// The value of each `--name: #rrggbb` in a stylesheet's first `:root` block.
    fn palette(css: &[u8]) -> std::collections::HashMap<String, [u8; 3]> {
        let css = std::str::from_utf8(css).expect("utf-8");
        let root = css.split(":root").nth(1).expect(":root");
        let block = &root[..root.find('}').expect("}")];
        block
            .split(';')
            .filter_map(|d| {
                let (name, value) = d.trim().split_once(':')?;
                let name = name.trim_start_matches(|c: char| c == '{' || c.is_whitespace());
                Some((name.trim_start_matches("--").to_owned(), rgb(value.trim())?))
            })
            .collect()
    }

    /// Every text colour of each theme on every background it is drawn on: body text, hints,
    /// links and buttons, and each badge and notice on its own tint.
    #[test]
    fn both_themes_keep_every_text_colour_readable() {
        for (name, css, surfaces) in [
            ("light", CSS, LIGHT_SURFACES),
            ("dark", DARK, DARK_SURFACES),
        ] {
            let p = palette(css);
            let c = |k: &str| *p.get(k).unwrap_or_else(|| panic!("{name}: --{k} missing"));
            assert_eq!(
                Some(c("bg")),
                rgb(surfaces[0]),
                "{name}: --bg is the checked surface"
            );
            assert_eq!(
                Some(c("card")),
                rgb(surfaces[1]),
                "{name}: --card is the checked surface"
            );
            let mut pairs = vec![("on-accent", "accent")];
            for text in ["fg", "muted", "accent"] {
                pairs.extend([(text, "bg"), (text, "card"), (text, "field-bg")]);
            }
            pairs.extend([
                ("ok", "ok-bg"),
                ("warn", "warn-bg"),
                ("bad", "bad-bg"),
                ("off", "off-bg"),
            ]);
            for (fg, bg) in pairs {
                let ratio = contrast(c(fg), c(bg));
                assert!(
                    ratio >= MIN_CONTRAST,
                    "{name}: --{fg} on --{bg} is {ratio:.2}:1"
                );
            }
        }
    }
}
