//! Determinism and the classes every scene must contain.

use super::*;

#[test]
fn scenes_are_deterministic_and_use_only_the_drawn_ids() {
    let a = draw(7, 128, 64, 8.0, 40);
    let b = draw(7, 128, 64, 8.0, 40);
    assert_eq!(a.rgb, b.rgb);
    assert_eq!(a.label, b.label);
    assert_ne!(draw(8, 128, 64, 8.0, 40).label, a.label);
    let allowed = [
        id::EGO_VEHICLE,
        id::ROAD,
        id::SIDEWALK,
        id::BUILDING,
        id::POLE,
        id::TRAFFIC_SIGN,
        id::VEGETATION,
        id::SKY,
        id::PERSON,
        id::CAR,
    ];
    assert!(a.label.iter().all(|l| allowed.contains(l)));
    assert_eq!(a.rgb.len(), 128 * 64 * 3);
}

#[test]
fn every_scene_has_sky_road_and_sidewalk() {
    for seed in 0..20 {
        let scene = draw(seed, 128, 64, 0.0, 1);
        for class in [id::SKY, id::ROAD, id::SIDEWALK] {
            assert!(scene.label.contains(&class), "seed {seed} lacks {class}");
        }
    }
}
