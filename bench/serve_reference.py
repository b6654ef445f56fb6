#!/usr/bin/env python3
"""bench/serve_reference.py — transformers serving the workload that `graphed bench --serve --json` wrote, on the same
model shape (a random bf16 LlamaForCausalLM built in-process, no download), so both come from one run on one GPU.

Paths (--paths, a comma list; default continuous,generate):
  continuous  continuous batching with paged attention: model.init_continuous_batching's ContinuousBatchingManager,
              warmed by manager.warmup() (CUDA graphs where transformers turns them on: with flash attention, not
              paged|sdpa), each request added by manager.add_request with its own max_new_tokens at its arrival time
              (all at once when every arrival is 0); token times are transformers' per-token timestamps
              (record_timestamps); warmup: the longest prompt and 3 short ones. Attention "paged|flash_attention_2"
              when flash_attn imports, else "paged|sdpa", whose steps grow far faster than the batch: it runs with
              ContinuousBatchingConfig(max_requests_per_batch=32) unless --max-requests-per-batch says otherwise
              (seen on an H100: 512 requests at once uncapped, 8 done in 200 s; 128 requests, 534 tok/s at 32 and
              491 at 64).
  generate    static batching: model.generate (dynamic cache, sdpa) on --batch-size requests at a time in arrival
              order, left padded, each batch drawing its longest output (only each request's own length counts).
              A batch's first-token time is a separate timed generate of 1 new token on it, outside the wall time;
              TTFT = wait from arrival to the batch's start + that; TPOT = (batch time - first token time) /
              (new tokens - 1). A virtual clock: a batch starts when the one before ends and its last request arrived.
  forward     prefill only (gpu-check's time to first token): one forward over each prompt alone with a KV cache
              and the last position's logits, median of 3 after a warmup; TTFT = that time, no TPOT.

PyTorch's cuDNN attention backend is off: it builds a cuDNN graph for each new sequence length (about 3 ms a layer
the first time, seen with torch 2.11 on an H100), which every decode step of a growing cache meets; SDPA then runs its
flash or memory-efficient kernels. Greedy, eos disabled: each request draws exactly its output length. Prompt ids are
random, seeded by the workload's seed (graphed draws its own; the values do not change the timing). TTFT / TPOT p50
and p99: nearest rank over requests, as graphed reports them (one-token requests have no TPOT; 0 when none). A failing
path prints "failed: <reason>" and the others run; a path past --max-seconds is cut and reports the requests done (its
note says so). Exit status 0, or 2 when the workload file is unreadable or invalid.
Usage: python3 bench/serve_reference.py --workload FILE [--paths continuous,generate] [--batch-size 32]
       [--max-requests-per-batch N] [--max-seconds 900] [--json]
"""
import argparse
import contextlib
import gc
import importlib.util
import inspect
import json
import math
import os
import statistics
import sys
import threading
import time

try:
    import torch
    import transformers
except Exception as error:  # every path reports it
    torch = transformers = None
    IMPORT_ERROR = error

PATHS = ("forward", "continuous", "generate")
SHAPE_FIELDS = ("hidden_size", "ffn_hidden_size", "num_layers", "num_attention_heads", "num_query_groups", "vocab_size",
                "max_position_embeddings", "rotary_base", "norm_epsilon")


class WorkloadError(Exception):
    pass


def load_workload(path):
    """(model_shape, workload) of a `graphed bench --serve --json` file; WorkloadError when it is not one."""
    try:
        with open(path) as file:
            document = json.load(file)
        shape, workload = document["model_shape"], document["workload"]
        names = ("prompt_lengths", "output_lengths", "arrival_seconds")
        prompts, outputs, arrivals = (workload[name] for name in names)
        valid = (len(prompts) == len(outputs) == len(arrivals) > 0 and min(shape[name] for name in SHAPE_FIELDS) > 0
                 and all(isinstance(value, int) and value >= 1 for value in list(prompts) + list(outputs))
                 and all(isinstance(value, (int, float)) and value >= 0 for value in arrivals)
                 and isinstance(workload["seed"], int)
                 and isinstance(shape["untie_embeddings_and_output_weights"], bool))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise WorkloadError(f"unreadable or incomplete ({one_line(error)})") from None
    if not valid:
        raise WorkloadError("needs prompt_lengths and output_lengths >= 1 and arrival_seconds >= 0 of one length, "
                            "an integer seed and a positive model_shape")
    return shape, workload


def one_line(error):
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:200]}" if lines else type(error).__name__


def percentile(values, fraction):
    """graphed's nearest rank: the value at rank ceil(fraction x n) of the sorted values; 0 for none."""
    ordered = sorted(values)
    return ordered[min(len(ordered), max(math.ceil(fraction * len(ordered)), 1)) - 1] if ordered else 0.0


def summarize(path, requests, output_tokens, seconds, ttft_ms, tpot_ms, notes):
    row = {"path": path, "requests": requests, "output_tokens": output_tokens, "seconds": seconds,
           "output_tokens_per_second": output_tokens / seconds if seconds > 0 else 0.0,
           "requests_per_second": requests / seconds if seconds > 0 else 0.0,
           "ttft_ms_p50": percentile(ttft_ms, 0.5), "ttft_ms_p99": percentile(ttft_ms, 0.99),
           "tpot_ms_p50": percentile(tpot_ms, 0.5), "tpot_ms_p99": percentile(tpot_ms, 0.99)}
    if notes:
        row["note"] = "; ".join(notes)
    return row


def rope_arguments(theta):
    """rope_theta (transformers 4) or rope_parameters (5), as tests/hf/hf_reference.py does."""
    if int(transformers.__version__.split(".")[0]) >= 5:
        return {"rope_parameters": {"rope_type": "default", "rope_theta": theta}}
    return {"rope_theta": theta}


def build_model(shape):
    config = transformers.LlamaConfig(
        hidden_size=int(shape["hidden_size"]), intermediate_size=int(shape["ffn_hidden_size"]),
        num_hidden_layers=int(shape["num_layers"]), num_attention_heads=int(shape["num_attention_heads"]),
        num_key_value_heads=int(shape["num_query_groups"]), vocab_size=int(shape["vocab_size"]),
        max_position_embeddings=int(shape["max_position_embeddings"]), rms_norm_eps=float(shape["norm_epsilon"]),
        tie_word_embeddings=not shape["untie_embeddings_and_output_weights"], bos_token_id=None, eos_token_id=None,
        **rope_arguments(float(shape["rotary_base"])))
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    model.eval()
    return model


def make_prompts(workload, vocabulary):
    generator = torch.Generator().manual_seed(workload["seed"])
    return [torch.randint(0, vocabulary, (length,), generator=generator).tolist()
            for length in workload["prompt_lengths"]]


def use_attention(model, names):
    """Sets the first of `names` that the model takes; returns it."""
    errors = []
    for name in names:
        try:
            model.set_attn_implementation(name)
            return name
        except Exception as error:  # not installed, or unknown to this transformers
            errors.append(f"{name}: {one_line(error)}")
    raise RuntimeError("no attention implementation: " + "; ".join(errors))


def start_manager(model, workload, max_requests):
    from transformers.generation import ContinuousBatchingConfig, GenerationConfig
    config = ContinuousBatchingConfig(**({"max_requests_per_batch": max_requests} if max_requests else {}))
    arguments = {"continuous_batching_config": config, "generation_config": GenerationConfig(
        max_new_tokens=max(workload["output_lengths"]), do_sample=False, eos_token_id=None, pad_token_id=0)}
    if "workload_hints" in inspect.signature(model.init_continuous_batching).parameters:
        from transformers.generation.continuous_batching.utils import WorkloadHints
        hints = {"max_prompt_length": max(workload["prompt_lengths"]), "num_requests": len(workload["prompt_lengths"]),
                 "max_generated_length": max(workload["output_lengths"])}
        fields = getattr(WorkloadHints, "__dataclass_fields__", hints)
        arguments["workload_hints"] = WorkloadHints(**{name: hints[name] for name in hints if name in fields})
    manager = model.init_continuous_batching(**arguments)
    if hasattr(manager, "warmup"):
        manager.warmup()  # as generate_batch(warmup=True) does: captures the CUDA graphs where they are on
    manager.start()
    return manager


def stop_manager(manager, hard):
    try:
        hard = {"hard_stop": True} if hard and "hard_stop" in inspect.signature(manager.stop).parameters else {}
        manager.stop(block=True, timeout=60, **hard)
        if hasattr(manager, "destroy"):
            manager.destroy()
    except Exception as error:  # the figures are taken; a failed shutdown only keeps memory
        print(f"serve_reference: stopping the continuous batching manager: {one_line(error)}", file=sys.stderr)


def request_timings(entry, result):
    """(TTFT ms or None, TPOT ms or None, tokens) of a finished request from transformers' timestamps, or from our
    own times of its streamed outputs when add_request takes no record_timestamps."""
    arrival, first, last = entry[1:]
    tokens = len(result.generated_tokens)
    stamps = getattr(result, "timestamps", None) or []
    if 0 < len(stamps) < tokens:  # preempted and prefilled again: its earlier stamps were dropped
        return None, (stamps[-1] - stamps[0]) * 1000.0 / (len(stamps) - 1) if len(stamps) > 1 else None, tokens
    if stamps:
        first, last = stamps[0], stamps[tokens - 1]
    return (first - arrival) * 1000.0, (last - first) * 1000.0 / (tokens - 1) if tokens > 1 else None, tokens


def serve(manager, prompts, outputs, arrivals, max_seconds, tag):
    """Adds each request at its arrival time; returns ({index: timings}, seconds, whether cut by max_seconds)."""
    parameters = inspect.signature(manager.add_request).parameters
    extra = {"record_timestamps": True} if "record_timestamps" in parameters else {"streaming": True}
    extra.update({"eos_token_id": -1} if "eos_token_id" in parameters else {})  # -1: no eos
    order = sorted(range(len(prompts)), key=arrivals.__getitem__)
    submitted, live, done, start = 0, {}, {}, time.perf_counter()
    while len(done) < len(order):
        now = time.perf_counter() - start
        while submitted < len(order) and arrivals[order[submitted]] <= now:
            index = order[submitted]
            live[f"{tag}_{index}"] = [index, start + arrivals[index], None, None]
            manager.add_request(input_ids=prompts[index], request_id=f"{tag}_{index}", max_new_tokens=outputs[index],
                                **extra)
            submitted += 1
        if now > max_seconds:
            for request_id in (request_id for request_id, entry in live.items() if entry[0] not in done):
                manager.cancel_request(request_id)
            return done, now, True
        if not manager.is_running():
            raise RuntimeError("the continuous batching manager's thread stopped (its log is on stderr)")
        wait = 0.05 if submitted == len(order) else min(0.05, max(0.001, arrivals[order[submitted]] - now))
        result = manager.get_result(timeout=wait)
        entry = live.get(getattr(result, "request_id", None))
        if entry is not None and getattr(result, "error", None):
            raise RuntimeError(f"request {result.request_id}: {result.error}")
        if entry is not None:
            entry[2], entry[3] = entry[2] or time.perf_counter(), time.perf_counter()
            if result.is_finished():
                done[entry[0]] = request_timings(entry, result)
    return done, time.perf_counter() - start, False


def run_continuous(model, prompts, workload, max_requests, max_seconds):
    outputs, arrivals = workload["output_lengths"], workload["arrival_seconds"]
    names = (["paged|flash_attention_2"] if importlib.util.find_spec("flash_attn") else []) + ["paged|sdpa"]
    attention = use_attention(model, names)
    max_requests = (32 if attention == "paged|sdpa" else 0) if max_requests is None else max_requests
    notes = [f"attention {attention}", f"max_requests_per_batch {max_requests or 'default'}",
             "requests added at their arrival times" if any(arrivals) else "all requests added at once"]
    manager, cut = start_manager(model, workload, max_requests), False
    try:
        longest = max(prompts, key=len)
        serve(manager, [longest] + [longest[:16]] * 3, [4] * 4, [0.0] * 4, max_seconds, "warmup")
        done, seconds, cut = serve(manager, prompts, outputs, arrivals, max_seconds, "request")
    finally:
        stop_manager(manager, cut)
    ttft = [timings[0] for timings in done.values() if timings[0] is not None]
    tpot = [timings[1] for timings in done.values() if timings[1] is not None]
    wrong = sum(1 for index, timings in done.items() if timings[2] != outputs[index])
    for count, text in ((len(done) - len(ttft), "preempted requests lost their first-token times (no TTFT)"),
                        (wrong, "requests drew another number of tokens than asked"),
                        (cut and len(done), f"of {len(prompts)} requests done: cut at --max-seconds {max_seconds:g}")):
        notes += [f"{count} {text}"] if count else []
    return summarize("continuous", len(done), sum(timings[2] for timings in done.values()), seconds, ttft, tpot, notes)


def left_padded(prompts):
    width = max(len(prompt) for prompt in prompts)
    ids = torch.tensor([[0] * (width - len(prompt)) + prompt for prompt in prompts], device="cuda")
    mask = torch.tensor([[0] * (width - len(prompt)) + [1] * len(prompt) for prompt in prompts], device="cuda")
    return ids, mask


def timed_generate(model, ids, mask, new_tokens):
    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             do_sample=False, eos_token_id=None, pad_token_id=0)
    torch.cuda.synchronize()
    if out.shape[1] != ids.shape[1] + new_tokens:
        raise RuntimeError(f"generate drew {out.shape[1] - ids.shape[1]} tokens, not {new_tokens}")
    return time.perf_counter() - start


def run_generate(model, prompts, workload, batch_size, max_seconds):
    use_attention(model, ["sdpa"])
    outputs, arrivals = workload["output_lengths"], workload["arrival_seconds"]
    order = sorted(range(len(prompts)), key=arrivals.__getitem__)
    batches = [order[begin:begin + batch_size] for begin in range(0, len(order), batch_size)]
    # Warmup at the largest shape, so that the caching allocator holds what the batches need
    timed_generate(model, *left_padded([max(prompts, key=len)] * len(batches[0])), max(outputs))
    clock, ttft, tpot, tokens, served, notes = 0.0, [], [], 0, 0, [f"static batches of {batch_size}, sdpa"]
    started = time.perf_counter()
    for number, batch in enumerate(batches):
        ids, mask = left_padded([prompts[index] for index in batch])
        new_tokens = max(outputs[index] for index in batch)
        full, first = timed_generate(model, ids, mask, new_tokens), timed_generate(model, ids, mask, 1)
        begin = max([clock] + [arrivals[index] for index in batch])
        ttft += [(begin - arrivals[index] + first) * 1000.0 for index in batch]
        tpot += [(full - first) * 1000.0 / (new_tokens - 1) for index in batch if outputs[index] > 1]
        clock, served, tokens = begin + full, served + len(batch), tokens + sum(outputs[index] for index in batch)
        if time.perf_counter() - started > max_seconds and number + 1 < len(batches):
            notes.append(f"cut at --max-seconds {max_seconds:g}: {served} of {len(prompts)} requests done")
            break
    return summarize("generate", served, tokens, clock, ttft, tpot, notes)


def forward_ms(model, ids):
    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.no_grad():
        model(input_ids=ids, use_cache=True, logits_to_keep=1).logits[:, -1].argmax(-1)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1000.0


def run_forward(model, prompts, max_seconds):
    use_attention(model, ["sdpa"])
    ttft, notes, started = [], ["prefill only: one forward per prompt, median of 3; no TPOT"], time.perf_counter()
    for prompt in prompts:
        ids = torch.tensor([prompt], device="cuda")
        forward_ms(model, ids)  # warmup
        ttft.append(statistics.median(forward_ms(model, ids) for _ in range(3)))
        if time.perf_counter() - started > max_seconds and len(ttft) < len(prompts):
            notes.append(f"cut at --max-seconds {max_seconds:g}: {len(ttft)} of {len(prompts)} requests done")
            break
    return summarize("forward", len(ttft), len(ttft), sum(ttft) / 1000.0, ttft, [], notes)


def run_paths(names, shape, workload, args):
    environment = {"device": "none", "transformers": getattr(transformers, "__version__", "none"),
                   "torch": getattr(torch, "__version__", "none")}
    try:
        if torch is None:
            raise IMPORT_ERROR
        if not torch.cuda.is_available():
            raise RuntimeError("needs a CUDA device")
        environment["device"] = torch.cuda.get_device_name()
        torch.backends.cuda.matmul.allow_tf32 = False
        getattr(torch.backends.cuda, "enable_cudnn_sdp", lambda enabled: None)(False)  # see the docstring
        model, prompts = build_model(shape), make_prompts(workload, int(shape["vocab_size"]))
    except Exception as error:
        print(f"serve_reference: setup failed: {one_line(error)}", file=sys.stderr)
        return environment, [{"path": name, "failed": f"setup: {one_line(error)}"} for name in names]
    runners = {"forward": lambda: run_forward(model, prompts, args.max_seconds),
               "continuous": lambda: run_continuous(model, prompts, workload, args.max_requests, args.max_seconds),
               "generate": lambda: run_generate(model, prompts, workload, args.batch_size, args.max_seconds)}
    rows = []
    for name in names:
        try:
            if name not in runners:
                raise ValueError(f"unknown path (known: {', '.join(PATHS)})")
            rows.append(runners[name]())
        except Exception as error:  # report, never fail the run on a reference that does not work
            rows.append({"path": name, "failed": one_line(error)})
            print(f"serve_reference: {name} failed: {one_line(error)}", file=sys.stderr)
        gc.collect()
        with contextlib.suppress(Exception):  # a path that broke the CUDA context is reported already
            torch.cuda.empty_cache()
    return environment, rows


def print_table(environment, rows, workload):
    prompts, outputs = workload["prompt_lengths"], workload["output_lengths"]
    arrival = "arriving over time" if any(workload["arrival_seconds"]) else "all at once"
    print(f"serve_reference: transformers {environment['transformers']} on {environment['device']}, torch "
          f"{environment['torch']}, {len(prompts)} requests (prompts {min(prompts)}..{max(prompts)}, outputs "
          f"{min(outputs)}..{max(outputs)}, {arrival}), greedy, bf16")
    print("| path | requests | output tok/s | req/s | TTFT p50 / p99 ms | TPOT p50 / p99 ms | seconds |\n"
          "|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['path']} | failed: {row['failed']} ||||||" if "failed" in row else
              f"| {row['path']} | {row['requests']} | {row['output_tokens_per_second']:.0f} | "
              f"{row['requests_per_second']:.2f} | {row['ttft_ms_p50']:.1f} / {row['ttft_ms_p99']:.1f} | "
              f"{row['tpot_ms_p50']:.2f} / {row['tpot_ms_p99']:.2f} | {row['seconds']:.2f} |")
    for row in (row for row in rows if "note" in row):
        print(f"note ({row['path']}): {row['note']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", required=True, help="the JSON of graphed bench --serve --json")
    parser.add_argument("--paths", default="continuous,generate", help=f"comma list of {', '.join(PATHS)}")
    parser.add_argument("--batch-size", type=int, default=32, help="requests per batch of the generate path")
    parser.add_argument("--max-requests-per-batch", dest="max_requests", type=int, default=None,
                        help="the continuous path's cap (0: transformers' default; default 32 under paged|sdpa)")
    parser.add_argument("--max-seconds", type=float, default=900.0, help="cut a path's timed run past this")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        shape, workload = load_workload(args.workload)
    except WorkloadError as error:
        print(f"serve_reference: workload {args.workload}: {error}", file=sys.stderr)
        return 2
    args.batch_size = max(1, args.batch_size)
    names = [name.strip() for name in args.paths.split(",") if name.strip()]
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the table or the JSON alone
        environment, rows = run_paths(names, shape, workload, args)
    if args.json:
        print(json.dumps({**environment, "paths": rows}, indent=2))
    else:
        print_table(environment, rows, workload)
    return 0


if __name__ == "__main__":
    status = main()
    if threading.active_count() > 1:  # a manager thread that would not stop must not hold the exit
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)
