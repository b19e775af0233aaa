//! Keys the bridge keeps for itself: the local development signing key (`dev`) and the
//! key that seals HTTP session ids (`session`), each a file kept private in the data dir.

pub mod dev;
pub mod session;
