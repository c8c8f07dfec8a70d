//! The spans of a pass-through request.
