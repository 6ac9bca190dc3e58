"""Latent Lagrangian dynamics: the decoder's latent is the generalized coordinate of an elastic body.

Kinematics of the query points (physical units, float64)::

    free body:    x = c + t + R (Y0 + Phi a(z))        pinned body:  x = Y0 + c + Phi a(z)
    z = U q,      a(z) = g(z, e) - g(0, e)

with ``Phi`` the decoder's basis fields at the query points (scaled to metres, with pins and the body's rigid
modes projected out), ``U`` the reduced latent basis (active subspace below a frequency cut), ``t`` the centre of
mass, ``R`` a rotation (unit quaternion) and body angular velocity ``w``. With generalized velocities
u = (v, w, q'), the point velocities are x' = A u and accelerations x'' = A u' + b. The equations of motion are
the Euler-Lagrange equations written through virtual work (Kane's form, identical for these holonomic
coordinates; b carries the Coriolis and centrifugal terms)::

    (A^T m A) u' = A^T (f_gravity + f_drag + f_elastic + f_ground - m b)

so kinetic energy uses the mass matrix J^T M J and every force enters as a generalized force through J^T.
Elastic energy is that of a spring network between query points, calibrated to Young's modulus.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .errors import Cancelled
from .model import CoefficientMLP

DTYPE = torch.float64
CANCEL_CHECK_EVERY = 10  # right-hand side evaluations (a few ms each) between cancel checks


class LatentMap:
    """a(q) = g(U q, e) - g(0, e): the decoder's coefficient MLP for one shape, as a function of the reduced
    coordinates q, with closed-form first and second derivatives (float64).

    The shape code and the reduced basis U are folded into the first layer once per body, so each of the ODE's
    thousands of evaluations runs three small layers and nothing else.
    """

    def __init__(self, mlp: CoefficientMLP, code: torch.Tensor, U: torch.Tensor):
        def constant(t):  # weights are constants of the ODE: no autograd
            return t.detach().to(DTYPE)

        w1 = constant(mlp.l1.weight)
        k = U.shape[0]
        self.w1 = w1[:, :k] @ U  # (H, r)
        self.b1 = constant(mlp.l1.bias) + w1[:, k:] @ code.to(DTYPE)
        self.w2, self.b2 = constant(mlp.l2.weight), constant(mlp.l2.bias)
        self.w3, self.b3 = constant(mlp.l3.weight), constant(mlp.l3.bias)
        self.g0 = self._g(torch.zeros(U.shape[1], dtype=DTYPE))

    @property
    def n_latent(self) -> int:
        return self.w1.shape[1]

    def _g(self, q):
        h = torch.nn.functional.silu(q @ self.w1.T + self.b1)
        return torch.nn.functional.silu(h @ self.w2.T + self.b2) @ self.w3.T + self.b3

    def __call__(self, q: torch.Tensor) -> torch.Tensor:
        """a(q) for q of shape (..., r): (..., P)."""
        return self._g(q) - self.g0

    def with_derivatives(self, q: torch.Tensor, qd: torch.Tensor):
        """a(q) (P,), da/dq (P, r), and d2a/dq2[qd, qd] (P,) for q, qd of shape (r,)."""

        def silu_derivs(h):
            s = torch.sigmoid(h)
            return h * s, s * (1 + h * (1 - s)), s * (1 - s) * (2 + h * (1 - 2 * s))

        a1, d1, dd1 = silu_derivs(self.w1 @ q + self.b1)
        j1 = d1[:, None] * self.w1  # (H, r)
        v1 = self.w1 @ qd
        c1 = dd1 * v1 * v1  # second derivative along qd; the first layer is affine in q
        a2, d2, dd2 = silu_derivs(self.w2 @ a1 + self.b2)
        w2j1 = self.w2 @ j1
        j2 = d2[:, None] * w2j1
        v2 = w2j1 @ qd
        c2 = dd2 * v2 * v2 + d2 * (self.w2 @ c1)
        return self.w3 @ a2 + self.b3 - self.g0, self.w3 @ j2, self.w3 @ c2


@dataclass
class Body:
    """Everything the ODE needs about one mesh under one set of physical parameters."""

    rest: torch.Tensor  # (N, 3) query rest positions relative to the centre of mass
    center: torch.Tensor  # (3,) centre of mass at rest
    phi: torch.Tensor  # (3N, P) basis fields in metres per unit coefficient
    latent: LatentMap  # a(q), with z = U q in the reduced latent basis U (modal coordinates at rest)
    added_mass: torch.Tensor  # (r,) modal mass added to modes above the frame rate's reach
    mass: torch.Tensor  # (N,) kg
    spring_i: torch.Tensor
    spring_j: torch.Tensor
    spring_rest: torch.Tensor
    spring_k: torch.Tensor  # N/m
    damping: float  # stiffness-proportional Rayleigh damping, s
    drag: float  # 1/s
    gravity: torch.Tensor  # (3,)
    ground: float | None
    ground_k: float  # penalty stiffness per unit mass, 1/s^2
    free: bool

    @property
    def size(self) -> float:
        """Largest distance of a query point from the centre of mass, m."""
        return float(self.rest.norm(dim=1).max())

    @property
    def n_latent(self) -> int:
        return self.latent.n_latent


def quat_to_matrix(q: torch.Tensor) -> torch.Tensor:
    """Rotation matrix of a (not necessarily unit) quaternion (w, x, y, z)."""
    q = q / q.norm()
    w, v = q[0], q[1:]
    return (w * w - v @ v) * torch.eye(3, dtype=q.dtype) + 2.0 * torch.outer(v, v) + 2.0 * w * skew(v)


def quat_derivative(q: torch.Tensor, w_body: torch.Tensor) -> torch.Tensor:
    """dq/dt = 1/2 q (x) (0, w) for a body-frame angular velocity w."""
    a, b, c, d = q.unbind()
    x, y, z = w_body.unbind()
    return 0.5 * torch.stack([-b * x - c * y - d * z, a * x + c * z - d * y,
                              a * y - b * z + d * x, a * z + b * y - c * x])


def skew(v: torch.Tensor) -> torch.Tensor:
    """Batched cross-product matrices: (..., 3) -> (..., 3, 3)."""
    z = torch.zeros_like(v[..., 0])
    x, y, w = v.unbind(-1)
    return torch.stack([torch.stack([z, -w, y], -1), torch.stack([w, z, -x], -1), torch.stack([-y, x, z], -1)], -2)


class State:
    """Views into the flat ODE state [t(3), quat(4), q(r), v(3), w(3), q'(r)] (rigid parts only if free)."""

    def __init__(self, body: Body):
        r = body.n_latent
        self.pos_size = (7 + r) if body.free else r
        self.r = r
        self.free = body.free

    def split(self, y):
        p, v = y[: self.pos_size], y[self.pos_size:]
        if self.free:
            return p[:3], p[3:7], p[7:], v[:3], v[3:6], v[6:]
        return None, None, p, None, None, v


class Dynamics(torch.nn.Module):
    """The right-hand side dy/dt for torchdiffeq.odeint.

    ``should_cancel`` is polled every CANCEL_CHECK_EVERY evaluations, so a cancel stops even a stiff stretch of
    frames at once instead of after the step budget: the Cancelled it raises leaves odeint unhandled.
    """

    def __init__(self, body: Body, should_cancel: Callable[[], bool] | None = None):
        super().__init__()
        self.body, self.state = body, State(body)
        self.eye = torch.eye(3, dtype=DTYPE)
        self.mass3 = body.mass.repeat_interleave(3)
        self.evaluations = 0
        self.should_cancel = should_cancel

    def kinematics(self, y):
        """Positions x (N,3), velocities x' (N,3), the velocity Jacobian A (3N, n) and bias acceleration b (N,3)."""
        b_ = self.body
        t, quat, q, v, w, qd = self.state.split(y)
        a, G, c2 = b_.latent.with_derivatives(q, qd)
        n = len(b_.rest)
        y_body = b_.rest + (b_.phi @ a).view(n, 3)
        jy = b_.phi @ G  # (3N, r)
        yd = (jy @ qd).view(n, 3)
        bias = (b_.phi @ c2).view(n, 3)
        if not b_.free:
            return b_.center + y_body, yd, jy, bias
        R = quat_to_matrix(quat)
        x = b_.center + t + y_body @ R.T
        wy = torch.linalg.cross(w.expand(n, 3), y_body)
        xd = v + (wy + yd) @ R.T
        rot_cols = -(R @ skew(y_body))  # (N, 3, 3): dx/d(theta_body)
        A = torch.cat([self.eye.expand(n, 3, 3), rot_cols, (R @ jy.view(n, 3, -1))], dim=2)
        bias = (torch.linalg.cross(w.expand(n, 3), wy) + 2 * torch.linalg.cross(w.expand(n, 3), yd) + bias) @ R.T
        return x, xd, A.reshape(3 * n, -1), bias

    def forces(self, x, xd):
        b_ = self.body
        m = b_.mass[:, None]
        f = m * b_.gravity - b_.drag * m * xd
        d = x[b_.spring_j] - x[b_.spring_i]
        length = d.norm(dim=1, keepdim=True).clamp_min(1e-12)
        nrm = d / length
        rate = (nrm * (xd[b_.spring_j] - xd[b_.spring_i])).sum(1, keepdim=True)
        fs = b_.spring_k[:, None] * ((length - b_.spring_rest[:, None]) + b_.damping * rate) * nrm
        f = f.index_add(0, b_.spring_i, fs).index_add(0, b_.spring_j, -fs)
        if b_.ground is not None:
            depth = (b_.ground - x[:, 2]).clamp_min(0.0)
            touching = (depth > 0).to(DTYPE)
            # Penalty contact, critically damped in the normal direction, with viscous friction tangentially.
            k = b_.ground_k
            fn = m[:, 0] * (k * depth - 2.0 * k**0.5 * xd[:, 2].clamp_max(0.0) * touching)
            f = f + torch.stack([-touching * m[:, 0] * k**0.5 * xd[:, 0], -touching * m[:, 0] * k**0.5 * xd[:, 1],
                                 fn], dim=1)
        return f

    def forward(self, t, y):
        self.evaluations += 1
        if self.should_cancel and self.evaluations % CANCEL_CHECK_EVERY == 0 and self.should_cancel():
            raise Cancelled("simulation cancelled")
        b_ = self.body
        x, xd, A, bias = self.kinematics(y)
        f = self.forces(x, xd) - b_.mass[:, None] * bias
        mA = A * self.mass3[:, None]
        M = A.T @ mA
        latent = slice(M.shape[0] - b_.n_latent, None)
        M[latent, latent] += torch.diag(b_.added_mass)
        ud = torch.linalg.solve(M, A.T @ f.reshape(-1))
        st = self.state
        _, quat, _, v, w, qd = st.split(y)
        if b_.free:
            return torch.cat([v, quat_derivative(quat, w), qd, ud])
        return torch.cat([qd, ud])

    def energy(self, y) -> dict:
        """Kinetic, elastic and gravitational energy (J) of a state; used by checks of energy conservation."""
        b_ = self.body
        x, xd, _, _ = self.kinematics(y)
        length = (x[b_.spring_j] - x[b_.spring_i]).norm(dim=1)
        qd = self.state.split(y)[5]
        kinetic = 0.5 * (b_.mass[:, None] * xd * xd).sum() + 0.5 * (b_.added_mass * qd * qd).sum()
        elastic = 0.5 * (b_.spring_k * (length - b_.spring_rest) ** 2).sum()
        gravitational = -(b_.mass[:, None] * x * b_.gravity).sum()
        return {"kinetic": kinetic.item(), "elastic": elastic.item(), "gravitational": gravitational.item()}
