//! Keyset paging, newest (or oldest) first, on the sortable primary key: every page is one index range
//! scan, however deep the caller has paged.

use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Select,
};

use crate::Result;

pub const MAX_LIMIT: u64 = 250;

#[derive(Clone, Debug, Default)]
pub struct ListParams {
    /// Page size (1..=250; 0 means the default of 50).
    pub limit: u64,
    /// Continue after this id (the `iterator` of the previous page).
    pub iterator: Option<String>,
    /// Oldest first instead of newest first.
    pub ascending: bool,
}

impl ListParams {
    pub fn first(limit: u64) -> Self {
        ListParams {
            limit,
            iterator: None,
            ascending: false,
        }
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
    pub done: bool,
}

impl<T> Page<T> {
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            data: self.data.into_iter().map(f).collect(),
            iterator: self.iterator,
            done: self.done,
        }
    }
}

/// `select` narrowed to one page: ordered by `id_col` descending, after the iterator, one row
/// more than the limit (to tell whether another page follows).
pub(crate) fn page_query<E: EntityTrait>(
    select: Select<E>,
    id_col: E::Column,
    params: &ListParams,
) -> Select<E> {
    let select = select.limit(params.effective_limit() + 1);
    match (params.ascending, &params.iterator) {
        (false, None) => select.order_by_desc(id_col),
        (false, Some(after)) => select
            .order_by_desc(id_col)
            .filter(id_col.lt(after.as_str())),
        (true, None) => select.order_by_asc(id_col),
        (true, Some(after)) => select
            .order_by_asc(id_col)
            .filter(id_col.gt(after.as_str())),
    }
}

/// Runs `select` as one page ordered by `id_col` descending.
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
    let iterator = data.last().map(&key);
    Ok(Page {
        data,
        iterator,
        done,
    })
}
