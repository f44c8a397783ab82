//! Area of interest: a uniform grid on the horizontal X/Y plane for the
//! broad phase and, per client, a subscribed set with hysteresis (enter
//! within `inner`, leave beyond `outer`, both 3-D distances).
//!
//! Build one [`FrameIndex`] per latched frame (shared by every client);
//! each client asks it for the candidates near its viewer and its own
//! objects, and its [`Interest`] updates against those alone, so a client's
//! cost grows with what it can see, not with the size of the world.

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

/// The broad phase of one latched frame: its objects by horizontal cell
/// and by owner. Built once per frame and shared by every client.
#[derive(Debug, Clone, Default)]
pub struct FrameIndex {
    grid: Grid,
    by_owner: HashMap<u64, Vec<usize>>,
}

impl FrameIndex {
    /// Indexes `objects` with cells of `cell_size`.
    pub fn build(objects: &[FrameObject], cell_size: f32) -> FrameIndex {
        let mut by_owner: HashMap<u64, Vec<usize>> = HashMap::new();
        for (i, o) in objects.iter().enumerate().filter(|(_, o)| o.owner != 0) {
            by_owner.entry(o.owner).or_default().push(i);
        }
        FrameIndex {
            grid: Grid::build(objects, cell_size),
            by_owner,
        }
    }

    /// Indices (into the indexed slice) of the objects within the square
    /// of half-width `radius` around `center`, then those owned by `owner`
    /// (which may repeat some of the first).
    pub fn candidates(&self, center: [f32; 3], radius: f32, owner: u64, out: &mut Vec<usize>) {
        self.grid.query(center, radius, out);
        if owner != 0
            && let Some(own) = self.by_owner.get(&owner)
        {
            out.extend_from_slice(own);
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

    /// The radius a broad phase must cover for [`Interest::update`] to see
    /// every object that may stay or become relevant (the exit radius).
    pub fn reach(&self) -> f32 {
        self.config.normalized().2
    }

    /// Updates against `candidates` for a viewer at `viewer`; `pinned`
    /// objects (the client's own) are always relevant. `candidates` must
    /// hold every object within [`Interest::reach`] of the viewer and every
    /// pinned object (a [`FrameIndex`] query gives exactly that); anything
    /// subscribed and absent from them exits. Duplicates are harmless.
    pub fn update(
        &mut self,
        candidates: &[&FrameObject],
        viewer: [f32; 3],
        pinned: &dyn Fn(&FrameObject) -> bool,
    ) -> InterestChange {
        let (_, inner, outer) = self.config.normalized();
        let mut keep = BTreeSet::new();
        for o in candidates {
            let d = distance(o.position, viewer);
            let was = self.subscribed.contains(&o.id);
            if pinned(o) || d <= inner || (was && d <= outer) {
                keep.insert(o.id);
            }
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
