"""``simulate``: mesh + physical parameters -> per-frame vertex positions, through the learned
latent space.

Pipeline: validate the mesh -> encode it once (``encoding``: shape tokens, decoder basis fields at
query points and at every vertex; cached per mesh and pin set, so re-simulating after a parameter
tweak skips it) -> build the reduced Lagrangian body for the parameters (``body``) -> integrate with
torchdiffeq.odeint frame chunk by frame chunk (``integration``: progress and cancel between chunks)
-> decode every frame at every vertex with one matrix product per chunk (here).
"""

import dataclasses
import hashlib
from collections.abc import Callable

import numpy as np
import torch

from . import contact, continuum_free, continuum_sheet, continuum_solid
from . import mesh as meshlib
from .body import Plan, _rigid_fields, build_body
from .dynamics import DTYPE, State, quat_to_matrix
from .encoding import VERTEX_CHUNK, Encoding, encode_mesh
from .errors import SimulationError, size_hint
from .integration import DEFAULT_METHOD, Progress, integrate
from .model import NeuROK
from .params import SimParams, make_params
from .weights import load_model


class Simulator:
    """Holds a loaded model and the encoding of the last mesh, so a warm worker re-simulates
    quickly."""

    def __init__(self, weights: str | None = None):
        self.model: NeuROK = load_model(weights)
        self.coeff = self.model.decoder.coeff
        self.locking = self.model.calibration.get("locking")
        self._cache: tuple[str, Encoding] | None = None
        self._subspace: tuple[str, continuum_solid.Subspace | continuum_sheet.Sheet] | None = None

    @torch.no_grad()
    def simulate(self, vertices, faces, params: SimParams, progress: Progress | None = None,
                 should_cancel: Callable[[], bool] | None = None,
                 method: str = DEFAULT_METHOD) -> np.ndarray:
        mesh = meshlib.validate(vertices, faces)
        if len(params.pins) and params.pins.max() >= len(mesh.vertices):
            raise SimulationError("pin indices do not fit this mesh")
        meshlib.check_pins(mesh, params.pins)
        progress = progress or (lambda fraction, message: None)
        path = continuum_path(mesh, params)
        if path is not None:
            return self._continuum(path, mesh, params, progress, should_cancel)
        progress(0.0, "encoding mesh")
        enc = self.encode(mesh, params.pins, params.gravity)
        plan = build_body(enc, params, self.coeff, self.locking)
        progress(0.05, "integrating latent dynamics")
        states = integrate(plan, params, method, progress, should_cancel)
        progress(0.95, "decoding frames")
        positions = decode_frames(enc, plan, states)
        positions[0] = mesh.vertices
        if not np.isfinite(positions).all():
            raise SimulationError("the simulation produced non-finite positions; try a stiffer "
                                  "material, a lower gravity or more drag")
        progress(1.0, "done")
        return positions

    def built(self, path, mesh: meshlib.Mesh, params: SimParams, progress: Progress | None = None,
              should_cancel: Callable[[], bool] | None = None):
        """What the continuum ``path`` (continuum_solid's subspace, continuum_sheet's coarse sheet) builds for the
        mesh, in the scene's own axes (mesh.principal_frame) so that it, and so the motion, turn with the scene;
        with the mesh in those axes and the axes (3, 3). Kept per path, mesh, pins, axes and Poisson ratio: a
        re-simulate after any other change only integrates."""
        axes = meshlib.principal_frame(mesh, params.pins, params.gravity)
        local = meshlib.Mesh(mesh.vertices @ axes, mesh.faces)
        key = hashlib.sha1(path.__name__.encode() + mesh.vertices.tobytes() + mesh.faces.tobytes()
                           + params.pins.tobytes() + axes.tobytes() + np.float64(params.poisson).tobytes()).hexdigest()
        if self._subspace is None or self._subspace[0] != key:
            self._subspace = (key, path.build(local, params, progress, should_cancel))
        return self._subspace[1], local, axes

    def _continuum(self, path, mesh: meshlib.Mesh, params: SimParams, progress: Progress,
                   should_cancel: Callable[[], bool] | None) -> np.ndarray:
        """A pinned solid or a sheet on the continuum's own physics: a run that builds spends the first half of the
        bar on it."""
        before = self._subspace
        built, local, axes = self.built(path, mesh, params,
                                        lambda fraction, message: progress(0.5 * fraction, message), should_cancel)
        start = 0.05 if self._subspace is before else 0.5
        progress(start, "integrating the continuum's dynamics")
        colliders = tuple(c.turned(axes) for c in contact.scene_colliders(params.ground, params.colliders))
        try:
            out = path.simulate(built, local, turned(params, axes),
                                lambda fraction, message: progress(start + (1 - start) * fraction, message),
                                should_cancel, colliders)
        except SimulationError as error:
            raise SimulationError(str(error) + size_hint(mesh.diagonal)) from error
        return (out @ axes.T.astype(np.float32)).astype(np.float32)

    @torch.no_grad()
    def encode(self, mesh: meshlib.Mesh, pins: np.ndarray, gravity=(0.0, 0.0, 0.0)) -> Encoding:
        axes = meshlib.principal_frame(mesh, pins, gravity)
        key = hashlib.sha1(mesh.vertices.tobytes() + mesh.faces.tobytes() + pins.tobytes()
                           + axes.tobytes())
        if self._cache and self._cache[0] == key.hexdigest():
            return self._cache[1]
        enc = encode_mesh(self.model, mesh, pins, axes)
        self._cache = (key.hexdigest(), enc)
        return enc


def continuum_path(mesh: meshlib.Mesh, params: SimParams):
    """The continuum path (module) that simulates this body: continuum_sheet for open surfaces, continuum_solid for
    pinned solids; None for the latent Lagrangian's spring network (solids without pins)."""
    return next((path for path in (continuum_sheet, continuum_solid, continuum_free) if path.applies(mesh, params)),
                None)


def turned(p: SimParams, axes: np.ndarray) -> SimParams:
    """The parameters seen in the axes ``axes`` (3, 3) (columns: the axes in the mesh's coordinates). Velocities
    turn; so do gravity and wind, unless the object is animated: then they stay in world axes and its frames,
    which turn them into object space, take the axes on."""
    turned = dataclasses.replace(p, initial_velocity=tuple(np.asarray(p.initial_velocity) @ axes),
                                 angular_velocity=tuple(np.asarray(p.angular_velocity) @ axes))
    if p.frame_motion is not None:
        turn = np.eye(4)
        turn[:3, :3] = axes
        return dataclasses.replace(turned, frame_motion=p.frame_motion @ turn)
    return dataclasses.replace(
        turned, gravity=tuple(np.asarray(p.gravity) @ axes),
        wind=[{**w, "acceleration": list(np.asarray(w["acceleration"], float) @ axes)} for w in p.wind])


@torch.no_grad()
def decode_frames(enc: Encoding, plan: Plan, states: torch.Tensor) -> np.ndarray:
    """Vertex positions (T, V, 3) float32 for every integrated state:
    x = c + t + R (X - c + Phi_v a).

    Vertices are decoded in chunks so that memory beyond the output itself stays bounded for any
    mesh size.
    """
    body = plan.body
    st = State(body)
    T, V = len(states), len(enc.vertices)
    parts = [st.split(y) for y in states]
    A = body.latent(torch.stack([q for _, _, q, _, _, _ in parts]))
    if body.free:
        R = torch.from_numpy(np.stack([quat_to_matrix(quat.numpy()) for _, quat, *_ in parts]))
        shift = body.center + torch.stack([t for t, *_ in parts])
    else:
        R, shift = torch.eye(3, dtype=DTYPE).expand(T, 3, 3), body.center.expand(T, 3)
    out = np.empty((T, V, 3), np.float32)
    for v0 in range(0, V, VERTEX_CHUNK):
        rest = torch.as_tensor(enc.vertices[v0:v0 + VERTEX_CHUNK], dtype=DTYPE) - body.center
        phi = enc.phi_v[v0:v0 + VERTEX_CHUNK].to(DTYPE).reshape(-1, A.shape[1]) * enc.scale
        if plan.rigid is not None:
            phi = phi - _rigid_fields(rest) @ plan.rigid
        y_body = rest + (A @ phi.T).reshape(T, -1, 3)
        turned = torch.einsum("tvj,tij->tvi", y_body, R)
        out[:, v0:v0 + VERTEX_CHUNK] = (turned + shift[:, None]).numpy()
    return out


def simulate(vertices, faces, *, weights: str | None = None, method: str = DEFAULT_METHOD,
             progress: Progress | None = None, should_cancel: Callable[[], bool] | None = None,
             **physics) -> np.ndarray:
    """One-shot simulation (loads the model each call; the worker keeps a Simulator instead)."""
    params = make_params(num_vertices=len(np.asarray(vertices)), **physics)
    return Simulator(weights).simulate(vertices, faces, params, progress, should_cancel, method)

