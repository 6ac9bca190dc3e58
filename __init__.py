"""NeuROK Blender extension package root.

Blender loads an extension from the folder that holds ``blender_manifest.toml``; this module only forwards
registration to the add-on package so that the bpy layer lives in ``neurok_addon`` and the bpy-free runtime in
``model_runtime``.
"""

from .neurok_addon import register, unregister

__all__ = ["register", "unregister"]
