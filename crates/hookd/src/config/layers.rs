//! The layers settings come from, merged by figment: defaults < TOML file < `HOOKD_*`
//! environment < command-line flags. Each value keeps figment's tag, so a setting's source
//! (for error messages and `hookd config`) is read back from the layer that set it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use figment::providers::{Format, Toml};
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider, Source};

use super::{ConfigError, SETTINGS, Shown, env_name};

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Default,
    File(PathBuf),
    /// The environment variable's name.
    Env(String),
    /// The flag, e.g. `--bind`.
    Flag(String),
}

impl Origin {
    /// As error messages name it: `the default`, `bind in hookd.toml`, `HOOKD_BIND`, `--bind`.
    pub fn describe(&self, setting: &str) -> String {
        match self {
            Origin::Default => "the default".to_owned(),
            Origin::File(path) => format!("{setting} in {}", path.display()),
            Origin::Env(name) | Origin::Flag(name) => name.clone(),
        }
    }

    /// As `hookd config` comments it: `default`, `from hookd.toml`, `from HOOKD_BIND`.
    pub fn comment(&self) -> String {
        match self {
            Origin::Default => "default".to_owned(),
            Origin::File(path) => format!("from {}", path.display()),
            Origin::Env(name) | Origin::Flag(name) => format!("from {name}"),
        }
    }
}

/// The kinds of layer besides the file, as figment's `Source::Custom` names them.
const DEFAULTS: &str = "defaults";
const ENV: &str = "environment";
const FLAGS: &str = "flags";

/// One layer of plain string values (the defaults, the environment or the flags), with the
/// metadata that names a value's source: `interpolate` gives the variable or the flag.
struct Strings {
    kind: &'static str,
    values: Dict,
}

impl Provider for Strings {
    fn metadata(&self) -> Metadata {
        let kind = self.kind;
        Metadata::named(kind)
            .source(Source::Custom(kind.to_owned()))
            .interpolater(move |_: &Profile, keys: &[&str]| {
                let key = keys.join(".");
                match kind {
                    ENV => env_name(&key),
                    FLAGS => format!("--{}", key.replace('_', "-")),
                    _ => key,
                }
            })
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        Ok(Profile::Default.collect(self.values.clone()))
    }
}

fn strings<'a>(
    kind: &'static str,
    values: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Strings {
    let values = values
        .into_iter()
        .map(|(k, v)| (k.to_owned(), Value::from(v.to_owned())))
        .collect();
    Strings { kind, values }
}

/// The merged layers, and the file's own tables (`[[sources]]`, `[[egress_grants]]`).
pub struct Layers {
    figment: Figment,
    file: Option<PathBuf>,
}

impl Layers {
    /// Merges the defaults, `file`, the `HOOKD_*` variables of `env` and `flags` (setting
    /// name, value). The file must exist and be TOML whose keys are settings or tables.
    pub fn merge(
        file: Option<&Path>,
        env: &BTreeMap<String, String>,
        flags: &[(&'static str, &str)],
    ) -> Result<Layers, ConfigError> {
        let mut figment = Figment::new().merge(strings(
            DEFAULTS,
            SETTINGS.iter().map(|s| (s.name, s.default)),
        ));
        if let Some(path) = file {
            // Read and parsed once here for errors of hookd's own: figment's would only say a
            // file is missing, and would quote the line of a syntax error, which may hold a
            // secret (the parser's message alone does not).
            let display = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: display.clone(),
                source,
            })?;
            text.parse::<toml::Table>().map_err(|e| ConfigError::Toml {
                path: display,
                message: e.message().to_owned(),
            })?;
            figment = figment.merge(Toml::file_exact(path));
        }
        let env_values: Vec<(&str, String)> = SETTINGS
            .iter()
            .filter_map(|s| Some((s.name, env.get(&env_name(s.name))?.clone())))
            .collect();
        figment = figment
            .merge(strings(
                ENV,
                env_values.iter().map(|(k, v)| (*k, v.as_str())),
            ))
            .merge(strings(FLAGS, flags.iter().copied()));
        let layers = Layers {
            figment,
            file: file.map(Path::to_path_buf),
        };
        layers.check_keys()?;
        Ok(layers)
    }

    fn file_display(&self) -> String {
        self.file
            .as_deref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }

    fn toml_error(&self, message: String) -> ConfigError {
        ConfigError::Toml {
            path: self.file_display(),
            message,
        }
    }

    /// Only the file can bring keys no setting has; it may also hold the two tables.
    fn check_keys(&self) -> Result<(), ConfigError> {
        let all: Dict = self
            .figment
            .extract()
            .map_err(|e| self.toml_error(e.to_string()))?;
        for key in all.keys() {
            let known = SETTINGS.iter().any(|s| s.name == key)
                || key == "sources"
                || key == "egress_grants";
            if !known {
                return Err(ConfigError::Unknown {
                    name: key.clone(),
                    path: self.file_display(),
                    known: SETTINGS
                        .iter()
                        .map(|s| s.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        Ok(())
    }

    /// One of the file's tables (`sources`, `egress_grants`) as TOML, if the file has it.
    pub fn table(&self, name: &str) -> Result<Option<toml::Value>, ConfigError> {
        if self.file.is_none() || !self.figment.contains(name) {
            return Ok(None);
        }
        let value = self
            .figment
            .find_value(name)
            .map_err(|e| self.toml_error(e.to_string()))?;
        let value = value
            .deserialize::<toml::Value>()
            .map_err(|e| self.toml_error(e.to_string()))?;
        Ok(Some(value))
    }

    /// A setting's value as text and where it came from. The file's numbers and booleans
    /// read as they are written, so every layer goes through the same parser.
    pub fn raw(&self, name: &'static str) -> Result<(String, Origin), ConfigError> {
        let value = self
            .figment
            .find_value(name)
            .map_err(|e| self.toml_error(e.to_string()))?;
        let origin = match self.figment.get_metadata(value.tag()) {
            Some(md) => match &md.source {
                Some(Source::File(path)) => Origin::File(path.clone()),
                Some(Source::Custom(kind)) if kind == ENV => {
                    Origin::Env(md.interpolate(&Profile::Default, &[name]))
                }
                Some(Source::Custom(kind)) if kind == FLAGS => {
                    Origin::Flag(md.interpolate(&Profile::Default, &[name]))
                }
                _ => Origin::Default,
            },
            None => Origin::Default,
        };
        let text = match &value {
            Value::String(_, s) => s.clone(),
            Value::Bool(_, b) => b.to_string(),
            Value::Char(_, c) => c.to_string(),
            Value::Num(_, n) => {
                let n = *n;
                n.to_u128()
                    .map(|u| u.to_string())
                    .or_else(|| n.to_i128().map(|i| i.to_string()))
                    .or_else(|| n.to_f64().map(|f| f.to_string()))
                    .unwrap_or_default()
            }
            other => {
                let kind = match other {
                    Value::Dict(..) => "table",
                    Value::Array(..) => "array",
                    _ => "empty",
                };
                return Err(self.toml_error(format!(
                    "{name} must be a string, number or boolean, not {kind}"
                )));
            }
        };
        Ok((text, origin))
    }

    /// Parses a setting's value (trimmed); an error names the setting, its value as it may
    /// be shown, and where it came from.
    pub fn field<T>(
        &self,
        name: &'static str,
        shown: Shown,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<(T, Origin), ConfigError> {
        let (text, origin) = self.raw(name)?;
        match parse(text.trim()) {
            Ok(v) => Ok((v, origin)),
            Err(reason) => Err(ConfigError::Invalid {
                setting: name,
                value: shown.redact(&text),
                source_name: origin.describe(name),
                reason,
            }),
        }
    }
}
