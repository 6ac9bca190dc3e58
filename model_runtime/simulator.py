"""``simulate``: mesh + physical parameters -> per-frame vertex positions, by the continuum's own physics in the
body's reduced coordinates.

Every body takes one of three paths, each bpy-free and each with the same four functions (``applies``, ``build``,
``simulate``, and ``integrate``/``positions``/``energies`` for the physics checks): an open surface is a sheet
(``continuum_sheet``), a closed one a solid, pinned (``continuum_solid``) or free (``continuum_free``). What a path
builds for a mesh (its coarse sheet, or its lattice, subspace and cubature) does not depend on the stiffness, mass,
drag, gravity or frames, so ``Simulator`` keeps it: a re-simulate after such a tweak only integrates.
"""

import dataclasses
import hashlib
from collections.abc import Callable

import numpy as np
import torch

from . import contact, continuum_free, continuum_sheet, continuum_solid
from . import mesh as meshlib
from .errors import SimulationError, size_hint
from .params import SimParams, make_params

Progress = Callable[[float, str], None]
PATHS = (continuum_sheet, continuum_solid, continuum_free)


class Simulator:
    """Keeps what the last mesh's path built, so a warm worker re-simulates quickly. Sets torch to one thread for the
    process: the paths' tensors are a few thousand elements, where intra-op threads cost more than they give (a free
    cube's first simulate took 25.3 s with torch's 2 threads on this 2-core machine, idle, and 10.1 s with one)."""

    def __init__(self):
        torch.set_num_threads(1)
        self._built: tuple[str, object] | None = None

    def simulate(self, vertices, faces, params: SimParams, progress: Progress | None = None,
                 should_cancel: Callable[[], bool] | None = None) -> np.ndarray:
        """Vertex positions (frames + 1, V, 3) float32 from rest; a build spends the first half of the bar."""
        mesh = meshlib.validate(vertices, faces)
        if len(params.pins) and params.pins.max() >= len(mesh.vertices):
            raise SimulationError("pin indices do not fit this mesh")
        meshlib.check_pins(mesh, params.pins)
        progress = progress or (lambda fraction, message: None)
        path = continuum_path(mesh, params)
        before = self._built
        built, local, axes = self.built(path, mesh, params,
                                        lambda fraction, message: progress(0.5 * fraction, message), should_cancel)
        start = 0.05 if self._built is before else 0.5
        progress(start, "integrating the continuum's dynamics")
        colliders = tuple(c.turned(axes) for c in contact.scene_colliders(params.ground, params.colliders))
        try:
            out = path.simulate(built, local, turned(params, axes),
                                lambda fraction, message: progress(start + (1 - start) * fraction, message),
                                should_cancel, colliders)
        except SimulationError as error:
            raise SimulationError(str(error) + size_hint(mesh.diagonal)) from error
        return (out @ axes.T.astype(np.float32)).astype(np.float32)

    def built(self, path, mesh: meshlib.Mesh, params: SimParams, progress: Progress | None = None,
              should_cancel: Callable[[], bool] | None = None):
        """What ``path`` builds for the mesh, in the scene's own axes (mesh.principal_frame) so that it, and so the
        motion, turn with the scene; with the mesh in those axes and the axes (3, 3). Kept per path, mesh, pins,
        axes and Poisson ratio: a re-simulate after any other change only integrates."""
        axes = meshlib.principal_frame(mesh, params.pins, params.gravity)
        local = meshlib.Mesh(mesh.vertices @ axes, mesh.faces)
        key = hashlib.sha1(path.__name__.encode() + mesh.vertices.tobytes() + mesh.faces.tobytes()
                           + params.pins.tobytes() + axes.tobytes() + np.float64(params.poisson).tobytes()).hexdigest()
        if self._built is None or self._built[0] != key:
            self._built = (key, path.build(local, params, progress, should_cancel))
        return self._built[1], local, axes


def continuum_path(mesh: meshlib.Mesh, params: SimParams):
    """The path (module) that simulates this body: continuum_sheet for open surfaces, continuum_solid for pinned
    solids, continuum_free for free ones."""
    return next(path for path in PATHS if path.applies(mesh, params))


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


def simulate(vertices, faces, *, progress: Progress | None = None, should_cancel: Callable[[], bool] | None = None,
             **physics) -> np.ndarray:
    """One-shot simulation (the worker keeps a Simulator instead)."""
    params = make_params(num_vertices=len(np.asarray(vertices)), **physics)
    return Simulator().simulate(vertices, faces, params, progress, should_cancel)
