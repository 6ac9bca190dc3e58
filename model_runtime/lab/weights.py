"""Loading and saving model weights: safetensors only, with the config stored beside the tensors.

A weights file is ``NAME.safetensors`` whose metadata holds the model config (JSON) and a format version;
``NAME.json`` next to it repeats the config for people and tools. Nothing here ever unpickles.
"""

import json
import os
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..errors import WeightsError
from .model import ModelConfig, NeuROK

FORMAT_VERSION = "neurok-weights-1"
ASSETS = Path(__file__).resolve().parents[2] / "assets"
DEFAULT_WEIGHTS = ASSETS / "neurok.safetensors"


def default_weights_path() -> Path:
    """The shipped model, unless NEUROK_WEIGHTS points elsewhere."""
    return Path(os.environ.get("NEUROK_WEIGHTS") or DEFAULT_WEIGHTS)


def save_model(model: NeuROK, path: str | os.PathLike, extra: dict | None = None) -> None:
    """Write the weights, their config and ``extra`` (training facts)."""
    path = Path(path)
    meta = {"format": FORMAT_VERSION, "config": json.dumps(model.cfg.to_dict())}
    if extra:
        meta["info"] = json.dumps(extra)
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(state, str(path), metadata=meta)
    path.with_suffix(".json").write_text(json.dumps({"format": FORMAT_VERSION, "config": model.cfg.to_dict(),
                                                     **({"info": extra} if extra else {})}, indent=2) + "\n")


def read_info(path: str | os.PathLike) -> dict:
    """The training facts stored with a weights file (empty if none)."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return json.loads((f.metadata() or {}).get("info", "{}"))


def load_model(path: str | os.PathLike | None = None) -> NeuROK:
    """Build the model from a .safetensors file; every failure names the file and what is wrong with it."""
    path = Path(path) if path else default_weights_path()
    if path.suffix != ".safetensors":
        raise WeightsError(f"{path}: only .safetensors weights are loaded (never pickled files)")
    if not path.is_file():
        raise WeightsError(f"model weights not found: {path}")
    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise WeightsError(f"{path}: not a readable safetensors file (truncated or corrupt?): {exc}") from exc
    if meta.get("format") != FORMAT_VERSION:
        raise WeightsError(f"{path}: weights format {meta.get('format')!r}, this NeuROK reads {FORMAT_VERSION!r}")
    try:
        cfg = ModelConfig(**json.loads(meta["config"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise WeightsError(f"{path}: missing or invalid model config in the file's metadata: {exc}") from exc
    model = NeuROK(cfg)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = [k for k in expected if k in state and state[k].shape != expected[k].shape]
    if missing or unexpected or wrong:
        raise WeightsError(f"{path}: tensors do not match the config (missing {missing[:3]}, unexpected "
                           f"{unexpected[:3]}, wrong shape {wrong[:3]})")
    if not all(torch.isfinite(t).all() for t in state.values()):
        raise WeightsError(f"{path}: weights contain NaN or infinite values")
    model.load_state_dict(state)
    return model.eval()
