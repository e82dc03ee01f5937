//! Ratcheting: an update is judged only on the violations it introduces, so a stored object
//! that an older webhook (or none) admitted can still be changed.

use super::{ErrorKind, FieldError};
use crate::json::{self, Val};

/// Ratcheting (as KEP-4008 does for CRD schemas): splits the updated object's `errors` into
/// those the update introduces (first) and those the stored object already had (second).
///
/// An error is already stored when `old` has the same one: same field, same message. Both
/// objects are judged as after defaulting, so an old object stored before the defaulting
/// webhook existed yields the same messages as its defaulted update. Every message that can
/// name the bad value does, so a bad value changed into another bad value is a new error; for
/// the few that cannot ([`FieldError::names_value`]), the JSON at the field must also be
/// unchanged between `old_object` and `object`. An autoscaler conflict is already stored when
/// the stored object had one with the same other autoscaler, whatever else changed: an
/// autoscaler created after the Memcached must never freeze it.
pub fn ratchet(
    errors: Vec<FieldError>,
    old: &[FieldError],
    object: Val<'_, '_>,
    old_object: Val<'_, '_>,
) -> (Vec<FieldError>, Vec<FieldError>) {
    let stored: std::collections::HashSet<&FieldError> = old.iter().collect();
    errors.into_iter().partition(|e| {
        if e.kind == ErrorKind::Autoscaled {
            let kept = old
                .iter()
                .any(|o| o.kind == ErrorKind::Autoscaled && o.detail == e.detail);
            return !kept;
        }
        let kept = stored.contains(e)
            && (e.names_value()
                || match (
                    json::at_path(object, &e.field),
                    json::at_path(old_object, &e.field),
                ) {
                    (None, None) => true,
                    (Some(a), Some(b)) => json::same(a, b),
                    _ => false,
                });
        !kept
    })
}

#[cfg(test)]
mod tests;
