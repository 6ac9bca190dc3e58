"""Physical parameters shared by the learned simulator and the reference simulator.

``simulate`` and ``reference`` take the same options in the same units, so both can be run on one mesh and
compared: seconds, metres, pascals, kg/m^3, m/s^2 and 1/s.
"""

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from .contact import make_colliders
from .errors import ParameterError
from .materials import DEFAULT_MATERIAL, MATERIALS
from .wind import make_wind

STANDARD_GRAVITY = 9.81  # m/s^2, Earth's: the default gravity, along -z
MAX_FRAMES = 10_000
MAX_GRAVITY = 1_000.0  # m/s^2, ~100 g: beyond that no preset material stays meaningful


@dataclass(frozen=True)
class Option:
    """One scalar physical option: its unit, accepted range and meaning. The runtime's checks, the CLI's arguments
    and the add-on's property limits and tooltips all come from OPTIONS."""

    unit: str  # SI unit as shown to people ("" for a pure number)
    low: float
    high: float
    help: str
    high_open: bool = False  # the range excludes ``high`` itself

    def check(self, name: str, value: float) -> None:
        if not (self.low <= value < self.high if self.high_open else self.low <= value <= self.high):
            bound = "below" if self.high_open else "at most"
            raise ParameterError(f"{name} must be at least {self.low:g} and {bound} {self.high:g}"
                                 f"{' ' + self.unit if self.unit else ''}, got {value:g}")


OPTIONS: dict[str, Option] = {
    "frames": Option("", 1, MAX_FRAMES, "frames to simulate after the rest frame"),
    "fps": Option("1/s", 1.0, 1000.0, "frames per second"),
    "drag": Option("1/s", 0.0, 1000.0, "air drag c: every part is slowed by a force c x mass x velocity (1: a "
                   "part coasting alone loses 63% of its speed per second)"),
    "stiffness": Option("Pa", 1.0, 1e11, "Young's modulus: how strongly a solid (closed mesh) resists stretching and "
                        "bending. Open surfaces (cloth) drape by their shape and weight: above some tens of kPa "
                        "their stiffness changes little"),
    "density": Option("kg/m^3", 1.0, 25_000.0, "mass per volume (water is 1000)"),
    "damping": Option("s", 0.0, 10.0, "internal (stiffness-proportional) damping: higher values calm wobbling "
                      "faster"),
    "poisson": Option("", 0.0, 0.5, "Poisson ratio: how much the material thins as it stretches", high_open=True),
    "thickness": Option("m", 1e-5, 1.0, "shell thickness of open surfaces (cloth)"),
}



@dataclass
class SimParams:
    """Resolved, validated physical options for one simulation."""

    frames: int = 48
    fps: float = 24.0
    gravity: tuple[float, float, float] = (0.0, 0.0, -STANDARD_GRAVITY)
    drag: float = 0.0  # air drag c in 1/s: force -c * m * v on every mass
    stiffness: float = MATERIALS[DEFAULT_MATERIAL].stiffness
    density: float = MATERIALS[DEFAULT_MATERIAL].density
    damping: float = MATERIALS[DEFAULT_MATERIAL].damping
    poisson: float = MATERIALS[DEFAULT_MATERIAL].poisson
    thickness: float = MATERIALS[DEFAULT_MATERIAL].thickness
    material: str = DEFAULT_MATERIAL
    initial_velocity: tuple[float, float, float] = (0.0, 0.0, 0.0)  # m/s
    angular_velocity: tuple[float, float, float] = (0.0, 0.0, 0.0)  # rad/s about the centroid
    ground: float | None = None  # height of a ground plane z = ground, m
    pins: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # The object's own animation: object-to-world rigid transforms (frames + 1, 4, 4) in metres at each frame, or
    # None for a still object. The simulation runs in object space (model_runtime.frame_motion).
    frame_motion: np.ndarray | None = None
    wind: list = field(default_factory=list)  # wind sources (model_runtime.wind.make_wind), in gravity's axes
    colliders: list = field(default_factory=list)  # static colliders (model_runtime.contact.make_colliders)

    def to_dict(self) -> dict:
        """Plain data (JSON). The scene's forces and an animation are written only when used, so the parameters of
        a still scene (a dataset's, for one) read as they did before these options existed."""
        d = asdict(self)
        d["pins"] = [int(i) for i in self.pins]
        for name in ("frame_motion", "wind", "colliders"):
            value = d.pop(name)
            if value is not None and len(value):
                d[name] = value.tolist() if isinstance(value, np.ndarray) else value
        return d


def make_params(
    *,
    frames: int = 48,
    fps: float = 24.0,
    gravity=(0.0, 0.0, -STANDARD_GRAVITY),
    drag: float = 0.0,
    stiffness: float | None = None,
    density: float | None = None,
    damping: float | None = None,
    poisson: float | None = None,
    thickness: float | None = None,
    material: str | None = None,
    initial_velocity=(0.0, 0.0, 0.0),
    angular_velocity=(0.0, 0.0, 0.0),
    ground: float | None = None,
    pins=None,
    frame_motion=None,
    wind=None,
    colliders=None,
    num_vertices: int | None = None,
) -> SimParams:
    """Fill unset values from the material preset and reject anything physically meaningless."""
    name = material or DEFAULT_MATERIAL
    if name not in MATERIALS:
        raise ParameterError(f"unknown material {name!r}; choose one of {', '.join(MATERIALS)}")
    preset = MATERIALS[name]

    def pick(key, value, default):
        return _number(key, default if value is None else value)

    p = SimParams(
        frames=_frames(frames),
        fps=_number("fps", fps),
        gravity=_vec3("gravity", gravity),
        drag=_number("drag", drag),
        stiffness=pick("stiffness", stiffness, preset.stiffness),
        density=pick("density", density, preset.density),
        damping=pick("damping", damping, preset.damping),
        poisson=pick("poisson", poisson, preset.poisson),
        thickness=pick("thickness", thickness, preset.thickness),
        material=name,
        initial_velocity=_vec3("initial_velocity", initial_velocity),
        angular_velocity=_vec3("angular_velocity", angular_velocity),
        ground=None if ground is None else _number("ground", ground),
        pins=_pins(pins, num_vertices),
    )
    make_wind(wind)  # validation: the simulator builds them from the plain data kept here
    make_colliders(colliders)
    p.wind, p.colliders = list(wind or []), list(colliders or [])
    p.frame_motion = _frame_motion(frame_motion, p.frames, p.ground is not None or bool(p.colliders))
    _check(p)
    return p


def _number(name: str, value) -> float:
    """A real number (bool and strings refused), or ParameterError naming the option."""
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise ParameterError(f"{name} must be a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ParameterError(f"{name} must be a number, got {value!r}") from exc


def _frames(value) -> int:
    f = _number("frames", value)
    if not math.isfinite(f) or f != round(f):
        raise ParameterError(f"frames must be a whole number between 1 and {MAX_FRAMES}, got {value!r}")
    return int(f)


def _vec3(name: str, value) -> tuple[float, float, float]:
    try:
        v = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ParameterError(f"{name} must be three finite numbers, got {value!r}") from exc
    if v.shape != (3,) or not np.isfinite(v).all():
        raise ParameterError(f"{name} must be three finite numbers, got {value!r}")
    return (float(v[0]), float(v[1]), float(v[2]))


def _pins(pins, num_vertices: int | None) -> np.ndarray:
    if pins is None:
        return np.zeros(0, np.int64)
    idx = np.asarray(pins).reshape(-1)
    if idx.dtype != bool and not np.issubdtype(idx.dtype, np.number):
        raise ParameterError(f"pins must be vertex indices or a boolean mask, got {idx.dtype} values")
    if np.iscomplexobj(idx):
        raise ParameterError("pins must be vertex indices (integers)")
    if idx.dtype == bool:
        if num_vertices is not None and len(idx) != num_vertices:
            raise ParameterError(f"pin mask has {len(idx)} entries for {num_vertices} vertices")
        idx = np.nonzero(idx)[0]
    if idx.size and not np.issubdtype(idx.dtype, np.integer):
        if not np.all(np.isfinite(idx)) or np.any(idx != np.round(idx)):
            raise ParameterError("pins must be vertex indices (integers)")
    idx = np.unique(idx.astype(np.int64))
    if idx.size and (idx[0] < 0 or (num_vertices is not None and idx[-1] >= num_vertices)):
        bad = idx[0] if idx[0] < 0 else idx[-1]
        raise ParameterError(f"pin index {bad} is out of range 0..{(num_vertices or 0) - 1}")
    if num_vertices is not None and idx.size >= num_vertices:
        raise ParameterError("every vertex is pinned: nothing is left free to move")
    return idx


FRAME_TOLERANCE = 1e-3  # how far a transform's 3x3 part may be from a rotation (object scale is not motion)
MAX_FRAME_TRAVEL = 1e4  # m: farther than any scene a frame motion is meant for


def _frame_motion(value, frames: int, contacts: bool) -> np.ndarray | None:
    """None, or (frames + 1, 4, 4) finite rigid transforms (a rotation and a translation in metres)."""
    if value is None:
        return None
    try:
        m = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"frame_motion must be an array of 4x4 transforms, got {type(value).__name__}") from exc
    if m.shape != (frames + 1, 4, 4):
        raise ParameterError(f"frame_motion must hold one 4x4 transform per frame, frames + 1 = {frames + 1} in "
                             f"all, got shape {m.shape}")
    if not np.isfinite(m).all() or np.abs(m[:, :3, 3]).max() > MAX_FRAME_TRAVEL:
        raise ParameterError(f"frame_motion must be finite translations within {MAX_FRAME_TRAVEL:.0f} m")
    R = m[:, :3, :3]
    if (np.abs(R.transpose(0, 2, 1) @ R - np.eye(3)).max() > FRAME_TOLERANCE or np.linalg.det(R).min() <= 0
            or np.abs(m[:, 3] - [0, 0, 0, 1]).max() > 0):
        raise ParameterError("frame_motion's transforms must be rotations and translations only (no scale, shear "
                             "or mirroring); pass the object's scale in its vertices")
    if contacts:
        raise ParameterError("a ground plane or colliders with an animated object (frame_motion) are not supported "
                             "yet: they would move with the object; leave one of them out")
    return m


def _check(p: SimParams) -> None:
    for name, option in OPTIONS.items():
        value = getattr(p, name)
        if not math.isfinite(value):
            raise ParameterError(f"{name} must be a finite number, got {value}")
        option.check(name, value)
    if np.linalg.norm(p.gravity) > MAX_GRAVITY:
        raise ParameterError(f"gravity magnitude {np.linalg.norm(p.gravity):.1f} m/s^2 exceeds {MAX_GRAVITY:.0f}")
    if p.ground is not None and not math.isfinite(p.ground):
        raise ParameterError("ground height must be finite")
