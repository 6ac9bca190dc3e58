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
# Spring-edge fields and their products in float32: the products' rounding (~1e-7 of an edge's relative
# displacement) is far below the ODE's tolerance, and the fields' memory traffic sets an evaluation's cost.
EDGE_DTYPE = torch.float32
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
    """The right-hand side dy/dt for torchdiffeq.odeint, in projected form.

    The equations are those of the module docstring, (A^T m A) u' = A^T f, but evaluated without forming A or any
    per-point force: every term is a sum over query points that is linear or quadratic in the basis fields, so it
    is precomputed once per body as a small matrix in coefficient space (P = number of basis fields):

    - gravity:  sum_k m_k Phi_k^T g = S^T g, with S = sum_k m_k Phi_k (3, P), the fields' first mass moment;
    - inertia:  sum_k m_k Phi_k^T Phi_k = B (P, P), so the deformation block of the mass matrix is G^T B G;
    - drag:     f = -c m x' gives A^T f = -c (A^T m A) u, the mass matrix (without the added modal mass) times u;
    - springs:  an edge's length depends only on the body frame (d = d0 + (Phi_j - Phi_i) a), and a central force
                pair exerts no net force or torque, so springs act on the deformation coordinates alone.

    Only free bodies need per-point sums that depend on the state (their inertia tensor and the coupling of rotation
    with deformation), two small matrix products per evaluation. Ground contact is per point by nature and is added
    only when a ground is set. ``tests/test_dynamics.py`` checks this form against A^T f built point by point.

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
        n, p = len(body.rest), body.phi.shape[1]
        self.phi3 = body.phi.view(n, 3, p)
        self.first_moment = (body.mass[:, None, None] * self.phi3).sum(0)  # S (3, P)
        self.inertia = body.phi.T @ (self.mass3[:, None] * body.phi)  # B (P, P)
        # Edge vectors and their fields, coordinate-major ((3, E) and (P, 3E)) so that the per-edge arithmetic runs
        # on contiguous rows. The fields are the largest operand of an evaluation (~2 MB at 256 points), read twice,
        # and memory-bound: EDGE_DTYPE halves that traffic (see its comment).
        self.edge_rest = (body.rest[body.spring_j] - body.rest[body.spring_i]).T.contiguous()
        self.edge_phi = (self.phi3[body.spring_j] - self.phi3[body.spring_i]).permute(2, 1, 0).reshape(p, -1)
        self.edge_phi = self.edge_phi.to(EDGE_DTYPE).contiguous()
        self.total_mass = body.mass.sum()
        self.added = torch.diag(body.added_mass)

    def kinematics(self, y):
        """Positions x (N,3), velocities x' (N,3), the velocity Jacobian A (3N, n) and bias acceleration b (N,3):
        the point-wise definition of the kinematics, used for energies and initial velocities."""
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

    def spring_force(self, a, ad):
        """Generalized force of the spring network on the coefficients (P,), given a and its rate ad."""
        b_ = self.body
        moved = (torch.stack([a, ad]).to(EDGE_DTYPE) @ self.edge_phi).to(DTYPE).view(2, 3, -1)
        d = self.edge_rest + moved[0]
        length = (d * d).sum(0).sqrt().clamp_min(1e-12)  # not vector_norm: 20x slower along a leading dim
        rate = (d * moved[1]).sum(0) / length
        tension = b_.spring_k * ((length - b_.spring_rest) + b_.damping * rate) / length
        # f_i += tension * d, f_j -= tension * d: on the coefficients, -(Phi_j - Phi_i)^T (tension * d).
        return -(self.edge_phi @ (tension * d).view(-1).to(EDGE_DTYPE)).to(DTYPE)

    def ground_force(self, x, xd):
        """Penalty contact, critically damped in the normal direction, with viscous friction tangentially (N, 3)."""
        b_ = self.body
        m = b_.mass
        depth = (b_.ground - x[:, 2]).clamp_min(0.0)
        touching = (depth > 0).to(DTYPE)
        k = b_.ground_k
        fn = m * (k * depth - 2.0 * k**0.5 * xd[:, 2].clamp_max(0.0) * touching)
        return torch.stack([-touching * m * k**0.5 * xd[:, 0], -touching * m * k**0.5 * xd[:, 1], fn], dim=1)

    def forward(self, t, y):
        self.evaluations += 1
        if self.should_cancel and self.evaluations % CANCEL_CHECK_EVERY == 0 and self.should_cancel():
            raise Cancelled("simulation cancelled")
        b_ = self.body
        pos, quat, q, v, w, qd = self.state.split(y)
        a, G, c2 = b_.latent.with_derivatives(q, qd)
        ad = G @ qd
        BG = self.inertia @ G
        S = self.first_moment
        if not b_.free:
            force = self.spring_force(a, ad) + S.T @ b_.gravity - self.inertia @ c2
            if b_.ground is not None:
                n = len(b_.rest)
                f = self.ground_force(b_.center + b_.rest + (b_.phi @ a).view(n, 3), (b_.phi @ ad).view(n, 3))
                force = force + b_.phi.T @ f.reshape(-1)
            M = G.T @ BG
            rhs = G.T @ force - b_.drag * (M @ qd)
            return torch.cat([qd, torch.linalg.solve(M + self.added, rhs)])
        return torch.cat([v, quat_derivative(quat, w), qd, self._free_accelerations(pos, quat, a, G, c2, ad, BG, v, w,
                                                                                     qd)])

    def _free_accelerations(self, pos, quat, a, G, c2, ad, BG, v, w, qd):
        """u' = (v', w', q'') of a free body (world linear, body angular velocity), from the blocks of A^T m A."""
        b_ = self.body
        n = len(b_.rest)
        S = self.first_moment
        R = quat_to_matrix(quat)
        y = b_.rest + (b_.phi @ a).view(n, 3)
        yd = (b_.phi @ ad).view(n, 3)
        m = b_.mass[:, None]
        # T[s, b, c, p] = sum_k m_k s_kb Phi_k[c, p] for s = y, y': the moments that couple rotation and deformation.
        T = (torch.cat([m * y, m * yd], 1).T @ self.phi3.reshape(n, -1)).view(2, 3, 3, -1)
        H = torch.stack([T[0, 1, 2] - T[0, 2, 1], T[0, 2, 0] - T[0, 0, 2], T[0, 0, 1] - T[0, 1, 0]])  # sum m y x Phi
        my, myd = S @ a + (m * b_.rest).sum(0), S @ ad
        C = y.T @ (m * y)  # second mass moment sum m y y^T
        Cd = y.T @ (m * yd)  # sum m y y'^T
        inertia = torch.trace(C) * self.eye - C
        Mvq, Mwq, Mqq = R @ (S @ G), H @ G, G.T @ BG
        Mvw = -R @ skew(my)
        M = torch.cat([torch.cat([self.total_mass * self.eye, Mvw, Mvq], 1),
                       torch.cat([Mvw.T, inertia, Mwq], 1),
                       torch.cat([Mvq.T, Mwq.T, Mqq], 1)])
        u = torch.cat([v, w, qd])
        g_body = R.T @ b_.gravity
        W = torch.outer(w, w) - (w @ w) * self.eye  # w x (w x y) = W y
        coriolis = torch.linalg.cross(w, myd)
        Qv = self.total_mass * b_.gravity - R @ (torch.linalg.cross(w, torch.linalg.cross(w, my)) + 2 * coriolis
                                                  + S @ c2)
        Qw = (torch.linalg.cross(my, g_body) - torch.linalg.cross(w, inertia @ w)
              - 2 * (w * torch.trace(Cd) - Cd.T @ w) - H @ c2)
        sw = skew(w)
        Qp = (self.spring_force(a, ad) + S.T @ g_body - torch.einsum("ab,bap->p", W, T[0])
              - 2 * torch.einsum("ab,bap->p", sw, T[1]) - self.inertia @ c2)
        if b_.ground is not None:
            x = b_.center + pos[:3] + y @ R.T
            xd = v + (torch.linalg.cross(w.expand(n, 3), y) + yd) @ R.T
            f = self.ground_force(x, xd)
            f_body = f @ R
            Qv = Qv + f.sum(0)
            Qw = Qw + torch.linalg.cross(y, f_body).sum(0)
            Qp = Qp + b_.phi.T @ f_body.reshape(-1)
        Q = torch.cat([Qv, Qw, G.T @ Qp]) - b_.drag * (M @ u)
        M[6:, 6:] += self.added
        return torch.linalg.solve(M, Q)

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
