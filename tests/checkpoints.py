"""Small random checkpoints in Hugging Face layout, made offline the way users make theirs: `transformers`' own
model classes and `save_pretrained`, a SentencePiece tokenizer trained here on a few sentences, and a chat template
in tokenizer_config.json. Needs the [hf] extra's packages (torch, transformers, sentencepiece)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

CORPUS = [
    "the quick brown fox jumps over the lazy dog", "hello world, how are you today?",
    "deep learning is a kind of machine learning", "pier serves models on cpus",
    "what is the capital of france? paris.", "user: hi\nassistant: hello there",
] * 20
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant:{% endif %}")
PROMPTS = ["hello world", "the quick brown", "what is deep learning", "pier serves"]


def tokenizer_model() -> bytes:
    """A SentencePiece BPE model with byte fallback, ids 0-2 for <unk>, <s>, </s> as Llama's."""
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS), model_writer=model, vocab_size=384,
                                   model_type="bpe", byte_fallback=True, character_coverage=1.0, unk_id=0, bos_id=1,
                                   eos_id=2, pad_id=-1, minloglevel=2)
    return model.getvalue()


def llama(folder: Path, *, shard_size: str | None = "100KB", architecture: str | None = None) -> Path:
    """A two-layer Llama with random weights (wide enough that greedy choices stand clear of float noise), saved
    sharded with its index when `shard_size` is set; `architecture` renames it in config.json."""
    return made(folder, "llama", shard_size=shard_size, architecture=architecture)


SHAPE = {"vocab_size": 384, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512, "bos_token_id": 1,
         "eos_token_id": 2, "pad_token_id": 0, "initializer_range": 0.3}
# transformers' config and model classes of each architecture, with what that architecture needs besides SHAPE.
ARCHITECTURES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {"tie_word_embeddings": False}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"tie_word_embeddings": False, "sliding_window": None}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"head_dim": 16}),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", {"head_dim": 16}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"tie_word_embeddings": False}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {"tie_word_embeddings": False}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"tie_word_embeddings": False, "head_dim": 16}),
}


def made(folder: Path, kind: str, *, shard_size: str | None = None, architecture: str | None = None) -> Path:
    """A random checkpoint of one of ARCHITECTURES, with the SentencePiece tokenizer and the chat template."""
    import torch
    import transformers

    config_class, model_class, extra = ARCHITECTURES[kind]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.model").write_bytes(tokenizer_model())
    config = getattr(transformers, config_class)(**SHAPE, **extra)
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(config)
    model.save_pretrained(folder, **({"max_shard_size": shard_size} if shard_size else {}))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "add_bos_token": True, "add_eos_token": False, "chat_template": CHAT_TEMPLATE}))
    if architecture:
        settings = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**settings, "architectures": [architecture]}))
    return folder


def greedy(folder: Path, prompt_ids: list[int], tokens: int) -> tuple[list[int], float]:
    """transformers' own greedy continuation of `prompt_ids`, and the smallest gap between the top two logits
    along it (below float noise, an engine may fairly pick the other token)."""
    import torch
    from transformers import AutoModelForCausalLM

    model: Any = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt_ids]), max_new_tokens=tokens, do_sample=False,
                             output_scores=True, return_dict_in_generate=True, eos_token_id=None, pad_token_id=0)
    gaps = [float(torch.topk(score[0], 2).values.diff().abs()) for score in out.scores]
    return out.sequences[0][len(prompt_ids):].tolist(), min(gaps)


def with_retrained_bpe(folder: Path) -> Path:
    """The checkpoint's tokenizer replaced by a byte-level BPE trained here (as a user who retrains one has): its
    token ids match no pre-tokenizer llama.cpp's converter knows."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    (folder / "tokenizer.model").unlink()
    (folder / "tokenizer_config.json").unlink()
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=384, special_tokens=["<|endoftext|>"],
                                                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>").save_pretrained(folder)
    return folder


LORA_TARGETS = ("q_proj", "v_proj")


def lora(folder: Path, base: Path, base_name: str, *, rank: int = 4, alpha: float = 8.0) -> Path:
    """A LoRA adapter of `base` in PEFT's layout (adapter_config.json, adapter_model.safetensors) on the
    attention's q and v projections, with random A and B (a trained adapter's B is not zero either)."""
    import torch
    from safetensors.torch import save_file

    settings = json.loads((base / "config.json").read_text())
    hidden, heads, kv_heads = settings["hidden_size"], settings["num_attention_heads"], settings["num_key_value_heads"]
    head_dim = settings.get("head_dim") or hidden // heads
    out_features = {"q_proj": heads * head_dim, "v_proj": kv_heads * head_dim}
    generator = torch.Generator().manual_seed(7)
    tensors = {}
    for layer in range(settings["num_hidden_layers"]):
        for target in LORA_TARGETS:
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{target}"
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(rank, hidden, generator=generator) * 0.3
            tensors[f"{prefix}.lora_B.weight"] = torch.randn(out_features[target], rank, generator=generator) * 0.3
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "base_model_name_or_path": base_name, "r": rank, "lora_alpha": alpha,
        "target_modules": list(LORA_TARGETS), "lora_dropout": 0.0, "bias": "none", "task_type": "CAUSAL_LM"}))
    return folder


def merged(base: Path, adapter: Path, into: Path) -> Path:
    """The base checkpoint with the adapter's W + (alpha / r) B A written into its weights: the reference a
    served base-plus-adapter must answer as."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    settings = json.loads((adapter / "adapter_config.json").read_text())
    scale = settings["lora_alpha"] / settings["r"]
    tensors = load_file(str(adapter / "adapter_model.safetensors"))
    model: Any = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    weights = dict(model.named_parameters())
    with torch.no_grad():
        for name, a in tensors.items():
            if ".lora_A." in name:
                b = tensors[name.replace(".lora_A.", ".lora_B.")]
                target = name.removeprefix("base_model.model.").replace(".lora_A.weight", ".weight")
                weights[target] += scale * (b @ a)
    model.save_pretrained(into)
    return into
