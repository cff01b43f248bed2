"""The model's configuration as an input: a Hugging Face `config.json` read for the sizes a serving trace hides.

Serving engines find an MoE layer's expert weights and an attention layer's KV cache by layer name (vLLM
`moe_forward(hidden, router_logits, layer_name)`, `unified_attention*(q, k, v, out, layer_name)`): the trace records
the activations, not the weights. The model's `config.json` gives those sizes. Keys read (the first present of each
line; multimodal configs nest the language model under `text_config` / `llm_config`, read when the top has none):

    hidden_size; moe_intermediate_size, intermediate_size; num_local_experts, num_experts, n_routed_experts;
    num_experts_per_tok; num_attention_heads; num_key_value_heads; head_dim; num_hidden_layers; sliding_window;
    layer_types; quantization_config (its quant_method / quant_algo)

Two keys beyond Hugging Face's say how the model is split across the ranks of a serving run (vLLM's engine argument
names): `tensor_parallel_size` (each rank holds 1/tp of every expert's intermediate size) and
`expert_parallel_size` (each rank holds 1/ep of the experts: the routed rows it runs are counted as 1/ep of all,
the share balanced routing gives). Without them the figures are those of the whole layer, said so.

A config is validated on load (one-line `ConfigError`), and its `digest` joins the summary key of every span it
rates, like the device row.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from ..errors import ConfigError
from ..trace.source import read_head

FILENAME = "model_config.json"  # a run directory's model config, found by logdir discovery

# Each size the estimates use, and the config keys that give it (first present wins).
KEYS: Dict[str, Tuple[str, ...]] = {
    "hidden": ("hidden_size",),
    "intermediate": ("moe_intermediate_size", "intermediate_size"),
    "experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "top_k": ("num_experts_per_tok",),
    "heads": ("num_attention_heads",),
    "kv_heads": ("num_key_value_heads",),
    "head_dim": ("head_dim",),
    "layers": ("num_hidden_layers",),
    "sliding_window": ("sliding_window",),
    "tensor_parallel": ("tensor_parallel_size",),
    "expert_parallel": ("expert_parallel_size",),
}
_NESTED = ("text_config", "llm_config", "language_config")
_MAX_BYTES = 4 << 20  # a config.json is a few KB; a bigger file is not one


@dataclass(frozen=True)
class ModelConfig:
    """The sizes read from a model's config (`sizes`: name -> int, only those present), the config key each came
    from (`keys`), its quantization method ("" none) and a digest of what was read."""

    sizes: Mapping[str, int]
    keys: Mapping[str, str]
    quantization: str = ""
    layer_types: Tuple[str, ...] = ()
    source: str = ""
    digest: str = field(default="", compare=False)

    def get(self, name: str) -> Optional[int]:
        """A size by its name in KEYS, or None when the config does not give it."""
        return self.sizes.get(name)

    def key(self, name: str) -> str:
        """The config key a size came from (for provenance), or the first key that would give it."""
        return self.keys.get(name) or KEYS[name][0]

    def label(self) -> str:
        """Where the config came from, for reasons: its file name or "model config"."""
        return os.path.basename(self.source) if self.source else "model config"


def load_model_config(config: "ModelConfig | Mapping[str, Any] | os.PathLike[str] | str | None"
                      ) -> Optional[ModelConfig]:
    """A `ModelConfig` from a path to a `config.json`, a dict of its keys, or one already loaded (None stays None).
    Raises ConfigError (one line) for a file that cannot be read or is not a model config."""
    if config is None or isinstance(config, ModelConfig):
        return config
    if isinstance(config, Mapping):
        return from_dict(config, "")
    path = os.fspath(config)
    try:
        raw = read_head(path, _MAX_BYTES + 1)  # a local path or an fsspec URL; a FIFO or device is refused
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the model config ({exc.strerror or exc})") from None
    if len(raw) > _MAX_BYTES:
        raise ConfigError(f"{path}: too large for a model config (over {_MAX_BYTES:,} bytes)")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not JSON ({str(exc)[:80]}); give the model's Hugging Face config.json") from None
    return from_dict(data, path)


def from_dict(data: Any, source: str = "") -> ModelConfig:
    """A `ModelConfig` from a config.json's object; ConfigError when it gives no size this project reads."""
    where = source or "model config"
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: a model config is a JSON object (a Hugging Face config.json)")
    sizes: Dict[str, int] = {}
    keys: Dict[str, str] = {}
    for name, names in KEYS.items():
        found = _first(data, names)
        if found is None:
            continue
        key, value = found
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            if value is None and name == "sliding_window":
                continue  # null: no sliding window
            raise ConfigError(f"{where}: {key} must be a positive integer, not {str(value)[:40]!r}")
        sizes[name], keys[name] = value, key
    if not any(k in sizes for k in ("hidden", "heads", "intermediate")):
        raise ConfigError(f"{where}: no hidden_size, intermediate_size or num_attention_heads: not a model's "
                          "config.json")
    kinds = _first(data, ("layer_types",))
    layer_types = tuple(str(t) for t in kinds[1]) if kinds and isinstance(kinds[1], list) else ()
    quant = _quantization(_first(data, ("quantization_config",)))
    import hashlib  # only with a config: a plain analysis imports no hashing

    text = json.dumps({"sizes": sizes, "quant": quant, "layers": layer_types}, sort_keys=True)
    return ModelConfig(sizes, keys, quant, layer_types, source, hashlib.sha256(text.encode()).hexdigest()[:16])


def _first(data: Mapping[str, Any], names: Tuple[str, ...]) -> Optional[Tuple[str, Any]]:
    """(key, value) of the first of `names` at the top level, else in a nested language-model config."""
    for scope in (data, *(data.get(n) for n in _NESTED)):
        if isinstance(scope, Mapping):
            for name in names:
                if name in scope:
                    return name, scope[name]
    return None


def _quantization(found: Optional[Tuple[str, Any]]) -> str:
    """The weights' format from `quantization_config`: its quant_algo (ModelOpt's "NVFP4", "FP8") or quant_method
    ("mxfp4", "fp8", ...), lower case; "" when absent."""
    if not found or not isinstance(found[1], Mapping):
        return ""
    q = found[1]
    for key in ("quant_algo", "quant_method"):
        if isinstance(q.get(key), str) and q[key]:
            return q[key].lower()
    return ""


def weight_bytes_per_value(config: ModelConfig, activation_itemsize: Union[int, float]) -> Tuple[float, str]:
    """Bytes one weight takes in DRAM under the config's quantization (scales included), and how that was read:
    MXFP4 half a byte plus one 8-bit scale per 32 values (OCP MX), NVFP4 half a byte plus one FP8 scale per 16,
    FP8 one byte; unquantized weights have the activation's element size."""
    q = config.quantization
    if "mxfp4" in q:
        return 0.5 + 1 / 32, "mxfp4 weights (4 bits + one 8-bit scale per 32)"
    if "nvfp4" in q or q == "fp4":
        return 0.5 + 1 / 16, "nvfp4 weights (4 bits + one FP8 scale per 16)"
    if "fp8" in q or "w8a8" in q:
        return 1.0, "fp8 weights"
    return float(activation_itemsize), "weights of the activation's dtype"


__all__ = ["FILENAME", "KEYS", "ModelConfig", "load_model_config", "from_dict", "weight_bytes_per_value"]
