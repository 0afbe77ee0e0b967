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
    /// The customer's endpoint form shows only URL, description and event types: timeout,
    /// rate limit, concurrency, retry policy and headers keep their defaults (or the values
    /// the tenant set through the API).
    pub hide_advanced: bool,
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
            // Checkboxes of their own, set by the caller.
            public_endpoints_only: false,
            hide_advanced: false,
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

/// The accent when the tenant chose none (as `--accent` in `static/hookd.css`).
pub const DEFAULT_ACCENT: &str = "#3552d8";
/// Background and card colours of each theme: the light one is `static/hookd.css`'s, the
/// dark one the portal's dark palette. Text in the accent colour stands on both.
pub const LIGHT_SURFACES: [&str; 2] = ["#f6f7f9", "#ffffff"];
pub const DARK_SURFACES: [&str; 2] = ["#12151c", "#1b1f28"];
/// WCAG AA for normal text.
pub const MIN_CONTRAST: f64 = 4.5;

/// The accent as shown in a theme, and the colour of text on it (buttons).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accent {
    pub color: String,
    pub on_accent: &'static str,
}

impl PortalSettings {
    /// The brand colour (or hookd's) made readable in the chosen theme: darkened on the light
    /// theme, lightened on the dark one, step by step until links in it reach
    /// [`MIN_CONTRAST`] on the theme's backgrounds and button text on it does too. An accent
    /// already readable is kept as chosen.
    pub fn accent(&self) -> Accent {
        let chosen = self
            .color
            .as_deref()
            .and_then(rgb)
            .or_else(|| rgb(DEFAULT_ACCENT))
            .unwrap_or([0, 0, 0]);
        readable_accent(chosen, self.dark)
    }
}

/// See [`PortalSettings::accent`].
pub fn readable_accent(chosen: [u8; 3], dark: bool) -> Accent {
    let (surfaces, toward, on) = if dark {
        (DARK_SURFACES, [255u8; 3], DARK_SURFACES[0])
    } else {
        (LIGHT_SURFACES, [0u8; 3], "#ffffff")
    };
    let surfaces: Vec<[u8; 3]> = surfaces.iter().filter_map(|s| rgb(s)).collect();
    let on_rgb = rgb(on).unwrap_or([255; 3]);
    let readable = |c: [u8; 3]| {
        surfaces.iter().all(|s| contrast(c, *s) >= MIN_CONTRAST)
            && contrast(c, on_rgb) >= MIN_CONTRAST
    };
    // Mixing toward black (or white) raises the contrast with every surface of the theme
    // step by step; at the end it is black (or white), which passes both.
    let mut color = chosen;
    for step in 0..=100u16 {
        color = mix(chosen, toward, step);
        if readable(color) {
            break;
        }
    }
    // On the dark theme, white text on a light accent would fail: its buttons take the dark
    // background's colour instead.
    Accent {
        color: format!("#{:02x}{:02x}{:02x}", color[0], color[1], color[2]),
        on_accent: on,
    }
}

/// `#rrggbb` as its three channels.
pub fn rgb(s: &str) -> Option<[u8; 3]> {
    if !is_hex_color(s) {
        return None;
    }
    let channel = |i: usize| u8::from_str_radix(&s[i..i + 2], 16).ok();
    Some([channel(1)?, channel(3)?, channel(5)?])
}

/// `a` moved `percent` of the way to `b`.
fn mix(a: [u8; 3], b: [u8; 3], percent: u16) -> [u8; 3] {
    let p = f64::from(percent.min(100)) / 100.0;
    let m = |x: u8, y: u8| (f64::from(x) + (f64::from(y) - f64::from(x)) * p).round() as u8;
    [m(a[0], b[0]), m(a[1], b[1]), m(a[2], b[2])]
}

/// WCAG 2's relative luminance.
fn luminance(c: [u8; 3]) -> f64 {
    let lin = |v: u8| {
        let v = f64::from(v) / 255.0;
        if v <= 0.04045 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2])
}

/// WCAG 2's contrast ratio, 1 to 21.
pub fn contrast(a: [u8; 3], b: [u8; 3]) -> f64 {
    let (la, lb) = (luminance(a), luminance(b));
    let (hi, lo) = if la > lb { (la, lb) } else { (lb, la) };
    (hi + 0.05) / (lo + 0.05)
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

    #[test]
    fn the_accent_reaches_aa_contrast_in_either_theme() {
        let surfaces = |dark: bool| if dark { DARK_SURFACES } else { LIGHT_SURFACES };
        for color in [
            "#7c3aed", "#3552d8", "#ffff00", "#000000", "#ffffff", "#777777",
        ] {
            for dark in [false, true] {
                let s = PortalSettings {
                    color: Some(color.to_owned()),
                    dark,
                    ..PortalSettings::default()
                };
                let accent = s.accent();
                let shown = rgb(&accent.color).expect("a colour");
                for bg in surfaces(dark) {
                    let c = contrast(shown, rgb(bg).unwrap());
                    assert!(
                        c >= MIN_CONTRAST,
                        "{color} dark={dark}: {accent:?} on {bg}: {c}"
                    );
                }
                let on = contrast(shown, rgb(accent.on_accent).unwrap());
                assert!(
                    on >= MIN_CONTRAST,
                    "{color} dark={dark}: text on {accent:?}: {on}"
                );
            }
        }
        // The purple: 2.89:1 on the dark card as given; lightened there, kept as
        // chosen on the light theme, where it already reads.
        let purple = [0x7c, 0x3a, 0xed];
        assert!(contrast(purple, rgb(DARK_SURFACES[1]).unwrap()) < 3.0);
        let light = readable_accent(purple, false);
        assert_eq!(light.color, "#7c3aed");
        assert_ne!(readable_accent(purple, true).color, "#7c3aed");
        // No colour chosen: hookd's own, made readable on the dark theme too.
        let dark_default = PortalSettings {
            dark: true,
            ..PortalSettings::default()
        };
        assert_ne!(dark_default.accent().color, DEFAULT_ACCENT);
        assert_eq!(PortalSettings::default().accent().color, DEFAULT_ACCENT);
        assert!((contrast([0; 3], [255; 3]) - 21.0).abs() < 1e-9);
    }
}

/// What a portal token's holder may do with its application: Svix's `capabilities`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capability {
    /// Read the application's endpoints, messages and attempts (never a secret or a header
    /// value).
    ViewBase,
    /// See an endpoint's signing secret and custom header values.
    ViewEndpointSecret,
    /// Rotate an endpoint's signing secret (and see it).
    ManageEndpointSecret,
    /// Change endpoints' transformations (hookd has none; accepted for Svix).
    ManageTransformations,
    /// Send again: resend, retry, recover, replay, send test events.
    CreateAttempts,
    /// Create, change and delete endpoints, their headers and authentication (and see and
    /// rotate their secrets, as in Svix).
    ManageEndpoint,
}

impl Capability {
    pub const ALL: [Capability; 6] = [
        Capability::ViewBase,
        Capability::ViewEndpointSecret,
        Capability::ManageEndpointSecret,
        Capability::ManageTransformations,
        Capability::CreateAttempts,
        Capability::ManageEndpoint,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Capability::ViewBase => "ViewBase",
            Capability::ViewEndpointSecret => "ViewEndpointSecret",
            Capability::ManageEndpointSecret => "ManageEndpointSecret",
            Capability::ManageTransformations => "ManageTransformations",
            Capability::CreateAttempts => "CreateAttempts",
            Capability::ManageEndpoint => "ManageEndpoint",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }

    /// What holding `self` also grants (Svix: managing endpoints includes their secrets;
    /// rotating a secret includes seeing it).
    fn implied(self) -> &'static [Capability] {
        match self {
            Capability::ManageEndpoint => &[
                Capability::ViewEndpointSecret,
                Capability::ManageEndpointSecret,
            ],
            Capability::ManageEndpointSecret => &[Capability::ViewEndpointSecret],
            _ => &[],
        }
    }
}

/// A set of [`Capability`]. Every set includes `ViewBase`: a portal token always reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities(u8);

impl Capabilities {
    /// What a token issued without `capabilities` may do: everything, or only read (without
    /// secrets) when it is read-only.
    pub fn default_for(read_only: bool) -> Capabilities {
        if read_only {
            Capabilities(Capability::ViewBase.bit())
        } else {
            Capabilities::of(&Capability::ALL)
        }
    }

    pub fn of(caps: &[Capability]) -> Capabilities {
        let bits = caps
            .iter()
            .flat_map(|c| std::iter::once(*c).chain(c.implied().iter().copied()))
            .fold(Capability::ViewBase.bit(), |acc, c| acc | c.bit());
        Capabilities(bits)
    }

    /// Parses Svix's names; an unknown one is refused, naming the known ones.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Vec<Capability>, String> {
        names
            .iter()
            .map(|n| {
                let n = n.as_ref();
                Capability::ALL
                    .into_iter()
                    .find(|c| c.name() == n)
                    .ok_or_else(|| {
                        let known: Vec<&str> = Capability::ALL.iter().map(|c| c.name()).collect();
                        format!("unknown capability {n:?}: one of {}", known.join(", "))
                    })
            })
            .collect()
    }

    /// A token's capabilities: those it was issued with (none given: the default), never more
    /// than reading when it is read-only.
    pub fn granted(read_only: bool, given: Option<&[Capability]>) -> Capabilities {
        let caps = given.map_or_else(|| Capabilities::default_for(read_only), Capabilities::of);
        if read_only {
            let reads = Capability::ViewBase.bit() | Capability::ViewEndpointSecret.bit();
            Capabilities(caps.0 & reads)
        } else {
            caps
        }
    }

    pub fn allows(self, c: Capability) -> bool {
        self.0 & c.bit() != 0
    }

    /// Whether anything beyond reading is allowed.
    pub fn changes_anything(self) -> bool {
        let reads = Capability::ViewBase.bit() | Capability::ViewEndpointSecret.bit();
        self.0 & !reads != 0
    }
}

#[cfg(test)]
mod capability_tests {
    use super::*;

    #[test]
    fn capabilities_follow_svix_and_read_only_wins() {
        let all = Capabilities::default_for(false);
        assert!(Capability::ALL.iter().all(|c| all.allows(*c)));
        let ro = Capabilities::default_for(true);
        assert!(ro.allows(Capability::ViewBase));
        assert!(!ro.allows(Capability::ViewEndpointSecret));
        assert!(!ro.changes_anything());

        let base = Capabilities::granted(false, Some(&[Capability::ViewBase]));
        assert!(!base.allows(Capability::ManageEndpointSecret));
        assert!(!base.allows(Capability::ViewEndpointSecret));
        assert!(!base.changes_anything());
        // Even an empty list reads.
        assert!(Capabilities::granted(false, Some(&[])).allows(Capability::ViewBase));

        let manage = Capabilities::granted(false, Some(&[Capability::ManageEndpoint]));
        assert!(manage.allows(Capability::ManageEndpointSecret));
        assert!(manage.allows(Capability::ViewEndpointSecret));
        assert!(!manage.allows(Capability::CreateAttempts));

        let ro_manage = Capabilities::granted(true, Some(&[Capability::ManageEndpoint]));
        assert!(ro_manage.allows(Capability::ViewEndpointSecret));
        assert!(!ro_manage.changes_anything());

        assert_eq!(
            Capabilities::parse(&["ViewBase", "CreateAttempts"]),
            Ok(vec![Capability::ViewBase, Capability::CreateAttempts])
        );
        assert!(
            Capabilities::parse(&["viewbase"])
                .unwrap_err()
                .contains("one of ViewBase")
        );
    }
}
