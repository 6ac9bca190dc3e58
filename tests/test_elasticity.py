"""The material laws against closed-form mechanics: small-strain limit, rotation, inversion, derivatives."""

import math

import pytest
import torch
from scipy.optimize import brentq

from model_runtime import elasticity as el

E, NU = 1.0e6, 0.3
MU, LAM = el.lame(E, NU)


def _uniaxial(strain: float) -> tuple[float, float]:
    """Axial stress and lateral strain of a cube stretched by ``strain`` with free sides."""
    def lateral_stress(t):
        F = torch.diag(torch.tensor([1 + strain, 1 + t, 1 + t], dtype=torch.float64))
        return float(el.neo_hookean_stress(F, MU, LAM)[1, 1])

    t = brentq(lateral_stress, -0.5, 0.5, xtol=1e-14)
    F = torch.diag(torch.tensor([1 + strain, 1 + t, 1 + t], dtype=torch.float64))
    return float(el.neo_hookean_stress(F, MU, LAM)[0, 0]), t


def test_uniaxial_stretch_gives_youngs_modulus_and_poisson_contraction():
    strain = 1e-5
    stress, lateral = _uniaxial(strain)
    assert stress / strain == pytest.approx(E, rel=1e-3)
    assert -lateral / strain == pytest.approx(NU, rel=1e-3)


def test_rotation_stores_no_energy_and_no_stress():
    torch.manual_seed(0)
    R = torch.linalg.qr(torch.randn(5, 3, 3, dtype=torch.float64)).Q
    R = R * torch.linalg.det(R)[:, None, None].sign()  # proper rotations
    assert el.neo_hookean_energy(R, MU, LAM).abs().max() < 1e-9 * MU
    assert el.neo_hookean_stress(R, MU, LAM).abs().max() < 1e-9 * MU


def test_inverted_element_has_finite_restoring_stress():
    F = torch.diag(torch.tensor([1.0, 1.0, -0.5], dtype=torch.float64))  # mirrored through its own plane
    P = el.neo_hookean_stress(F, MU, LAM)
    assert torch.isfinite(P).all()
    assert el.neo_hookean_energy(F, MU, LAM) > 0
    # Energy falls as the element is pushed back towards its rest orientation (F_33 grows).
    assert P[2, 2] < 0
    flat = torch.diag(torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))  # crushed to a plane
    assert torch.isfinite(el.neo_hookean_stress(flat, MU, LAM)).all() and el.neo_hookean_stress(flat, MU, LAM)[2, 2] < 0


def test_stress_and_its_derivative_match_finite_differences():
    torch.manual_seed(1)
    F = (torch.eye(3, dtype=torch.float64) + 0.3 * torch.randn(4, 3, 3, dtype=torch.float64)).requires_grad_()
    energy = el.neo_hookean_energy(F, MU, LAM).sum()
    (grad,) = torch.autograd.grad(energy, F)
    assert torch.allclose(el.neo_hookean_stress(F, MU, LAM), grad, rtol=1e-10, atol=1e-6)
    F = F.detach()
    dP = el.neo_hookean_stress_derivative(F, MU, LAM)
    h = 1e-6
    for row, col in ((0, 0), (1, 2), (2, 1)):
        dF = torch.zeros(3, 3, dtype=torch.float64)
        dF[row, col] = h
        numeric = (el.neo_hookean_stress(F + dF, MU, LAM) - el.neo_hookean_stress(F - dF, MU, LAM)) / (2 * h)
        assert torch.allclose(dP[..., row, col], numeric, rtol=1e-6, atol=1e-2)


def test_projected_hessian_is_positive_semidefinite():
    F = torch.diag(torch.tensor([1.0, 1.0, -0.5], dtype=torch.float64))
    H = el.neo_hookean_stress_derivative(F, MU, LAM).reshape(9, 9)
    assert torch.linalg.eigvalsh(H).min() < 0  # inversion makes the raw Hessian indefinite
    assert torch.linalg.eigvalsh(el.project_psd(H)).min() > -1e-6 * MU


def test_membrane_small_strain_is_plane_stress():
    mu_h, lam_h = el.plane_stress_moduli(E, NU, 1e-3)
    strain = 1e-5

    def energy(t):
        F = torch.tensor([[1 + strain, 0.0], [0.0, 1 + t], [0.0, 0.0]], dtype=torch.float64)
        return el.membrane_energy(F, mu_h, lam_h)

    t = brentq(lambda t: float(energy(t + 1e-9) - energy(t - 1e-9)), -0.5 * strain, 0.0, xtol=1e-16)
    assert -t / strain == pytest.approx(NU, rel=1e-3)
    # uniaxial stress: energy per area E h e^2 / 2
    assert float(energy(t)) == pytest.approx(0.5 * E * 1e-3 * strain**2, rel=1e-3)
    # rigid motion of the sheet: none
    R = torch.linalg.qr(torch.randn(3, 3, dtype=torch.float64)).Q
    assert float(el.membrane_energy(R[:, :2], mu_h, lam_h)) == pytest.approx(0.0, abs=1e-9)


def _grid(n: int, size: float):
    i, j = torch.meshgrid(torch.arange(n + 1), torch.arange(n + 1), indexing="ij")
    x = torch.stack([i.reshape(-1) * size / n, j.reshape(-1) * size / n, torch.zeros((n + 1) ** 2)], 1).double()
    v = (i * (n + 1) + j)[:-1, :-1].reshape(-1)
    faces = torch.cat([torch.stack([v, v + n + 1, v + 1], 1), torch.stack([v + 1, v + n + 1, v + n + 2], 1)])
    return x, faces


def test_discrete_shell_bending_energy_of_a_cylinder():
    """A square plate rolled to curvature kappa about either in-plane axis stores ~ D/2 kappa^2 per unit area."""
    size, kappa, thickness = 0.2, 5.0, 1e-3
    x, faces = _grid(30, size)
    hinge = el.hinges(faces)
    weights = el.hinge_weights(x, hinge)
    D = el.bending_modulus(E, NU, thickness)
    expected = 0.5 * D * kappa**2 * size**2
    for axis in (0, 1):
        s = x[:, axis]
        bent = x.clone()
        bent[:, axis] = torch.sin(kappa * s) / kappa
        bent[:, 2] = (1 - torch.cos(kappa * s)) / kappa
        theta = el.dihedral_angles(bent, hinge)
        energy = 0.5 * D * (weights * theta**2).sum()
        assert float(energy) == pytest.approx(expected, rel=0.05)  # boundary hinges: -3%
    assert el.dihedral_angles(x, hinge).abs().max() < 1e-12
    assert len(hinge) == 3 * 30 * 30 - 2 * 30  # interior edges of an n x n grid of split squares


def test_dihedral_angle_sign_and_value():
    x = torch.tensor([[0, 0, 0], [1, 0, 0], [0.5, 1, 0], [0.5, -1, 0]], dtype=torch.float64)
    hinge = torch.tensor([[0, 1, 2, 3]])
    assert float(el.dihedral_angles(x, hinge)) == pytest.approx(0.0, abs=1e-12)
    folded = x.clone()
    folded[3] = torch.tensor([0.5, -math.cos(0.3), math.sin(0.3)], dtype=torch.float64)
    up = float(el.dihedral_angles(folded, hinge))
    folded[3, 2] *= -1
    assert abs(up) == pytest.approx(0.3, rel=1e-9) and float(el.dihedral_angles(folded, hinge)) == pytest.approx(-up)


def test_second_derivatives_by_torch_func_are_finite_at_rest_and_match_the_closed_form():
    F = torch.eye(3, dtype=torch.float64)
    hess = torch.func.hessian(lambda G: el.neo_hookean_energy(G, MU, LAM))(F)
    assert torch.isfinite(hess).all()
    assert torch.allclose(hess, el.neo_hookean_stress_derivative(F, MU, LAM), rtol=1e-10, atol=1e-6)


def test_rotation_svd_factors_stretched_singular_and_inverted_matrices():
    torch.manual_seed(2)
    F = torch.eye(3, dtype=torch.float64) + 0.6 * torch.randn(200, 3, 3, dtype=torch.float64)
    R = torch.linalg.qr(torch.randn(6, 3, 3, dtype=torch.float64)).Q
    special = torch.stack([torch.eye(3, dtype=torch.float64), torch.zeros(3, 3, dtype=torch.float64),
                           torch.diag(torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64)),  # crushed flat
                           torch.diag(torch.tensor([2.0, 2.0, -1.0], dtype=torch.float64)),  # inverted, repeated
                           torch.diag(torch.tensor([100.0, 1.0, 0.01], dtype=torch.float64)),  # condition 1e4
                           torch.outer(torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))])
    F = torch.cat([F, R @ special])
    U, s, V = el.rotation_svd(F)
    eye = torch.eye(3, dtype=torch.float64)
    assert torch.allclose((U * s[:, None, :]) @ V.transpose(1, 2), F, atol=1e-12)
    for Q in (U, V):
        assert torch.allclose(Q.transpose(1, 2) @ Q, eye.expand_as(Q), atol=1e-12)
        assert torch.allclose(torch.linalg.det(Q), torch.ones(len(F), dtype=torch.float64), atol=1e-12)
    assert (s[:, 0] >= s[:, 1] - 1e-12).all() and (s[:, 1] >= s[:, 2].abs() - 1e-12).all()
    assert torch.allclose(s.abs().sort(-1, descending=True).values, torch.linalg.svdvals(F), atol=1e-12)
    det = torch.linalg.det(F)
    assert ((s.prod(-1) < 0) == (det < 0))[det.abs() > 1e-9].all()  # the sign of an inversion is in s_2
