"""Latent Lagrangian dynamics: the decoder's latent is the generalized coordinate of an elastic
body.

Kinematics of the query points (physical units, float64)::

    free body:    x = c + t + R (Y0 + Phi a(z))        pinned body:  x = Y0 + c + Phi a(z)
    z = U q,      a(z) = g(z, e) - g(0, e)

with ``Phi`` the decoder's basis fields at the query points (scaled to metres, with pins and the
body's rigid modes projected out), ``U`` the reduced latent basis (active subspace below a frequency
cut), ``t`` the centre of mass, ``R`` a rotation (unit quaternion) and body angular velocity ``w``.
With generalized velocities u = (v, w, q'), the point velocities are x' = A u and accelerations
x'' = A u' + b. The equations of motion are the Euler-Lagrange equations written through virtual
work (Kane's form, identical for these holonomic coordinates; b carries the Coriolis and centrifugal
terms)::

    (A^T m A) u' = A^T (f_gravity + f_wind + f_drag + f_elastic + f_contact - m b)

so kinetic energy uses the mass matrix J^T M J and every force enters as a generalized force through
J^T. Elastic energy is that of a spring network between query points, calibrated to Young's modulus
(a sheet's springs resist shortening less than stretching: Body.compression). Mass scaling adds
kinetic energy: 1/2 q'^T diag(a) q' on a solid's modal coordinates (Body.added_mass), or
1/2 sum mu L'^2 on a sheet's springs' length rates (Body.stretch_inertia), whose Euler-Lagrange term
is J_L^T mu L'' with J_L = dL/dq.

The right-hand side runs in numpy. An evaluation is ~60 array operations on arrays of a few thousand
numbers, and the ODE takes thousands of evaluations per simulation (~3,400 for a 100-frame cloth),
so per-call overhead sets the speed: the same arithmetic took ~200 us per evaluation in numpy
against ~450 us in torch (with no_grad or inference_mode) on this project's 2-core CPU. The one
exception is a sheet's product of its 19 coefficient rows with the spring-edge fields, which torch's
kernels run several times faster than numpy's BLAS (Dynamics.springs). torchdiffeq still integrates
it (Dynamics.forward takes and returns tensors). The point-wise kinematics stay in torch: energies,
initial velocities and the tests use them.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from scipy.linalg import lapack

from .contact import Collider, contact_force
from .errors import Cancelled
from .frame_motion import FrameMotion
from .model import CoefficientMLP
from .wind import Wind

DTYPE = torch.float64
# Spring-edge fields and their products in float32: the products' rounding (~1e-7 of an edge's
# relative displacement) is far below the ODE's tolerance, and these fields (~2 MB in float64 at 256
# query points, read once or twice an evaluation) are the operand whose memory traffic shows in an
# evaluation's cost.
EDGE_DTYPE = np.float32
CANCEL_CHECK_EVERY = 10  # right-hand side evaluations (a few ms each) between cancel checks


class BudgetSpent(Exception):
    """Raised by Dynamics when an integration spends the evaluations it was given
    (Dynamics.budget)."""


class LatentMap:
    """a(q) = g(U q, e) - g(0, e): the decoder's coefficient MLP for one shape, as a function of the
    reduced coordinates q, with closed-form first and second derivatives (float64).

    The shape code and the reduced basis U are folded into the first layer once per body, so each of
    the ODE's thousands of evaluations runs three small layers and nothing else.
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
        # numpy views (no copies) of the same weights, for with_derivatives
        self._arrays = tuple(t.numpy() for t in (self.w1, self.b1, self.w2, self.b2, self.w3,
                                                 self.b3, self.g0))

    @property
    def n_latent(self) -> int:
        return self.w1.shape[1]

    def _g(self, q):
        h = torch.nn.functional.silu(q @ self.w1.T + self.b1)
        return torch.nn.functional.silu(h @ self.w2.T + self.b2) @ self.w3.T + self.b3

    def __call__(self, q: torch.Tensor) -> torch.Tensor:
        """a(q) for q of shape (..., r): (..., P)."""
        return self._g(q) - self.g0

    def with_derivatives(self, q: np.ndarray, qd: np.ndarray):
        """a(q) (P,), da/dq (P, r), and d2a/dq2[qd, qd] (P,) for q, qd of shape (r,), as float64
        numpy arrays.

        Each layer's products are taken in one matrix product (value, second derivative and Jacobian
        columns side by side) because an evaluation's cost is its number of calls, not its
        arithmetic.
        """
        w1, b1, w2, b2, w3, b3, g0 = self._arrays
        h1 = w1 @ np.stack([q, qd], 1)  # (H, 2): pre-activation and its rate along qd
        a1, d1, dd1 = _silu_derivatives(h1[:, 0] + b1)
        # The first layer is affine in q, so its second derivative along qd is the activation's
        # alone.
        x2 = w2 @ np.concatenate([a1[:, None], (dd1 * h1[:, 1] ** 2)[:, None], d1[:, None] * w1], 1)
        a2, d2, dd2 = _silu_derivatives(x2[:, 0] + b2)
        w2j1 = x2[:, 2:]  # (H, r)
        c2 = dd2 * (w2j1 @ qd) ** 2 + d2 * x2[:, 1]
        out = w3 @ np.concatenate([a2[:, None], c2[:, None], d2[:, None] * w2j1], 1)
        return out[:, 0] + b3 - g0, out[:, 2:], out[:, 1]


def _solve_mass(M: np.ndarray, b: np.ndarray) -> np.ndarray:
    """M^-1 b for a mass matrix M (symmetric positive definite) by LAPACK's Cholesky solver, called
    directly: numpy's general solver spent ~30 us per call on checks around a 2 us solve. A matrix
    that is not numerically positive definite goes to the general solver, which raises LinAlgError
    if it is singular."""
    _, x, info = lapack.dposv(M, b)
    return x if info == 0 else np.linalg.solve(M, b)


def _silu_derivatives(h: np.ndarray):
    """silu(h) = h sigmoid(h) and its first and second derivatives."""
    s = 1.0 / (1.0 + np.exp(-h))
    rest = 1.0 - s
    return h * s, s * (1.0 + h * rest), s * rest * (2.0 + h * (1.0 - 2.0 * s))


@dataclass
class Body:
    """Everything the ODE needs about one mesh under one set of physical parameters."""

    rest: torch.Tensor  # (N, 3) query rest positions relative to the centre of mass
    center: torch.Tensor  # (3,) centre of mass at rest
    phi: torch.Tensor  # (3N, P) basis fields in metres per unit coefficient
    # a(q), with z = U q in the reduced latent basis U (modal coordinates at rest)
    latent: LatentMap
    # (r,) modal mass added at rest to modes above the frame rate's reach (mass scaling)
    added_mass: torch.Tensor
    mass: torch.Tensor  # (N,) kg
    spring_i: torch.Tensor
    spring_j: torch.Tensor
    spring_rest: torch.Tensor
    spring_k: torch.Tensor  # N/m
    damping: float  # stiffness-proportional Rayleigh damping, s
    drag: float  # 1/s
    gravity: torch.Tensor  # (3,)
    colliders: tuple[Collider, ...]  # the ground plane and the scene's colliders
    contact_k: float  # their penalty stiffness per unit mass, 1/s^2
    free: bool
    # a shortened spring's stiffness as a fraction of a stretched one's (sheets buckle)
    compression: float = 1.0
    # Mass scaling in any configuration (s^2, or None): each spring carries inertia
    # spring_k * stretch_inertia on its rate of change of length. Proportional to the stiffness, it
    # slows every mode of the network as omega / sqrt(1 + omega^2 stretch_inertia), wherever the
    # body is, and only motions that stretch springs (body.build_body).
    stretch_inertia: float | None = None
    # the object's animated transform: simulated in its moving frame
    frame: FrameMotion | None = None
    wind: Wind | None = None

    @property
    def size(self) -> float:
        """Largest distance of a query point from the centre of mass, m."""
        return float(self.rest.norm(dim=1).max())

    @property
    def n_latent(self) -> int:
        return self.latent.n_latent


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrix of a (not necessarily unit) quaternion (w, x, y, z)."""
    w, x, y, z = q / np.sqrt(q @ q)
    return np.array([[w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z]])


def quat_derivative(q: np.ndarray, w_body: np.ndarray) -> np.ndarray:
    """dq/dt = 1/2 q (x) (0, w) for a body-frame angular velocity w."""
    a, b, c, d = q
    x, y, z = w_body
    return 0.5 * np.array([-b * x - c * y - d * z, a * x + c * z - d * y,
                           a * y - b * z + d * x, a * z + b * y - c * x])


def skew(v: torch.Tensor) -> torch.Tensor:
    """Batched cross-product matrices: (..., 3) -> (..., 3, 3)."""
    z = torch.zeros_like(v[..., 0])
    x, y, w = v.unbind(-1)
    return torch.stack([torch.stack([z, -w, y], -1), torch.stack([w, z, -x], -1),
                        torch.stack([-y, x, z], -1)], -2)


class State:
    """Views into the flat ODE state [t(3), quat(4), q(r), v(3), w(3), q'(r)] (rigid parts only if
    free)."""

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


@dataclass
class _Arrays:
    """The body's constants as numpy arrays for the right-hand side."""

    rest: np.ndarray
    center: np.ndarray
    phi: np.ndarray  # (3N, P)
    phi3: np.ndarray  # (N, 3, P)
    mass: np.ndarray  # (N, 1)
    total_mass: float
    inertia: np.ndarray  # B = Phi^T m Phi (P, P)
    added: np.ndarray  # (r, r)
    edge_rest: np.ndarray  # (3, E)
    edge_phi: np.ndarray  # (P, 3E), EDGE_DTYPE
    spring_k: np.ndarray
    spring_k_short: np.ndarray  # a shortened spring's stiffness, spring_k * Body.compression
    spring_rest: np.ndarray
    spring_inertia: np.ndarray | None  # (E,) kg: spring_k * Body.stretch_inertia
    gravity: np.ndarray
    gravity_coeffs: np.ndarray  # sum_k m_k Phi_k^T g (P,)
    first_moment: np.ndarray  # sum_k m_k Phi_k (3, P)


class Dynamics(torch.nn.Module):
    """The right-hand side dy/dt for torchdiffeq.odeint.

    It solves the equations of the module docstring, (A^T m A) u' = A^T f, without forming
    A (3N x n):

    - drag f = -c m x' gives A^T f = -c (A^T m A) u: the mass matrix times u (with the stretch
      inertia: below);
    - springs: an edge's length depends only on the body frame, d = d0 + (Phi_j - Phi_i) a, and a
      central force pair exerts no net force or torque, so springs act on the deformation
      coordinates alone, through the edge fields precomputed per body;
    - the deformation block of the mass matrix is G^T B G with B = Phi^T m Phi, also precomputed;
    - gravity, wind, inertial (Coriolis, centrifugal, an animated frame's) and contact forces are
      summed per point in the body frame and projected once: onto the coefficients by Phi^T, onto
      translation and rotation by their sum and moment. A pinned body without contact, wind or an
      animated frame needs no per-point sum: gravity projects to the constant Phi^T m g and its
      inertial term to B d2a/dq2[q', q'].

    ``tests/test_dynamics.py`` checks it against A^T f assembled point by point with ``kinematics``.
    ``should_cancel`` is polled every CANCEL_CHECK_EVERY evaluations, so a cancel stops even a stiff
    stretch of frames at once instead of after the step budget: the Cancelled it raises leaves
    odeint unhandled.
    """

    def __init__(self, body: Body, should_cancel: Callable[[], bool] | None = None):
        super().__init__()
        self.body, self.state = body, State(body)
        self.eye = torch.eye(3, dtype=DTYPE)
        self.evaluations = 0
        self.budget: int | None = None  # evaluation count at which to raise BudgetSpent
        self.should_cancel = should_cancel
        n, p = len(body.rest), body.phi.shape[1]
        phi3 = body.phi.view(n, 3, p)
        edge_phi = (phi3[body.spring_j] - phi3[body.spring_i]).permute(2, 1, 0).reshape(p, -1)
        edge_phi = edge_phi.contiguous()
        self.arrays = _Arrays(
            rest=body.rest.numpy(), center=body.center.numpy(), phi=body.phi.numpy(),
            phi3=phi3.numpy(),
            mass=body.mass.numpy()[:, None], total_mass=float(body.mass.sum()),
            inertia=(body.phi.T @ (body.mass.repeat_interleave(3)[:, None] * body.phi)).numpy(),
            added=torch.diag(body.added_mass).numpy(),
            # Edge vectors (3, E) and their fields (P, 3E), coordinate-major so per-edge arithmetic
            # runs on rows.
            edge_rest=(body.rest[body.spring_j] - body.rest[body.spring_i]).T.contiguous().numpy(),
            edge_phi=edge_phi.numpy().astype(EDGE_DTYPE),
            spring_k=body.spring_k.numpy(),
            spring_k_short=(body.compression * body.spring_k).numpy(),
            spring_rest=body.spring_rest.numpy(),
            spring_inertia=(None if body.stretch_inertia is None
                            else body.stretch_inertia * body.spring_k.numpy()),
            gravity=body.gravity.numpy(),
            gravity_coeffs=(body.phi.T @ (body.mass[:, None] * body.gravity).reshape(-1)).numpy(),
            first_moment=(body.mass[:, None, None] * phi3).sum(0).numpy())
        # The coefficient rows multiplied by the edge fields at every evaluation (springs), and
        # tensor views of both.
        count = 2 if body.stretch_inertia is None else 3 + body.n_latent
        self._rows = np.empty((count, p), EDGE_DTYPE)
        self._rows_t = torch.from_numpy(self._rows)
        self._edge_phi_t = torch.from_numpy(self.arrays.edge_phi)

    def kinematics(self, y):
        """Positions x (N,3), velocities x' (N,3), the velocity Jacobian A (3N, n) and bias
        acceleration b (N,3): the point-wise definition of the kinematics, used for energies,
        initial velocities and checks."""
        b_ = self.body
        t, quat, q, v, w, qd = self.state.split(y)
        a, G, c2 = (torch.from_numpy(x) for x in b_.latent.with_derivatives(q.numpy(), qd.numpy()))
        n = len(b_.rest)
        y_body = b_.rest + (b_.phi @ a).view(n, 3)
        jy = b_.phi @ G  # (3N, r)
        yd = (jy @ qd).view(n, 3)
        bias = (b_.phi @ c2).view(n, 3)
        if not b_.free:
            return b_.center + y_body, yd, jy, bias
        R = torch.from_numpy(quat_to_matrix(quat.numpy()))
        x = b_.center + t + y_body @ R.T
        wy = torch.linalg.cross(w.expand(n, 3), y_body)
        xd = v + (wy + yd) @ R.T
        rot_cols = -(R @ skew(y_body))  # (N, 3, 3): dx/d(theta_body)
        A = torch.cat([self.eye.expand(n, 3, 3), rot_cols, (R @ jy.view(n, 3, -1))], dim=2)
        bias = (torch.linalg.cross(w.expand(n, 3), wy) + 2 * torch.linalg.cross(w.expand(n, 3), yd)
                + bias) @ R.T
        return x, xd, A.reshape(3 * n, -1), bias

    def springs(self, a: np.ndarray, ad: np.ndarray, c2: np.ndarray, G: np.ndarray):
        """The spring network at coefficients a with rate ad (G = da/dq, c2 = d2a/dq2[q', q']): its
        generalized force on q (r,), with its stretch inertia's velocity-dependent term, and its
        stretch inertia's mass matrix (r, r; 0 without one)."""
        z, b_ = self.arrays, self.body
        stretch_inertia = z.spring_inertia is not None
        # Edge vectors' displacement, rate and (with stretch inertia) bias acceleration, and the
        # Jacobian of the displacement, (rows, 3, E), in one product.
        rows = self._rows
        rows[0], rows[1] = a, ad
        if stretch_inertia:
            rows[2], rows[3:] = c2, G.T
        # A sheet's 19 rows took 73 us in numpy's BLAS and 53 us in torch (P = 64, E = 1180); a
        # solid's two rows and the force's matrix-vector product below took 29 and 12 us in numpy,
        # 29 and 31 us in torch (E = 2422).
        moved = (self._rows_t @ self._edge_phi_t).numpy() if stretch_inertia else rows @ z.edge_phi
        moved = moved.reshape(len(rows), 3, -1)
        change = moved[:3 if stretch_inertia else 2].astype(np.float64)
        d = change[0]
        d += z.edge_rest
        # a spring crushed to a point has no direction
        length = np.sqrt(np.einsum("ce,ce->e", d, d)).clip(1e-12)
        unit = d / length
        rate = np.einsum("ce,ce->e", unit, change[1])
        extension = length - z.spring_rest
        k = (z.spring_k if b_.compression == 1.0
             else np.where(extension < 0.0, z.spring_k_short, z.spring_k))
        tension = k * (extension + b_.damping * rate)
        if not stretch_inertia:
            # f_i += tension * unit, f_j -= tension * unit: on the coefficients, -(Phi_j - Phi_i)^T
            # (tension * unit).
            force = z.edge_phi @ (tension * unit).reshape(-1).astype(EDGE_DTYPE)
            return -(G.T @ force), 0.0
        # J_L = dL/dq = unit^T (Phi_j - Phi_i) G, (r, E): the same projection for the spring forces
        # and the stretch inertia, whose Euler-Lagrange term is J_L^T mu L'' with
        # L'' = J_L q'' + bias.
        jac = np.einsum("rce,ce->re", moved[3:], unit.astype(EDGE_DTYPE))
        jac = jac.astype(np.float64)  # the sums over springs in float32 left accelerations 2-7% off
        bias = (np.einsum("ce,ce->e", unit, change[2])
                + (np.einsum("ce,ce->e", change[1], change[1]) - rate * rate) / length)
        return -(jac @ (tension + z.spring_inertia * bias)), (z.spring_inertia * jac) @ jac.T

    def _deformation_mass(self, G: np.ndarray, stretch) -> np.ndarray:
        """The mass matrix on q (r, r): the points' G^T B G, with mass scaling's modal and stretch
        inertia."""
        return G.T @ (self.arrays.inertia @ G) + self.arrays.added + stretch

    def latent_mass(self, q: np.ndarray) -> np.ndarray:
        """The mass matrix on q (r, r) at deformation coordinates q."""
        a, G, c2 = self.body.latent.with_derivatives(q, np.zeros_like(q))
        return self._deformation_mass(G, self.springs(a, np.zeros_like(a), c2, G)[1])

    def contact_force(self, x: np.ndarray, xd: np.ndarray) -> np.ndarray:
        """Penalty contact with the colliders (N, 3) at positions x moving at xd
        (contact.contact_force)."""
        return contact_force(self.body.colliders, x, xd, self.arrays.mass[:, 0],
                             self.body.contact_k)

    def forward(self, t, y):
        self.evaluations += 1
        if (self.should_cancel and self.evaluations % CANCEL_CHECK_EVERY == 0
                and self.should_cancel()):
            raise Cancelled("simulation cancelled")
        if self.budget is not None and self.evaluations > self.budget:
            raise BudgetSpent(f"{self.evaluations} right-hand side evaluations")
        return torch.from_numpy(self.derivative(y.numpy(), float(t)))

    def derivative(self, state: np.ndarray, t: float = 0.0) -> np.ndarray:
        """dy/dt of a state (numpy, float64) at time t (s; only an animated frame depends on it)."""
        z, b_ = self.arrays, self.body
        r = b_.n_latent
        if b_.free:
            pos, quat, q = state[:3], state[3:7], state[7:7 + r]
            v, w, qd = state[7 + r:10 + r], state[10 + r:13 + r], state[13 + r:]
            R = quat_to_matrix(quat)
        else:
            q, qd = state[:r], state[r:]
        a, G, c2 = b_.latent.with_derivatives(q, qd)
        ad = G @ qd
        Qs, Ms = self.springs(a, ad, c2, G)  # on q
        if b_.free:
            y, f = self._point_forces(a, ad, c2, t, R, pos, v, w)
            Qa = z.phi.T @ f.reshape(-1)
        elif b_.colliders or b_.frame is not None or b_.wind is not None:
            y, f = self._point_forces(a, ad, c2, t)
            Qa = z.phi.T @ f.reshape(-1)
        else:
            # gravity and the inertial term of a still frame project through the fields' mass
            # moments
            Qa = z.gravity_coeffs - z.inertia @ c2
        # With the stretch inertia (slowed modes). Drag acts on it too, so a slowed mode decays at
        # the drag rate as the real one does: on the mass without it, a mode slowed by added mass a
        # decayed 1 + a times slower, and a stiff pinned body rang for seconds where the reference
        # had settled within a quarter of one.
        Mqq = self._deformation_mass(G, Ms)
        if not b_.free:
            rhs = G.T @ Qa + Qs - b_.drag * (Mqq @ qd)
            return np.concatenate([qd, _solve_mass(Mqq, rhs)])
        # Mass matrix blocks over u = (v world, w body, q'): A = [I, -R [y]x, R Phi G] per point.
        n = len(y)
        my = z.mass * y
        second = y.T @ my  # sum m y y^T
        T = (my.T @ z.phi3.reshape(n, -1)).reshape(3, 3, -1)  # T[b, c] = sum m y_b Phi_c
        # sum m y x Phi (3, P)
        moment = np.stack([T[1, 2] - T[2, 1], T[2, 0] - T[0, 2], T[0, 1] - T[1, 0]])
        Mvw = -R @ np.cross(my.sum(0), np.eye(3)).T  # -R [sum m y]x
        Mvq = R @ z.first_moment @ G
        Mwq = moment @ G
        M = np.block([[z.total_mass * np.eye(3), Mvw, Mvq],
                      [Mvw.T, np.trace(second) * np.eye(3) - second, Mwq],
                      [Mvq.T, Mwq.T, Mqq]])
        u = np.concatenate([v, w, qd])
        Q = np.concatenate([R @ f.sum(0), np.cross(y, f).sum(0), G.T @ Qa + Qs]) - b_.drag * (M @ u)
        return np.concatenate([v, quat_derivative(quat, w), qd, _solve_mass(M, Q)])

    def _point_forces(self, a, ad, c2, t, R=None, pos=None, v=None, w=None):
        """Body-frame query positions y (N, 3) and the forces on them (N, 3), expressed in the body
        frame: gravity, wind, contact, the inertial force -m b (with Coriolis and centrifugal terms
        for a free body: pass its rotation R, position and velocities) and an animated object's
        frame acceleration at time t."""
        z, b_ = self.arrays, self.body
        n = len(z.rest)
        y = z.rest + (z.phi @ a).reshape(n, 3)
        yd = (z.phi @ ad).reshape(n, 3)
        bias = (z.phi @ c2).reshape(n, 3)
        if R is None:  # the body frame is the mesh's space
            x, xd = z.center + y, yd
        else:
            bias = bias + np.cross(w, np.cross(w, y)) + 2.0 * np.cross(w, yd)
            x, xd = z.center + pos + y @ R.T, v + (np.cross(w, y) + yd) @ R.T
        # External accelerations in the mesh's space (an animated object's: its moving frame)
        # Gravity and wind are given in world axes (the mesh's, unless it is animated), gusts vary
        # over the body
        push = z.gravity if b_.wind is None else z.gravity + b_.wind.acceleration(t, x)
        if b_.frame is not None:
            felt, turn = b_.frame.acceleration(t, x, xd)
            push = push @ turn - felt
        f = z.mass * push
        if b_.colliders:
            f = f + self.contact_force(x, xd)
        if R is None:
            return y, f - z.mass * bias
        return y, f @ R - z.mass * bias

    def energy(self, y) -> dict:
        """Kinetic, elastic and gravitational energy (J) of a state; used by checks of energy
        conservation."""
        b_ = self.body
        x, xd, _, _ = self.kinematics(y)
        d = x[b_.spring_j] - x[b_.spring_i]
        length = d.norm(dim=1)
        length_rate = (d * (xd[b_.spring_j] - xd[b_.spring_i])).sum(1) / length
        qd = self.state.split(y)[5]
        kinetic = 0.5 * (b_.mass[:, None] * xd * xd).sum() + 0.5 * (b_.added_mass * qd * qd).sum()
        if b_.stretch_inertia is not None:
            kinetic = kinetic + 0.5 * b_.stretch_inertia * (b_.spring_k * length_rate**2).sum()
        extension = length - b_.spring_rest
        stiffness = torch.where(extension < 0, b_.compression, 1.0) * b_.spring_k
        elastic = 0.5 * (stiffness * extension**2).sum()
        gravitational = -(b_.mass[:, None] * x * b_.gravity).sum()
        return {"kinetic": kinetic.item(), "elastic": elastic.item(),
                "gravitational": gravitational.item()}
