pub mod applications;
pub mod attempts;
pub mod auth;
pub mod endpoints;
pub mod event_types;
pub mod inbound;
pub mod messages;
pub mod retention;
