//! The spans of an A2A streamed turn through sid.
