#!/usr/bin/env python3
"""A pure-Python reference of CLIP's tokenizer (OpenAI CLIP simple_tokenizer / HF CLIPTokenizer), standard library only.

It is the oracle for src/sd/clip_tokenizer.cpp, written from the rules rather than from that code:
  1. html.unescape twice, str.strip()
  2. runs of Unicode White_Space (the `regex` module's \\s: str.isspace() without U+001C..U+001F) -> one space,
     str.strip() again
  3. str.lower()
  4. CLIP's pattern, with IGNORECASE:
         <\\|startoftext\\|>|<\\|endoftext\\|>|'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+
     scanned character by character with unicodedata (the `regex` module is not available):
     the literals are matched with Python re's IGNORECASE (so U+017F matches 's'); [\\p{L}] and [\\p{N}] test the
     character itself; [^\\s\\p{L}\\p{N}] rejects a character when it or one of its case partners is a letter,
     number or space (so U+0345, whose upper case is a letter, matches nothing and is skipped)
  5. bytes_to_unicode, then BPE by merge rank with '</w>' on the last symbol; unknown symbols -> unk token
  6. padding: BOS + ids[:max_len-2] + EOS + pad
  7. A1111 weights: (x) *1.1, [x] *(1/1.1), (x:w) *w, \\( \\) \\[ \\] \\\\ literal, a lone backslash dropped,
     open brackets closed at the end; equal-weight neighbours merged; each run tokenized separately.
ftfy is not applied.

Usable as a module (ClipTokenizerRef) or as a command: clip_tokenizer_ref.py DIR [--raw|--weighted] [--max-len N]
reads JSON-string lines on stdin and prints the same lines as sd_tokenize.
"""
import html
import json
import os
import re
import struct
import sys
import unicodedata

SPECIALS = ("<|startoftext|>", "<|endoftext|>")
LITERALS = [re.compile(re.escape(lit), re.IGNORECASE)
            for lit in SPECIALS + ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")]


def bytes_to_unicode():
    """CLIP's byte -> printable character table, in CLIP's vocab order (printable bytes first)."""
    keep = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    table = {b: chr(b) for b in keep}
    for n, b in enumerate(b for b in range(256) if b not in table):
        table[b] = chr(0x100 + n)
    return table


BYTE_CHARS = bytes_to_unicode()


def is_white_space(ch):
    return ch.isspace() and not "\x1c" <= ch <= "\x1f"


def general(ch):
    return unicodedata.category(ch)[0]


def is_other(ch):
    """[^\\s\\p{L}\\p{N}] under IGNORECASE: neither the character nor a case partner is a space, letter or number."""
    for v in (ch, ch.lower(), ch.upper(), ch.casefold()):
        if len(v) == 1 and (is_white_space(v) or general(v) in "LN"):
            return False
    return True


def clean(text):
    text = html.unescape(html.unescape(text)).strip()
    out, in_space = [], False
    for ch in text:
        if is_white_space(ch):
            if not in_space:
                out.append(" ")
            in_space = True
        else:
            out.append(ch)
            in_space = False
    return "".join(out).strip().lower()


def pre_tokenize(text):
    """re.findall(CLIP's pattern, clean(text)) without the `regex` module."""
    text = clean(text)
    pieces, i = [], 0
    while i < len(text):
        m = next((m for m in (lit.match(text, i) for lit in LITERALS) if m), None)
        if m:
            end = m.end()
        elif general(text[i]) == "L":
            end = i + 1
            while end < len(text) and general(text[end]) == "L":
                end += 1
        elif general(text[i]) == "N":
            end = i + 1
        elif is_other(text[i]):
            end = i + 1
            while end < len(text) and is_other(text[end]):
                end += 1
        else:
            i += 1
            continue
        pieces.append(text[i:end])
        i = end
    return pieces


def read_special_tokens(path, pad, unk):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    found = {}
    for key in ("pad_token", "unk_token"):
        v = data.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str):
            found[key] = v
    return found.get("pad_token", pad), found.get("unk_token", unk)


class ClipTokenizerRef:
    def __init__(self, folder):
        with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as f:
            self.vocab = json.load(f)
        self.ranks = {}
        path = os.path.join(folder, "merges.txt")
        with open(path, encoding="utf-8", newline="") as f:
            lines = f.read().split("\n")
        rank = 0
        for n, line in enumerate(lines, 1):
            line = line[:-1] if line.endswith("\r") else line
            if not line or (n == 1 and line.startswith("#version")):
                continue
            parts = line.split(" ")
            if len(parts) != 2 or not all(parts):
                raise ValueError("%s:%d: bad merge line %r" % (path, n, line))
            self.ranks[tuple(parts)] = rank  # a repeated pair keeps its last rank
            rank += 1
        pad = unk = "<|endoftext|>"
        for name in ("special_tokens_map.json", "tokenizer_config.json"):
            p = os.path.join(folder, name)
            if os.path.exists(p):
                pad, unk = read_special_tokens(p, pad, unk)
                break
        self.bos, self.eos = self.vocab[SPECIALS[0]], self.vocab[SPECIALS[1]]
        self.pad, self.unk = self.vocab[pad], self.vocab[unk]

    def bpe(self, piece):
        if piece in SPECIALS:
            return [piece]
        word = [BYTE_CHARS[b] for b in piece.encode("utf-8")]
        word[-1] += "</w>"
        while len(word) > 1:
            pairs = set(zip(word, word[1:]))
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            merged, k = [], 0
            while k < len(word):
                if tuple(word[k:k + 2]) == best:
                    merged.append(best[0] + best[1])
                    k += 2
                else:
                    merged.append(word[k])
                    k += 1
            word = merged
        return word

    def encode(self, text):
        return [self.vocab.get(sym, self.unk) for piece in pre_tokenize(text) for sym in self.bpe(piece)]

    def encode_padded(self, text, max_len=77):
        ids = [self.bos] + self.encode(text)[:max_len - 2] + [self.eos]
        return ids + [self.pad] * (max_len - len(ids))

    def encode_weighted(self, text, max_len=77):
        ids, weights = [self.bos], [1.0]
        for run, w in parse_weights(text):
            run_ids = self.encode(run)
            ids += run_ids
            weights += [float32(w)] * len(run_ids)
        ids, weights = ids[:max_len - 1] + [self.eos], weights[:max_len - 1] + [1.0]
        return ids + [self.pad] * (max_len - len(ids)), weights + [1.0] * (max_len - len(weights))


WEIGHT_SYNTAX = re.compile(r"""
      \\[()\[\]\\]                                              # an escaped bracket or backslash
    | \\                                                        # a lone backslash (dropped)
    | [(\[]                                                     # opening brackets
    | :\s*(?P<w>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))\s*\)     # ':' weight ')' closes a round bracket
    | [)\]]                                                     # closing brackets
    | [^\\()\[\]:]+                                             # text
    | :
""", re.VERBOSE)


def parse_weights(text):
    """[(text, weight)] per AUTOMATIC1111's prompt attention syntax (without BREAK)."""
    runs, opened = [], {"(": [], "[": []}
    factor = {"(": 1.1, "[": 1 / 1.1}

    def scale(start, f):
        for r in runs[start:]:
            r[1] *= f

    for m in WEIGHT_SYNTAX.finditer(text):
        tok = m.group(0)
        if tok.startswith("\\"):
            runs.append([tok[1:], 1.0])
        elif tok in "([":
            opened[tok].append(len(runs))
        elif m.group("w") is not None and opened["("]:
            scale(opened["("].pop(), float(m.group("w")))
        elif tok == ")" and opened["("]:
            scale(opened["("].pop(), factor["("])
        elif tok == "]" and opened["["]:
            scale(opened["["].pop(), factor["["])
        else:
            runs.append([tok, 1.0])
    for kind in "([":
        for start in opened[kind]:
            scale(start, factor[kind])
    merged = []
    for t, w in runs:
        if merged and merged[-1][1] == w:
            merged[-1][0] += t
        else:
            merged.append([t, w])
    return [tuple(r) for r in merged]


def float32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def format_line(tok, text, mode, max_len):
    if mode == "raw":
        return " ".join(map(str, tok.encode(text)))
    if mode == "weighted":
        ids, weights = tok.encode_weighted(text, max_len)
        return " ".join(map(str, ids)) + " |" + "".join(" %.6g" % w for w in weights)
    return " ".join(map(str, tok.encode_padded(text, max_len)))


def main():
    args = sys.argv[1:]
    mode = "raw" if "--raw" in args else "weighted" if "--weighted" in args else "padded"
    max_len = int(args[args.index("--max-len") + 1]) if "--max-len" in args else 77
    tok = ClipTokenizerRef(args[0])
    for line in sys.stdin:
        print(format_line(tok, json.loads(line), mode, max_len))


if __name__ == "__main__":
    main()
