//! The spans of a split (which side served) and of a shadowed call (the shadow's exchange in the
//! same trace).
