"""Weights are safetensors with their config; anything wrong with the file is reported by name."""

import shutil

import pytest
import torch

from model_runtime.errors import WeightsError
from model_runtime.lab.model import ModelConfig, NeuROK
from model_runtime.lab.weights import DEFAULT_WEIGHTS, load_model, save_model

TINY = ModelConfig(d_model=16, n_heads=2, n_shape_tokens=4, n_posterior_tokens=2, encoder_self_layers=1,
                   decoder_layers=1, n_freqs=2, latent_dim=3, n_basis=4, code_dim=4, coeff_hidden=8)


def test_round_trip_is_exact(tmp_path):
    torch.manual_seed(0)
    model = NeuROK(TINY)
    save_model(model, tmp_path / "m.safetensors")
    loaded = load_model(tmp_path / "m.safetensors")
    assert loaded.cfg == TINY
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k])
    assert (tmp_path / "m.json").exists()


def test_shipped_weights_load():
    model = load_model(DEFAULT_WEIGHTS)
    assert sum(p.numel() for p in model.parameters()) > 100_000


def test_missing_truncated_mismatched_and_pickled_files_are_refused(tmp_path):
    with pytest.raises(WeightsError, match="not found"):
        load_model(tmp_path / "none.safetensors")
    path = tmp_path / "m.safetensors"
    save_model(NeuROK(TINY), path)
    data = path.read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(WeightsError, match="cut.safetensors"):
        load_model(tmp_path / "cut.safetensors")
    with pytest.raises(WeightsError, match="only .safetensors"):
        load_model(tmp_path / "m.pt")
    other = NeuROK(ModelConfig(**{**TINY.__dict__, "n_basis": 5}))
    state = other.state_dict()
    import json

    from safetensors.torch import save_file

    from model_runtime.lab.weights import FORMAT_VERSION

    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "wrong.safetensors"),
              metadata={"format": FORMAT_VERSION, "config": json.dumps(TINY.to_dict())})
    with pytest.raises(WeightsError, match="do not match"):
        load_model(tmp_path / "wrong.safetensors")
    shutil.copy(path, tmp_path / "old.safetensors")
    save_file({k: v.contiguous() for k, v in NeuROK(TINY).state_dict().items()}, str(tmp_path / "old.safetensors"),
              metadata={"format": "neurok-weights-0", "config": json.dumps(TINY.to_dict())})
    with pytest.raises(WeightsError, match="format"):
        load_model(tmp_path / "old.safetensors")
