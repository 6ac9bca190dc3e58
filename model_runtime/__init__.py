"""NeuROK runtime: the simulator (the continuum's own physics in each body's reduced coordinates), the learned model
the lab trains, and the worker, free of bpy. Data, training and evaluation are the lab (``model_runtime.lab``),
which the extension zip leaves out.

The one public entry point is :func:`simulate`. Importing this package stays light (no torch) so that Blender's
Python can import the worker protocol from it; torch loads on the first simulation.
"""

from .errors import Cancelled, MeshError, NeuROKError, ParameterError, SimulationError, WeightsError
from .materials import MATERIALS

__all__ = ["simulate", "MATERIALS", "NeuROKError", "MeshError", "ParameterError", "WeightsError",
           "SimulationError", "Cancelled"]


def simulate(vertices, faces, **options):
    """Animate a triangle mesh; returns float32 positions (frames+1, V, 3), frame 0 = rest.

    Options (SI units): frames, fps, gravity, drag, stiffness, density, damping, poisson, thickness, material,
    pins (vertex indices or a boolean mask; pinned loose vertices stay put but hold nothing, so at least one pin
    must be on a face), initial_velocity, angular_velocity, ground, wind, colliders, frame_motion,
    progress(fraction, message), should_cancel() -> bool (also polled between frames; cancelling raises
    Cancelled). See :func:`model_runtime.simulator.simulate`.
    """
    from .simulator import simulate as _simulate

    return _simulate(vertices, faces, **options)
