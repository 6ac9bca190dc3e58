"""Scene families and their randomized, physically meaningful parameters (all SI units).

Families: ``cloth`` (sheets pinned along an edge, at two corners or at one, or dropped on the ground),
``cutout`` (flat real outlines, woody, re-gridded, hanging from an edge), ``soft`` (boxes, ellipsoids
and bumped blobs as tetrahedral solids: pinned at their base, thrown and spinning, or dropped on the ground),
``real`` (the closed real meshes of ../shared/meshes decimated to 500-3000 vertices, set up like ``soft``) and
``beam`` (box cantilevers clamped at one end, L/a 5-20). A scene is a pure function of (seed, index, config).

``DEFAULT_CONFIG`` is the v1 dataset's (no real solids, no ground); ``configs/data-v1.1.json`` adds both;
``configs/data-v2.json`` draws soft bodies' E by self-weight strain, makes beams stubbier and softer, and runs on the
validated reference (``"solver"``). A family or set-up with weight 0 draws nothing from the random stream, and a
replaced range is drawn in the place of v1's, so v1 regenerates bit for bit.
"""

from dataclasses import dataclass

import numpy as np

from ...params import SimParams, make_params
from . import shapes

DEFAULT_CONFIG = {
    "frames": 48,
    "fps": 24.0,
    "family_weights": {"cloth": 0.3, "cutout": 0.1, "soft": 0.35, "beam": 0.25, "real": 0.0},
    "resolution_scale": 1.0,  # multiplies vertex counts (tests use tiny meshes)
    "stiffness_scale": 1.0,  # multiplies every sampled Young's modulus (tests force blow-ups with tiny values)
    "max_edge_stretch": 3.0,  # reject a sequence when any edge grows beyond this factor of its rest length
    # Set-ups and their odds. The v1 dataset left out ground contact (Newton's collision pipeline made a sequence
    # 10-20x slower on this CPU) and one-corner pins (a point load stretched the unconverged cloth beyond the
    # rejection bound).
    "cloth_modes": {"edge": 0.6, "two_corners": 0.4, "one_corner": 0.0, "ground": 0.0},
    "soft_modes": {"base": 0.6, "ground": 0.0, "free": 0.4},
    # Ranges that replace v1's (None: v1's), each drawn in v1's place in the random stream (_soft_material, _beam).
    "soft_strain": None,  # (lo, hi): draw soft and real bodies' E by their self-weight strain instead of 0.3-3 MPa
    "soft_damping": None,  # (lo, hi) s: soft and real bodies' Rayleigh damping, v1 1e-3-2e-2
    "beam_slenderness": None,  # (lo, hi): L/a, v1 5-20
    "beam_sag": None,  # (lo, hi): nominal tip sag / L that sets a beam's E, v1 0.005-0.08
    "beam_damping": None,  # (lo, hi) s: v1 1e-3-1e-2
    # Pinned soft and real solids start at rest. The reference gives an initial velocity to every free node while
    # the held ones stay, a velocity jump at the clamp that collapsed soft bodies' elements within a frame
    # (docs/physics-validation.md, "Collapse"); v1 and v1.1 drew one for them.
    "pinned_soft_at_rest": False,
    # The simulator's settings (reference.simulate_reference): "dataset" is v1's all-VBD solver, "reference" the
    # validated one of docs/physics-validation.md.
    "solver": "dataset",
}
CUTOUT_MESHES = ("woody",)  # alligator's thin legs and tail tore (stretch > 3x) at the dataset's solver settings
REAL_SOLIDS = ("cheburashka", "fandisk")  # the closed, manifold meshes of ../shared/meshes


@dataclass
class Scene:
    vertices: np.ndarray
    faces: np.ndarray
    params: SimParams
    family: str
    shape_id: str
    variant: str  # pin pattern / set-up, for the statistics


def sample_scene(seed: int, index: int, config: dict | None = None) -> Scene:
    """Sequence ``index`` of the dataset with master ``seed``: its own RNG stream, independent of every other."""
    unknown = set(config or {}) - set(DEFAULT_CONFIG)
    if unknown:
        raise ValueError(f"unknown dataset config keys {sorted(unknown)}")
    cfg = {**DEFAULT_CONFIG, **(config or {})}
    rng = np.random.default_rng([seed, index])
    names = list(cfg["family_weights"])
    w = np.array([cfg["family_weights"][k] for k in names], float)
    family = names[rng.choice(len(names), p=w / w.sum())]
    res = float(cfg["resolution_scale"])
    shape_id = f"{family}-{seed}-{index}"
    if family == "cloth":
        v, f, pins, ground, variant = _cloth(rng, res, cfg["cloth_modes"])
        mat = _cloth_material(rng)
    elif family == "cutout":
        name = CUTOUT_MESHES[rng.integers(len(CUTOUT_MESHES))]
        shape_id = f"real-{name}"  # one real outline is one shape: it must stay in one split
        v, f = shapes.flat_cutout(name, max(30, int(400 * res)))
        v *= rng.uniform(0.4, 1.5)
        pins = _edge_pins(v, rng.integers(4), 0.04)
        ground, variant = None, f"{name}-edge"
        mat = _cloth_material(rng)
    elif family in ("soft", "real"):
        v, f, pins, ground, kind, mode = _soft(rng, res, cfg["soft_modes"], real=family == "real")
        variant = f"{kind}-{mode}"
        if family == "real":
            shape_id = f"real-{kind}"  # one real mesh is one shape: it must stay in one split
        mat = _soft_material(rng, v, cfg["soft_strain"], cfg["soft_damping"])
    else:
        v, f, pins, mat = _beam(rng, res, cfg["beam_slenderness"], cfg["beam_sag"], cfg["beam_damping"])
        ground, variant = None, "cantilever"
    gravity = _gravity(rng)
    if ground is None:
        rot = _random_rotation(rng)  # no ground: the whole scene may face any way, gravity turns with it
        v, gravity = v @ rot.T, rot @ gravity
    else:
        ground = float(v[:, 2].min() - ground)  # ground planes stay horizontal: only tilt gravity a little
    mat["stiffness"] *= float(cfg["stiffness_scale"])
    speed = rng.uniform(0, 1.5) if rng.random() < 0.5 else 0.0
    spin = rng.uniform(0, 3.0) if rng.random() < 0.4 else 0.0
    drag = 0.0 if rng.random() < 0.3 else rng.uniform(0.0, 2.0)
    velocity, angular = speed * _unit(rng), spin * _unit(rng)
    if cfg["pinned_soft_at_rest"] and family in ("soft", "real") and len(pins):
        velocity, angular = np.zeros(3), np.zeros(3)  # drawn all the same, so later draws do not shift
    params = make_params(
        frames=int(cfg["frames"]), fps=float(cfg["fps"]), gravity=gravity, drag=drag, initial_velocity=velocity,
        angular_velocity=angular, ground=ground, pins=pins, num_vertices=len(v), material=_material_name(family),
        **mat)
    return Scene(v, f, params, family, shape_id, variant)


def _log_uniform(rng, lo, hi) -> float:
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def _unit(rng) -> np.ndarray:
    d = rng.normal(size=3)
    return d / np.linalg.norm(d)


def _random_rotation(rng) -> np.ndarray:
    q = rng.normal(size=4)
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _gravity(rng) -> np.ndarray:
    """Mostly straight down; a third of the time tilted up to 40 degrees; 5-20 m/s^2."""
    g = np.array([0.0, 0.0, -1.0])
    if rng.random() < 0.35:
        tilt, azimuth = np.radians(rng.uniform(5, 40)), rng.uniform(0, 2 * np.pi)
        g = np.array([np.sin(tilt) * np.cos(azimuth), np.sin(tilt) * np.sin(azimuth), -np.cos(tilt)])
    return g * rng.uniform(5.0, 20.0)


def _material_name(family: str) -> str:
    return {"cloth": "cloth", "cutout": "cloth", "soft": "jelly", "real": "jelly", "beam": "elastic_beam"}[family]


def principal_extent(v: np.ndarray) -> float:
    """The body's length along its longest principal axis: unlike a bounding box's, it does not change when the
    scene is turned afterwards."""
    centred = v - v.mean(0)
    return float(np.ptp(centred @ np.linalg.svd(centred, full_matrices=False)[2].T, axis=0).max())


def _soft_material(rng, v: np.ndarray, strain: list[float] | None, damping: list[float] | None) -> dict:
    """A soft body's material. v1 draws Young's modulus from 0.3-3 MPa, where the self-weight strain
    rho g L / E of a 0.1-0.5 m body is about 1e-3 and its deformation cannot be seen. Given ``strain`` (lo, hi),
    that nominal strain (at g = 9.81 and L the body's largest principal extent, ``principal_extent``) is drawn
    log-uniformly instead and E follows from it, as the beams' E follows from their sag: deformations stay visible,
    and the slow elastic waves of a soft body make the validated reference's explicit steps cheap. ``damping``
    (lo, hi) replaces v1's Rayleigh damping range of 1e-3-2e-2 s. The draws are the same in number and order either
    way.
    """
    e_or_strain = _log_uniform(rng, 3e5, 3e6) if strain is None else _log_uniform(rng, *strain)
    density = rng.uniform(500, 1500)
    if strain is not None:
        e_or_strain = density * 9.81 * principal_extent(v) / e_or_strain
    return {"stiffness": e_or_strain, "density": density, "poisson": rng.uniform(0.25, 0.45),
            "damping": _log_uniform(rng, *(damping or (1e-3, 2e-2))), "thickness": 1e-3}


def _cloth_material(rng) -> dict:
    return {"stiffness": _log_uniform(rng, 1e6, 5e7), "density": rng.uniform(100, 600),
            "poisson": rng.uniform(0.2, 0.4), "damping": _log_uniform(rng, 1e-3, 1e-2),
            "thickness": _log_uniform(rng, 3e-4, 2e-3)}


def _edge_pins(v: np.ndarray, side: int, band: float) -> np.ndarray:
    """Vertices within ``band`` (fraction of the extent) of one side (0..3: -x, +x, -y, +y) of a flat shape."""
    axis, sign = divmod(int(side), 2)
    c = v[:, axis] * (1 if sign else -1)
    return np.nonzero(c >= c.max() - band * (c.max() - c.min()) - 1e-9)[0]


def _pick(rng, odds: dict) -> str:
    return str(rng.choice(list(odds), p=np.array(list(odds.values()), float) / sum(odds.values())))


def _cloth(rng, res: float, modes: dict):
    w, h = rng.uniform(0.3, 2.0), rng.uniform(0.3, 2.0)
    n = max(4, int(np.sqrt(rng.uniform(150, 600) * res)))
    nx = max(3, int(round(n * np.sqrt(w / h))))
    ny = max(3, int(round(n * np.sqrt(h / w))))
    v, f = shapes.grid_sheet(nx, ny, w, h)
    mode = _pick(rng, modes)
    corners = [0, ny, nx * (ny + 1), nx * (ny + 1) + ny]
    ground = None
    if mode == "edge":
        pins = _edge_pins(v, rng.integers(4), 1e-6)
    elif mode == "two_corners":
        k = rng.integers(4)
        # a small patch at each corner: a single pinned vertex is a point load the solver tears at
        ends = v[[corners[k], corners[(k + 1) % 4 if k % 2 == 0 else (k + 2) % 4]]]
        cell = 1.6 * max(w / nx, h / ny)
        pins = np.nonzero((np.linalg.norm(v[:, None] - ends[None], axis=-1) <= cell).any(1))[0]
    elif mode == "one_corner":
        pins = np.array([corners[rng.integers(4)]])
    else:
        pins = np.zeros(0, np.int64)
        v = v @ _tilt(rng, 30).T
        ground = rng.uniform(0.05, 0.5)  # drop height below the lowest vertex
    return v, f, pins, ground, str(mode)


def _tilt(rng, max_deg: float) -> np.ndarray:
    a = np.radians(rng.uniform(-max_deg, max_deg))
    c, s = np.cos(a), np.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def _solid_shape(rng, res: float, real: bool):
    """(vertices, faces, kind, size in m) of a soft body: a real closed mesh, or a box, ellipsoid or blob."""
    if real:
        kind = REAL_SOLIDS[rng.integers(len(REAL_SOLIDS))]
        size = rng.uniform(0.15, 0.6)  # bounding-box diagonal
        v, f = shapes.decimated_solid(kind, max(60, int(rng.uniform(500, 3000) * res)))
        return v * size, f, kind, size
    kind = str(rng.choice(["box", "ellipsoid", "blob"]))
    size = rng.uniform(0.1, 0.5)
    if kind == "box":
        dims = size * rng.uniform(0.4, 1.0, size=3)
        cell = (np.prod(dims) ** (1 / 3)) / max(2.0, 5.0 * np.sqrt(res) * rng.uniform(0.8, 1.3))
        counts = tuple(int(max(2, round(d / cell))) for d in dims)
        return *shapes.box_surface(counts, dims), kind, size
    sub = 3 if res >= 0.5 and (kind == "blob" or rng.random() < 0.5) else 2
    v, f = shapes.icosphere(sub) if kind == "ellipsoid" else shapes.bumped_sphere(sub, rng)
    return v * (size / 2 * rng.uniform(0.5, 1.0, size=3)), f, kind, size


def _soft(rng, res: float, modes: dict, real: bool = False):
    v, f, kind, size = _solid_shape(rng, res, real)
    v = v @ _random_rotation(rng).T
    mode = _pick(rng, modes)
    ground = None
    pins = np.zeros(0, np.int64)
    if mode == "base":
        z = v[:, 2]
        pins = np.nonzero(z <= z.min() + rng.uniform(0.15, 0.3) * (z.max() - z.min()))[0]
    elif mode == "ground":
        ground = rng.uniform(0.0, 0.3) * size
    return v, f, pins, ground, kind, mode


def _beam(rng, res: float, slenderness: list[float] | None = None, sag_range: list[float] | None = None,
          damping: list[float] | None = None):
    """A cantilever: E chosen so the nominal Euler-Bernoulli sag 3 rho g L^4 / (2 E a^2) is 0.5-8% of L (the
    solver at the dataset's settings comes out softer than that, see newton_engine), L/a 5-20, Rayleigh damping
    1e-3-1e-2 s; ``slenderness``, ``sag_range`` and ``damping`` (lo, hi) replace these ranges. The validated
    reference resolves the thickness by 8 lattice cells, so its cost grows with L/a (cells) and with the wave speed,
    that is with 1 / sqrt(sag) and L/a again."""
    length = rng.uniform(0.3, 1.5)
    a = length / rng.uniform(*(slenderness or (5, 20)))
    b = a * rng.uniform(0.6, 1.0)
    across = 2 if res < 0.5 else int(rng.integers(2, 4))
    along = int(np.clip(round(length / a * across * 0.7 * np.sqrt(res)), 4, 40))
    v, f = shapes.box_surface((along, across, across), (length, a, b))
    density = rng.uniform(500, 2000)
    sag = _log_uniform(rng, *(sag_range or (0.005, 0.08)))
    stiffness = float(np.clip(3 * density * 9.81 * length**3 / (2 * sag * min(a, b) ** 2), 1e4, 1e10))
    pins = np.nonzero(v[:, 0] <= v[:, 0].min() + 1e-9)[0]
    mat = {"stiffness": stiffness, "density": density, "poisson": rng.uniform(0.25, 0.45),
           "damping": _log_uniform(rng, *(damping or (1e-3, 1e-2))), "thickness": 1e-3}
    return v, f, pins, mat
