//! Images: `spec.image` and the exporter's must be references the kubelet can pull.

use super::{FieldError, go_quote};
use crate::json::Field;
use crate::memcached::{Spec, image};

/// `spec.image` and `spec.monitoring.exporterImage` must be references the kubelet can pull.
/// Absent or null means the default image. The exporter image is checked whenever it is set, even
/// with monitoring disabled, so that switching monitoring on later cannot be the first failure.
pub(super) fn check(spec: &Spec<'_, '_>, errors: &mut Vec<FieldError>) {
    if let Field::Set(img) = spec.image {
        check_image("spec.image", img, errors);
    }
    if let Some(Field::Set(img)) = spec.monitoring.get().map(|m| m.exporter_image) {
        check_image("spec.monitoring.exporterImage", img, errors);
    }
}

fn check_image(field: &'static str, img: &str, errors: &mut Vec<FieldError>) {
    match image::check(img) {
        Ok(()) => {}
        Err(e @ image::ImageError::Empty) => {
            errors.push(FieldError::required(field, e.to_string()))
        }
        Err(e) => errors.push(FieldError::invalid(field, go_quote(img), e.to_string())),
    }
}

#[cfg(test)]
mod tests;
