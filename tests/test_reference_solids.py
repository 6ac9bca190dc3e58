"""The reference's solids (issue 23): any closed-ish mesh embeds by winding number, and the implicit stable
Neo-Hookean solver recovers from inversion."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from model_runtime import elasticity
from model_runtime.lab.data.implicit_fem import simulate_solid
from model_runtime.lab.data.reference import REFERENCE, simulate_reference
from model_runtime.lab.data.shapes import box_surface
from model_runtime.lattice import build_cage
from model_runtime.mesh import Mesh
from model_runtime.params import make_params
from model_runtime.winding import enclosed_by_winding, winding_numbers


def _tet_volumes(x, tets):
    a, b, c, d = (x[..., tets[:, k], :] for k in range(4))
    return np.einsum("...i,...i->...", b - a, np.cross(c - a, d - a)) / 6.0


def test_the_projected_tangent_is_the_nearest_psd_one_also_when_inverted():
    torch.manual_seed(0)
    F = torch.randn(500, 3, 3, dtype=torch.float64) * 0.6 + torch.eye(3, dtype=torch.float64)
    F[0] = torch.eye(3, dtype=torch.float64)
    assert (torch.linalg.det(F) < 0).sum() > 50
    mu, lam = elasticity.lame(5e4, 0.45)
    dense = elasticity.project_psd(elasticity.neo_hookean_stress_derivative(F, mu, lam).reshape(-1, 9, 9))
    Q, values = elasticity.neo_hookean_stress_derivative_eigensystem(F, mu, lam)
    analytic = (Q * values[:, None, :]) @ Q.transpose(1, 2)
    assert torch.allclose(analytic, dense, rtol=0, atol=1e-9 * float(dense.abs().max()))


def test_winding_numbers_are_one_inside_zero_outside_and_tell_sheets_from_solids():
    v, f = box_surface((3, 3, 3), (1.0, 1.0, 1.0))
    w = winding_numbers(v, f, np.array([[0.0, 0.0, 0.0], [0.4, -0.3, 0.2], [2.0, 0.0, 0.0], [0.0, 0.7, 0.0]]))
    assert np.allclose(w, [1, 1, 0, 0], atol=0.02)
    assert enclosed_by_winding(Mesh(v, f)) == pytest.approx(1.0, rel=0.15)
    top = np.flatnonzero(np.all(v[f][:, :, 2] > 0.5 - 1e-9, axis=1))
    assert enclosed_by_winding(Mesh(v, np.delete(f, top[:2], 0))) > 0.8  # a small hole: still a solid
    sheet = v[:, :2][np.abs(v[:, 2] - 0.5) < 1e-9]
    grid = np.c_[sheet, np.zeros(len(sheet))]
    from scipy.spatial import Delaunay

    assert enclosed_by_winding(Mesh(grid, Delaunay(sheet).simplices)) == 0.0  # a flat sheet is cloth


def test_a_self_intersecting_mesh_of_two_overlapping_boxes_embeds_and_simulates():
    a, fa = box_surface((2, 2, 2), (0.2, 0.2, 0.2))
    b, fb = box_surface((2, 2, 2), (0.2, 0.2, 0.2))
    v = np.vstack([a, b + [0.1, 0.05, 0.0]])  # half overlapping: the surfaces cross each other
    f = np.vstack([fa, fb + len(a)])
    nodes, tets, fill, volume, at, weights = build_cage(v, v, f, 0.02)
    union = 2 * 0.008 - 0.1 * 0.15 * 0.2
    assert volume.sum() == pytest.approx(union, rel=0.05)
    assert (weights >= -1e-12).all() and np.allclose(weights.sum(1), 1.0)
    pins = np.flatnonzero(v[:, 0] <= v[:, 0].min() + 1e-9)
    params = make_params(frames=6, fps=24, material="jelly", pins=pins, num_vertices=len(v))
    pos = simulate_reference(v, f, params, settings=replace(REFERENCE, cell=0.04))
    assert np.isfinite(pos).all() and np.abs(pos[-1] - v).max() > 1e-3
    assert np.abs(pos[:, pins] - v[pins].astype(np.float32)).max() == 0.0


def test_a_soft_block_squashed_past_inversion_recovers_its_shape():
    # Its free nodes start pushed through its pinned base to a third of its height below it: every element inside
    # out. Stable Neo-Hookean pushes them back through and drag settles the block to its rest shape.
    v, f = box_surface((2, 2, 2), (0.2, 0.2, 0.2))
    nodes, tets, fill, volume, _, _ = build_cage(v, v, f, 0.04)
    bottom = nodes[:, 2].min()
    base = np.flatnonzero(nodes[:, 2] <= bottom + 1e-9)
    squashed = nodes * [1.0, 1.0, 0.0] + np.c_[0 * nodes[:, :2], bottom - (nodes[:, 2] - bottom) / 3.0]
    rest = _tet_volumes(nodes, tets)
    assert (_tet_volumes(squashed, tets) < 0).mean() > 0.8
    params = make_params(frames=36, fps=24, material="jelly", gravity=(0, 0, 0), drag=10.0)
    pos = simulate_solid(nodes, tets, params, volume, base, fill, start=squashed).astype(np.float64)
    assert (_tet_volumes(pos[-1], tets) / rest > 0.9).all()
    assert np.abs(pos[-1] - nodes).max() < 0.02 * 0.2
