//! Who may do what: the admin routes' callers.

pub mod admin;
