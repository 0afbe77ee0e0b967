//! What an attempt's result means: delivered, try again, or stop.

use serde::{Deserialize, Serialize};

use crate::delivery::ErrorKind;

/// What an attempt produced: a final HTTP status, or no response at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    Status(u16),
    Error(ErrorKind),
    /// A broker destination confirmed that it holds the message.
    Published,
}

/// A named starting table an endpoint can pick before its explicit lists apply. Its names
/// (in JSON, settings and the API) are the ones below, written once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(
    feature = "sea-orm",
    derive(sea_orm::DeriveValueType),
    sea_orm(value_type = "String")
)]
#[serde(try_from = "String", into = "&'static str")]
pub enum StatusPreset {
    /// DESIGN.md's table: permanent on 400, 401, 403, 410, 413, 415, 422; retry otherwise.
    #[default]
    Default,
    /// For receivers that misuse 4xx codes: only 410 Gone is final (Svix's rule).
    RetryAllBut410,
}

crate::delivery::text_enum!(StatusPreset { Default => "default", RetryAllBut410 => "retry-all-but-410" });

impl StatusPreset {
    /// Every preset, in the order choices list them.
    pub const ALL: [StatusPreset; 2] = [StatusPreset::Default, StatusPreset::RetryAllBut410];
}

impl TryFrom<String> for StatusPreset {
    type Error = crate::delivery::UnknownVariant;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<StatusPreset> for &'static str {
    fn from(p: StatusPreset) -> Self {
        p.as_str()
    }
}

/// Codes the default table gives up on: the request itself is wrong, so resending cannot help.
const DEFAULT_PERMANENT: [u16; 7] = [400, 401, 403, 410, 413, 415, 422];

/// 410 Gone: the receiver says the endpoint no longer exists.
const GONE: u16 = 410;

/// An endpoint's adjustments to the default classification.
///
/// Built through [`StatusOverrides::new`] (or deserialization, which calls it), so lists hold
/// only non-2xx codes in 100..=599, sorted, without duplicates, and no code in both lists.
/// Field names match the endpoint's JSON extension fields, so API DTOs can `#[serde(flatten)]`
/// it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "OverridesSpec", into = "OverridesSpec")]
pub struct StatusOverrides {
    /// None: the endpoint did not choose; [`StatusOverrides::or_preset`] fills in the server's
    /// (or tenant's) default, and hookd's own table applies when nothing did.
    preset: Option<StatusPreset>,
    retry_on: Vec<u16>,
    permanent_on: Vec<u16>,
}

/// Why status overrides were refused; each names the code and the list it was in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatusOverridesError {
    #[error("{list}: {code} is not an HTTP status code (100..=599)")]
    OutOfRange { list: &'static str, code: u16 },
    #[error("{list}: {code} is a success code; any 2xx always counts as delivered")]
    Success { list: &'static str, code: u16 },
    #[error("{code} is in both retryOn and permanentOn")]
    InBothLists { code: u16 },
}

impl StatusOverridesError {
    /// The JSON field at fault.
    pub fn field(&self) -> &'static str {
        match self {
            StatusOverridesError::OutOfRange { list, .. }
            | StatusOverridesError::Success { list, .. } => list,
            StatusOverridesError::InBothLists { .. } => "permanentOn",
        }
    }
}

impl StatusOverrides {
    /// Checked overrides. A code listed twice in one list is fine; a code in both lists is
    /// refused, because either reading would silently ignore half of what the tenant asked.
    pub fn new(
        preset: impl Into<Option<StatusPreset>>,
        mut retry_on: Vec<u16>,
        mut permanent_on: Vec<u16>,
    ) -> Result<Self, StatusOverridesError> {
        for (list, codes) in [
            ("retryOn", &mut retry_on),
            ("permanentOn", &mut permanent_on),
        ] {
            for &code in codes.iter() {
                if !(100..=599).contains(&code) {
                    return Err(StatusOverridesError::OutOfRange { list, code });
                }
                if is_success(code) {
                    return Err(StatusOverridesError::Success { list, code });
                }
            }
            codes.sort_unstable();
            codes.dedup();
        }
        if let Some(&code) = retry_on
            .iter()
            .find(|c| permanent_on.binary_search(c).is_ok())
        {
            return Err(StatusOverridesError::InBothLists { code });
        }
        Ok(StatusOverrides {
            preset: preset.into(),
            retry_on,
            permanent_on,
        })
    }

    /// The endpoint's own preset, if it chose one.
    pub fn preset(&self) -> Option<StatusPreset> {
        self.preset
    }

    /// These overrides with `fallback` as the preset unless the endpoint chose its own.
    pub fn or_preset(mut self, fallback: StatusPreset) -> Self {
        self.preset.get_or_insert(fallback);
        self
    }

    pub fn retry_on(&self) -> &[u16] {
        &self.retry_on
    }

    pub fn permanent_on(&self) -> &[u16] {
        &self.permanent_on
    }
}

/// The verdict on one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Classification {
    Success,
    Retry,
    /// Stop retrying this delivery; on 410 Gone also disable the endpoint.
    Permanent {
        disable_endpoint: bool,
    },
}

impl Classification {
    /// What an attempt stores of it (`attempts.classification`).
    pub const fn verdict(self) -> Verdict {
        match self {
            Classification::Success => Verdict::Success,
            Classification::Retry => Verdict::Retry,
            Classification::Permanent { .. } => Verdict::Permanent,
        }
    }
}

/// The verdict an attempt stores (`attempts.classification`): a [`Classification`] without
/// the 410's disabling, which acted when the attempt was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(
    feature = "sea-orm",
    derive(sea_orm::DeriveValueType),
    sea_orm(value_type = "String")
)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Success,
    Retry,
    Permanent,
}

crate::delivery::text_enum!(Verdict { Success => "success", Retry => "retry", Permanent => "permanent" });

fn is_success(code: u16) -> bool {
    (200..=299).contains(&code)
}

/// Classifies an attempt. Any 2xx is a success whatever the overrides; network errors and
/// timeouts always retry. Otherwise explicit lists win over the preset, and unknown codes
/// (3xx included, since redirects are not followed) retry: giving up is the costlier mistake.
pub fn classify(outcome: Outcome, overrides: &StatusOverrides) -> Classification {
    let code = match outcome {
        Outcome::Error(_) => return Classification::Retry,
        Outcome::Published => return Classification::Success,
        Outcome::Status(code) if is_success(code) => return Classification::Success,
        Outcome::Status(code) => code,
    };
    let permanent = Classification::Permanent {
        disable_endpoint: code == GONE,
    };
    if overrides.retry_on.binary_search(&code).is_ok() {
        return Classification::Retry;
    }
    if overrides.permanent_on.binary_search(&code).is_ok() {
        return permanent;
    }
    let preset_permanent = match overrides.preset.unwrap_or_default() {
        StatusPreset::Default => DEFAULT_PERMANENT.contains(&code),
        StatusPreset::RetryAllBut410 => code == GONE,
    };
    if preset_permanent {
        permanent
    } else {
        Classification::Retry
    }
}

/// The wire shape: the endpoint's `statusPreset`, `retryOn` and `permanentOn` fields.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OverridesSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status_preset: Option<StatusPreset>,
    #[serde(default)]
    retry_on: Vec<u16>,
    #[serde(default)]
    permanent_on: Vec<u16>,
}

impl TryFrom<OverridesSpec> for StatusOverrides {
    type Error = StatusOverridesError;

    fn try_from(s: OverridesSpec) -> Result<Self, Self::Error> {
        StatusOverrides::new(s.status_preset, s.retry_on, s.permanent_on)
    }
}

impl From<StatusOverrides> for OverridesSpec {
    fn from(o: StatusOverrides) -> Self {
        OverridesSpec {
            status_preset: o.preset,
            retry_on: o.retry_on,
            permanent_on: o.permanent_on,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Classification::{Permanent, Retry, Success};
    use proptest::prelude::*;

    const STOP: Classification = Permanent {
        disable_endpoint: false,
    };
    const GONE_DISABLE: Classification = Permanent {
        disable_endpoint: true,
    };

    fn status(code: u16, o: &StatusOverrides) -> Classification {
        classify(Outcome::Status(code), o)
    }

    #[test]
    fn default_table() {
        let o = StatusOverrides::default();
        let table = [
            (200, Success),
            (201, Success),
            (204, Success),
            (299, Success),
            (301, Retry),
            (302, Retry),
            (304, Retry),
            (400, STOP),
            (401, STOP),
            (403, STOP),
            (404, Retry),
            (405, Retry),
            (408, Retry),
            (409, Retry),
            (410, GONE_DISABLE),
            (413, STOP),
            (415, STOP),
            (418, Retry),
            (422, STOP),
            (425, Retry),
            (429, Retry),
            (500, Retry),
            (501, Retry),
            (502, Retry),
            (503, Retry),
            (504, Retry),
            (599, Retry),
            (100, Retry),
            (0, Retry),
            (999, Retry),
        ];
        for (code, expected) in table {
            assert_eq!(status(code, &o), expected, "{code}");
        }
    }

    #[test]
    fn network_errors_always_retry() {
        let strict = StatusOverrides::new(StatusPreset::Default, vec![], vec![500, 503]).unwrap();
        for kind in [
            ErrorKind::Timeout,
            ErrorKind::Connect,
            ErrorKind::Dns,
            ErrorKind::Tls,
            ErrorKind::Auth,
            ErrorKind::Broker,
            ErrorKind::Http,
        ] {
            assert_eq!(classify(Outcome::Error(kind), &strict), Retry, "{kind}");
        }
    }

    #[test]
    fn retry_all_but_410() {
        let o = StatusOverrides::new(StatusPreset::RetryAllBut410, vec![], vec![]).unwrap();
        for (code, expected) in [
            (200, Success),
            (400, Retry),
            (401, Retry),
            (403, Retry),
            (404, Retry),
            (410, GONE_DISABLE),
            (413, Retry),
            (422, Retry),
            (500, Retry),
        ] {
            assert_eq!(status(code, &o), expected, "{code}");
        }
    }

    #[test]
    fn explicit_lists_win_over_the_preset() {
        let o =
            StatusOverrides::new(StatusPreset::Default, vec![400, 410], vec![404, 500]).unwrap();
        for (code, expected) in [
            (400, Retry),
            (410, Retry),
            (404, STOP),
            (500, STOP),
            (401, STOP),
            (503, Retry),
            (204, Success),
        ] {
            assert_eq!(status(code, &o), expected, "{code}");
        }
        let o =
            StatusOverrides::new(StatusPreset::RetryAllBut410, vec![410], vec![401, 409]).unwrap();
        for (code, expected) in [(410, Retry), (401, STOP), (409, STOP), (400, Retry)] {
            assert_eq!(status(code, &o), expected, "{code}");
        }
        // 410 listed as permanent still disables the endpoint.
        let o = StatusOverrides::new(StatusPreset::RetryAllBut410, vec![], vec![410]).unwrap();
        assert_eq!(status(410, &o), GONE_DISABLE);
    }

    #[test]
    fn invalid_overrides_name_the_code() {
        let cases = [
            (vec![99], vec![], "retryOn: 99 is not"),
            (vec![], vec![600], "permanentOn: 600 is not"),
            (vec![500, 200], vec![], "retryOn: 200 is a success"),
            (vec![], vec![204], "permanentOn: 204 is a success"),
            (vec![500, 404], vec![404], "404 is in both"),
        ];
        for (retry_on, permanent_on, message) in cases {
            let err =
                StatusOverrides::new(StatusPreset::Default, retry_on, permanent_on).unwrap_err();
            assert!(err.to_string().starts_with(message), "{err}");
        }
        let err = StatusOverrides::new(StatusPreset::Default, vec![0], vec![]).unwrap_err();
        assert_eq!(
            err,
            StatusOverridesError::OutOfRange {
                list: "retryOn",
                code: 0
            }
        );
        assert_eq!(err.field(), "retryOn");
    }

    #[test]
    fn lists_are_sorted_and_deduplicated() {
        let o = StatusOverrides::new(StatusPreset::Default, vec![503, 404, 503], vec![]).unwrap();
        assert_eq!(o.retry_on(), [404, 503]);
        assert_eq!(status(503, &o), Retry);
    }

    /// A server or tenant default applies to endpoints that did not choose, never over a choice.
    #[test]
    fn a_default_preset_fills_only_an_unchosen_one() {
        let unchosen = StatusOverrides::default();
        assert_eq!(status(401, &unchosen), STOP);
        let svix_like = unchosen.clone().or_preset(StatusPreset::RetryAllBut410);
        assert_eq!(status(401, &svix_like), Retry);
        assert_eq!(status(410, &svix_like), GONE_DISABLE);
        let chosen = StatusOverrides::new(StatusPreset::Default, vec![], vec![]).unwrap();
        assert_eq!(
            status(401, &chosen.or_preset(StatusPreset::RetryAllBut410)),
            STOP
        );
    }

    #[test]
    fn json_shape() {
        let o: StatusOverrides = serde_json::from_str(
            r#"{"statusPreset": "retry-all-but-410", "retryOn": [410], "permanentOn": [400]}"#,
        )
        .unwrap();
        assert_eq!(o.preset(), Some(StatusPreset::RetryAllBut410));
        assert_eq!(o.retry_on(), [410]);
        assert_eq!(o.permanent_on(), [400]);
        assert_eq!(
            serde_json::to_value(&o).unwrap(),
            serde_json::json!({"statusPreset": "retry-all-but-410", "retryOn": [410], "permanentOn": [400]})
        );
        let o: StatusOverrides = serde_json::from_str("{}").unwrap();
        assert_eq!(o, StatusOverrides::default());
        assert_eq!(
            serde_json::to_value(StatusPreset::Default).unwrap(),
            serde_json::json!("default")
        );
        let err = serde_json::from_str::<StatusOverrides>(r#"{"retryOn": [200]}"#).unwrap_err();
        assert!(err.to_string().contains("retryOn: 200"), "{err}");
        assert!(serde_json::from_str::<StatusPreset>(r#""retry-all""#).is_err());
    }

    fn any_overrides() -> impl Strategy<Value = StatusOverrides> {
        let code = prop_oneof![100u16..200, 300u16..600];
        (
            prop_oneof![
                Just(StatusPreset::Default),
                Just(StatusPreset::RetryAllBut410)
            ],
            proptest::collection::vec(code.clone(), 0..8),
            proptest::collection::vec(code, 0..8),
        )
            .prop_map(|(preset, retry_on, permanent_on)| {
                let permanent_on = permanent_on
                    .into_iter()
                    .filter(|c| !retry_on.contains(c))
                    .collect();
                StatusOverrides::new(preset, retry_on, permanent_on).unwrap()
            })
    }

    proptest! {
        #[test]
        fn two_xx_is_always_success(o in any_overrides(), code in 200u16..300) {
            prop_assert_eq!(status(code, &o), Success);
        }

        #[test]
        fn only_410_disables(o in any_overrides(), code in any::<u16>()) {
            if let Permanent { disable_endpoint: true } = status(code, &o) {
                prop_assert_eq!(code, 410);
            }
        }

        #[test]
        fn listed_codes_do_what_the_list_says(o in any_overrides()) {
            for &code in o.retry_on() {
                prop_assert_eq!(status(code, &o), Retry);
            }
            for &code in o.permanent_on() {
                let is_permanent = matches!(status(code, &o), Permanent { .. });
                prop_assert!(is_permanent);
            }
        }
    }
}
