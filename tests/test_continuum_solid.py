"""Pinned solids through the continuum's own dynamics in their modes' and modal derivatives' subspace, checked
against closed-form mechanics: a cantilever's sag and first frequency, contact with the ground and a collider,
exact pins, gravity's direction, drag, energy without dissipation, the cubature against the whole lattice, and the
scene turned."""

import os

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from model_runtime import continuum_solid
from model_runtime.errors import Cancelled
from model_runtime.lab.data.shapes import SHARED_MESHES, cantilever_box
from model_runtime.lab.data.validate import beam_theory, fit_oscillation
from model_runtime.mesh import validate
from model_runtime.params import make_params
from model_runtime.simulator import Simulator

L, A = 0.3, 0.06  # m: the box cantilever of issue 22, L / a = 5


@pytest.fixture(scope="module")
def sim():
    return Simulator()


@pytest.fixture(scope="module")
def beam():
    v, f = cantilever_box((L, A, A), (10, 2, 2))
    return v, f, np.nonzero(v[:, 0] <= 1e-9)[0], np.nonzero(v[:, 0] >= L - 1e-9)[0]


@pytest.fixture(scope="module")
def block():
    """A stubby block clamped at x = 0, no two sides alike (so its own axes are well defined)."""
    v, f = cantilever_box((0.2, 0.16, 0.12), (4, 3, 3))
    return v, f, np.nonzero(v[:, 0] <= 1e-9)[0]


@pytest.fixture(scope="module")
def block_subspace(block):
    v, f, pins = block
    return continuum_solid.build_subspace(validate(v, f), pins, 0.45)


def _params(v, pins, **kw):
    base = dict(frames=24, fps=24.0, material="rubber", drag=0.0, damping=0.0, pins=pins, num_vertices=len(v))
    return make_params(**{**base, **kw})


def test_a_pinned_closed_solid_takes_the_continuum_path(block):
    v, f, pins = block
    mesh = validate(v, f)
    assert continuum_solid.applies(mesh, _params(v, pins))
    assert not continuum_solid.applies(mesh, _params(v, pins[:0]))
    assert continuum_solid.applies(mesh, _params(v, pins, ground=-1.0))


def test_cantilever_sag_and_frequency_match_euler_bernoulli(sim, beam):
    """Rubber (E 1 MPa, Poisson 0.45), no drag: the tip swings about its static sag at the first bending frequency
    (Euler-Bernoulli's; measured 0.90 of the sag and 1.03 of the frequency)."""
    v, f, pins, tip = beam
    p = _params(v, pins, frames=180, fps=120.0, stiffness=1e6)
    z = sim.simulate(v, f, p)[:, tip, 2].astype(np.float64).mean(1) - v[tip, 2].mean()
    static, freq = fit_oscillation(z, p.fps)
    sag, f1 = beam_theory(L, A, 1e6, p.density)
    assert 0.85 < -static / sag < 1.15
    assert 0.85 < freq / f1 < 1.15


def test_a_resimulate_after_a_tweak_reuses_the_subspace_and_cancel_stops(sim, beam):
    v, f, pins, _ = beam
    sim.simulate(v, f, _params(v, pins, frames=4))
    built = sim._built
    seen = []
    sim.simulate(v, f, _params(v, pins, frames=4, drag=3.0, stiffness=3e6, density=900.0),
                 progress=lambda fraction, message: seen.append(fraction))
    assert sim._built is built and seen[-1] == 1.0
    with pytest.raises(Cancelled):
        sim.simulate(v, f, _params(v, pins, frames=4), should_cancel=lambda: True)
    seen.clear()
    with pytest.raises(Cancelled):  # a new mesh: cancelled while its subspace is built, which is not kept
        sim.simulate(v * 1.1, f, _params(v, pins, frames=4), progress=lambda fraction, message: seen.append(fraction),
                     should_cancel=lambda: len(seen) >= 2)
    assert sim._built is built and 0 < max(seen) <= 0.5


def test_a_ground_out_of_reach_changes_nothing_and_one_in_reach_holds_the_tip(sim, beam):
    """Rubber sags ~3 cm: a ground 1 cm under the beam catches its tip (the reference's contact law: it rests
    ~0.1 mm deep), one 1 m under it changes nothing: switching the ground on does not change the physics."""
    v, f, pins, tip = beam
    free = sim.simulate(v, f, _params(v, pins, stiffness=1e6, drag=0.5))
    assert np.array_equal(sim.simulate(v, f, _params(v, pins, stiffness=1e6, drag=0.5, ground=v[:, 2].min() - 1)),
                          free)
    ground = v[:, 2].min() - 0.01
    held = sim.simulate(v, f, _params(v, pins, stiffness=1e6, drag=0.5, ground=ground))
    assert free[-1, tip, 2].mean() - v[tip, 2].mean() < -0.02
    assert held[:, :, 2].min() > ground - 3e-3  # the penalty's give on impact (1.5 mm measured)
    assert held[12:, :, 2].min() > ground - 5e-4  # at rest on it
    assert abs(held[-1, tip, 2].mean() - ground - (v[tip, 2].mean() - v[:, 2].min())) < 1e-3


def test_a_sphere_collider_holds_the_solid_off_it(sim, beam):
    """A Collision sphere just under the beam's free half: no vertex ends up more than 1 mm inside it."""
    v, f, pins, tip = beam
    center, radius = np.array([0.22, 0.0, v[:, 2].min() - 0.005 - 0.05]), 0.05
    p = _params(v, pins, stiffness=1e6, drag=0.5,
                colliders=[{"shape": "sphere", "center": center.tolist(), "radius": radius}])
    out = sim.simulate(v, f, p)
    inside = radius - np.linalg.norm(out - center, axis=-1)
    assert inside.max() < 1e-3
    assert out[-1, tip, 2].mean() - v[tip, 2].mean() < -0.005  # it did come down onto the sphere


def test_pins_are_exact_and_gravity_sets_the_direction(block, block_subspace):
    v, f, pins = block
    mesh = validate(v, f)
    for g in [(0.0, 0.0, -9.81), (0.0, 9.81, 0.0), (-9.81, 0.0, 0.0)]:
        out = continuum_solid.simulate(block_subspace, mesh, _params(v, pins, gravity=g, stiffness=1e5, drag=2.0))
        assert np.array_equal(out[:, pins], np.repeat(v[None, pins].astype(np.float32), len(out), 0))
        moved = (out[-1] - v).mean(0)
        assert moved @ np.asarray(g) / 9.81 > 0.9 * np.linalg.norm(moved) > 0


def test_more_drag_leaves_less_swing(block, block_subspace):
    v, f, pins = block
    swing = []
    for drag in (0.0, 2.0, 8.0):
        p = _params(v, pins, frames=36, drag=drag, gravity=(0, 0, 0), stiffness=1e5, initial_velocity=(0.0, 0.0, 0.3))
        out = continuum_solid.simulate(block_subspace, validate(v, f), p)
        swing.append(np.abs(out[18:, :, 2] - v[:, 2]).max())
    assert swing[0] > swing[1] > swing[2] > 0


def test_energy_without_dissipation_is_conserved(block, block_subspace):
    """Implicit midpoint does not damp: with no drag or damping, kinetic + elastic + gravitational energy stays
    within 2% of the largest kinetic energy (the issue's target) over 2 s of a swinging rubber block."""
    v, f, pins = block
    p = _params(v, pins, frames=48, stiffness=1e5, initial_velocity=(0.0, 0.0, 0.5))
    energy = continuum_solid.energies(block_subspace, p, *continuum_solid.integrate(block_subspace, p))
    total = sum(energy.values())
    assert energy["elastic"].max() > 0.1 * energy["kinetic"].max()  # it did swing
    assert np.abs(total - total[0]).max() < 0.02 * energy["kinetic"].max()


def test_the_cubature_matches_the_whole_lattice_on_a_pose_it_was_not_fitted_to(block, block_subspace):
    v, f, pins = block
    sub = block_subspace
    p = make_params(material="rubber", pins=pins, num_vertices=len(v))
    lattice = continuum_solid.Lattice(sub.body, p)
    q = np.random.default_rng(7).normal(size=sub.dims)
    q *= 0.01 / np.abs(sub.basis @ q).max()  # a 1 cm pose
    _, g = lattice.elastic.energy_and_gradient(lattice.x0 + (sub.basis @ q).reshape(-1, 3))
    exact = sub.basis.T @ g.ravel()
    _, reduced = continuum_solid.ReducedElasticity(sub, p).energy_and_force(q)
    assert np.linalg.norm(reduced - exact) < 0.1 * np.linalg.norm(exact)
    assert len(sub.tets) < 0.1 * len(sub.body.tets)


def test_the_motion_turns_with_the_scene(block):
    """About gravity, and mesh and gravity together: the result turned back is the original's."""
    v, f, pins = block
    sim = Simulator()
    g = np.array([0.0, 0.0, -9.81])
    base = sim.simulate(v, f, _params(v, pins, stiffness=1e5, drag=1.0))
    motion = np.linalg.norm(base - v, axis=-1).mean()
    for R, together in ((Rotation.from_euler("z", 37, degrees=True).as_matrix(), False),
                        (Rotation.random(random_state=3).as_matrix(), True)):
        turned = _params(v, pins, stiffness=1e5, drag=1.0, gravity=tuple(R @ g) if together else tuple(g))
        back = sim.simulate(v @ R.T, f, turned) @ R
        assert np.linalg.norm(back - base, axis=-1).mean() < 0.02 * motion


@pytest.mark.skipif(not os.path.exists(SHARED_MESHES), reason="v2's real solids need ../shared/meshes")
def test_a_lattice_piece_hanging_by_an_edge_is_dropped_not_left_as_a_free_hinge():
    """v2's scene 153 (a cheburashka) in its own axes: one lattice cube joins the rest only along an edge, a hinge
    of zero frequency that swamped the basis. held_together drops it; mass and the surface's rest shape stay."""
    import json
    from pathlib import Path

    from model_runtime.lab.data.scenes import sample_scene
    from model_runtime.lattice import embed_solid, held_together, lattice_cell
    from model_runtime.mesh import Mesh, enclosed_volume, principal_frame

    config = json.loads((Path(__file__).resolve().parents[1] / "configs/data-v2.json").read_text())
    scene = sample_scene(1, 153, config)
    mesh = validate(scene.vertices, scene.faces)
    local = Mesh(mesh.vertices @ principal_frame(mesh, scene.params.pins, scene.params.gravity), mesh.faces)
    volume = enclosed_volume(local)
    body = embed_solid(local, scene.params.pins, volume, lattice_cell(local.vertices, volume, continuum_solid.LATTICE))
    together = held_together(body)
    assert 0 < len(body.tets) - len(together.tets) < 0.01 * len(body.tets)
    assert np.isclose(together.node_volume.sum(), body.node_volume.sum())
    assert np.abs(together.surface(together.nodes[None])[0] - local.vertices).max() < 1e-9
    unit = make_params(stiffness=1.0, density=1.0, poisson=scene.params.poisson)
    omega = continuum_solid.Lattice(body, unit).modes(2)[1]
    assert omega[0] < 1e-4 * omega[1]  # the hinge
    omega = continuum_solid.Lattice(together, unit).modes(2)[1]
    assert omega[0] > 0.1 * omega[1]
