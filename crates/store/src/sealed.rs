//! Secrets sealed at rest (`domain::seal`): where each sealed column is bound, where the keys
//! come from when none are configured, and the job that seals what is plain or re-seals what
//! an older key sealed (`hookd rekey`, and every start for values stored before sealing).
//!
//! Sealed columns: `endpoint_secrets.secret`, each value of `endpoints.headers` (the names
//! stay readable, so the dashboard can list them without opening anything),
//! `endpoints.auth` whole, `inbound_sources.verification` and `.url_token`, and
//! `integrations.key_sealed`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use domain::endpoint_auth::{EndpointAuth, Mtls};
use domain::ids::{EndpointId, SecretId};
use domain::seal::{Keyring, OpenError, OperatorKey};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use crate::entities::{endpoint, endpoint_secret};
use crate::error::StoreError;
use crate::{Result, Store, System};

/// The file a single-machine install keeps its generated key in, beside its database.
pub const KEY_FILE: &str = "hookd.key";

/// Where the keys of a store came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// Given in the settings (`secret_keys` or `secret_keys_file`).
    Configured,
    /// Read from the key file beside the SQLite database; `generated` when this start made it.
    File { path: PathBuf, generated: bool },
    /// A key of this process only (PostgreSQL without keys; never for serving).
    Process,
}

/// A key made for a key file that does not exist yet: written by [`Store::save_key_file`]
/// once the start knows it will go on, so a start that is refused leaves no file behind.
#[derive(Clone)]
pub(crate) struct UnsavedKey(String);

impl std::fmt::Debug for UnsavedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UnsavedKey(<redacted>)")
    }
}

/// The keys for `sqlite_file` when none are configured: the key file beside it, or when it is
/// missing a new key, kept in memory until [`Store::save_key_file`].
pub(crate) fn key_file_keys(
    sqlite_file: &Path,
) -> Result<(Keyring, KeySource, Option<UnsavedKey>)> {
    let dir = sqlite_file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let path = dir.join(KEY_FILE);
    let unreadable = |e: &dyn std::fmt::Display| {
        StoreError::Keys(format!("cannot use the key file {}: {e}", path.display()))
    };
    if !path.exists() {
        let id = format!("local-{}", time_tag());
        let (key, text) =
            OperatorKey::generate(&id, &mut rand::rng()).map_err(|e| unreadable(&e))?;
        let keys = Keyring::new(vec![key]).map_err(|e| unreadable(&e))?;
        let source = KeySource::File {
            path,
            generated: true,
        };
        return Ok((keys, source, Some(UnsavedKey(text))));
    }
    check_private(&path)?;
    let text = std::fs::read_to_string(&path).map_err(|e| unreadable(&e))?;
    let keys = Keyring::parse(&text).map_err(|e| unreadable(&e))?;
    let source = KeySource::File {
        path,
        generated: false,
    };
    Ok((keys, source, None))
}

/// A file of keys must be readable by its owner only, as ssh asks of a private key: anyone
/// else who can read it can open every stored secret.
fn check_private(path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map_err(|e| {
                StoreError::Keys(format!("cannot use the key file {}: {e}", path.display()))
            })?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(StoreError::Keys(format!(
                "the key file {} can be read by other users (mode {:o}); it seals every stored \
                 secret, so hookd will not use it until only its owner can: chmod 600 {}",
                path.display(),
                mode & 0o777,
                path.display()
            )));
        }
    }
    Ok(())
}

fn time_tag() -> String {
    let secs = domain::Timestamp::now().as_millis() / 1000;
    format!("{secs:x}")
}

/// One key per process, for stores opened on PostgreSQL without keys (tools, admin
/// connections): what it seals no other process can open.
pub(crate) fn process_keys() -> Keyring {
    static KEYS: OnceLock<Keyring> = OnceLock::new();
    KEYS.get_or_init(|| {
        let (key, _) = OperatorKey::generate("process", &mut rand::rng()).expect("a valid id");
        Keyring::new(vec![key]).expect("one key")
    })
    .clone()
}

/// Where a signing secret is bound.
fn secret_context(id: &SecretId) -> String {
    format!("endpoint_secret/{id}")
}

/// Where a custom header value is bound.
fn header_context(endpoint: &EndpointId, name: &str) -> String {
    format!("endpoint_header/{endpoint}/{name}")
}

pub(crate) fn seal_secret(keys: &Keyring, id: &SecretId, plain: &str) -> String {
    keys.seal(plain, &secret_context(id))
}

pub(crate) fn open_secret(keys: &Keyring, row: &endpoint_secret::Model) -> Result<String> {
    Ok(keys.open(&row.secret, &secret_context(&row.id))?)
}

/// An endpoint column holding one value as JSON, sealed whole.
#[derive(Clone, Copy)]
pub(crate) enum SealedJson {
    /// `endpoints.auth`: `EndpointAuth`.
    Auth,
    /// `endpoints.mtls`: `Mtls`.
    Mtls,
}

impl SealedJson {
    fn name(self) -> &'static str {
        match self {
            SealedJson::Auth => "auth",
            SealedJson::Mtls => "mtls",
        }
    }

    /// Where its value is bound.
    fn context(self, endpoint: &EndpointId) -> String {
        format!("endpoint_{}/{endpoint}", self.name())
    }

    pub(crate) fn column(self) -> endpoint::Column {
        match self {
            SealedJson::Auth => endpoint::Column::Auth,
            SealedJson::Mtls => endpoint::Column::Mtls,
        }
    }

    fn stored(self, ep: &endpoint::Model) -> &Option<String> {
        match self {
            SealedJson::Auth => &ep.auth,
            SealedJson::Mtls => &ep.mtls,
        }
    }

    pub(crate) fn seal(
        self,
        keys: &Keyring,
        endpoint: &EndpointId,
        value: &impl serde::Serialize,
    ) -> String {
        seal_json(keys, &self.context(endpoint), value)
    }

    pub(crate) fn open<T: serde::de::DeserializeOwned>(
        self,
        keys: &Keyring,
        ep: &endpoint::Model,
    ) -> Result<Option<T>> {
        let Some(stored) = self.stored(ep) else {
            return Ok(None);
        };
        let what = format!("endpoint {}: column {}", ep.id, self.name());
        open_json(keys, &self.context(&ep.id), stored, &what).map(Some)
    }
}

/// `value` as JSON, sealed for `context`.
pub(crate) fn seal_json(keys: &Keyring, context: &str, value: &impl serde::Serialize) -> String {
    let json = serde_json::to_string(value).expect("a sealed value serialises");
    keys.seal(&json, context)
}

/// A value [`seal_json`] sealed; `what` names where it is stored, for the error.
pub(crate) fn open_json<T: serde::de::DeserializeOwned>(
    keys: &Keyring,
    context: &str,
    stored: &str,
    what: &str,
) -> Result<T> {
    let json = keys.open(stored, context)?;
    serde_json::from_str(&json).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

/// The `headers` column for these headers: names as they are, values sealed.
pub(crate) fn seal_headers(
    keys: &Keyring,
    endpoint: &EndpointId,
    headers: &BTreeMap<String, String>,
) -> String {
    let sealed: BTreeMap<&str, String> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), keys.seal(v, &header_context(endpoint, k))))
        .collect();
    serde_json::to_string(&sealed).expect("a map of strings serialises")
}

pub(crate) fn open_headers(
    keys: &Keyring,
    endpoint: &EndpointId,
    stored: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>> {
    stored
        .into_iter()
        .map(|(k, v)| {
            let plain = keys.open(&v, &header_context(endpoint, &k))?;
            Ok((k, plain))
        })
        .collect()
}

impl From<OpenError> for StoreError {
    fn from(e: OpenError) -> Self {
        StoreError::Sealed(e)
    }
}

impl Store {
    /// The keys this store seals and opens with.
    pub fn keyring(&self) -> &Keyring {
        &self.seal
    }

    /// Writes the key made at connect to the key file (mode 0600, never over another one), when
    /// there was none; a no-op otherwise. Called once the start knows it goes on: before that,
    /// the key lives in memory only.
    pub fn save_key_file(&self) -> Result<()> {
        let (KeySource::File { path, .. }, Some(UnsavedKey(text))) =
            (&*self.key_source, &*self.unsaved_key)
        else {
            return Ok(());
        };
        let failed = |e: &dyn std::fmt::Display| {
            StoreError::Keys(format!("cannot write the key file {}: {e}", path.display()))
        };
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        match opts.open(path) {
            Ok(mut f) => {
                use std::io::Write;
                f.write_all(format!("{text}\n").as_bytes())
                    .and_then(|()| f.sync_all())
                    .map_err(|e| failed(&e))
            }
            // Another process starting at the same moment made its own: ours must not seal.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(StoreError::Keys(format!(
                    "another hookd process made the key file {} while this one started; start \
                     again to use it",
                    path.display()
                )))
            }
            Err(e) => Err(failed(&e)),
        }
    }

    /// Where [`Store::keyring`] came from.
    pub fn key_source(&self) -> &KeySource {
        &self.key_source
    }

    /// An endpoint's custom headers, opened.
    pub fn endpoint_headers(&self, ep: &endpoint::Model) -> Result<BTreeMap<String, String>> {
        open_headers(&self.seal, &ep.id, ep.stored_headers()?)
    }

    /// How an endpoint authenticates, opened; `None`: by its signature only.
    pub fn endpoint_auth(&self, ep: &endpoint::Model) -> Result<Option<EndpointAuth>> {
        SealedJson::Auth.open(&self.seal, ep)
    }

    /// An endpoint's mutual-TLS identity and receiver CA, opened.
    pub fn endpoint_mtls(&self, ep: &endpoint::Model) -> Result<Option<Mtls>> {
        SealedJson::Mtls.open(&self.seal, ep)
    }
}

/// Which stored values [`System::reseal`] seals again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reseal {
    /// None: only counts and checks (before a start that may be refused writes anything).
    Check,
    /// Only values stored before sealing existed (every start).
    PlainOnly,
    /// Those, and values sealed under any key but the current one (`hookd rekey`).
    All,
}

/// What [`System::reseal`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resealed {
    /// Values read (signing secrets and header values).
    pub seen: u64,
    /// Plain values now sealed.
    pub sealed_plain: u64,
    /// Values moved from an older key to the current one.
    pub rekeyed: u64,
    /// Values sealed under keys this process was not given, by key id: left as they are.
    pub unknown_keys: BTreeMap<String, u64>,
    /// Ids of keys this process was given that open none of the values sealed under their id:
    /// another key was given that id (two keys, one id).
    pub wrong_keys: std::collections::BTreeSet<String>,
    /// Key ids known to open at least one stored value.
    opened: std::collections::BTreeSet<String>,
}

impl Resealed {
    fn count(&mut self, keys: &Keyring, stored: &str, mode: Reseal) -> bool {
        self.seen += 1;
        match (keys.needs_reseal(stored), domain::seal::Sealing::of(stored)) {
            (Err(OpenError::UnknownKey(id)), _) => {
                *self.unknown_keys.entry(id).or_default() += 1;
                false
            }
            (Ok(true), domain::seal::Sealing::Plain) => {
                self.sealed_plain += 1;
                mode != Reseal::Check
            }
            (Ok(true), _) if mode == Reseal::All => {
                self.rekeyed += 1;
                true
            }
            _ => false,
        }
    }
}

impl Resealed {
    /// Opens values under each configured key id until one opens: a key given the id of
    /// another opens none, which would otherwise show only as failed deliveries. One open per
    /// key id when the keys are right.
    fn probe(&mut self, keys: &Keyring, stored: &str, context: &str) {
        let domain::seal::Sealing::Sealed(id) = domain::seal::Sealing::of(stored) else {
            return;
        };
        if self.opened.contains(id) || !keys.ids().contains(&id) {
            return;
        }
        match keys.open(stored, context) {
            Ok(_) => {
                self.wrong_keys.remove(id);
                self.opened.insert(id.to_owned());
            }
            Err(_) => {
                self.wrong_keys.insert(id.to_owned());
            }
        }
    }
}

impl System<'_> {
    /// The dispatcher, after a token endpoint answered a refresh-token grant with a new refresh
    /// token: stores it in place of `used` (sealed), unless the endpoint's OAuth configuration
    /// changed meanwhile (then the tenant's new one stands). Returns whether it was stored.
    pub async fn replace_refresh_token(
        &self,
        endpoint: EndpointId,
        used: &str,
        new: &str,
    ) -> Result<bool> {
        let Some(ep) = endpoint::Entity::find_by_id(endpoint).one(&self.db).await? else {
            return Ok(false);
        };
        let Some(EndpointAuth::OAuth(mut client)) = self.endpoint_auth(&ep)? else {
            return Ok(false);
        };
        if client.refresh_token.as_deref() != Some(used) {
            return Ok(false);
        }
        client.refresh_token = Some(new.to_owned());
        let sealed = SealedJson::Auth.seal(&self.seal, &ep.id, &EndpointAuth::OAuth(client));
        // Compare-and-set on what was read: a change made meanwhile is not overwritten.
        let res = endpoint::Entity::update_many()
            .col_expr(endpoint::Column::Auth, Expr::value(sealed))
            .filter(endpoint::Column::Id.eq(endpoint))
            .filter(endpoint::Column::Auth.eq(ep.auth.clone()))
            .exec(&self.db)
            .await?;
        // The dispatcher's copies hold the used token: the next refresh must take the new one.
        self.endpoints_changed();
        Ok(res.rows_affected == 1)
    }
}

impl System<'_> {
    /// Seals plain values (and with [`Reseal::All`] re-seals older keys' values) under the
    /// current key, `batch` rows at a time in id order, each batch one short transaction, so it
    /// runs beside live traffic: a row changed meanwhile (a rotation, an edit) is left to the
    /// change, which sealed it under the current key already.
    pub async fn reseal(&self, mode: Reseal, batch: u64) -> Result<Resealed> {
        let keys = self.seal.clone();
        let mut report = Resealed::default();
        let mut after: Option<SecretId> = None;
        loop {
            let mut q = endpoint_secret::Entity::find()
                .order_by_asc(endpoint_secret::Column::Id)
                .limit(batch);
            if let Some(a) = after {
                q = q.filter(endpoint_secret::Column::Id.gt(a));
            }
            let rows = q.all(&self.db).await?;
            let Some(last) = rows.last() else { break };
            after = Some(last.id);
            let mut changes = Vec::new();
            for row in &rows {
                report.probe(&keys, &row.secret, &secret_context(&row.id));
                if report.count(&keys, &row.secret, mode) {
                    let plain = open_secret(&keys, row)?;
                    changes.push((
                        row.id,
                        row.secret.clone(),
                        seal_secret(&keys, &row.id, &plain),
                    ));
                }
            }
            if !changes.is_empty() {
                let txn = self.write_txn().await?;
                for (id, old, new) in changes {
                    endpoint_secret::Entity::update_many()
                        .col_expr(endpoint_secret::Column::Secret, Expr::value(new))
                        .filter(endpoint_secret::Column::Id.eq(id))
                        .filter(endpoint_secret::Column::Secret.eq(old))
                        .exec(&*txn)
                        .await?;
                }
                txn.commit().await?;
            }
        }
        let mut after: Option<EndpointId> = None;
        loop {
            let mut q = endpoint::Entity::find()
                .select_only()
                .column(endpoint::Column::Id)
                .column(endpoint::Column::Headers)
                .column(endpoint::Column::Auth)
                .column(endpoint::Column::Mtls)
                .order_by_asc(endpoint::Column::Id)
                .limit(batch);
            if let Some(a) = after {
                q = q.filter(endpoint::Column::Id.gt(a));
            }
            let rows: Vec<(EndpointId, String, Option<String>, Option<String>)> =
                q.into_tuple().all(&self.db).await?;
            let Some(last) = rows.last() else { break };
            after = Some(last.0);
            let mut changes = Vec::new();
            let mut auth_changes = Vec::new();
            for (id, stored, auth, mtls) in rows {
                for (kind, value) in [(SealedJson::Auth, auth), (SealedJson::Mtls, mtls)] {
                    let (column, context) = (kind.column(), kind.context(&id));
                    if let Some(value) = &value {
                        report.probe(&keys, value, &context);
                    }
                    if let Some(value) = value
                        && report.count(&keys, &value, mode)
                    {
                        let plain = keys.open(&value, &context)?;
                        auth_changes.push((id, column, value, keys.seal(&plain, &context)));
                    }
                }
                let map = crate::columns::decode::<BTreeMap<String, String>>(
                    "endpoint", &id, "headers", &stored,
                )?;
                let mut changed = false;
                let mut out = BTreeMap::new();
                for (name, value) in map {
                    report.probe(&keys, &value, &header_context(&id, &name));
                    let value = if report.count(&keys, &value, mode) {
                        changed = true;
                        let plain = keys.open(&value, &header_context(&id, &name))?;
                        keys.seal(&plain, &header_context(&id, &name))
                    } else {
                        value
                    };
                    out.insert(name, value);
                }
                if changed {
                    changes.push((id, stored, serde_json::to_string(&out).expect("strings")));
                }
            }
            if !changes.is_empty() || !auth_changes.is_empty() {
                let txn = self.write_txn().await?;
                for (id, old, new) in changes {
                    endpoint::Entity::update_many()
                        .col_expr(endpoint::Column::Headers, Expr::value(new))
                        .filter(endpoint::Column::Id.eq(id))
                        .filter(endpoint::Column::Headers.eq(old))
                        .exec(&*txn)
                        .await?;
                }
                for (id, column, old, new) in auth_changes {
                    endpoint::Entity::update_many()
                        .col_expr(column, Expr::value(new))
                        .filter(endpoint::Column::Id.eq(id))
                        .filter(column.eq(old))
                        .exec(&*txn)
                        .await?;
                }
                txn.commit().await?;
            }
        }
        self.reseal_one_per_row(&keys, mode, batch, &mut report)
            .await?;
        Ok(report)
    }

    /// [`System::reseal`] for the columns that hold one sealed value per row, bound to the
    /// row's id: the inbound sources' verification secrets and URL tokens, and the
    /// integrations' keys.
    async fn reseal_one_per_row(
        &self,
        keys: &Keyring,
        mode: Reseal,
        batch: u64,
        report: &mut Resealed,
    ) -> Result<()> {
        use crate::entities::{inbound_source as src, integration as integ};
        self.reseal_column::<src::Entity, domain::ids::SourceId>(
            (src::Column::Id, src::Column::Verification),
            |id| source_context(&id),
            (keys, mode, batch, report),
        )
        .await?;
        self.reseal_column::<src::Entity, domain::ids::SourceId>(
            (src::Column::Id, src::Column::UrlToken),
            |id| source_url_token_context(&id),
            (keys, mode, batch, report),
        )
        .await?;
        self.reseal_column::<integ::Entity, domain::ids::IntegrationId>(
            (integ::Column::Id, integ::Column::KeySealed),
            |id| integration_key_context(&id),
            (keys, mode, batch, report),
        )
        .await
    }

    /// Re-seals one sealed text column of `E`, `batch` rows at a time in id order; `context`
    /// is where a row's value is bound, from its id.
    async fn reseal_column<E: sea_orm::EntityTrait, I>(
        &self,
        (id_col, sealed_col): (E::Column, E::Column),
        context: impl Fn(&str) -> String,
        (keys, mode, batch, report): (&Keyring, Reseal, u64, &mut Resealed),
    ) -> Result<()>
    where
        I: sea_orm::TryGetable + Into<sea_orm::Value> + Copy + std::fmt::Display,
    {
        let mut after: Option<I> = None;
        loop {
            let mut q = E::find()
                .select_only()
                .column(id_col)
                .column(sealed_col)
                // A nullable column (a source's URL token) has nothing to re-seal where null.
                .filter(sealed_col.is_not_null())
                .order_by_asc(id_col)
                .limit(batch);
            if let Some(a) = after {
                q = q.filter(id_col.gt(a));
            }
            let rows: Vec<(I, String)> = q.into_tuple().all(&self.db).await?;
            let Some(last) = rows.last() else { break };
            after = Some(last.0);
            let mut changes = Vec::new();
            for (id, stored) in rows {
                let context = context(&id.to_string());
                report.probe(keys, &stored, &context);
                if report.count(keys, &stored, mode) {
                    let plain = keys.open(&stored, &context)?;
                    let new = keys.seal(&plain, &context);
                    changes.push((id, stored, new));
                }
            }
            if !changes.is_empty() {
                let txn = self.write_txn().await?;
                for (id, old, new) in changes {
                    E::update_many()
                        .col_expr(sealed_col, Expr::value(new))
                        .filter(id_col.eq(id))
                        .filter(sealed_col.eq(old))
                        .exec(&*txn)
                        .await?;
                }
                txn.commit().await?;
            }
        }
        Ok(())
    }
}

/// Shared by every clone of a store.
pub(crate) type SharedKeys = Arc<Keyring>;

/// Where an inbound source's verification is bound when sealed.
pub(crate) fn source_context(id: &dyn std::fmt::Display) -> String {
    format!("inbound_source/{id}")
}

/// Where a source's URL token is sealed: apart from its verification, so neither sealed value
/// opens in the other's column.
pub(crate) fn source_url_token_context(id: &dyn std::fmt::Display) -> String {
    format!("inbound_source/{id}/url_token")
}

/// Where an integration key is bound when sealed: a sealed key copied to another row does
/// not open.
pub(crate) fn integration_key_context(id: &dyn std::fmt::Display) -> String {
    format!("integration_key/{id}")
}
