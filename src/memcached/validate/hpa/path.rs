//! HPA field paths, built on the stack as the checks descend and rendered only for an error.

use std::fmt;

/// A field path built on the stack and rendered only when an error needs it.
#[derive(Clone, Copy)]
pub(super) struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    segment: Segment,
}

#[derive(Clone, Copy)]
enum Segment {
    Name(&'static str),
    Index(usize),
}

impl<'a> Path<'a> {
    pub(super) const fn root(name: &'static str) -> Path<'static> {
        Path {
            parent: None,
            segment: Segment::Name(name),
        }
    }

    pub(super) fn child(&'a self, name: &'static str) -> Path<'a> {
        Path {
            parent: Some(self),
            segment: Segment::Name(name),
        }
    }

    pub(super) fn index(&'a self, i: usize) -> Path<'a> {
        Path {
            parent: Some(self),
            segment: Segment::Index(i),
        }
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(parent) = self.parent {
            write!(f, "{parent}")?;
            if let Segment::Name(_) = self.segment {
                f.write_str(".")?;
            }
        }
        match self.segment {
            Segment::Name(name) => f.write_str(name),
            Segment::Index(i) => write!(f, "[{i}]"),
        }
    }
}
