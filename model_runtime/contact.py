"""Colliders: the ground plane and the scene's Collision objects, as penalty contacts on the body's points.

Every collider is a sphere or a convex polytope (a plane is a polytope of one face; a box of six; a convex mesh of
its hull's faces). A point inside is pushed out along the normal of the nearest face (the sphere's radial
direction) by a critically damped penalty with viscous friction along the surface, the contact the ground has
always had. Colliders are static, in the same space and units (m) as the mesh's vertices.
"""

from dataclasses import dataclass

import numpy as np

from .errors import ParameterError

SHAPES = ("plane", "sphere", "box", "convex")
# The implicit solvers' contact (the reference's lattice and the product's pinned solids): a stiff penalty, which
# only an implicit step can take, with Coulomb friction lagged from the step's start.
CONTACT_STIFFNESS = 1.0e6  # penalty per kg of contact mass, N/m/kg = 1/s^2: rests g / k ~ 0.01 mm deep
CONTACT_FRICTION = 0.5  # Coulomb coefficient of every collider
SLIP_SPEED = 1e-2  # m/s: slower tangential motion on a collider is resisted viscously (sticks), faster at mu N


@dataclass(frozen=True)
class Collider:
    """A convex polytope (``planes`` (K, 4): outward unit normals n and offsets d, inside where n.x < d for all) or
    a sphere (``center``, ``radius``)."""

    planes: np.ndarray | None = None
    center: np.ndarray | None = None
    radius: float = 0.0

    def penetration(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Depth (N,) inside the collider (0 outside) and the outward normal (N, 3) to push along."""
        if self.planes is None:
            offset = x - self.center
            distance = np.linalg.norm(offset, axis=1)
            normal = offset / np.maximum(distance, 1e-12)[:, None]
            return np.maximum(self.radius - distance, 0.0), normal
        margin = self.planes[:, 3] - x @ self.planes[:, :3].T  # (N, K): distance inside each face
        nearest = margin.argmin(1)
        depth = margin[np.arange(len(x)), nearest]
        return np.maximum(depth, 0.0), self.planes[nearest, :3]

    def turned(self, axes: np.ndarray) -> "Collider":
        """This collider seen in the axes ``axes`` (3, 3) (columns: the axes in these coordinates)."""
        if self.planes is None:
            return Collider(center=self.center @ axes, radius=self.radius)
        return Collider(planes=np.column_stack([self.planes[:, :3] @ axes, self.planes[:, 3]]))


def ground(height: float) -> Collider:
    """The ground plane z = height, solid below."""
    return Collider(planes=np.array([[0.0, 0.0, 1.0, height]]))


def scene_colliders(height: float | None, specs) -> tuple[Collider, ...]:
    """The scene's colliders (make_colliders) and, where ``height`` is set, the ground plane z = height."""
    return make_colliders(specs) + (() if height is None else (ground(height),))


def implicit_viscosity(mass: np.ndarray, depth: np.ndarray, slide: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The implicit solvers' contact viscosity (N s/m) at touching points of masses (K,), depths (K,) and tangential
    speeds (K,): Coulomb friction mu k m depth / max(slide, SLIP_SPEED) along the surface, and critical damping
    2 sqrt(k) m of the penalty along the normal (a symplectic step would keep the penalty's own oscillation)."""
    return (CONTACT_FRICTION * CONTACT_STIFFNESS * mass * depth / np.maximum(slide, SLIP_SPEED),
            2.0 * np.sqrt(CONTACT_STIFFNESS) * mass)


def contact_force(colliders, x: np.ndarray, xd: np.ndarray, mass: np.ndarray, k: float) -> np.ndarray:
    """Penalty contact (N, 3) on points x moving at xd with masses (N,): stiffness k per unit mass (1/s^2),
    critically damped along the normal, viscous friction sqrt(k) along the surface."""
    force = np.zeros_like(x)
    for collider in colliders:
        depth, n = collider.penetration(x)
        touching = depth > 0
        if not touching.any():
            continue
        vn = np.einsum("nc,nc->n", xd, n)
        normal = mass * (k * depth - 2.0 * k**0.5 * np.minimum(vn, 0.0) * touching)
        tangential = xd - vn[:, None] * n
        force += normal[:, None] * n - (touching * mass * k**0.5)[:, None] * tangential
    return force


def make_colliders(specs) -> tuple[Collider, ...]:
    """Validated colliders from plain data (JSON): a list of dicts with "shape" one of SHAPES and
    plane: "point", "normal" (solid on the side opposite the normal); sphere: "center", "radius";
    box: "matrix" (4x4 rigid transform of its centre), "size" (3 full extents); convex: "points" (M, 3), the
    collider is their convex hull."""
    if specs is None:
        return ()
    if not isinstance(specs, (list, tuple)):
        raise ParameterError(f"colliders must be a list of collider descriptions, got {type(specs).__name__}")
    return tuple(_collider(i, spec) for i, spec in enumerate(specs))


def _collider(i: int, spec) -> Collider:
    if not isinstance(spec, dict) or spec.get("shape") not in SHAPES:
        raise ParameterError(f"collider {i} must be a dict with a 'shape' of {', '.join(SHAPES)}, got {spec!r:.80}")
    shape = spec["shape"]

    def array(key, shape_):
        try:
            a = np.asarray(spec[key], dtype=float)
        except (KeyError, TypeError, ValueError) as exc:
            raise ParameterError(f"collider {i} ({shape}) needs '{key}' as numbers") from exc
        if (shape_ is not None and a.shape != shape_) or not np.isfinite(a).all():
            raise ParameterError(f"collider {i} ({shape}): '{key}' must be finite numbers of shape {shape_}")
        return a

    if shape == "sphere":
        radius = float(array("radius", ()))
        if radius <= 0:
            raise ParameterError(f"collider {i} (sphere): radius must be positive, got {radius}")
        return Collider(center=array("center", (3,)), radius=radius)
    if shape == "plane":
        normal = array("normal", (3,))
        if np.linalg.norm(normal) == 0:
            raise ParameterError(f"collider {i} (plane): normal must not be zero")
        normal = normal / np.linalg.norm(normal)
        return Collider(planes=np.append(normal, normal @ array("point", (3,)))[None])
    if shape == "box":
        m, half = array("matrix", (4, 4)), 0.5 * array("size", (3,))
        R = m[:3, :3]
        if (half <= 0).any() or np.abs(R.T @ R - np.eye(3)).max() > 1e-3:
            raise ParameterError(f"collider {i} (box): size must be positive and matrix a rotation and translation")
        normals = np.concatenate([R.T, -R.T])  # rows: the box's axes in the mesh's space, both ways
        return Collider(planes=np.column_stack([normals, normals @ m[:3, 3] + np.tile(half, 2)]))
    from scipy.spatial import ConvexHull, QhullError  # here: params (and with it the add-on) imports this module

    points = array("points", None)
    try:
        hull = ConvexHull(points.reshape(-1, 3))
    except (QhullError, ValueError) as exc:
        raise ParameterError(f"collider {i} (convex): its points span no volume") from exc
    return Collider(planes=np.column_stack([hull.equations[:, :3], -hull.equations[:, 3]]))
