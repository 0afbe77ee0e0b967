//! Keyset paging, newest (or oldest) first, on the sortable primary key: every page is one index range
//! scan, however deep the caller has paged.

use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Select,
};

use crate::Result;

pub const MAX_LIMIT: u64 = 250;

/// The most rows of a listing's index range one page reads when its filter is checked row by
/// row (an event type, a channel, a tag, an endpoint or a delivery state: see
/// [`fetch_walked_page`]). A page that finds fewer matches in them ends there, not done, its
/// iterator where it stopped: each request is bounded however rare the match (21–25 ms of
/// SQLite for 5,000 rows here, loaded), and a client that follows the iterator, as Svix's do,
/// still sees every match.
pub const WALK_WINDOW: u64 = 5_000;

#[derive(Clone, Debug, Default)]
pub struct ListParams {
    /// Page size (1..=250; 0 means the default of 50).
    pub limit: u64,
    /// Continue after this id (the `iterator` of the previous page), or, written `-id` (a
    /// page's `prev_iterator`), go back: the rows just before it in the listing's order.
    pub iterator: Option<String>,
    /// Oldest first instead of newest first.
    pub ascending: bool,
    /// For tests: a smaller [`WALK_WINDOW`] (0 means that one).
    pub walk_window: u64,
}

impl ListParams {
    pub fn first(limit: u64) -> Self {
        ListParams {
            limit,
            iterator: None,
            ascending: false,
            walk_window: 0,
        }
    }

    fn walk_window(&self) -> u64 {
        match self.walk_window {
            0 => WALK_WINDOW,
            n => n,
        }
    }

    /// The iterator's id and whether it walks back (`-id`, Svix's reversible iterator).
    fn cursor(&self) -> Option<(&str, bool)> {
        let it = self.iterator.as_deref()?;
        Some(match it.strip_prefix('-') {
            Some(id) => (id, true),
            None => (it, false),
        })
    }

    fn effective_limit(&self) -> u64 {
        match self.limit {
            0 => 50,
            n => n.min(MAX_LIMIT),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Page<T> {
    pub data: Vec<T>,
    /// Pass back as `iterator` for the next page; `None` when the page is empty.
    pub iterator: Option<String>,
    /// Pass back as `iterator` for the page before this one (`-` and the first row's id);
    /// `None` when the page is empty.
    pub prev_iterator: Option<String>,
    /// No more rows in the direction this page was read (forward, or back with `-id`).
    pub done: bool,
}

impl<T> Page<T> {
    /// No rows: a listing whose filter can match nothing.
    pub fn empty() -> Self {
        Page {
            data: Vec::new(),
            iterator: None,
            prev_iterator: None,
            done: true,
        }
    }

    pub fn map<U>(mut self, f: impl FnMut(T) -> U) -> Page<U> {
        let data = std::mem::take(&mut self.data).into_iter().map(f).collect();
        self.with_data(data)
    }

    /// The same page (its iterators, `done`) over other rows: the rows a listing built from
    /// this page's, e.g. joined with a second read.
    pub fn with_data<U>(self, data: Vec<U>) -> Page<U> {
        Page {
            data,
            iterator: self.iterator,
            prev_iterator: self.prev_iterator,
            done: self.done,
        }
    }
}

/// `select` narrowed to one page: ordered by `id_col` (descending unless `ascending`), after
/// the iterator, one row more than the limit (to tell whether another page follows). A `-id`
/// iterator reads the other way from `id`; [`fetch_page`] puts those rows back in order.
pub(crate) fn page_query<E: EntityTrait>(
    select: Select<E>,
    id_col: E::Column,
    params: &ListParams,
) -> Select<E> {
    let select = select.limit(params.effective_limit() + 1);
    let (after, back) = match params.cursor() {
        Some((id, back)) => (Some(id), back),
        None => (None, false),
    };
    // Reading back through a newest-first listing is reading oldest-first, and so on.
    let ascending = params.ascending != back;
    // Ids are stored as their bytes (decisions 94): the cursor's text is compared as those.
    // One that names no id matches nothing.
    let after = after.map(|id| {
        domain::ids::any_id_bytes(id)
            .map(|b| sea_orm::Value::Uuid(Some(Box::new(sea_orm::prelude::Uuid::from_bytes(b)))))
    });
    let select = match after {
        None => select,
        Some(None) => select.filter(sea_orm::sea_query::Expr::cust("1 = 0")),
        Some(Some(id)) if ascending => select.filter(id_col.gt(id)),
        Some(Some(id)) => select.filter(id_col.lt(id)),
    };
    if ascending {
        select.order_by_asc(id_col)
    } else {
        select.order_by_desc(id_col)
    }
}

/// One page of `range` (rows an index reads in order) narrowed by `check` (a condition tested
/// row by row), reading at most the params' walk window of `range` past the iterator: the
/// window's last id (`I`, shown as the page's keys are) is found first (one index range read,
/// the id alone), and the page is read up to it. When the window holds no more than a page of
/// matches and `range` goes on past it, the page is not done and continues after that row
/// (or, read back, before it).
pub(crate) async fn fetch_walked_page<E, C, I>(
    db: &C,
    range: Select<E>,
    check: sea_orm::Condition,
    id_col: E::Column,
    key: impl Fn(&E::Model) -> String,
    params: &ListParams,
) -> Result<Page<E::Model>>
where
    E: EntityTrait,
    C: ConnectionTrait,
    I: sea_orm::TryGetable + Into<sea_orm::Value> + std::fmt::Display,
{
    let edge: Option<I> = page_query(range.clone(), id_col, params)
        .select_only()
        .column(id_col)
        .offset(params.walk_window() - 1)
        .limit(1)
        .into_tuple()
        .one(db)
        .await?;
    // No edge: the range ends within the window.
    let Some(edge) = edge else {
        return fetch_page(db, range.filter(check), id_col, key, params).await;
    };
    let edge_key = edge.to_string();
    let back = params.cursor().is_some_and(|(_, back)| back);
    let within = if params.ascending != back {
        id_col.lte(edge)
    } else {
        id_col.gte(edge)
    };
    let mut page = fetch_page(db, range.filter(within).filter(check), id_col, key, params).await?;
    if page.done {
        page.done = false;
        let cursor = params.cursor().map(|(id, _)| id.to_owned());
        if back {
            page.prev_iterator = Some(format!("-{edge_key}"));
            page.iterator = page.iterator.or(cursor);
        } else {
            page.iterator = Some(edge_key);
            page.prev_iterator = page.prev_iterator.or(cursor.map(|id| format!("-{id}")));
        }
    }
    Ok(page)
}

/// Runs `select` as one page ordered by `id_col` (see [`page_query`]).
pub(crate) async fn fetch_page<E, C>(
    db: &C,
    select: Select<E>,
    id_col: E::Column,
    key: impl Fn(&E::Model) -> String,
    params: &ListParams,
) -> Result<Page<E::Model>>
where
    E: EntityTrait,
    C: ConnectionTrait,
{
    let limit = params.effective_limit();
    let mut data = page_query(select, id_col, params).all(db).await?;
    let done = data.len() as u64 <= limit;
    data.truncate(limit as usize);
    if params.cursor().is_some_and(|(_, back)| back) {
        data.reverse();
    }
    let iterator = data.last().map(&key);
    let prev_iterator = data.first().map(|m| format!("-{}", key(m)));
    Ok(Page {
        data,
        iterator,
        prev_iterator,
        done,
    })
}
