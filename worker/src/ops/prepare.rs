//! Building the timed closure of a case from a backend's primitives.
