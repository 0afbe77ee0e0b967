//! What is wrong with a submitted form, field by field: each problem is shown under its field
//! (which carries `aria-invalid` and points at it with `aria-describedby`, see
//! `templates/macros.html`), and every problem is also listed at the top of the form, so one
//! round trip shows everything and a screen reader hears it.

/// The problems of one submitted form. A problem's field is the form field's `name`; `""`
/// for one that belongs to no single field.
#[derive(Debug, Default, Clone)]
pub struct Problems(Vec<(&'static str, String)>);

impl Problems {
    pub fn new() -> Problems {
        Problems(Vec::new())
    }

    /// A problem with the field named `field` ("" for the form as a whole).
    pub fn add(&mut self, field: &'static str, message: impl Into<String>) {
        self.0.push((field, message.into()));
    }

    /// Puts a problem before the others (the first field's, found later).
    pub fn add_first(&mut self, field: &'static str, message: impl Into<String>) {
        self.0.insert(0, (field, message.into()));
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The first problem of the field named `field`, for under it.
    pub fn of(&self, field: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(f, _)| !f.is_empty() && *f == field)
            .map(|(_, m)| m.as_str())
    }

    /// Every problem's message, in order, for the list at the top of the form.
    pub fn messages(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(_, m)| m.as_str())
    }

    /// The messages rewritten by `f` (the portal's customer words), fields kept.
    pub fn map(self, f: impl Fn(&str) -> String) -> Problems {
        Problems(self.0.into_iter().map(|(k, m)| (k, f(&m))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fields_first_problem_is_the_one_under_it() {
        let mut p = Problems::new();
        p.add("name", "Name: too long.");
        p.add("url", "URL: enter an address.");
        p.add("url", "URL: second.");
        p.add("", "Something about the whole form.");
        p.add_first("url", "URL: first.");
        assert_eq!(p.of("url"), Some("URL: first."));
        assert_eq!(p.of("name"), Some("Name: too long."));
        assert_eq!(p.of(""), None, "a form-wide problem belongs to no field");
        assert_eq!(p.of("timeout"), None);
        assert_eq!(p.len(), 5);
        assert_eq!(p.messages().next(), Some("URL: first."));
        let p = p.map(|m| m.to_uppercase());
        assert_eq!(p.of("name"), Some("NAME: TOO LONG."));
    }
}
