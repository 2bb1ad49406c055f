//! The decision search of the `exact` strategy: is there a canonical packing of one component
//! within a capacity? MiniMalloc's depth-first search (Moffitt, ASPLOS 2023, §4–§5) with an
//! incremental state that allocates nothing per node:
//!
//! - every buffer is placed at its **minimum offset** (the highest top of the placed buffers
//!   it overlaps), in non-decreasing offset order, ties in preorder (canonical solutions, §4.1);
//! - a section's **floor** is kept equal to the lowest minimum offset of its unplaced buffers
//!   (every placed buffer of a section overlaps every unplaced one there, so this is at least
//!   the top of the placed ones); only sections whose lowest buffer moved are rescanned;
//! - **inference** (§4.2): in every section, `max(floor, offset) + unplaced sizes` must fit,
//!   and every raised buffer's minimum offset plus its size must fit;
//! - **dominance** (§4.3): no placement at or above the lowest top an unplaced buffer could
//!   reach (that buffer would fill the gap below);
//! - **twins**: buffers with the same lifetime and size are interchangeable, so they are placed
//!   in index order only (relabelling twins maps solutions to solutions);
//! - **stranded buffers**: a buffer is always placed at its minimum offset, which only rises
//!   when an overlapping buffer is placed; once it lies below the canonical order's current
//!   position and no unplaced buffer overlaps it, it can never be placed, so the branch is dead;
//! - **dynamic decomposition** (§4.4): a section boundary no unplaced buffer crosses splits the
//!   problem into independent ones, each searched from scratch;
//! - the orderings of all open nodes live on one stack; a child's ordering is its parent's with
//!   the placed buffer removed and the raised ones re-sorted and merged back in (linear time).

use std::cmp::Reverse;
use std::time::Instant;

use super::{Component, NO_TWIN};

/// What a component's decision search answers.
pub(super) enum Search {
    /// Local offsets of a packing within the capacity.
    Found(Vec<u64>),
    Infeasible,
    Unknown,
}

impl Component {
    /// Round-robin over the preorders with a doubling node limit (MiniMalloc's solver, §5):
    /// one preorder often finds a packing that another needs millions of nodes for.
    pub(super) fn decide(
        &self,
        capacity: u64,
        deadline: Option<Instant>,
        nodes_left: &mut u64,
    ) -> Search {
        if self.breadth > capacity {
            return Search::Infeasible;
        }
        let mut limit = (2 * self.items.len() as u64).max(16);
        loop {
            for preorder in PREORDERS {
                let attempt = limit.min(*nodes_left);
                if attempt == 0 {
                    return Search::Unknown;
                }
                let mut s = Solver::new(self, capacity, deadline, attempt);
                let status = s.solve(preorder);
                *nodes_left -= s.nodes.min(*nodes_left);
                match status {
                    Status::Found => return Search::Found(s.solution),
                    Status::NotFound => return Search::Infeasible,
                    Status::Deadline => return Search::Unknown,
                    Status::NodeLimit if attempt < limit => return Search::Unknown,
                    Status::NodeLimit => {}
                }
            }
            limit = limit.saturating_mul(2);
        }
    }
}

/// Static preorders, MiniMalloc's defaults "WAT", "TAW", "TWA": W = lifetime width,
/// A = area (size × width), T = the largest section total the buffer takes part in.
#[derive(Clone, Copy)]
pub(super) enum Preorder {
    Wat,
    Taw,
    Twa,
}

pub(super) const PREORDERS: [Preorder; 3] = [Preorder::Wat, Preorder::Taw, Preorder::Twa];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Status {
    Found,
    NotFound,
    NodeLimit,
    Deadline,
}

const UNPLACED: u64 = u64::MAX;

/// A contiguous stretch of one of the solver's stacks.
#[derive(Clone, Copy)]
struct Slice {
    start: usize,
    len: usize,
}

impl Slice {
    fn range(self) -> std::ops::Range<usize> {
        self.start..self.start + self.len
    }
}

/// One decision search over one component at one capacity with one preorder.
pub(super) struct Solver<'c> {
    c: &'c Component,
    capacity: u64,
    deadline: Option<Instant>,
    nodes_budget: u64,
    pub(super) nodes: u64,
    assignment: Vec<u64>,
    pub(super) solution: Vec<u64>,
    min_offset: Vec<u64>,
    /// Lowest minimum offset of the unplaced buffers of each section (unchanged once a
    /// section has no unplaced buffer left: its total is then 0 and it constrains nothing).
    floor: Vec<u64>,
    /// Sum of the sizes of the unplaced buffers of each section.
    total: Vec<u64>,
    /// `cuts[s]`: unplaced buffers live in both section s and s + 1.
    cuts: Vec<u32>,
    /// Unplaced buffers overlapping each buffer.
    free_overlaps: Vec<u32>,
    /// Unplaced buffers of each section whose minimum offset equals its floor: the floor
    /// only needs a rescan when the last of them moves.
    at_floor: Vec<u32>,
    /// Sections to rescan.
    touched: Vec<u32>,
    /// Undo logs: (buffer, previous minimum offset) and (section, previous floor).
    offset_log: Vec<(u32, u64)>,
    floor_log: Vec<(u32, u64)>,
    /// Stack of the preorders of the open (sub)problems: local buffer indices.
    pres: Vec<u32>,
    /// Stack of the dynamic orderings of the open nodes: (minimum offset, preorder index).
    orders: Vec<(u64, u32)>,
    /// Scratch for building a child's ordering.
    kept: Vec<(u64, u32)>,
    raised: Vec<(u64, u32)>,
    /// Stack of the cut points of the open decompositions.
    cutpoints: Vec<u32>,
}

impl<'c> Solver<'c> {
    pub(super) fn new(
        c: &'c Component,
        capacity: u64,
        deadline: Option<Instant>,
        budget: u64,
    ) -> Self {
        let n = c.items.len();
        let ns = c.sections.len();
        let mut total = vec![0u64; ns];
        let mut cuts = vec![0u32; ns.saturating_sub(1)];
        for j in 0..n {
            for s in c.lo[j]..=c.hi[j] {
                total[s as usize] = total[s as usize].saturating_add(c.size[j]);
            }
            for s in c.lo[j]..c.hi[j] {
                cuts[s as usize] += 1;
            }
        }
        Solver {
            c,
            capacity,
            deadline,
            nodes_budget: budget,
            nodes: 0,
            assignment: vec![UNPLACED; n],
            solution: vec![0; n],
            min_offset: vec![0; n],
            floor: vec![0; ns],
            total,
            cuts,
            free_overlaps: c.overlaps.iter().map(|o| o.len() as u32).collect(),
            at_floor: c.sections.iter().map(|b| b.len() as u32).collect(),
            touched: Vec::new(),
            offset_log: Vec::with_capacity(n),
            floor_log: Vec::with_capacity(ns),
            pres: Vec::with_capacity(2 * n),
            orders: Vec::with_capacity(4 * n),
            kept: Vec::with_capacity(n),
            raised: Vec::with_capacity(n),
            cutpoints: Vec::new(),
        }
    }

    /// Searches the whole component.
    pub(super) fn solve(&mut self, preorder: Preorder) -> Status {
        self.pres.extend(0..self.c.items.len() as u32);
        let pre = Slice {
            start: 0,
            len: self.c.items.len(),
        };
        self.sub_solve(pre, (0, self.c.sections.len() as u32), preorder)
    }

    /// Solves the buffers `pre` (a stretch of `pres`, all unplaced and inside sections
    /// `[range.0, range.1)`) from scratch: sorts them into the preorder and searches.
    fn sub_solve(&mut self, pre: Slice, range: (u32, u32), preorder: Preorder) -> Status {
        let c = self.c;
        let total = &self.total;
        let key = |j: u32| {
            let j = j as usize;
            let t = (c.lo[j]..=c.hi[j])
                .map(|s| total[s as usize])
                .max()
                .unwrap_or(0);
            let width = u128::from(c.width[j].saturating_add(1));
            let area = u128::from(c.size[j]) * width;
            let t = u128::from(t);
            let k = match preorder {
                Preorder::Wat => (width, area, t),
                Preorder::Taw => (t, area, width),
                Preorder::Twa => (t, width, area),
            };
            (Reverse(k), j)
        };
        self.pres[pre.range()].sort_by_cached_key(|&j| key(j));
        let mark = self.orders.len();
        for p in 0..pre.len {
            let j = self.pres[pre.start + p] as usize;
            self.orders.push((self.min_offset[j], p as u32));
        }
        self.orders[mark..].sort_unstable();
        let orig = Slice {
            start: mark,
            len: pre.len,
        };
        let status = self.search(range, pre, orig, 0, 0, preorder);
        self.orders.truncate(mark);
        status
    }

    /// One node: `orig` is the parent's ordering, `(last_offset, last_pre)` the placement
    /// that led here.
    fn search(
        &mut self,
        range: (u32, u32),
        pre: Slice,
        orig: Slice,
        last_offset: u64,
        last_pre: u32,
        preorder: Preorder,
    ) -> Status {
        if self.nodes >= self.nodes_budget {
            return Status::NodeLimit;
        }
        if self.nodes.is_multiple_of(256) && self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Status::Deadline;
        }
        self.nodes += 1;
        let Some(ordering) = self.child_ordering(pre, orig, last_offset, last_pre) else {
            return Status::NotFound;
        };
        if ordering.len == 0 {
            for idx in pre.range() {
                let j = self.pres[idx] as usize;
                self.solution[j] = self.assignment[j];
            }
            return Status::Found;
        }
        let c = self.c;
        let mut min_height = u64::MAX;
        for &(o, p) in &self.orders[ordering.range()] {
            let j = self.pres[pre.start + p as usize] as usize;
            min_height = min_height.min(o.saturating_add(c.size[j]));
        }
        // The parent's check passed for every section, and placing a buffer only lowers
        // totals: below `quick`, the only sections that can fail are those whose floor rose.
        let max_total = self.total[range.0 as usize..range.1 as usize]
            .iter()
            .copied()
            .max()
            .unwrap_or(0);
        let quick = self.capacity.saturating_sub(max_total);
        let mut status = Status::NotFound;
        for idx in ordering.range() {
            let (offset, p) = self.orders[idx];
            // Dominance (§4.3): at or above `min_height` some buffer fits underneath.
            if offset >= min_height {
                break;
            }
            // Canonical order (§4.1): offsets never decrease; ties in preorder.
            if offset < last_offset || (offset == last_offset && p < last_pre) {
                continue;
            }
            let j = self.pres[pre.start + p as usize] as usize;
            let twin = c.twin[j];
            if twin != NO_TWIN && self.assignment[twin as usize] == UNPLACED {
                continue;
            }
            let offset_mark = self.offset_log.len();
            let floor_mark = self.floor_log.len();
            let fits = self.place(j, offset);
            let consistent = fits
                && if offset <= quick {
                    self.check_raised(offset)
                } else {
                    self.check(range, offset)
                };
            self.touched.clear();
            status = if consistent {
                self.decompose(range, pre, ordering, offset, p, j, preorder)
            } else {
                Status::NotFound
            };
            self.unplace(j, offset_mark, floor_mark);
            if status != Status::NotFound {
                break;
            }
        }
        self.orders.truncate(ordering.start);
        status
    }

    /// Pushes the ordering of this node: the parent's unplaced buffers by (minimum offset,
    /// preorder index). Unchanged entries stay sorted; the raised ones are sorted apart and
    /// merged back. `None` when a stranded buffer makes the node a dead end.
    fn child_ordering(
        &mut self,
        pre: Slice,
        orig: Slice,
        last_offset: u64,
        last_pre: u32,
    ) -> Option<Slice> {
        let mut kept = std::mem::take(&mut self.kept);
        let mut raised = std::mem::take(&mut self.raised);
        kept.clear();
        raised.clear();
        let mut stranded = false;
        for idx in orig.range() {
            let (o, p) = self.orders[idx];
            let j = self.pres[pre.start + p as usize] as usize;
            if self.assignment[j] != UNPLACED {
                continue;
            }
            let m = self.min_offset[j];
            if (m, p) < (last_offset, last_pre) && self.free_overlaps[j] == 0 {
                stranded = true;
                break;
            }
            if m == o {
                kept.push((o, p));
            } else {
                raised.push((m, p));
            }
        }
        let start = self.orders.len();
        if !stranded {
            raised.sort_unstable();
            let (mut a, mut b) = (0, 0);
            while a < kept.len() && b < raised.len() {
                if kept[a] <= raised[b] {
                    self.orders.push(kept[a]);
                    a += 1;
                } else {
                    self.orders.push(raised[b]);
                    b += 1;
                }
            }
            self.orders.extend_from_slice(&kept[a..]);
            self.orders.extend_from_slice(&raised[b..]);
        }
        self.kept = kept;
        self.raised = raised;
        (!stranded).then(|| Slice {
            start,
            len: self.orders.len() - start,
        })
    }

    /// Places buffer `j` at `offset` (its minimum offset): raises its unplaced neighbours'
    /// minimum offsets, takes it out of its sections' totals and rescans the floors whose
    /// last lowest buffer moved. Returns false when some buffer can no longer fit under the
    /// capacity.
    fn place(&mut self, j: usize, offset: u64) -> bool {
        let c = self.c;
        let height = offset.saturating_add(c.size[j]);
        let mut fits = height <= self.capacity;
        for s in c.lo[j]..=c.hi[j] {
            let s = s as usize;
            self.total[s] -= c.size[j];
            if self.floor[s] == offset {
                self.leave_floor(s);
            }
        }
        self.assignment[j] = offset;
        for &o in &c.overlaps[j] {
            let o = o as usize;
            if self.assignment[o] != UNPLACED {
                continue;
            }
            self.free_overlaps[o] -= 1;
            let m = self.min_offset[o];
            if m < height {
                self.offset_log.push((o as u32, m));
                self.min_offset[o] = height;
                if height.saturating_add(c.size[o]) > self.capacity {
                    fits = false;
                }
                for s in c.lo[o]..=c.hi[o] {
                    if self.floor[s as usize] == m {
                        self.leave_floor(s as usize);
                    }
                }
            }
        }
        let touched = std::mem::take(&mut self.touched);
        for &s in &touched {
            let s = s as usize;
            let (mut lowest, mut count) = (u64::MAX, 0u32);
            for &b in &c.sections[s] {
                let b = b as usize;
                if self.assignment[b] == UNPLACED {
                    let m = self.min_offset[b];
                    if m < lowest {
                        (lowest, count) = (m, 1);
                    } else if m == lowest {
                        count += 1;
                    }
                }
            }
            self.floor_log.push((s as u32, self.floor[s]));
            if count > 0 {
                self.floor[s] = lowest;
                self.at_floor[s] = count;
            }
        }
        self.touched = touched;
        fits
    }

    /// One unplaced buffer of section `s` leaves the floor level (placed or raised); when it
    /// was the last one there, the section's floor must be rescanned.
    fn leave_floor(&mut self, s: usize) {
        self.at_floor[s] -= 1;
        if self.at_floor[s] == 0 {
            self.touched.push(s as u32);
        }
    }

    fn unplace(&mut self, j: usize, offset_mark: usize, floor_mark: usize) {
        let c = self.c;
        // Undo in reverse: rescans, raises, then the placement itself, so that each floor
        // test sees the floor it saw when the count was taken.
        for &(s, f) in self.floor_log[floor_mark..].iter().rev() {
            self.floor[s as usize] = f;
            self.at_floor[s as usize] = 0;
        }
        self.floor_log.truncate(floor_mark);
        for &(o, m) in self.offset_log[offset_mark..].iter().rev() {
            let o = o as usize;
            self.min_offset[o] = m;
            for s in c.lo[o]..=c.hi[o] {
                if self.floor[s as usize] == m {
                    self.at_floor[s as usize] += 1;
                }
            }
        }
        self.offset_log.truncate(offset_mark);
        self.assignment[j] = UNPLACED;
        for &o in &c.overlaps[j] {
            if self.assignment[o as usize] == UNPLACED {
                self.free_overlaps[o as usize] += 1;
            }
        }
        let offset = self.min_offset[j];
        for s in c.lo[j]..=c.hi[j] {
            let s = s as usize;
            self.total[s] += c.size[j];
            if self.floor[s] == offset {
                self.at_floor[s] += 1;
            }
        }
    }

    /// Cross-section inference (§4.2): floor + unplaced sizes must fit in every section; the
    /// floor is at least the current offset, since offsets never decrease.
    fn check(&self, range: (u32, u32), offset: u64) -> bool {
        let (lo, hi) = (range.0 as usize, range.1 as usize);
        self.floor[lo..hi]
            .iter()
            .zip(&self.total[lo..hi])
            .all(|(&f, &t)| t == 0 || f.max(offset).saturating_add(t) <= self.capacity)
    }

    /// [`Self::check`] restricted to the sections whose floor was just rescanned (`touched`).
    fn check_raised(&self, offset: u64) -> bool {
        self.touched.iter().all(|&s| {
            let s = s as usize;
            self.total[s] == 0
                || self.floor[s].max(offset).saturating_add(self.total[s]) <= self.capacity
        })
    }

    /// Dynamic decomposition (§4.4): section boundaries no unplaced buffer crosses any more
    /// split the problem into independent ones.
    #[allow(clippy::too_many_arguments)]
    fn decompose(
        &mut self,
        range: (u32, u32),
        pre: Slice,
        ordering: Slice,
        offset: u64,
        p: u32,
        j: usize,
        preorder: Preorder,
    ) -> Status {
        self.solution[j] = self.assignment[j];
        let (lo, hi) = (self.c.lo[j], self.c.hi[j]);
        let cut_mark = self.cutpoints.len();
        self.cutpoints.push(range.0);
        for s in lo..hi {
            self.cuts[s as usize] -= 1;
            if self.cuts[s as usize] == 0 {
                self.cutpoints.push(s + 1);
            }
        }
        let status = if self.cutpoints.len() == cut_mark + 1 {
            self.search(range, pre, ordering, offset, p, preorder)
        } else {
            self.cutpoints.push(range.1);
            let mut status = Status::Found;
            for w in cut_mark..self.cutpoints.len() - 1 {
                let (a, b) = (self.cutpoints[w], self.cutpoints[w + 1]);
                let part_start = self.pres.len();
                for idx in pre.range() {
                    let k = self.pres[idx];
                    let ku = k as usize;
                    if self.assignment[ku] == UNPLACED && self.c.lo[ku] < b && self.c.hi[ku] >= a {
                        self.pres.push(k);
                    }
                }
                let part = Slice {
                    start: part_start,
                    len: self.pres.len() - part_start,
                };
                if part.len > 0 {
                    status = self.sub_solve(part, (a, b), preorder);
                }
                self.pres.truncate(part_start);
                if status != Status::Found {
                    break;
                }
            }
            status
        };
        self.cutpoints.truncate(cut_mark);
        for s in lo..hi {
            self.cuts[s as usize] += 1;
        }
        status
    }
}
