"""The lab: what makes and measures the shipped model (data engines, training, evaluation, the command
line), never run by an artist. It may import the shipped runtime (``model_runtime``); nothing shipped imports it, and
the extension zip leaves it out (blender_manifest.toml)."""
