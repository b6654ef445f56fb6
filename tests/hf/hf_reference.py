#!/usr/bin/env python3
"""tests/hf/hf_reference.py OUT_DIR — reference data for tests/hf/hf_model_cuda_test.cpp.

Builds small randomly initialised Hugging Face models with `transformers` (fixed seed, no download),
saves each with save_pretrained into OUT_DIR/<name>/, and writes OUT_DIR/<name>.json with a fixed
prompt, transformers' logits at the prompt's last position (float32) and transformers' greedy
`generate` of 64 new tokens (eos disabled, so exactly 64). The models:

  llama  LlamaForCausalLM, GQA (8 heads, 2 kv heads), llama3 rope scaling, untied, float32; its JSON
         also holds "mixed_requests": 32 prompts of 3 to 300 ids and each one's greedy 16 new tokens
  qwen2  Qwen2ForCausalLM, random non-zero q/k/v biases, tied embeddings, float32, sharded (max_shard_size)
  qwen3  Qwen3ForCausalLM, random q/k norm weights, head_dim 64 != 256 / 8, bfloat16
  gpt2   GPT2LMHeadModel, random non-zero biases, float32
  mixtral    MixtralForCausalLM, 8 experts top-2 (always renormalised), GQA, float32; also saved as
             mixtral_in_memory/: its state_dict under transformers' in-memory names (fused experts in 5)
  qwen2_moe  Qwen2MoeForCausalLM, 8 experts top-4 not renormalised, a sigmoid-gated shared expert, layer 0
             dense (mlp_only_layers), q/k/v biases, float32; its JSON also holds "mixed_requests"
  qwen3_moe  Qwen3MoeForCausalLM, 8 experts top-3 renormalised (norm_topk_prob), q/k norm, head_dim unset
             (hidden_size / heads), float32
  olmoe      OlmoeForCausalLM, 8 experts top-3 not renormalised, q/k norms across heads, GQA, float32

The logits and tokens come from each saved folder loaded back with from_pretrained, as a user would
run it. For the bfloat16 model the JSON also holds "last_logits_fp32" and "greedy_new_tokens_fp32": the
folder loaded in float32 (the same weights; the rotary frequencies computed afresh in float32, where
the bf16 model that wrote the folder had rounded its inv_freq buffer to bf16), the reference a bf16 run
is compared against (a bf16 greedy text parts from the float32 one after some tens of tokens).
Runs on CUDA when there is one (TF32 off), else on the CPU.
"""
import json
import os
import shutil
import sys

import torch
import transformers

SEED = 1234
VOCAB = 1000
NEW_TOKENS = 64
INIT_STD = 0.1  # transformers' 0.02 makes random models repeat one token; this varies the greedy text
PROMPT = [(37 * i + 11) % VOCAB for i in range(16)]


def rope_arguments(theta, scaling=None):
    """rope_theta / rope_scaling (transformers 4) or rope_parameters (5)."""
    if int(transformers.__version__.split(".")[0]) >= 5:
        parameters = {"rope_type": "default", "rope_theta": theta}
        if scaling:
            parameters.update(scaling)
        return {"rope_parameters": parameters}
    return {"rope_theta": theta, "rope_scaling": scaling}


def randomize(parameter, std, mean=0.0):
    with torch.no_grad():
        parameter.copy_(torch.randn_like(parameter) * std + mean)


def llama():
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=8,
        num_key_value_heads=2, max_position_embeddings=512, rms_norm_eps=1e-5, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2, initializer_range=INIT_STD,
        **rope_arguments(500000.0, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 64}))
    model = transformers.LlamaForCausalLM(config)
    for layer in model.model.layers:  # norms away from 1 so a misplaced norm weight shows
        randomize(layer.input_layernorm.weight, 0.1, 1.0)
        randomize(layer.post_attention_layernorm.weight, 0.1, 1.0)
    return model, {}


def qwen2():
    config = transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=8,
        num_key_value_heads=2, max_position_embeddings=512, rms_norm_eps=1e-6, tie_word_embeddings=True,
        use_sliding_window=False, bos_token_id=1, eos_token_id=[2, 3], initializer_range=INIT_STD,
        **rope_arguments(1000000.0))
    model = transformers.Qwen2ForCausalLM(config)
    for layer in model.model.layers:  # biases are initialised to zero: make them matter
        for projection in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
            randomize(projection.bias, 0.1)
    return model, {"max_shard_size": "1MB"}


def qwen3():
    config = transformers.Qwen3Config(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=8,
        num_key_value_heads=4, head_dim=64, max_position_embeddings=512, rms_norm_eps=1e-6,
        tie_word_embeddings=False, use_sliding_window=False, bos_token_id=1, eos_token_id=2,
        initializer_range=INIT_STD, **rope_arguments(1000000.0))
    model = transformers.Qwen3ForCausalLM(config)
    for layer in model.model.layers:
        randomize(layer.self_attn.q_norm.weight, 0.2, 1.0)
        randomize(layer.self_attn.k_norm.weight, 0.2, 1.0)
    return model.to(torch.bfloat16), {}


def gpt2():
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=256, n_layer=4, n_head=8, n_positions=512,
                                     activation_function="gelu_new", bos_token_id=0, eos_token_id=0,
                                     initializer_range=INIT_STD)
    model = transformers.GPT2LMHeadModel(config)
    for name, parameter in model.named_parameters():
        if name.endswith(".bias"):
            randomize(parameter, 0.05)
        elif name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
            randomize(parameter, 0.1, 1.0)
    return model, {}


def mixtral():
    config = transformers.MixtralConfig(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=384, num_hidden_layers=4, num_attention_heads=8,
        num_key_value_heads=2, max_position_embeddings=512, rms_norm_eps=1e-5, tie_word_embeddings=False,
        num_local_experts=8, num_experts_per_tok=2, sliding_window=None, bos_token_id=1, eos_token_id=2,
        initializer_range=INIT_STD, **rope_arguments(1000000.0))
    return transformers.MixtralForCausalLM(config), {}


def qwen2_moe():
    config = transformers.Qwen2MoeConfig(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=512, moe_intermediate_size=192,
        shared_expert_intermediate_size=320, num_experts=8, num_experts_per_tok=4, norm_topk_prob=False,
        mlp_only_layers=[0], decoder_sparse_step=1, num_hidden_layers=4, num_attention_heads=8,
        num_key_value_heads=2, max_position_embeddings=512, rms_norm_eps=1e-6, tie_word_embeddings=False,
        use_sliding_window=False, bos_token_id=1, eos_token_id=2, initializer_range=INIT_STD,
        **rope_arguments(1000000.0))
    model = transformers.Qwen2MoeForCausalLM(config)
    for layer in model.model.layers:
        for projection in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
            randomize(projection.bias, 0.1)
    return model, {}


def qwen3_moe():
    config = transformers.Qwen3MoeConfig(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=512, moe_intermediate_size=192, num_experts=8,
        num_experts_per_tok=3, norm_topk_prob=True, num_hidden_layers=4, num_attention_heads=8,
        num_key_value_heads=4, max_position_embeddings=512, rms_norm_eps=1e-6,
        tie_word_embeddings=False, use_sliding_window=False, bos_token_id=1, eos_token_id=2,
        initializer_range=INIT_STD, **rope_arguments(1000000.0))
    model = transformers.Qwen3MoeForCausalLM(config)
    for layer in model.model.layers:
        randomize(layer.self_attn.q_norm.weight, 0.2, 1.0)
        randomize(layer.self_attn.k_norm.weight, 0.2, 1.0)
    return model, {}


def olmoe():
    config = transformers.OlmoeConfig(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=192, num_experts=8, num_experts_per_tok=3,
        norm_topk_prob=False, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
        max_position_embeddings=512, rms_norm_eps=1e-5, tie_word_embeddings=False, clip_qkv=None,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=INIT_STD, **rope_arguments(10000.0))
    model = transformers.OlmoeForCausalLM(config)
    for layer in model.model.layers:
        randomize(layer.self_attn.q_norm.weight, 0.2, 1.0)
        randomize(layer.self_attn.k_norm.weight, 0.2, 1.0)
    return model, {}


def expert_layout(folder):
    """"fused" when the saved files hold transformers 5's gate_up_proj tensors, else "per_expert"."""
    from safetensors import safe_open
    for name in os.listdir(folder):
        if name.endswith(".safetensors"):
            with safe_open(os.path.join(folder, name), framework="pt") as file:
                if any(key.endswith("experts.gate_up_proj") for key in file.keys()):
                    return "fused"
    return "per_expert"


def save_in_memory(model, folder, target):
    """The loaded model's tensors under their in-memory names (transformers 5 keeps every expert's gate and up
    projections in one gate_up_proj) as a folder of its own: a fused checkpoint as transformers 5 holds it."""
    from safetensors.torch import save_file
    os.makedirs(target, exist_ok=True)
    shutil.copy(os.path.join(folder, "config.json"), target)
    tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in model.state_dict().items()}
    save_file(tensors, os.path.join(target, "model.safetensors"), metadata={"format": "pt"})


def load(model_class, folder, dtype, device):
    """The saved folder loaded back (dtype= in transformers 5, torch_dtype= in 4)."""
    key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    return model_class.from_pretrained(folder, **{key: dtype}).to(device).eval()


def last_logits(model, device):
    with torch.no_grad():
        ids = torch.tensor([PROMPT], device=device)
        return model(input_ids=ids).logits[0, -1].float().cpu().tolist()


def greedy(model, device):
    model.generation_config.eos_token_id = None  # exactly NEW_TOKENS tokens: no stop, no eos suppression
    model.generation_config.pad_token_id = 0
    ids = torch.tensor([PROMPT], device=device)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS,
                             do_sample=False)
    tokens = out[0, len(PROMPT):].cpu().tolist()
    assert len(tokens) == NEW_TOKENS, f"generate returned {len(tokens)} new tokens, expected {NEW_TOKENS}"
    return tokens


MIXED_REQUESTS = 32
MIXED_NEW_TOKENS = 16


def mixed_requests(model, device):
    """32 prompts of 3 to 300 seeded random ids, each continued greedily by 16 tokens on its own: the
    serving engine's check that a request's tokens do not depend on the requests beside it."""
    generator = torch.Generator().manual_seed(SEED + 1)
    prompts, tokens = [], []
    for _ in range(MIXED_REQUESTS):
        length = int(torch.randint(3, 301, (1,), generator=generator))
        prompt = torch.randint(3, VOCAB, (length,), generator=generator).tolist()
        model.generation_config.eos_token_id = None
        model.generation_config.pad_token_id = 0
        ids = torch.tensor([prompt], device=device)
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                 max_new_tokens=MIXED_NEW_TOKENS, do_sample=False)
        prompts.append(prompt)
        tokens.append(out[0, length:].cpu().tolist())
    return {"prompts": prompts, "greedy_new_tokens": tokens}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: hf_reference.py OUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    models = (("llama", llama), ("qwen2", qwen2), ("qwen3", qwen3), ("gpt2", gpt2), ("mixtral", mixtral),
              ("qwen2_moe", qwen2_moe), ("qwen3_moe", qwen3_moe), ("olmoe", olmoe))
    for name, build in models:
        torch.manual_seed(SEED)
        model, save_options = build()
        model.eval()
        folder = os.path.join(out_dir, name)
        model.save_pretrained(folder, **save_options)
        dtype = next(model.parameters()).dtype
        model = load(type(model), folder, dtype, device)
        record = {
            "name": name,
            "architecture": type(model).__name__,
            "dtype": str(dtype).replace("torch.", ""),
            "prompt": PROMPT,
            "last_logits": last_logits(model, device),
            "greedy_new_tokens": greedy(model, device),
            "greedy_note": "model.generate(do_sample=False, max_new_tokens=64) with generation_config.eos_token_id "
                           "= None: the argmax token at every step, the prompt not included",
            "transformers_version": transformers.__version__,
            "torch_version": torch.__version__,
            "device": device,
            "files": sorted(os.listdir(folder)),
        }
        if name in ("llama", "qwen2_moe"):
            record["mixed_requests"] = mixed_requests(model, device)
        if name in ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe"):
            record["expert_layout"] = expert_layout(folder)
        if name == "mixtral":  # the same weights under transformers' in-memory names, in mixtral_in_memory/
            save_in_memory(model, folder, folder + "_in_memory")
            record["in_memory_layout"] = expert_layout(folder + "_in_memory")
        if dtype != torch.float32:
            fp32 = load(type(model), folder, torch.float32, device)
            record["last_logits_fp32"] = last_logits(fp32, device)
            record["greedy_new_tokens_fp32"] = greedy(fp32, device)
        with open(os.path.join(out_dir, name + ".json"), "w") as file:
            json.dump(record, file)
        print(f"{name}: {record['architecture']} {record['dtype']} files {record['files']}")


if __name__ == "__main__":
    main()
