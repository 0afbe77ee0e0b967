pub mod applications;
pub mod attempts;
pub mod endpoints;
pub mod event_types;
pub mod messages;
pub mod retention;
