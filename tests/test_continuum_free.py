"""Free solids on the continuum's own physics in a floating frame (model_runtime.continuum_free), against
closed-form mechanics: the subspace moves no mass's centre, free flight and drag are exact, linear and angular
momentum are conserved and energy does not drift without dissipation, a spinning body stretches outward, and a body
turned moves the same, turned."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from model_runtime import continuum_free as free
from model_runtime import continuum_solid as solid
from model_runtime.lab.data.shapes import box_surface
from model_runtime.mesh import validate
from model_runtime.params import make_params
from model_runtime.simulator import Simulator, continuum_path
from model_runtime.tets import node_masses

FPS = 24.0


@pytest.fixture(scope="module")
def bar():
    v, f = box_surface((6, 3, 3), (0.3, 0.12, 0.12))
    return validate(v, f)


@pytest.fixture(scope="module")
def bar_subspace(bar):
    return solid.build_subspace(bar, np.zeros(0, np.int64), 0.45)


def params(bar, **kw):
    return make_params(num_vertices=len(bar.vertices), material="jelly", fps=FPS, **{"drag": 0.0, "damping": 0.0, **kw})


def test_a_closed_mesh_without_pins_takes_the_free_path(bar):
    assert continuum_path(bar, params(bar)) is free
    assert continuum_path(bar, params(bar, pins=[0])) is solid


def test_the_deforming_subspace_moves_no_centre_of_mass_and_turns_nothing(bar_subspace):
    """The six rigid motions are off the basis M-orthogonally: q moves neither the centre of mass nor, at first
    order, the body's orientation, so c is the centre of mass and R the body's frame."""
    m = np.repeat(node_masses(bar_subspace.body.node_volume, 1.0), 3)
    rigid = solid.rigid_motions(bar_subspace.body.nodes.astype(np.float64), m[::3])
    assert np.abs(rigid.T @ (m[:, None] * bar_subspace.basis)).max() < 1e-10
    np.testing.assert_allclose(bar_subspace.basis.T @ (m[:, None] * bar_subspace.basis), np.eye(bar_subspace.dims),
                               atol=1e-9)
    assert bar_subspace.dims >= 30  # 8 modes and most of their 36 derivatives


def test_free_flight_with_drag_is_the_closed_form(bar, bar_subspace):
    c, g = 1.5, 9.81
    p = params(bar, frames=24, gravity=(0, 0, -g), drag=c, initial_velocity=(0.4, 0.0, 0.0))
    X, _ = free.integrate(bar_subspace, p)
    t = np.arange(25) / FPS
    drop = -(g / c) * (t - (1 - np.exp(-c * t)) / c)
    np.testing.assert_allclose(X[:, 2] - X[0, 2], drop, atol=1e-4 * abs(drop[-1]))
    np.testing.assert_allclose(X[:, 0] - X[0, 0], 0.4 * (1 - np.exp(-c * t)) / c, atol=1e-4)
    assert np.abs(X[:, 12:]).max() < 1e-9  # uniform gravity and drag deform nothing


def test_a_spin_conserves_momentum_and_energy_and_stretches_the_body_outward(bar, bar_subspace):
    """Spinning about a tilted axis, without gravity, drag or damping, for 2 s: the discrete linear and angular
    momentum hold to Newton's tolerance (1e-5); energy stays within 0.1% of the kinetic energy (no drift); the
    centrifugal load stretches the bar along its length (the axis it spins across)."""
    p = params(bar, frames=48, gravity=(0, 0, 0), initial_velocity=(0.3, -0.1, 0.2), angular_velocity=(0.5, 1.0, 6.0))
    X, P = free.integrate(bar_subspace, p)
    np.testing.assert_allclose(P[:, :6], np.broadcast_to(P[0, :6], (len(P), 6)), rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(X[-1, :3] - X[0, :3], 2.0 * np.array([0.3, -0.1, 0.2]), atol=1e-9)
    e = free.energies(bar_subspace, p, X, P)
    total = e["kinetic"] + e["elastic"]
    assert e["elastic"].max() > 1e-4 * e["kinetic"][0]
    assert np.abs(total - total[0]).max() < 1e-3 * e["kinetic"][0]
    out = free.positions(bar_subspace, bar, p.pins, X)
    local = (out[1:] - X[1:, None, :3]) @ X[1:, 3:12].reshape(-1, 3, 3)  # back in the body's frame
    length = np.ptp(local[:, :, 0], axis=1)
    assert length.mean() > np.ptp(bar.vertices[:, 0]) * (1 + 1e-4)


def test_a_stiff_body_spins_as_a_rigid_one(bar, bar_subspace):
    """Torque-free spin about a principal axis of a nearly rigid body: the frame turns by the variational step's
    exact angle, asin(h w) a step (the chords' momentum is I sin(angle) / h), with no numerical damping of the spin;
    the lattice's own principal axis, which its tets' split tilts off the box's by a few tenths of a degree."""
    w, frames = 12.0, 24
    p = params(bar, frames=frames, gravity=(0, 0, 0), stiffness=1e9)
    inertia = free.Inertia(bar_subspace, p.density)
    axis = np.linalg.eigh(inertia.mass_matrix(np.eye(3), np.zeros(bar_subspace.dims))[3:6, 3:6])[1][:, 0]
    X, _ = free.integrate(bar_subspace, params(bar, frames=frames, gravity=(0, 0, 0), stiffness=1e9,
                                               angular_velocity=tuple(w * axis)))
    steps = len(X[1:]) * int(np.ceil(solid.STEP_RATE / FPS))
    angle = steps * np.arcsin(w / (FPS * np.ceil(solid.STEP_RATE / FPS)))
    off = Rotation.from_rotvec(angle * axis).inv() * Rotation.from_matrix(X[-1, 3:12].reshape(3, 3))
    assert off.magnitude() < 1e-4


def test_a_free_body_turned_about_gravity_moves_the_same_turned(bar):
    """Dropped tilted onto the ground, once as it is and once turned 0.7 rad about gravity (its velocity too)."""
    tilt = Rotation.from_rotvec([0.3, 0.2, 0.0]).as_matrix()
    v = bar.vertices @ tilt.T
    turn = Rotation.from_rotvec([0.0, 0.0, 0.7]).as_matrix()
    runs = []
    for R in (np.eye(3), turn):
        p = make_params(num_vertices=len(v), material="jelly", fps=FPS, frames=18, ground=float(v[:, 2].min()) - 0.02,
                        initial_velocity=tuple(R @ [0.5, 0.0, 0.0]))
        runs.append(Simulator().simulate(v @ R.T, bar.faces, p))
    motion = np.linalg.norm(runs[0] - v, axis=2).mean()
    assert motion > 0.05
    assert np.linalg.norm(runs[1] @ turn - runs[0], axis=2).mean() < 0.02 * motion
