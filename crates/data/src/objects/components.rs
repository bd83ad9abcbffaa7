//! Objects from a semantic label map: the connected components of each class.
//!
//! A flood fill with an explicit stack (no recursion, so a 2048×1024 road is no stack
//! overflow) visits every pixel once. Components come out in raster order of their first pixel,
//! so the object list of an image never depends on anything but the label.

use serde::{Deserialize, Serialize};

use super::mask::ObjectMask;

/// Which neighbours join a component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Connectivity {
    /// Left, right, up, down: diagonal touches do not merge two objects.
    #[default]
    Four,
    /// The 4 neighbours and the 4 diagonals.
    Eight,
}

/// The connected components of every class in `labels` (`width × height` class ids) with at
/// least `min_area` pixels. Pixels equal to `ignore_index` belong to no object; `keep` says
/// which classes make objects. Each mask's `id` is its class.
pub fn connected_components(
    labels: &[u8],
    width: usize,
    height: usize,
    ignore_index: u8,
    connectivity: Connectivity,
    min_area: usize,
    keep: &dyn Fn(u8) -> bool,
) -> Vec<ObjectMask> {
    debug_assert_eq!(labels.len(), width * height);
    let mut component = vec![u32::MAX; labels.len()];
    let mut objects = Vec::new();
    let mut stack = Vec::new();
    let mut members = Vec::new();
    for start in 0..labels.len() {
        let class = labels[start];
        if component[start] != u32::MAX || class == ignore_index || !keep(class) {
            continue;
        }
        let id = objects.len() as u32;
        members.clear();
        component[start] = id;
        stack.push(start);
        while let Some(at) = stack.pop() {
            members.push(at);
            let (x, y) = (at % width, at / width);
            let mut visit = |nx: usize, ny: usize| {
                let next = ny * width + nx;
                if component[next] == u32::MAX && labels[next] == class {
                    component[next] = id;
                    stack.push(next);
                }
            };
            if x > 0 {
                visit(x - 1, y);
            }
            if x + 1 < width {
                visit(x + 1, y);
            }
            if y > 0 {
                visit(x, y - 1);
            }
            if y + 1 < height {
                visit(x, y + 1);
            }
            if connectivity == Connectivity::Eight {
                if x > 0 && y > 0 {
                    visit(x - 1, y - 1);
                }
                if x + 1 < width && y > 0 {
                    visit(x + 1, y - 1);
                }
                if x > 0 && y + 1 < height {
                    visit(x - 1, y + 1);
                }
                if x + 1 < width && y + 1 < height {
                    visit(x + 1, y + 1);
                }
            }
        }
        // Small components still get an id (so they are not revisited) but no mask.
        let mut pixels = vec![0u8; labels.len()];
        for &at in &members {
            pixels[at] = 1;
        }
        objects.push((members.len() >= min_area).then(|| ObjectMask {
            width,
            height,
            pixels,
            id: u32::from(class),
        }));
    }
    objects.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rustfmt::skip]
    const LABELS: [u8; 30] = [
        1, 1, 0, 0, 2, 2,
        1, 0, 0, 0, 2, 2,
        0, 0, 1, 0, 0, 0,
        0, 0, 0, 1, 255, 255,
        3, 0, 0, 0, 255, 1,
    ];

    fn all(_: u8) -> bool {
        true
    }

    #[test]
    fn components_split_by_class_and_connectivity() {
        let four = connected_components(&LABELS, 6, 5, 255, Connectivity::Four, 1, &all);
        let summary: Vec<(u32, usize)> = four.iter().map(|m| (m.id, m.area())).collect();
        // Raster order of first pixels: the class-1 L, the background, class 2, the two
        // diagonal class-1 pixels (separate under 4-connectivity), class 3, the lone 1.
        assert_eq!(
            summary,
            [(1, 3), (0, 16), (2, 4), (1, 1), (1, 1), (3, 1), (1, 1)]
        );
        let eight = connected_components(&LABELS, 6, 5, 255, Connectivity::Eight, 1, &all);
        let summary: Vec<(u32, usize)> = eight.iter().map(|m| (m.id, m.area())).collect();
        assert_eq!(summary, [(1, 3), (0, 16), (2, 4), (1, 2), (3, 1), (1, 1)]);
        // Every labelled, non-ignored pixel is in exactly one object.
        let covered: usize = eight.iter().map(ObjectMask::area).sum();
        assert_eq!(covered, 30 - 3);
    }

    #[test]
    fn min_area_and_class_filter() {
        let big = connected_components(&LABELS, 6, 5, 255, Connectivity::Four, 3, &all);
        let summary: Vec<(u32, usize)> = big.iter().map(|m| (m.id, m.area())).collect();
        assert_eq!(summary, [(1, 3), (0, 16), (2, 4)]);
        let no_background =
            connected_components(&LABELS, 6, 5, 255, Connectivity::Four, 2, &|c| c != 0);
        assert!(no_background.iter().all(|m| m.id != 0));
        assert_eq!(no_background.len(), 2);
        // The mask is exactly the component.
        let l_shape = &big[0];
        assert_eq!(&l_shape.pixels[..7], &[1, 1, 0, 0, 0, 0, 1]);
    }
}
