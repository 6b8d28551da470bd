//! OVSDB
