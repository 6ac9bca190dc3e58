"""Wind and colliders: forces from the scene on the body, checked in closed form where there is one."""

from pathlib import Path

import numpy as np
import pytest

from model_runtime.contact import Collider, make_colliders
from model_runtime.errors import ParameterError
from model_runtime.lab.data.shapes import grid_sheet
from model_runtime.mesh import read_obj
from model_runtime.params import make_params
from model_runtime.simulator import Simulator

ASSETS = Path(__file__).resolve().parents[1] / "assets"

FPS = 24.0


@pytest.fixture(scope="module")
def sim():
    return Simulator()


@pytest.fixture(scope="module")
def cube():
    m = read_obj(str(ASSETS / "meshes" / "cube_subdiv.obj"))
    return m.vertices, m.faces


def run(sim, v, f, **kw):
    return sim.simulate(v, f, make_params(num_vertices=len(v), fps=FPS, **kw))


def test_steady_wind_pushes_a_free_body_as_half_a_t_squared(sim, cube):
    v, f = cube
    push = np.array([2.0, -1.0, 0.5])
    out = run(sim, v, f, frames=24, gravity=(0, 0, 0), wind=[{"acceleration": push.tolist()}])
    t = np.arange(25) / FPS
    expected = 0.5 * np.outer(t**2, push)
    assert np.abs(out.mean(1) - v.mean(0) - expected).max() <= 0.01 * np.abs(expected).max()


def test_gusty_wind_flutters_a_pinned_sheet_around_its_steady_lean(sim):
    v, f = grid_sheet(11, 11, 0.8, 0.8)
    pins = np.nonzero(v[:, 1] == v[:, 1].min())[0]
    common = dict(frames=24, gravity=(0, 0, 0), material="cloth", drag=2.0, pins=pins)
    steady = run(sim, v, f, wind=[{"acceleration": [0, 0, 3.0]}], **common)
    gusty = run(sim, v, f, wind=[{"acceleration": [0, 0, 3.0], "noise": 1.0}], **common)
    assert steady[-1, :, 2].mean() > v[:, 2].mean() + 0.02  # leans downwind
    assert np.abs(gusty - steady).max() > 0.01  # gusts move it differently over time and across the sheet
    np.testing.assert_array_equal(gusty, run(sim, v, f, wind=[{"acceleration": [0, 0, 3.0], "noise": 1.0}],
                                             **common))  # and the same settings give the same motion


def test_a_sphere_collider_holds_up_a_falling_sheet(sim):
    v, f = grid_sheet(15, 15, 0.8, 0.8)
    sphere = {"shape": "sphere", "center": [0.0, 0.0, -0.25], "radius": 0.2}
    out = run(sim, v, f, frames=24, material="cloth", drag=1.0, colliders=[sphere])
    free = run(sim, v, f, frames=24, material="cloth", drag=1.0)
    inside = 0.2 - np.linalg.norm(out - np.array(sphere["center"]), axis=-1)
    assert free[-1, :, 2].min() < -0.5  # without it the sheet falls through where the sphere is
    assert inside.max() < 0.02 * 0.8 * np.sqrt(2)  # with it, nothing goes more than 2% of the sheet's size in
    assert out[-1, :, 2].max() > -0.1  # and the middle rests on top of it


def test_a_cube_rests_on_a_box_collider(sim, cube):
    v, f = cube
    top = v[:, 2].min() - 0.05
    box = {"shape": "box", "matrix": np.eye(4).tolist(), "size": [4.0, 4.0, 0.2]}
    box["matrix"][2][3] = top - 0.1
    out = run(sim, v, f, frames=24, colliders=[box], drag=2.0)
    size = np.ptp(v[:, 2])
    assert abs(out[-1, :, 2].min() - top) < 0.05 * size


@pytest.mark.parametrize("spec, inside, outside, normal", [
    ({"shape": "plane", "point": [0, 0, 1], "normal": [0, 0, 2]}, [0.3, 0.2, 0.9], [0, 0, 1.1], [0, 0, 1]),
    ({"shape": "sphere", "center": [1, 0, 0], "radius": 0.5}, [1.3, 0, 0], [1.6, 0, 0], [1, 0, 0]),
    ({"shape": "box", "matrix": np.eye(4), "size": [2, 2, 2]}, [0.9, 0.5, 0], [1.1, 0, 0], [1, 0, 0]),
    ({"shape": "convex", "points": [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]}, [0.1, 0.1, 0.05], [0.5, 0.5, 0.5],
     [0, 0, -1]),
])
def test_each_collider_shape_knows_inside_from_outside(spec, inside, outside, normal):
    (collider,) = make_colliders([spec])
    depth, n = collider.penetration(np.array([inside, outside], float))
    assert depth[0] > 0 and depth[1] == 0
    np.testing.assert_allclose(n[0], normal, atol=1e-9)


@pytest.mark.parametrize("colliders, wind, match", [
    ([{"shape": "cone"}], None, "shape"),
    ([{"shape": "sphere", "center": [0, 0, 0], "radius": -1}], None, "radius"),
    ([{"shape": "convex", "points": [[0, 0, 0], [1, 0, 0], [0, 1, 0]]}], None, "no volume"),
    (None, [{"acceleration": [1, 2]}], "acceleration"),
    (None, [{"acceleration": [1, 0, 0], "noise": -1}], "noise"),
])
def test_bad_wind_and_colliders_are_refused_with_the_reason(colliders, wind, match):
    with pytest.raises(ParameterError, match=match):
        make_params(colliders=colliders, wind=wind)


def test_a_point_deep_in_a_sphere_is_pushed_outwards():
    depth, n = Collider(center=np.zeros(3), radius=1.0).penetration(np.array([[0.0, 0.0, 0.1]]))
    assert depth[0] == pytest.approx(0.9) and n[0] @ [0, 0, 1] == pytest.approx(1.0)
