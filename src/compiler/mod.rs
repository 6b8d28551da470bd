//! Pure compiler: model to desired flows, and the diff against installed flows.

pub mod userdata;
