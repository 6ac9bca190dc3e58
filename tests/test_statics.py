"""The linear statics a pinned solid's stiffness is calibrated to, against closed-form mechanics."""

import numpy as np
import pytest

from model_runtime import statics
from model_runtime.data.shapes import box_surface, icosphere
from model_runtime.errors import MeshError
from model_runtime.mesh import enclosed_volume, validate

RHO, G, E = 1000.0, 9.81, 1e7


def tip_sag(length, side, poisson):
    """Mean tip sag (m) of a square box cantilever clamped at x = 0 under its own weight along -z."""
    v, f = box_surface((20, 2, 2), (length, side, side))
    v[:, 0] += length / 2
    pins = np.nonzero(v[:, 0] <= 1e-9)[0]
    tip = v[:, 0] >= length - 1e-9
    mass = RHO * length * side**2
    sag = statics.self_weight_sag(validate(v, f), pins, poisson, v[tip], mass)
    return float(-(sag[:, :, 2] @ [0, 0, -G]).mean() / E)


@pytest.mark.parametrize("length", [1.0, 0.5])
@pytest.mark.parametrize("cells", [200, 1500])
def test_cantilever_sag_is_euler_bernoulli_plus_timoshenko_shear_at_any_resolution(length, cells, monkeypatch):
    side = 0.1
    moment, area, shear_modulus = side**4 / 12, side**2, E / 2  # Poisson 0: no clamp constraint on the section
    q = RHO * G * area
    bending = q * length**4 / (8 * E * moment)
    shear = q * length**2 / (2 * (5 / 6) * shear_modulus * area)
    monkeypatch.setattr(statics, "TARGET_CELLS", cells)
    sag = tip_sag(length, side, 0.0)
    # Bubble bricks bend exactly: ~3 cells across (200 cells) does as well as ~6 (1500). Plain trilinear bricks
    # (no bubbles) came out 5% too stiff at 200 cells.
    assert sag == pytest.approx(bending + shear, rel=0.02)


def test_brick_has_exactly_the_six_rigid_motions_as_zero_energy_modes():
    k = statics.brick_stiffness(np.array([0.3, 0.1, 0.2]), 0.3)
    assert np.allclose(k, k.T)
    eig = np.linalg.eigvalsh(k)
    assert np.all(eig > -1e-12 * eig.max())
    assert (eig < 1e-9 * eig.max()).sum() == 6


def test_column_under_its_own_weight_shortens_by_rho_g_h2_over_2e():
    h = 0.6
    v, f = box_surface((2, 2, 6), (0.2, 0.2, h))
    v[:, 2] += h / 2
    pins = np.nonzero(v[:, 2] <= 1e-9)[0]
    top = v[:, 2] >= h - 1e-9
    sag = statics.self_weight_sag(validate(v, f), pins, 0.0, v[top], RHO * 0.2 * 0.2 * h)
    drop = -(sag[:, :, 2] @ [0, 0, -G]).mean() / E
    assert drop == pytest.approx(RHO * G * h**2 / (2 * E), rel=0.01)


def test_a_sphere_is_filled_with_its_own_volume():
    v, f = icosphere(3)
    mesh = validate(v, f)
    lo, hi = v.min(0), v.max(0)
    n = np.array([16, 16, 16])
    spacing = (hi - lo) / n
    inside = statics.inside_cells(mesh, lo, spacing, n)
    assert inside.sum() * np.prod(spacing) == pytest.approx(enclosed_volume(mesh), rel=0.05)
    assert inside[8, 8, 8] and not inside[0, 0, 0]


def test_an_unpinned_body_has_no_static_sag():
    v, f = box_surface((2, 2, 2), (0.2, 0.2, 0.2))
    with pytest.raises(MeshError, match="without pins"):
        statics.self_weight_sag(validate(v, f), np.zeros(0, np.int64), 0.3, v, 1.0)
