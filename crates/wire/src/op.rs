//! Operation views (filled in next).
