"""Sheets on the continuum's own physics (model_runtime.continuum_sheet, model_runtime.shells): the law's rigid
invariance and stress, a clamped plate's sag and frequency against plate theory, pins, gravity, drag, contact,
the decimated sheet and its turning with the scene."""

import numpy as np
import pytest
import torch

from model_runtime import continuum_sheet, elasticity
from model_runtime.errors import Cancelled
from model_runtime.lab.data.shapes import grid_sheet
from model_runtime.mesh import Mesh, edge_strain, validate
from model_runtime.params import make_params
from model_runtime.shells import ShellElasticity
from model_runtime.simulator import Simulator


def grid(nx: int, ny: int, sx: float, sy: float, hole: float = 0.0) -> Mesh:
    """A flat nx x ny vertex grid of sx x sy m from the origin in the xy-plane (shapes.grid_sheet), with a round
    hole of ``hole`` m radius at its centre."""
    v, f = grid_sheet(nx - 1, ny - 1, sx, sy, hole)
    return validate(v + [0.5 * sx, 0.5 * sy, 0.0], f)


def test_the_sheet_law_is_zero_at_rigid_motion_and_matches_its_stress():
    sheet = grid(6, 5, 0.5, 0.4)
    x = sheet.vertices.astype(np.float64)
    x[:, 2] = 0.05 * np.sin(6 * x[:, 0])  # curved at rest
    law = ShellElasticity(x, sheet.faces, 2e6, 0.3, 1e-3)
    turn = np.linalg.qr(np.random.default_rng(0).standard_normal((3, 3)))[0]
    turn *= np.sign(np.linalg.det(turn))
    energy, grad = law.energy_and_gradient(x @ turn.T + [1.0, -2.0, 0.5])
    assert abs(energy) < 1e-18 and np.abs(grad).max() < 1e-9
    # uniaxial stretch by s along x of a flat sheet, lateral held: S_11 = (mu h 2 + lam h) E_11, energy A psi
    flat = ShellElasticity(sheet.vertices, sheet.faces, 2e6, 0.3, 1e-3)
    s = 1.1
    mu_h, lam_h = elasticity.plane_stress_moduli(2e6, 0.3, 1e-3)
    e11 = 0.5 * (s * s - 1)
    assert flat.energy(sheet.vertices * [s, 1, 1]) == pytest.approx(0.2 * (mu_h * e11**2 + 0.5 * lam_h * e11**2))
    # the analytic stress and stress derivative are the energy's derivatives; an inverted triangle's force is finite
    F = torch.randn(7, 3, 2, dtype=torch.float64, requires_grad=True)
    (P,) = torch.autograd.grad(elasticity.membrane_energy(F, mu_h, lam_h).sum(), F, create_graph=True)
    assert torch.allclose(P, elasticity.membrane_stress(F, mu_h, lam_h))
    dP = torch.stack([torch.autograd.grad(P[..., i, j].sum(), F, retain_graph=True)[0]
                      for i in range(3) for j in range(2)], 1).reshape(7, 3, 2, 3, 2)
    assert torch.allclose(dP, elasticity.membrane_stress_derivative(F.detach(), mu_h, lam_h))
    inverted = sheet.vertices * [-1.0, 1.0, 1.0]
    assert np.isfinite(flat.energy_and_gradient(inverted)[1]).all()


def test_dihedral_angle_gradients_are_the_angles_derivatives():
    x = torch.randn(10, 3, dtype=torch.float64, requires_grad=True)
    hinge = torch.tensor([[0, 1, 2, 3], [4, 5, 6, 7], [1, 8, 9, 2]])
    (grad,) = torch.autograd.grad(elasticity.dihedral_angles(x, hinge).sum(), x)
    mine = torch.zeros_like(x).index_add_(0, hinge.ravel(), elasticity.dihedral_angle_gradients(x.detach(), hinge)
                                          .reshape(-1, 3))
    assert torch.allclose(grad, mine)


def clamped_strip(**physics):
    """A 0.32 x 0.06 m stiff strip (E 1 GPa, 2 mm, density 1000) clamped over its first 2 cm (two rows of vertices
    held: one row alone is a hinge), so 0.3 m long, through the continuum path."""
    strip = grid(33, 7, 0.32, 0.06)
    pins = np.flatnonzero(strip.vertices[:, 0] < 0.02 + 1e-9)
    p = make_params(num_vertices=len(strip.vertices), stiffness=1e9, density=1000.0, thickness=2e-3, poisson=0.3,
                    damping=0.0, pins=pins, **physics)
    sheet = continuum_sheet.build_sheet(strip, pins)
    return strip, p, continuum_sheet.simulate(sheet, strip, p)


def test_a_clamped_strip_sags_and_rings_as_beam_theory_says():
    """A strip this narrow curls across as it bends (its free long edges let it), so it is Euler-Bernoulli's beam
    of E h^3 / 12, not a plate in cylindrical bending. Discrete-shell bending on these square-cut triangles is
    softer: 1.16 of the sag (docs/decisions.md), hence 20%."""
    stiffness = 1e9 * 2e-3**3 / 12  # N m per unit width
    load = 1000.0 * 2e-3 * 9.81  # N/m^2
    sag = load * 0.3**4 / (8 * stiffness)
    omega = 3.516 * np.sqrt(stiffness / (1000.0 * 2e-3 * 0.3**4))
    strip, _, out = clamped_strip(drag=2 * omega, frames=36, fps=24.0)
    tip = strip.vertices[:, 0] > 0.32 - 1e-9
    assert -out[-1][tip, 2].mean() == pytest.approx(sag, rel=0.2)
    strip, _, out = clamped_strip(frames=60, fps=120.0)
    z = out[:, tip, 2].mean(1)
    swing = z - 0.5 * (z.max() + z.min())
    crossings = np.flatnonzero(np.diff(np.sign(swing)) != 0)
    period = 2 * np.diff(crossings).mean() / 120.0
    assert 2 * np.pi / period == pytest.approx(omega, rel=0.2)


def test_pins_are_exact_gravity_sets_the_direction_and_drag_slows():
    cloth = grid(12, 12, 0.5, 0.5)
    pins = np.flatnonzero(cloth.vertices[:, 1] > 0.5 - 1e-9)
    sheet = continuum_sheet.build_sheet(cloth, pins)

    def run(gravity, drag=0.0):
        p = make_params(num_vertices=len(cloth.vertices), material="cloth", frames=12, pins=pins, gravity=gravity,
                        drag=drag)
        return continuum_sheet.simulate(sheet, cloth, p)

    down = run((0.0, 3.0, -9.0))
    held = cloth.vertices[pins].astype(np.float32)
    assert np.array_equal(down[:, pins], np.broadcast_to(held, down[:, pins].shape))
    assert (down[-1] - cloth.vertices).mean(0) @ [0.0, 3.0, -9.0] > 0
    assert np.abs(edge_strain(down, cloth.faces)).max() < 0.02
    up = run((0.0, 3.0, 9.0))  # the flat sheet's mirror image: the same motion mirrored
    assert np.abs(up * [1, 1, -1] - down).max() < 1e-5
    slowed = run((0.0, 3.0, -9.0), drag=3.0)
    assert np.abs(slowed - cloth.vertices).sum() < np.abs(down - cloth.vertices).sum()


def test_a_falling_sheet_lands_on_the_ground():
    cloth = grid(8, 8, 0.4, 0.4)
    p = make_params(num_vertices=len(cloth.vertices), material="cloth", frames=24, ground=-0.1, drag=0.5)
    out = Simulator().simulate(cloth.vertices, cloth.faces, p)
    assert out[-1][:, 2].min() > -0.1 - 2e-3 and out[-1][:, 2].max() < -0.1 + 0.02


@pytest.fixture(scope="module")
def cut_out():
    """An irregular 1 x 0.8 m sheet with a hole, finer than the coarse sheet (so it is decimated)."""
    return grid(41, 33, 1.0, 0.8, hole=0.15)


def test_a_fine_sheet_is_decimated_and_carried_exactly_at_rest(cut_out):
    pins = np.flatnonzero(cut_out.vertices[:, 1] > 0.8 - 1e-9)
    sheet = continuum_sheet.build_sheet(cut_out, pins)
    assert len(sheet.nodes) <= 1.2 * continuum_sheet.MAX_NODES < len(cut_out.vertices)
    assert np.abs(sheet.carry(sheet.nodes) - cut_out.vertices).max() < 1e-9
    assert sheet.area.sum() == pytest.approx(np.sum(0.5 * np.linalg.norm(np.cross(
        *(cut_out.vertices[cut_out.faces[:, k]] - cut_out.vertices[cut_out.faces[:, 0]] for k in (1, 2))), axis=1)))


def test_a_turned_sheet_moves_turned(cut_out):
    pins = np.flatnonzero(cut_out.vertices[:, 1] > 0.8 - 1e-9)
    physics = dict(material="cloth", frames=8, pins=pins, drag=0.5)
    sim = Simulator()
    base = sim.simulate(cut_out.vertices, cut_out.faces, make_params(num_vertices=len(cut_out.vertices), **physics))
    motion = np.abs(base - cut_out.vertices).mean()
    about_z = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    spin = np.linalg.qr(np.random.default_rng(3).standard_normal((3, 3)))[0]
    spin *= np.sign(np.linalg.det(spin))
    for turn, gravity in ((about_z, (0.0, 0.0, -9.81)), (spin, spin @ [0.0, 0.0, -9.81])):
        p = make_params(num_vertices=len(cut_out.vertices), gravity=tuple(gravity), **physics)
        out = sim.simulate(cut_out.vertices @ turn.T, cut_out.faces, p) @ turn
        assert np.abs(out - base).mean() < 0.02 * motion


def test_a_sheet_cancels_between_frames_and_reports_progress():
    cloth = grid(6, 6, 0.3, 0.3)
    seen, checks = [], []

    def should_cancel():
        checks.append(1)
        return len(checks) > 3

    p = make_params(num_vertices=len(cloth.vertices), material="cloth", frames=50, pins=np.arange(6))
    with pytest.raises(Cancelled):
        Simulator().simulate(cloth.vertices, cloth.faces, p, progress=lambda f, m: seen.append(m),
                             should_cancel=should_cancel)
    assert [m for m in seen if m.startswith("frame")] == ["frame 1 of 50", "frame 2 of 50", "frame 3 of 50"]
