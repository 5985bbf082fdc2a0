//! Integration tests of the SQLite store, on real files in temp dirs.

mod contract;
mod corrupt;
mod full;
mod group;
#[cfg(feature = "journal")]
mod journal;
mod lock;
mod owned;
mod private;
mod restart;
