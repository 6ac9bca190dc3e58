"""The projected right-hand side of the latent dynamics against Kane's equations assembled point by point.

``Dynamics.forward`` never forms the velocity Jacobian A or a per-point force (see its docstring). Here the same
equations are written the plain way, (A^T m A + added inertia) u' = A^T f with every force computed at the query
points, and both must give the same accelerations in every regime: pinned and free, spinning, deformed and moving,
with drag, Rayleigh damping and ground contact.
"""

import numpy as np
import pytest
import torch

from model_runtime.body import build_body
from model_runtime.dynamics import DTYPE, Dynamics
from model_runtime.mesh import read_obj, validate
from model_runtime.params import make_params
from model_runtime.simulator import Simulator
from model_runtime.weights import DEFAULT_WEIGHTS

MESHES = DEFAULT_WEIGHTS.parent / "meshes"


def pointwise_accelerations(dyn: Dynamics, y: torch.Tensor) -> torch.Tensor:
    """u' from the point-wise kinematics and forces (the textbook form of the module docstring)."""
    b = dyn.body
    x, xd, A, bias = dyn.kinematics(y)
    m = b.mass[:, None]
    f = m * b.gravity - b.drag * m * xd - m * bias
    d = x[b.spring_j] - x[b.spring_i]
    length = d.norm(dim=1, keepdim=True)
    rate = (d / length * (xd[b.spring_j] - xd[b.spring_i])).sum(1, keepdim=True)
    extension = length - b.spring_rest[:, None]
    k = torch.where(extension < 0, b.compression, 1.0) * b.spring_k[:, None]
    fs = k * (extension + b.damping * rate) * d / length
    f = f.index_add(0, b.spring_i, fs).index_add(0, b.spring_j, -fs)
    if b.colliders:
        f = f + torch.from_numpy(dyn.contact_force(x.numpy(), xd.numpy()))
    M = A.T @ (b.mass.repeat_interleave(3)[:, None] * A)
    # Mass scaling: modal mass, and stretch inertia 1/2 sum mu L'^2 with L' = J_L u, J_L = unit . (A_j - A_i), and
    # L'' = J_L u' + unit . (b_j - b_i) + (|x'_j - x'_i|^2 - L'^2) / L. Drag acts on both as on the points' mass.
    unit = d / length
    A3 = A.view(len(x), 3, -1)
    jac = (unit[:, :, None] * (A3[b.spring_j] - A3[b.spring_i])).sum(1)
    dxd = xd[b.spring_j] - xd[b.spring_i]
    length_bias = ((unit * (bias[b.spring_j] - bias[b.spring_i])).sum(1)
                   + ((dxd**2).sum(1) - rate[:, 0] ** 2) / length[:, 0])
    mu = torch.zeros_like(length[:, 0]) if b.stretch_inertia is None else b.stretch_inertia * b.spring_k
    added = jac.T @ (mu[:, None] * jac)
    r = b.n_latent
    added[-r:, -r:] += torch.diag(b.added_mass)
    u = y[dyn.state.pos_size:]  # the generalized velocities (v, w, q') that A multiplies
    Q = A.T @ f.reshape(-1) - jac.T @ (mu * length_bias) - b.drag * added @ u
    return torch.linalg.solve(M + added, Q)


@pytest.fixture(scope="module")
def sim():
    return Simulator()


def body(sim, vertices, faces, **physics):
    mesh = validate(vertices, faces)
    params = make_params(num_vertices=len(vertices), frames=1, fps=24, **physics)
    return build_body(sim.encode(mesh, params.pins, params.gravity), params, sim.coeff, sim.locking).body


def random_state(dyn: Dynamics, seed: int) -> torch.Tensor:
    """A deformed, moving, rotated state: latent coordinates and velocities at the scale of the body's motion."""
    g = torch.Generator().manual_seed(seed)
    st = dyn.state
    y = torch.zeros(2 * st.pos_size - (1 if st.free else 0), dtype=DTYPE)
    scale = 0.3 * float(dyn.body.mass.sum()) ** 0.5 * dyn.body.size  # modal coordinates are sqrt(kg) m
    r = st.r
    if st.free:
        y[:3] = torch.randn(3, generator=g, dtype=DTYPE)
        quat = torch.randn(4, generator=g, dtype=DTYPE)
        y[3:7] = quat / quat.norm()
        y[7:7 + r] = scale * torch.randn(r, generator=g, dtype=DTYPE)
        y[7 + r:] = torch.randn(6 + r, generator=g, dtype=DTYPE) * torch.cat([torch.ones(6, dtype=DTYPE),
                                                                              scale * torch.ones(r, dtype=DTYPE)])
    else:
        y[:r] = scale * torch.randn(r, generator=g, dtype=DTYPE)
        y[r:] = 3 * scale * torch.randn(r, generator=g, dtype=DTYPE)
    return y


CASES = {
    "pinned cloth, drag and damping": ("grid", dict(material="cloth", drag=0.7, damping=0.01)),
    "pinned cloth on the ground": ("grid", dict(material="cloth", ground=-0.2)),
    "free cloth, spinning, on the ground": ("sheet", dict(material="cloth", ground=0.0, drag=0.3)),
    "free cube, tilted gravity": ("cube", dict(material="rubber", gravity=(1.0, -2.0, -9.0), drag=0.3)),
    "free cube on the ground": ("cube", dict(material="jelly", ground=0.0, damping=0.02)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_projected_right_hand_side_matches_the_pointwise_equations(sim, case):
    shape, physics = CASES[case]
    if shape in ("grid", "sheet"):
        n = 9
        u = np.linspace(0.0, 0.8, n)
        v = np.stack(np.meshgrid(u, u, indexing="ij"), -1).reshape(-1, 2)
        v = np.c_[v, np.zeros(len(v))]
        idx = np.arange(n * n).reshape(n, n)
        f = np.concatenate([np.stack([idx[:-1, :-1], idx[1:, :-1], idx[1:, 1:]], -1).reshape(-1, 3),
                            np.stack([idx[:-1, :-1], idx[1:, 1:], idx[:-1, 1:]], -1).reshape(-1, 3)])
        if shape == "grid":
            physics = dict(physics, pins=np.nonzero(v[:, 1] == 0.0)[0])
    else:
        mesh = read_obj(str(MESHES / "cube_subdiv.obj"))
        v, f = mesh.vertices, mesh.faces
    dyn = Dynamics(body(sim, v, f, **physics))
    for seed in range(3):
        y = random_state(dyn, seed)
        if physics.get("ground") is not None:  # make sure some points are below the ground
            assert (dyn.kinematics(y)[0][:, 2] < physics["ground"]).any() or not dyn.body.free
        expected = pointwise_accelerations(dyn, y)
        got = dyn(0.0, y)[-len(expected):]
        scale = expected.abs().max()
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-4 * float(scale))
