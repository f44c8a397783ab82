//! Area of interest: a uniform grid on the horizontal X/Y plane for the
//! broad phase and, per client, a subscribed set with hysteresis (enter
//! within `inner`, leave beyond `outer`, both 3-D distances).
//!
//! Build one [`Grid`] per latched frame (shared by every client); each
//! client's [`Interest`] updates against it at its snapshot tick.

use std::collections::{BTreeSet, HashMap};

use crate::frame::FrameObject;

/// AOI parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InterestConfig {
    /// Cell edge (cm); non-finite or ≤ 0 becomes 1.
    pub cell_size: f32,
    /// Enter radius (cm).
    pub inner: f32,
    /// Exit radius (cm); swapped with `inner` if smaller.
    pub outer: f32,
}

impl InterestConfig {
    fn normalized(self) -> (f32, f32, f32) {
        let cell = if self.cell_size.is_finite() && self.cell_size > 0.0 {
            self.cell_size
        } else {
            1.0
        };
        let (inner, outer) = if self.inner > self.outer {
            (self.outer, self.inner)
        } else {
            (self.inner, self.outer)
        };
        (cell, inner.max(0.0), outer.max(0.0))
    }
}

fn cell_of(v: f32, size: f32) -> i32 {
    if !v.is_finite() {
        return 0;
    }
    let c = (v / size).floor();
    c.clamp(i32::MIN as f32, i32::MAX as f32) as i32
}

/// Objects bucketed by horizontal cell.
#[derive(Debug, Clone, Default)]
pub struct Grid {
    cell: f32,
    cells: HashMap<(i32, i32), Vec<usize>>,
}

impl Grid {
    /// Buckets `objects` (indices into the slice).
    pub fn build(objects: &[FrameObject], cell_size: f32) -> Grid {
        let cell = if cell_size.is_finite() && cell_size > 0.0 {
            cell_size
        } else {
            1.0
        };
        let mut cells: HashMap<(i32, i32), Vec<usize>> = HashMap::new();
        for (i, o) in objects.iter().enumerate() {
            cells
                .entry((cell_of(o.position[0], cell), cell_of(o.position[1], cell)))
                .or_default()
                .push(i);
        }
        Grid { cell, cells }
    }

    /// Indices of objects in cells overlapping the square of half-width
    /// `radius` around `center` (a superset of the sphere).
    pub fn query(&self, center: [f32; 3], radius: f32, out: &mut Vec<usize>) {
        let reach = ((radius / self.cell).ceil() as i64).clamp(0, 4096) as i32;
        let (cx, cy) = (cell_of(center[0], self.cell), cell_of(center[1], self.cell));
        if (2 * reach as usize + 1).pow(2) > self.cells.len() * 4 {
            // Reach covers most of the grid: scan buckets instead of cells.
            for bucket in self.cells.values() {
                out.extend_from_slice(bucket);
            }
            return;
        }
        for dx in -reach..=reach {
            for dy in -reach..=reach {
                if let Some(bucket) = self
                    .cells
                    .get(&(cx.saturating_add(dx), cy.saturating_add(dy)))
                {
                    out.extend_from_slice(bucket);
                }
            }
        }
    }
}

fn distance(a: [f32; 3], b: [f32; 3]) -> f32 {
    let d = [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
    (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt()
}

/// One client's subscribed set.
#[derive(Debug, Clone)]
pub struct Interest {
    config: InterestConfig,
    subscribed: BTreeSet<u32>,
}

/// What changed in a client's interest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterestChange {
    /// Newly relevant ids.
    pub entered: Vec<u32>,
    /// No longer relevant ids.
    pub exited: Vec<u32>,
}

impl Interest {
    /// An empty subscription.
    pub fn new(config: InterestConfig) -> Self {
        Interest {
            config,
            subscribed: BTreeSet::new(),
        }
    }

    /// Currently relevant ids.
    pub fn subscribed(&self) -> &BTreeSet<u32> {
        &self.subscribed
    }

    /// Updates against `objects` for a viewer at `viewer`; `pinned` ids (the
    /// client's own objects) are always relevant. Without a `grid` every
    /// object is a candidate.
    pub fn update(
        &mut self,
        objects: &[FrameObject],
        grid: Option<&Grid>,
        viewer: [f32; 3],
        pinned: &dyn Fn(&FrameObject) -> bool,
    ) -> InterestChange {
        let (_, inner, outer) = self.config.normalized();
        let mut near = Vec::new();
        match grid {
            Some(grid) => grid.query(viewer, outer, &mut near),
            None => near.extend(0..objects.len()),
        }
        let mut keep = BTreeSet::new();
        for &i in &near {
            let Some(o) = objects.get(i) else { continue };
            let d = distance(o.position, viewer);
            let was = self.subscribed.contains(&o.id);
            if pinned(o) || d <= inner || (was && d <= outer) {
                keep.insert(o.id);
            }
        }
        for o in objects.iter().filter(|o| pinned(o)) {
            keep.insert(o.id);
        }
        let entered = keep.difference(&self.subscribed).copied().collect();
        let exited = self.subscribed.difference(&keep).copied().collect();
        self.subscribed = keep;
        InterestChange { entered, exited }
    }

    /// Forgets everything (client reset).
    pub fn reset(&mut self) {
        self.subscribed.clear();
    }
}
