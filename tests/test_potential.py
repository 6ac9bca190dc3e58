"""The continuum energy on cubature points carried by a displacement field, against closed-form mechanics."""

import numpy as np
import pytest
import torch

from model_runtime import cubature, elasticity
from model_runtime.lab.data.shapes import box_surface, grid_sheet
from model_runtime.mesh import enclosed_volume, validate
from model_runtime.potential import ElasticPotential

E, NU, H = 1.0e6, 0.3, 2e-3


def _potential(cub, field):
    phi, grad, curv = cubature.field_derivatives(field, cub)
    n = len(cub.points)
    frame = torch.eye(3, dtype=torch.float64).expand(n, 3, 3) if cub.solid else torch.as_tensor(cub.tangents)
    return ElasticPotential(grad, frame, torch.as_tensor(cub.weights), E, NU, H, curv)


def test_solid_points_fill_the_enclosed_volume_from_inside():
    v, f = box_surface((6, 2, 2), (0.3, 0.06, 0.06))
    cub = cubature.solid_points(validate(v, f))
    assert cub.weights.sum() == pytest.approx(enclosed_volume(validate(v, f)))
    assert (np.abs(cub.points) < [0.15, 0.03, 0.03]).all()
    assert np.ptp(cub.points[:, 1]) / cub.spacing >= cubature.MIN_CELLS_ACROSS - 1  # cells across the thin side


def test_uniform_stretch_of_a_solid_stores_the_laws_energy_times_volume():
    v, f = box_surface((4, 4, 4), (0.2, 0.2, 0.2))
    mesh = validate(v, f)
    cub = cubature.solid_points(mesh)

    def field(points):  # coefficient 0: stretch along x; 1: rigid translation
        out = torch.zeros(len(points), 3, 2, dtype=torch.float64)
        out[:, 0, 0] = torch.as_tensor(points[:, 0])
        out[:, 1, 1] = 1.0
        return out

    potential = _potential(cub, field)
    strain = 0.2
    F = torch.diag(torch.tensor([1 + strain, 1.0, 1.0], dtype=torch.float64))
    expected = enclosed_volume(mesh) * float(elasticity.neo_hookean_energy(F, *elasticity.lame(E, NU)))
    a = torch.tensor([strain, 0.7], dtype=torch.float64)
    assert float(potential.energy(a)) == pytest.approx(expected, rel=1e-9)
    assert float(potential.energy(torch.tensor([0.0, 0.7], dtype=torch.float64))) == pytest.approx(0.0, abs=1e-12)
    # the force is the energy's slope, and the Rayleigh term is damping x stiffness x rate
    force = potential.force(a, torch.zeros(2, dtype=torch.float64), 0.0)
    h = 1e-6
    slope = (potential.energy(a + torch.tensor([h, 0.0])) - potential.energy(a - torch.tensor([h, 0.0]))) / (2 * h)
    assert float(force[0]) == pytest.approx(float(slope), rel=1e-6)
    rate = torch.tensor([0.5, 0.0], dtype=torch.float64)
    damped = potential.force(a, rate, 0.01)
    assert torch.allclose(damped - force, 0.01 * potential.stiffness(a) @ rate)


def test_a_strip_bent_into_an_arc_stores_the_plates_bending_energy():
    """Rolling a flat strip onto a cylinder of curvature kappa (isometric: no membrane strain) stores D / 2 kappa^2
    per unit area; the same sag without the inward pull stretches the strip, which its membrane resists."""
    length, width, kappa = 0.3, 0.1, 2.0
    v, f = grid_sheet(30, 10, length, width)
    cub = cubature.sheet_points(validate(v, f), np.random.default_rng(0))

    def field(points):  # coefficient 0: the roll; 1: its sag alone
        x = torch.as_tensor(points[:, 0])
        out = torch.zeros(len(points), 3, 2, dtype=torch.float64)
        out[:, 0, 0] = torch.sin(kappa * x) / kappa - x
        out[:, 2, :] = ((1 - torch.cos(kappa * x)) / kappa)[:, None]
        return out

    potential = _potential(cub, field)
    bending = 0.5 * elasticity.bending_modulus(E, NU, H) * kappa**2 * length * width
    assert float(potential.energy(torch.tensor([1.0, 0.0], dtype=torch.float64))) == pytest.approx(bending, rel=0.02)
    assert float(potential.energy(torch.tensor([0.0, 1.0], dtype=torch.float64))) > 100 * bending
