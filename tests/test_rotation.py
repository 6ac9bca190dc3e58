"""Physics does not depend on which way the scene faces: a turned scene gives the turned result."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from model_runtime.lab.data.shapes import box_surface, grid_sheet
from model_runtime.params import make_params
from model_runtime.simulator import Simulator

FPS, FRAMES = 24.0, 24
G = np.array([0.0, 0.0, -9.81])


@pytest.fixture(scope="module")
def sim():
    return Simulator()


def cloth():
    v, f = grid_sheet(11, 11, 0.8, 0.6)  # not square: its in-plane axes are distinct
    return v, f, np.nonzero(v[:, 1] == v[:, 1].min())[0]


def motion_apart(sim, v, f, pins, R: np.ndarray, gravity_turns: bool, material: str = "cloth") -> float:
    """Largest mean distance, over the frames, between the original result and the turned scene's result turned
    back, as a fraction of the original's mean motion at that frame."""
    def run(vertices, g):
        p = make_params(frames=FRAMES, fps=FPS, gravity=g, material=material, drag=0.5, pins=pins,
                        num_vertices=len(v))
        return sim.simulate(vertices, f, p).astype(np.float64)

    still = run(v, G)
    turned = run(v @ R.T, R @ G if gravity_turns else G) @ R
    motion = np.linalg.norm(still - v, axis=-1).mean(1)[1:]
    apart = np.linalg.norm(turned - still, axis=-1).mean(1)[1:]
    return float((apart / motion).max())


@pytest.mark.parametrize("angle", [90.0, 37.0])
def test_a_cloth_turned_about_gravity_moves_the_same(sim, angle):
    v, f, pins = cloth()
    R = Rotation.from_rotvec(np.radians(angle) * np.array([0, 0, 1.0])).as_matrix()
    assert motion_apart(sim, v, f, pins, R, gravity_turns=False) <= 0.02


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_cloth_turned_with_its_gravity_moves_the_same_turned(sim, seed):
    v, f, pins = cloth()
    R = Rotation.random(random_state=seed).as_matrix()
    assert motion_apart(sim, v, f, pins, R, gravity_turns=True) <= 0.02


def test_a_pinned_solid_turned_with_its_gravity_moves_the_same_turned(sim):
    """A pinned solid's lattice, modes and cubature are built in its own axes, so they must turn with it too."""
    v, f = box_surface((4, 2, 2), (0.4, 0.1, 0.1))
    pins = np.nonzero(v[:, 0] == v[:, 0].min())[0]
    R = Rotation.random(random_state=3).as_matrix()
    assert motion_apart(sim, v, f, pins, R, gravity_turns=True, material="jelly") <= 0.02
