"""The NeuROK network: a conditional VAE of three Perceiver-style transformers.

* PriorEncoder (inference): surface points of the rest mesh -> shape tokens S, the prior mean mu_cond of
  p(z) = N(mu_cond, I) and a pooled shape code e.
* PosteriorEncoder (training only): rest points + their displacements -> q(z) = N(mu, sigma^2).
* Decoder: displacement of any query point x for a latent z,

      D(z, x) = Phi(x) (g(z, e) - g(0, e)),

  where Phi(x) in R^{3 x P} comes from query points cross-attending to the shape tokens and g is a small MLP.
  z = 0 is the rest shape exactly. The factorization is what makes latent dynamics affordable on a CPU: Phi is
  evaluated once per mesh (and cached), while the ODE only needs g and its first and second derivatives, which
  ``dynamics.LatentMap`` computes in closed form.

All geometry seen by the network is normalized: centred on the bounding-box centre, divided by its diagonal.
"""

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ModelConfig:
    d_model: int = 128
    n_heads: int = 4
    n_shape_tokens: int = 64
    n_posterior_tokens: int = 16
    encoder_self_layers: int = 2
    decoder_layers: int = 2
    n_freqs: int = 8  # Fourier feature octaves per coordinate
    latent_dim: int = 16
    n_basis: int = 64  # P: displacement basis fields per shape
    code_dim: int = 32  # pooled shape code fed to g
    coeff_hidden: int = 128

    def to_dict(self) -> dict:
        return asdict(self)


class FourierEmbed(nn.Module):
    """3DShape2VecSet-style positional features: x, sin(2^i pi x), cos(2^i pi x)."""

    def __init__(self, n_freqs: int):
        super().__init__()
        self.register_buffer("freqs", (2.0 ** torch.arange(n_freqs)) * math.pi, persistent=False)
        self.out_dim = 3 + 6 * n_freqs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = (x[..., None] * self.freqs).flatten(-2)
        return torch.cat([x, a.sin(), a.cos()], dim=-1)


class MLP(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    """Pre-norm attention block; cross-attention when a context is given, self-attention otherwise."""

    def __init__(self, d: int, n_heads: int, cross: bool):
        super().__init__()
        self.ln_q, self.ln_kv = nn.LayerNorm(d), (nn.LayerNorm(d) if cross else None)
        self.attn = nn.MultiheadAttention(d, n_heads, batch_first=True)
        self.ln_mlp, self.mlp = nn.LayerNorm(d), MLP(d)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        q = self.ln_q(x)
        kv = q if self.ln_kv is None else self.ln_kv(context)
        x = x + self.attn(q, kv, kv, need_weights=False)[0]
        return x + self.mlp(self.ln_mlp(x))


class PointEmbed(nn.Module):
    """Points (B, N, 3) plus per-point features (B, N, f) -> (B, N, d)."""

    def __init__(self, cfg: ModelConfig, n_features: int):
        super().__init__()
        self.fourier = FourierEmbed(cfg.n_freqs)
        self.proj = nn.Linear(self.fourier.out_dim + n_features, cfg.d_model)

    def forward(self, x, features):
        return self.proj(torch.cat([self.fourier(x), features], dim=-1))


class PriorEncoder(nn.Module):
    """Rest-shape point cloud (with a pinned flag per point) -> shape tokens, mu_cond, shape code."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed = PointEmbed(cfg, 1)
        self.tokens = nn.Parameter(torch.randn(cfg.n_shape_tokens, cfg.d_model) * 0.02)
        self.cross = Block(cfg.d_model, cfg.n_heads, cross=True)
        self.layers = nn.ModuleList(Block(cfg.d_model, cfg.n_heads, cross=False)
                                    for _ in range(cfg.encoder_self_layers))
        self.ln = nn.LayerNorm(cfg.d_model)
        self.to_mu = nn.Linear(cfg.d_model, cfg.latent_dim)
        self.to_code = nn.Linear(cfg.d_model, cfg.code_dim)

    def forward(self, points, pinned):
        h = self.embed(points, pinned[..., None])
        s = self.cross(self.tokens.expand(len(points), -1, -1), h)
        for layer in self.layers:
            s = layer(s)
        s = self.ln(s)
        pooled = s.mean(1)
        return s, self.to_mu(pooled), self.to_code(pooled)


class PosteriorEncoder(nn.Module):
    """Rest points + displacement at each point -> q(z | deformation) mean and log-variance."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed = PointEmbed(cfg, 1 + 3 + cfg.d_model)
        self.tokens = nn.Parameter(torch.randn(cfg.n_posterior_tokens, cfg.d_model) * 0.02)
        self.cross = Block(cfg.d_model, cfg.n_heads, cross=True)
        self.self_attn = Block(cfg.d_model, cfg.n_heads, cross=False)
        self.ln = nn.LayerNorm(cfg.d_model)
        self.out = nn.Linear(cfg.d_model, 2 * cfg.latent_dim)

    def forward(self, points, pinned, displacement, shape_tokens):
        # Displacements are a few percent of the diagonal; x10 brings them to the scale of the coordinates.
        shape = shape_tokens.mean(1, keepdim=True).expand(-1, points.shape[1], -1)
        h = self.embed(points, torch.cat([pinned[..., None], 10.0 * displacement, shape], dim=-1))
        t = self.self_attn(self.cross(self.tokens.expand(len(points), -1, -1), h))
        mu, logvar = self.out(self.ln(t).mean(1)).chunk(2, dim=-1)
        return mu, logvar.clamp(-8.0, 4.0)


class CoefficientMLP(nn.Module):
    """g(z, e): latent + shape code -> P basis coefficients (two SiLU layers; dynamics.LatentMap differentiates it)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.l1 = nn.Linear(cfg.latent_dim + cfg.code_dim, cfg.coeff_hidden)
        self.l2 = nn.Linear(cfg.coeff_hidden, cfg.coeff_hidden)
        self.l3 = nn.Linear(cfg.coeff_hidden, cfg.n_basis)

    def forward(self, z, code):
        h = F.silu(self.l1(torch.cat([z, code], dim=-1)))
        return self.l3(F.silu(self.l2(h)))


class Decoder(nn.Module):
    """Basis fields Phi(x) from query points attending to shape tokens, and the coefficient map g."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = PointEmbed(cfg, 1)
        self.layers = nn.ModuleList(Block(cfg.d_model, cfg.n_heads, cross=True) for _ in range(cfg.decoder_layers))
        self.ln = nn.LayerNorm(cfg.d_model)
        self.to_basis = nn.Linear(cfg.d_model, 3 * cfg.n_basis)
        self.coeff = CoefficientMLP(cfg)

    def basis(self, queries, pinned, shape_tokens) -> torch.Tensor:
        """Phi at query points: (B, N, 3, P), normalized displacement per unit coefficient."""
        h = self.embed(queries, pinned[..., None])
        for layer in self.layers:
            h = layer(h, shape_tokens)
        phi = self.to_basis(self.ln(h))
        # 1/sqrt(P) keeps displacements O(1) at initialization whatever the basis size.
        return phi.view(*phi.shape[:-1], 3, self.cfg.n_basis) / math.sqrt(self.cfg.n_basis)

    def coefficients(self, z, code) -> torch.Tensor:
        """g(z, e) - g(0, e): zero at z = 0, so the rest shape is decoded exactly."""
        return self.coeff(z, code) - self.coeff(torch.zeros_like(z), code)

    def forward(self, z, code, queries, pinned, shape_tokens):
        phi = self.basis(queries, pinned, shape_tokens)
        return torch.einsum("bnip,bp->bni", phi, self.coefficients(z, code))


class NeuROK(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.prior = PriorEncoder(cfg)
        self.posterior = PosteriorEncoder(cfg)
        self.decoder = Decoder(cfg)

    def forward(self, points, pinned, displacement, queries, query_pinned):
        """Training pass: encode rest + deformation, decode at queries. Returns (prediction, kl per shape)."""
        tokens, mu_cond, code = self.prior(points, pinned)
        mu, logvar = self.posterior(points, pinned, displacement, tokens)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        pred = self.decoder(z, code, queries, query_pinned, tokens)
        # KL(N(mu, sigma^2) || N(mu_cond, I)) summed over latent dimensions.
        kl = 0.5 * (logvar.exp() + (mu - mu_cond) ** 2 - 1.0 - logvar).sum(-1)
        return pred, kl
