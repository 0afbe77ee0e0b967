//! A tenant's app-portal settings (issue 19): the origins allowed to embed the portal in an
//! iframe, and its branding. The rules live here, once: the origins end up in a
//! `Content-Security-Policy` header and the colour in a stylesheet, so nothing but the
//! characters each form allows gets through.

use serde::{Deserialize, Serialize};

/// Most origins a tenant may list.
pub const MAX_ORIGINS: usize = 20;
/// Longest display name and logo URL.
pub const MAX_NAME: usize = 64;
pub const MAX_LOGO_URL: usize = 2048;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PortalSettings {
    /// Shown in the portal's header instead of "Webhooks".
    pub display_name: Option<String>,
    /// An https image shown beside the name.
    pub logo_url: Option<String>,
    /// `#rrggbb`: links and buttons.
    pub color: Option<String>,
    pub dark: bool,
    /// `scheme://host[:port]` of each site that may show the portal in an iframe.
    pub allowed_origins: Vec<String>,
    /// Customers' endpoints go to public addresses only: none of the networks the operator
    /// granted the tenant, nor the server-wide list.
    pub public_endpoints_only: bool,
}

/// What is wrong with one field: its name and a sentence for the user.
pub type Problem = (&'static str, String);

impl PortalSettings {
    /// The settings as typed (empty text: not set; origins one per line or separated by
    /// spaces or commas), checked; every problem at once.
    pub fn parse(
        display_name: &str,
        logo_url: &str,
        color: &str,
        dark: bool,
        origins: &str,
    ) -> Result<PortalSettings, Vec<Problem>> {
        let mut problems = Vec::new();
        let text = |s: &str| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
        let display_name = text(display_name);
        if let Some(n) = &display_name
            && (n.chars().count() > MAX_NAME || n.chars().any(char::is_control))
        {
            problems.push((
                "displayName",
                format!("The display name must be 1 to {MAX_NAME} printable characters."),
            ));
        }
        let logo_url = text(logo_url);
        if let Some(u) = &logo_url
            && !is_https_url(u)
        {
            problems.push((
                "logoUrl",
                format!(
                    "The logo must be an https:// address of at most {MAX_LOGO_URL} characters."
                ),
            ));
        }
        let color = text(color).map(|c| c.to_ascii_lowercase());
        if let Some(c) = &color
            && !is_hex_color(c)
        {
            problems.push(("color", "The colour must look like #3552d8.".to_owned()));
        }
        let mut allowed_origins = Vec::new();
        for o in origins
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|o| !o.is_empty())
        {
            match origin(o) {
                Some(o) if !allowed_origins.contains(&o) => allowed_origins.push(o),
                Some(_) => {}
                None => problems.push((
                    "allowedOrigins",
                    format!(
                        "{o:?} is not an origin: write the scheme and host (and port), like \
                         https://app.example.com, without a path."
                    ),
                )),
            }
        }
        if allowed_origins.len() > MAX_ORIGINS {
            problems.push((
                "allowedOrigins",
                format!("At most {MAX_ORIGINS} origins may embed the portal."),
            ));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(PortalSettings {
            display_name,
            logo_url,
            color,
            dark,
            allowed_origins,
            // A checkbox of its own, set by the caller.
            public_endpoints_only: false,
        })
    }

    /// The `frame-ancestors` sources of the portal's pages: the allowed origins, or `'none'`.
    pub fn frame_ancestors(&self) -> String {
        if self.allowed_origins.is_empty() {
            "'none'".to_owned()
        } else {
            self.allowed_origins.join(" ")
        }
    }
}

/// `http(s)://host[:port]`, lowercased, no path, no user, no wildcard; `None` otherwise.
fn origin(s: &str) -> Option<String> {
    let s = s.trim_end_matches('/').to_ascii_lowercase();
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))?;
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) if !h.contains(']') || h.ends_with(']') => (h, Some(p)),
        _ => (rest, None),
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']' | ':'));
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.parse::<u16>().is_ok());
    (host_ok && port_ok).then_some(s)
}

fn is_https_url(s: &str) -> bool {
    s.len() <= MAX_LOGO_URL
        && s.strip_prefix("https://").is_some_and(|r| !r.is_empty())
        && s.chars().all(|c| c.is_ascii_graphic())
        && !s.contains(['"', '\'', '<', '>', '\\', '(', ')'])
}

fn is_hex_color(s: &str) -> bool {
    s.len() == 7 && s.starts_with('#') && s[1..].chars().all(|c| c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_scheme_host_and_port_only() {
        let ok = PortalSettings::parse(
            "",
            "",
            "",
            false,
            "https://App.example.com/\nhttp://127.0.0.1:8080, https://app.example.com",
        )
        .expect("valid");
        assert_eq!(
            ok.allowed_origins,
            ["https://app.example.com", "http://127.0.0.1:8080"]
        );
        assert_eq!(
            ok.frame_ancestors(),
            "https://app.example.com http://127.0.0.1:8080"
        );
        for bad in [
            "app.example.com",
            "https://app.example.com/path",
            "https://*.example.com",
            "https://a.example;script-src",
            "javascript:alert(1)",
            "https://a.example:99999",
            "https://user@a.example",
        ] {
            let e = PortalSettings::parse("", "", "", false, bad).expect_err(bad);
            assert_eq!(e[0].0, "allowedOrigins", "{bad}");
        }
        assert_eq!(PortalSettings::default().frame_ancestors(), "'none'");
    }

    #[test]
    fn branding_is_checked_and_every_problem_reported() {
        let ok = PortalSettings::parse(
            " Acme ",
            "https://acme.example/logo.png",
            "#3552D8",
            true,
            "",
        )
        .expect("valid");
        assert_eq!(ok.display_name.as_deref(), Some("Acme"));
        assert_eq!(ok.color.as_deref(), Some("#3552d8"));
        assert!(ok.dark);
        let e = PortalSettings::parse(
            &"x".repeat(65),
            "http://acme.example/logo.png",
            "red; }",
            false,
            "nope",
        )
        .expect_err("invalid");
        let fields: Vec<&str> = e.iter().map(|p| p.0).collect();
        assert_eq!(
            fields,
            ["displayName", "logoUrl", "color", "allowedOrigins"]
        );
        let e =
            PortalSettings::parse("", "https://a.example/x\")", "", false, "").expect_err("quote");
        assert_eq!(e[0].0, "logoUrl");
    }
}
