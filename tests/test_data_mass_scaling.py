"""Mass scaling at the lattice's boundary (mujoco_engine.node_masses): no node is much stiffer per kilogram than the
body's interior, so the explicit step stays near a full cube's wave limit, while the total mass stays exact."""

import numpy as np

from model_runtime.data import mujoco_engine as M
from model_runtime.data.newton_engine import lumped_tet_masses
from model_runtime.data.reference import MIN_FILL, build_cage, tetrahedralize
from model_runtime.data.shapes import bumped_sphere
from model_runtime.mesh import validate
from model_runtime.params import make_params


def _blob():
    v, f = bumped_sphere(2, np.random.default_rng(0))
    v = 0.1 * v @ np.linalg.qr(np.random.default_rng(1).normal(size=(3, 3)))[0].T  # off the lattice's axes
    nodes, tets, fill, volume, _, _ = build_cage(v, *tetrahedralize(validate(v, f)), 0.02)
    return nodes, tets, np.maximum(fill, MIN_FILL), volume


def test_boundary_nodes_get_mass_for_their_stiffness_and_the_total_stays_exact():
    nodes, tets, scale, volume = _blob()
    density = 1000.0
    plain = np.maximum(density * volume, M.MASS_FLOOR * density * volume.mean())
    mass = M.node_masses(volume, density, nodes, tets, scale)
    share = lumped_tet_masses(nodes, tets, density * scale)  # the mass each node's stiffness would carry
    assert (share / plain).max() > 5  # the problem: barely filled boundary cubes (measured 10x on dataset blobs)
    assert (share / mass).max() <= 1.02 / M.MASS_SCALING
    assert abs(mass.sum() / (density * volume.sum()) - 1) < 1e-12
    centre = (mass @ nodes) / mass.sum()
    exact = (volume @ nodes) / volume.sum()
    assert np.linalg.norm(centre - exact) < 0.01 * 0.2  # within 1% of the blob's size


def test_the_explicit_step_is_near_a_full_cubes_wave_limit():
    nodes, tets, scale, volume = _blob()
    params = make_params(stiffness=1e5, density=1000.0, poisson=0.3, damping=0.0)
    full = M.stable_step(nodes, tets, params, np.full(len(nodes), 1e30), scale)  # no mass penalty at all
    step = M.stable_step(nodes, tets, params, M.node_masses(volume, 1000.0, nodes, tets, scale), scale)
    before = M.stable_step(nodes, tets, params, np.maximum(1000.0 * volume, 20.0 * volume.mean()), scale)
    assert step >= 0.99 * np.sqrt(M.MASS_SCALING) * full
    assert step > 1.8 * before
