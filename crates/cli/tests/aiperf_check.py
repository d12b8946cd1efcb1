"""Loads infertrace's exports with AIPerf's own dataset loaders (aiperf 0.13.0), without sending any request.

usage: aiperf_check.py TOKENIZER_DIR MOONCAKE AIPERF_MOONCAKE AIPERF_MULTI_TURN

AIPerf makes the prompts of a mooncake_trace from its hash_ids with a tokenizer. This machine may not reach the
Hugging Face hub, so a small byte-level BPE is trained on AIPerf's own bundled corpus and put in a Hugging Face
cache under TOKENIZER_DIR, as model `infertrace/test-bpe` (AIPerf's decoding processes load tokenizers offline,
from that cache only). Prints one JSON line: per file, the conversations and turns AIPerf built, the turns with a
timestamp, and the turns whose prompt is not what the file asks for.
"""

import json
import os
import sys

# Before transformers and huggingface_hub are imported, which read them once.
os.environ["HF_HUB_CACHE"] = os.path.join(os.path.abspath(sys.argv[1]), "hub")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
MODEL = "infertrace/test-bpe"

import aiperf
from aiperf.common import random_generator as rng
from aiperf.common.tokenizer import Tokenizer
from aiperf.dataset.generator.prompt import PromptGenerator
from aiperf.dataset.loader.mooncake_trace import MooncakeTraceDatasetLoader
from aiperf.dataset.loader.multi_turn import MultiTurnDatasetLoader
from tokenizers import Tokenizer as BpeTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast


def train_tokenizer():
    """A byte-level BPE of 4,000 tokens trained on AIPerf's bundled corpus, saved in the Hugging Face cache."""
    corpus = os.path.join(os.path.dirname(aiperf.__file__), "dataset/generator/assets/shakespeare.txt")
    bpe = BpeTokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train(
        [corpus],
        trainers.BpeTrainer(
            vocab_size=4000, special_tokens=["<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    revision = "0" * 40
    repo = os.path.join(os.environ["HF_HUB_CACHE"], "models--" + MODEL.replace("/", "--"))
    snapshot = os.path.join(repo, "snapshots", revision)
    PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>").save_pretrained(snapshot)
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(revision)


def read(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def sessions_of(lines):
    """The file's sessions as AIPerf groups them: by session_id, lines without one alone, in file order."""
    grouped, order = {}, []
    for i, line in enumerate(lines):
        key = line.get("session_id", f"line {i}")
        if key not in grouped:
            grouped[key] = []
            order.append(key)
        grouped[key].append(line)
    return [grouped[k] for k in order]


def mooncake_check(path, tokenizer):
    """AIPerf's mooncake_trace loader: parse, then build every prompt from its lengths and hash_ids."""
    lines = read(path)
    generator = PromptGenerator(prompts=None, prefix_prompts=None, tokenizer=tokenizer)
    loader = MooncakeTraceDatasetLoader(filename=path, prompt_generator=generator)
    conversations = loader.convert_to_conversations(loader.load_dataset())
    built = {}
    for conversation in conversations:
        turns = conversation.turns
        first = turns[0]
        built.setdefault(first.timestamp, []).append(
            [(t.timestamp, t.delay, t.max_tokens, len(tokenizer.encode(t.texts[0].contents[0]))) for t in turns]
        )
    wanted = {}
    for session in sessions_of(lines):
        wanted.setdefault(session[0].get("timestamp"), []).append(
            [(l.get("timestamp"), l.get("delay"), l["output_length"], l["input_length"]) for l in session]
        )
    mismatches = 0
    for stamp, sessions in wanted.items():
        got = sorted(built.get(stamp, []))
        for want in sorted(sessions):
            if want in got:
                got.remove(want)
            else:
                mismatches += len(want)
    # Lines whose first block id is the same get the same first block of text.
    prompts = [c.turns[0].texts[0].contents[0] for c in conversations if c.turns[0].timestamp is not None]
    firsts = [s[0] for s in sessions_of(lines)]
    pairs = 0
    for a in range(len(firsts)):
        for b in range(a + 1, min(a + 20, len(firsts))):
            ha, hb = firsts[a].get("hash_ids") or [None], firsts[b].get("hash_ids") or [None]
            if ha[0] is not None and ha[0] == hb[0] and firsts[a]["input_length"] >= 512 <= firsts[b]["input_length"]:
                head_a = tokenizer.encode(prompts[a])[:256]
                head_b = tokenizer.encode(prompts[b])[:256]
                assert head_a == head_b, f"lines {a} and {b} share hash id {ha[0]} but not their text"
                pairs += 1
    return {
        "conversations": len(conversations),
        "turns": sum(len(c.turns) for c in conversations),
        "timestamps": sum(t.timestamp is not None for c in conversations for t in c.turns),
        "length_mismatches": mismatches,
        "shared_prefix_pairs_checked": pairs,
    }


def multi_turn_check(path):
    """AIPerf's multi_turn loader: parse and convert; the texts, times and output lengths must be the file's."""
    lines = read(path)
    loader = MultiTurnDatasetLoader(filename=path)
    conversations = loader.convert_to_conversations(loader.load_dataset())
    by_id = {c.session_id: c for c in conversations}
    mismatches = 0
    for line in lines:
        conversation = by_id[line["session_id"]]
        for want, got in zip(line["turns"], conversation.turns, strict=True):
            same = (
                got.texts[0].contents[0] == want["text"]
                and got.timestamp == want.get("timestamp")
                and got.delay == want.get("delay")
                and got.max_tokens == want.get("output_length")
            )
            mismatches += not same
    return {
        "conversations": len(conversations),
        "turns": sum(len(c.turns) for c in conversations),
        "timestamps": sum(t.timestamp is not None for c in conversations for t in c.turns),
        "length_mismatches": mismatches,
    }


def main():
    mooncake, aiperf_mooncake, multi_turn = sys.argv[2:5]
    train_tokenizer()
    rng.init(42)
    tokenizer = Tokenizer.from_pretrained(MODEL)
    report = {
        "mooncake": mooncake_check(mooncake, tokenizer),
        "aiperf-mooncake": mooncake_check(aiperf_mooncake, tokenizer),
        "aiperf-multi-turn": multi_turn_check(multi_turn),
    }
    print(json.dumps(report))


# AIPerf decodes prompts in a pool of processes, which import this file again: only the main one runs the check.
if __name__ == "__main__":
    main()
