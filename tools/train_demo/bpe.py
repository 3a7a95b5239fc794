# SPDX-License-Identifier: MIT
"""A byte-level BPE tokenizer trained on a corpus and written as a Hugging Face tokenizer.json.

The file has the GPT-2 byte-level form that mambacpp's tokenizer reads (and that make-model's
write_byte_level_tokenizer_json writes): an NFC normalizer, the ByteLevel pre-tokenizer with the
GPT-2 split regex, a BPE model, <|endoftext|> as token 0 and the 256 byte tokens as ids 1..256.

The training text must be ASCII: the split regex below is GPT-2's with \\p{L} and \\p{N} replaced by
their ASCII members, which splits ASCII text exactly as the real regex does, so the token ids the
model is trained on are the ones mambacpp produces for the same text.
"""

import collections
import json
import re

END_OF_TEXT = "<|endoftext|>"

# GPT-2's pre-tokenizer regex restricted to ASCII letters and digits.
_SPLIT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


def _bytes_to_unicode():
    """GPT-2's table from bytes to printable characters (the ByteLevel alphabet)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1))
    printable += list(range(ord("\xae"), ord("\xff") + 1))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


BYTE_CHAR = _bytes_to_unicode()


def pre_tokenize(text):
    """The text's words, each in the byte-level alphabet."""
    if not text.isascii():
        raise ValueError("the training text must be ASCII (see the module comment)")
    return ["".join(BYTE_CHAR[b] for b in w.encode()) for w in _SPLIT.findall(text)]


def learn_merges(word_counts, n_merges):
    """The first n_merges BPE merges of the words (ties go to the smallest pair, as make-model's)."""
    words = [list(w) for w in word_counts]
    counts = list(word_counts.values())
    pairs = collections.Counter()
    where = collections.defaultdict(set)  # pair -> indices of the words that hold it
    for i, symbols in enumerate(words):
        for pair in zip(symbols, symbols[1:]):
            pairs[pair] += counts[i]
            where[pair].add(i)
    merges = []
    while len(merges) < n_merges and pairs:
        best_count = max(pairs.values())
        if best_count < 2:
            break
        best = min(p for p, c in pairs.items() if c == best_count)
        merges.append(best)
        joined = best[0] + best[1]
        for i in list(where[best]):
            symbols, count = words[i], counts[i]
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] -= count
                if pairs[pair] <= 0:
                    del pairs[pair]
            merged, k = [], 0
            while k < len(symbols):
                if k + 1 < len(symbols) and (symbols[k], symbols[k + 1]) == best:
                    merged.append(joined)
                    k += 2
                else:
                    merged.append(symbols[k])
                    k += 1
            words[i] = merged
            for pair in zip(merged, merged[1:]):
                pairs[pair] += count
                where[pair].add(i)
        del where[best]
    return merges


class Tokenizer:
    """Encodes text with learned merges by rank, as Hugging Face's BPE model does."""

    def __init__(self, merges):
        self.merges = merges
        self.vocab = {END_OF_TEXT: 0}
        for b in range(256):
            self.vocab[BYTE_CHAR[b]] = b + 1
        for left, right in merges:
            self.vocab.setdefault(left + right, len(self.vocab))
        self.ranks = {pair: r for r, pair in enumerate(merges)}
        self.itos = {i: s for s, i in self.vocab.items()}
        self.char_byte = {c: b for b, c in BYTE_CHAR.items()}
        self.cache = {}

    def _encode_word(self, word):
        ids = self.cache.get(word)
        if ids is not None:
            return ids
        symbols = list(word)
        while len(symbols) > 1:
            ranked = [(self.ranks.get(p, 1 << 30), k) for k, p in enumerate(zip(symbols, symbols[1:]))]
            rank, k = min(ranked)
            if rank == 1 << 30:
                break
            pair = (symbols[k], symbols[k + 1])
            merged, j = [], 0
            while j < len(symbols):
                if j + 1 < len(symbols) and (symbols[j], symbols[j + 1]) == pair:
                    merged.append(symbols[j] + symbols[j + 1])
                    j += 2
                else:
                    merged.append(symbols[j])
                    j += 1
            symbols = merged
        ids = [self.vocab[s] for s in symbols]
        self.cache[word] = ids
        return ids

    def encode(self, text):
        return [i for w in pre_tokenize(text) for i in self._encode_word(w)]

    def decode(self, ids):
        data = bytes(self.char_byte[c] for i in ids if i != 0 for c in self.itos[i])
        return data.decode("utf-8", errors="replace")

    def write_json(self, path):
        byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
        root = {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [{"id": 0, "content": END_OF_TEXT, "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": False, "special": True}],
            "normalizer": {"type": "NFC"},
            "pre_tokenizer": byte_level,
            "post_processor": byte_level,
            "decoder": byte_level,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": False, "vocab": self.vocab,
                      "merges": [[left, right] for left, right in self.merges]},
        }
        with open(path, "w", encoding="utf-8") as f:
            json.dump(root, f, ensure_ascii=False, indent=1)
            f.write("\n")


def train(text, vocab_size):
    """A tokenizer of vocab_size ids (token 0, 256 bytes, then merges) learned from text."""
    word_counts = collections.Counter(pre_tokenize(text))
    return Tokenizer(learn_merges(word_counts, vocab_size - 257))
