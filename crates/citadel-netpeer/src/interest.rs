//! NetworkPeer's own interest grid (realtime-behaviour §5 rules, its own
//! defaults): uniform square cells on X/Y, broad phase = the 3 × 3 cells
//! around the viewer's cell, enter within `inner` (3-D), leave beyond
//! `outer` (3-D), hysteresis in between.
//!
//! What it is not: the transform hub's grid (that one lives in
//! citadel-netcode and keeps its own state). Call order: [`Grid::build`]
//! once per tick and match, then [`Grid::candidates`] per viewer.

use std::collections::HashMap;

use crate::limits::InterestConfig;

/// Normalised `(cell, inner, outer)`: degenerate cells become 1, radii
/// are ordered.
pub fn normalized(c: &InterestConfig) -> (f32, f32, f32) {
    let cell = if c.cell_size.is_finite() && c.cell_size > 0.0 {
        c.cell_size
    } else {
        1.0
    };
    let (a, b) = if c.inner > c.outer {
        (c.outer, c.inner)
    } else {
        (c.inner, c.outer)
    };
    (cell, a.max(0.0), b.max(0.0))
}

fn cell_of(v: f32, size: f32) -> i32 {
    if !v.is_finite() {
        return 0;
    }
    (v / size).floor().clamp(i32::MIN as f32, i32::MAX as f32) as i32
}

/// Squared 3-D distance (non-finite coordinates count as 0).
pub fn dist2(a: [f32; 3], b: [f32; 3]) -> f32 {
    let f = |v: f32| if v.is_finite() { v } else { 0.0 };
    (0..3).map(|i| (f(a[i]) - f(b[i])).powi(2)).sum()
}

/// Object ids bucketed by cell.
#[derive(Debug, Default)]
pub struct Grid {
    cell: f32,
    cells: HashMap<(i32, i32), Vec<u32>>,
}

impl Grid {
    /// Buckets `(object_id, position)` pairs.
    pub fn build(cell: f32, objects: impl Iterator<Item = (u32, [f32; 3])>) -> Grid {
        let mut cells: HashMap<(i32, i32), Vec<u32>> = HashMap::new();
        for (id, p) in objects {
            cells
                .entry((cell_of(p[0], cell), cell_of(p[1], cell)))
                .or_default()
                .push(id);
        }
        Grid { cell, cells }
    }

    /// Objects in the 3 × 3 cells around `center`'s cell.
    pub fn candidates(&self, center: [f32; 3], out: &mut Vec<u32>) {
        out.clear();
        let (cx, cy) = (cell_of(center[0], self.cell), cell_of(center[1], self.cell));
        for dx in -1..=1 {
            for dy in -1..=1 {
                let key = (cx.saturating_add(dx), cy.saturating_add(dy));
                if let Some(ids) = self.cells.get(&key) {
                    out.extend_from_slice(ids);
                }
            }
        }
    }
}
