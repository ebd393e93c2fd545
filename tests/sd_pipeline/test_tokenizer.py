#!/usr/bin/env python3
"""Checks sd_tokenize (src/sd/clip_tokenizer.cpp) against clip_tokenizer_ref.py.

Usage: test_tokenizer.py SD_TOKENIZE_BIN WORKDIR

Makes a vocab with make_vocab.py in WORKDIR, runs the driver on tricky and on seeded random prompts in every mode
(padded, --raw, --max-len, --weighted) and on variant tokenizer folders (pad "!", tokenizer_config.json only,
ASCII-escaped vocab.json with CRLF merges.txt, symbols missing from vocab.json), compares ids exactly and weights
within 1e-6 (relative), checks a few facts that do not depend on the reference, and checks that bad folders and
bad input exit 2 naming the file. A self-check first proves that the comparison catches wrong expectations.
Prints a summary; exits 1 on any failure.
"""
import json
import os
import random
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from clip_tokenizer_ref import ClipTokenizerRef, format_line  # noqa: E402

PROMPTS = [
    "",
    " ",
    "   \t \n  ",
    "a photo of an astronaut riding a horse on mars",
    "A PHOTO OF AN ASTRONAUT Riding A Horse",
    "MiXeD CaSe WoRdS and CamelCaseWords",
    "tabs\tand\nnewlines\r\nand  double  spaces   ",
    "   leading and trailing spaces   ",
    "\u00a0nbsp\u00a0inside\u3000ideographic space\u2003em\u2028line\u2029para\u0085nel",
    "\x1c\x1dseparators\x1e inside \x1fare not regex spaces\x1f",
    "&amp; &lt;b&gt;bold&lt;/b&gt; &quot;q&quot; &apos;a&apos; &nbsp;x &NewLine;y",
    "&amp;amp; &amp;lt;double&amp;gt; &amp;amp;amp;",
    "&#65;&#x42;&#X43; &#128; &#0; &#1; &#xD800; &#99999999999; &#65 &#x263a;&#9731",
    "&eacute;t&eacute; &copy 2024 &notit; &notin; &ampx &AMP; &Eacute &frac12;",
    "& &; &# &#x; &#xZ a&b c & d &&amp; &thisisaverylongentitynamethatgoesonandon;",
    "&lt;|endoftext|&gt; &amp;lt;|startoftext|&amp;gt;",
    "café crème brûlée naïve déjà vu",
    "Ärger ÖL über STRASSE Straße GRÜSSE",
    "ΟΔΟΣ ΟΔΥΣΣΕΥΣ Σ ΣΑ ΑΣ. ὈΔΥΣΣΕΎΣ σς Σ.Σ ΑΣ'Β ΑΣ'",
    "москва ПРИВЕТ Ёж ЇЖАК Ґанок",
    "東京の夜景 北京的长城 서울의 밤 美しい風景",
    "🔥🔥🔥 ❤️ 👍🏽 👨‍👩‍👧 🇫🇷 emoji🔥in🔥words",
    "1234",
    "3.14159 10,000 1/250s 2024-01-01 42nd 1st",
    "١٢٣ ४५६ ½ Ⅻ ⑤ ² x²",
    "don't I'll we've they're she'd it's I'm",
    "DON'T I'LL WE'VE THEY'RE SHE'D",
    "'s 't 're 'sup ''s rock'n'roll o'clock '",
    "it'ſ oſt 'ſ",
    "!!! ??? ... --- *** ### $$$ %%% ^^^ ~~~",
    "hello!!!world...again?!yes",
    "<|endoftext|>",
    "<|startoftext|>a cat<|endoftext|>",
    "!<|endoftext|> x<|ENDOFTEXT|>y <|endoftext| <|endoftext |>",
    "<|ſtartoftext|> <|StartOfText|>",
    "xqzvbjkw qqqqqqqq zzxxyyww",
    "supercalifragilisticexpialidocious",
    "İstanbul İİ iİi",
    "ᾳ ΑΙ\u0345 a\u0345b \u0345",
    "e\u0301 combining acute vs \u00e9",
    "ﬁne ﬂower ｆｕｌｌｗｉｄｔｈ ＡＢＣ",
    "“curly quotes” ‘single’ don’t",
    "\u200bzero width\u200bspace \ufeffbom a\u00adb",
    "\u0000 nul \u0007 bell \u007f del",
    "Ω Å K ǅ ǈ ǋ ŉ ß ẞ",
    "abcабвαβγ123東京",
    "مرحبا שלום สวัสดี नमस्ते",
    "a,b;c:d e.f g-h i_j k/l m\\n",
    "@user #hashtag $100 50% C++ C# node.js",
    "https://example.com/path?q=1&x=2&amp=3&lang=en",
    "masterpiece, best quality, (ultra detailed), 8k, hdr, <lora:foo:0.8>",
    "a " * 75,
    "a " * 76,
    "cat " * 40 + "dog",
    "a" * 300,
    " ".join("word%d" % k for k in range(120)),
    "The Quick Brown Fox Jumps Over The Lazy Dog 0123456789 !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "\U0001F600\U0001F601 \U00010400\U00010428 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛",
    "tab\tseparated\tvalues\t",
    "\n\nnewlines only around\n\n",
]

WEIGHTED = [
    "",
    "a (red) cat",
    "a ((red)) cat",
    "a [[blue]] sky",
    "(red:1.3) cat",
    "( red : 1.3 ) cat",
    "(red:-0.5) (blue:+2) (green:0)",
    "(a:1.2.3) b",
    "(a:.5) (b:1.) (c:.)",
    "\\(literal\\) \\[x\\] \\\\ back",
    "lone \\ backslash \\q end\\",
    "(unclosed [also open",
    "unmatched ) and ] here",
    ":1.3) no open bracket : colon",
    "(a(b(c)))",
    "[(a:1.5)]",
    "(a)(b)",
    "(a) (b)",
    "(a:1.21) ((b))",
    "(a:1.1)(b)",
    "a (b:1.5 c) d",
    "(a:\u30001.5\u3000)",
    "(html &amp; entity) &lt;tag&gt;",
    "(<|endoftext|>) [<|startoftext|>]",
    "BREAK test a BREAK b",
    "((masterpiece)), best quality, [[[lowres]]], (detailed face:1.2), 1girl, (blue eyes:0.8)",
    "(" * 5 + "deep" + ")" * 5,
    "ΟΔΟ(Σ) (ΟΔΟΣ) ΟΔΟΣ",
    "(" + "word " * 90 + ")",
    "[a:1.5] (b]",
    "(a:1e3) (b: 2 )",
    "(huge:" + "9" * 400 + ") (tiny:0." + "0" * 400 + "1) (zeros:000." + "0" * 400 + "7)",
]

POOL = ["a", "b", "the", "cat", " ", "  ", "\t", "\n", "(", ")", "[", "]", ":", ":1.3)", ": 0.5 )", "\\", "'s", "'",
        "'ll", "&amp;", "&lt", "&#", "&#65;", "&#x1F525;", "&", ";", "&notin", "Σ", "σ", "ς", "Α", ".", "İ", "ſ",
        "\u0345", "1", "23", "é", "e\u0301", "東京", "🔥", "<|endoftext|>", "<|", "|>", "!", "?", "-", "\u00a0",
        "\x1c", "ΟΔΟΣ", "don't", "\u3000", "Straße", "Ёж", "\u200b", "x", "ü", "½", "Ⅻ", "\U0001F600"]


def random_prompts(n, seed):
    rng = random.Random(seed)
    return ["".join(rng.choice(POOL) for _ in range(rng.randint(0, 16))) for _ in range(n)]


def float32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def compare(label, prompts, expected, got):
    """Mismatch descriptions (empty when all lines agree). Weighted lines: ids exact, weights within 1e-6 relative."""
    bad = []
    if len(got) != len(expected):
        bad.append("%s: %d output lines for %d prompts" % (label, len(got), len(prompts)))
    for p, e, g in zip(prompts, expected, got):
        ok = e == g
        if not ok and "|" in e and "|" in g:
            (e_ids, e_w), (g_ids, g_w) = e.split("|"), g.split("|")
            ew, gw = [float(x) for x in e_w.split()], [float(x) for x in g_w.split()]
            close = all(abs(a - b) <= 1e-6 * max(1.0, abs(a)) for a, b in zip(ew, gw))
            ok = e_ids == g_ids and len(ew) == len(gw) and close
        if not ok:
            bad.append("%s: prompt %r\n    expected %s\n    got      %s" % (label, p, e[:400], g[:400]))
    return bad


def run(binary, folder, flags, prompts, ascii_json=True):
    lines = "".join(json.dumps(p, ensure_ascii=ascii_json) + "\n" for p in prompts)
    r = subprocess.run([binary, "--tokenizer", folder] + flags, input=lines.encode("utf-8"), capture_output=True)
    return r.returncode, r.stdout.decode("utf-8", "replace").splitlines(), r.stderr.decode("utf-8", "replace")


def expect(ref, prompts, flags):
    mode = "raw" if "--raw" in flags else "weighted" if "--weighted" in flags else "padded"
    max_len = int(flags[flags.index("--max-len") + 1]) if "--max-len" in flags else 77
    return [format_line(ref, p, mode, max_len) for p in prompts]


def make_variants(vocab_dir, work):
    """Tokenizer folders that must load like the original (or with a known difference)."""
    with open(os.path.join(vocab_dir, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(vocab_dir, "merges.txt"), encoding="utf-8") as f:
        merges = f.read().split("\n")
    out = {}

    d = out["pad_bang"] = os.path.join(work, "pad_bang")  # SD 2.x: pad "!" (id 0), string form
    shutil.copytree(vocab_dir, d, dirs_exist_ok=True)
    with open(os.path.join(d, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": "<|startoftext|>", "pad_token": "!", "unk_token": "<|endoftext|>"}, f)

    d = out["config_only"] = os.path.join(work, "config_only")  # tokenizer_config.json, nested values to skip
    os.makedirs(d, exist_ok=True)
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(vocab_dir, name), d)
    if os.path.exists(os.path.join(d, "special_tokens_map.json")):
        os.remove(os.path.join(d, "special_tokens_map.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"add_prefix_space": False,
                   "added_tokens_decoder": {"2013": {"content": "<|endoftext|>", "special": True, "lstrip": False}},
                   "bos_token": {"__type": "AddedToken", "content": "<|startoftext|>"},
                   "clean_up_tokenization_spaces": True, "model_max_length": 77, "errors": "replace",
                   "pad_token": {"__type": "AddedToken", "content": "!", "normalized": True}, "unk_token": None,
                   "list": [1, -2.5e3, [True, False, None, {}], []], "tokenizer_class": "CLIPTokenizer"}, f, indent=4)

    d = out["escaped"] = os.path.join(work, "escaped")  # \uXXXX escapes, pretty-printed, CRLF + blank lines
    shutil.copytree(vocab_dir, d, dirs_exist_ok=True)
    with open(os.path.join(d, "vocab.json"), "w", encoding="ascii") as f:
        json.dump(vocab, f, ensure_ascii=True, indent=1)
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8", newline="") as f:
        f.write("\r\n".join(m for m in merges if m) + "\r\n\r\n")

    d = out["holes"] = os.path.join(work, "holes")  # symbols missing from vocab.json -> unk
    shutil.copytree(vocab_dir, d, dirs_exist_ok=True)
    first_merges = [m.replace(" ", "") for m in merges[1:6] if m]
    gone = {"ð", "ð</w>", "Ã", "t</w>", "Ģ"} | set(first_merges)
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({k: v for k, v in vocab.items() if k not in gone}, f, ensure_ascii=False)
    return out


BAD_FOLDERS = [
    # name, {file: content or None to delete}, text stderr must contain
    ("no_vocab", {"vocab.json": None}, "vocab.json"),
    ("no_merges", {"merges.txt": None}, "merges.txt"),
    ("truncated_json", {"vocab.json": '{"a": 1, "b":'}, "vocab.json"),
    ("float_id", {"vocab.json": '{"a": 1.5}'}, "vocab.json"),
    ("negative_id", {"vocab.json": '{"a": -1}'}, "vocab.json"),
    ("lone_surrogate", {"vocab.json": '{"\\ud800": 1}'}, "vocab.json"),
    ("not_object", {"vocab.json": '["a", 1]'}, "vocab.json"),
    ("trailing_garbage", {"vocab.json": '{"<|startoftext|>": 1, "<|endoftext|>": 2} x'}, "vocab.json"),
    ("no_specials", {"vocab.json": '{"a": 0, "b": 1}'}, "vocab.json"),
    ("merge_one_symbol", {"merges.txt": "#version: 0.2\ni n\na n\nr e\nabc\n"}, "merges.txt:5"),
    ("merge_three_symbols", {"merges.txt": "#version: 0.2\ni n\na b c\n"}, "merges.txt:3"),
    ("merge_double_space", {"merges.txt": "i  n\n"}, "merges.txt:1"),
    ("bad_special_map", {"special_tokens_map.json": '{"pad_token": '}, "special_tokens_map.json"),
    ("pad_not_in_vocab", {"special_tokens_map.json": '{"pad_token": "<|pad|>"}'}, "special_tokens_map.json"),
    ("bad_config", {"special_tokens_map.json": None, "tokenizer_config.json": '{"pad_token": 12}'},
     "tokenizer_config.json"),
]


def check_bad_folders(binary, vocab_dir, work):
    failures = []
    for name, files, needle in BAD_FOLDERS:
        d = os.path.join(work, "bad_" + name)
        shutil.copytree(vocab_dir, d, dirs_exist_ok=True)
        for fname, content in files.items():
            path = os.path.join(d, fname)
            if content is None:
                if os.path.exists(path):
                    os.remove(path)
            else:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(content)
        rc, out, err = run(binary, d, [], ["x"])
        if rc != 2 or needle not in err or out:
            failures.append("bad folder %s: exit %d, stdout %r, stderr %r (want exit 2 naming %s)"
                            % (name, rc, out[:1], err.strip(), needle))
    # Bad input and usage.
    for label, args, stdin, needle in [
        ("non-JSON stdin line", ["--tokenizer", vocab_dir], b'"ok"\nnot json\n', "stdin line 2"),
        ("unterminated string", ["--tokenizer", vocab_dir], b'"abc\n', "stdin line 1"),
        ("two strings on a line", ["--tokenizer", vocab_dir], b'"a" "b"\n', "stdin line 1"),
        ("no --tokenizer", [], b"", "--tokenizer"),
        ("--max-len 1", ["--tokenizer", vocab_dir, "--max-len", "1"], b"", "--max-len"),
        ("--raw with --weighted", ["--tokenizer", vocab_dir, "--raw", "--weighted"], b"", "--raw"),
    ]:
        r = subprocess.run([binary] + args, input=stdin, capture_output=True)
        err = r.stderr.decode("utf-8", "replace")
        if r.returncode != 2 or needle not in err:
            failures.append("%s: exit %d, stderr %r (want exit 2 mentioning %s)"
                            % (label, r.returncode, err.strip(), needle))
    return failures


def self_check(binary, vocab_dir, ref):
    """The comparison must catch a wrong id, a wrong weight and a missing line."""
    prompts = ["a photo of a cat", "(red:1.3) dog"]
    problems = []
    rc, got, _ = run(binary, vocab_dir, ["--raw"], prompts[:1])
    exp = expect(ref, prompts[:1], ["--raw"])
    wrong = [" ".join(str(int(x) + 1) for x in exp[0].split())]
    if rc != 0 or compare("self", prompts[:1], exp, got):
        problems.append("self-check: the right expectation did not match")
    if not compare("self", prompts[:1], wrong, got):
        problems.append("self-check: a wrong id list was not detected")
    rc, got, _ = run(binary, vocab_dir, ["--weighted"], prompts[1:])
    exp = expect(ref, prompts[1:], ["--weighted"])
    ids, weights = exp[0].split("|")
    bent = ids + "|" + "".join(" %.6g" % (float(w) + (1e-3 if k == 1 else 0)) for k, w in enumerate(weights.split()))
    if compare("self", prompts[1:], exp, got):
        problems.append("self-check: the right weighted expectation did not match")
    if not compare("self", prompts[1:], [bent], got):
        problems.append("self-check: a wrong weight was not detected")
    if not compare("self", prompts, exp + exp, got):
        problems.append("self-check: a missing output line was not detected")
    return problems


def absolute_facts(binary, vocab_dir, vocab):
    """Facts from the rules themselves, independent of the reference."""
    def raw(p):
        return run(binary, vocab_dir, ["--raw"], [p])[1][0].split()

    def padded(p, extra=()):
        return [int(x) for x in run(binary, vocab_dir, list(extra), [p])[1][0].split()]

    bos, eos = vocab["<|startoftext|>"], vocab["<|endoftext|>"]
    cat = raw("cat")
    facts = [
        ("empty prompt has no ids", raw("") == []),
        ("white space only has no ids", raw(" \t\n\u3000 ") == []),
        ("digits are separate tokens", raw("1234") == [str(vocab[d + "</w>"]) for d in "1234"]),
        ("<|endoftext|> in text is EOS", raw("<|endoftext|>") == [str(eos)]),
        ("case is folded", raw("HeLLo WORLD") == raw("hello world")),
        ("&amp; is unescaped", raw("&amp;") == raw("&") and raw("&amp;amp;") == raw("&")),
        ("padded: BOS ... EOS pad", padded("cat") == [bos] + [int(x) for x in cat] + [eos] * (76 - len(cat))),
        ("padded length is 77", len(padded("a " * 200)) == 77),
        ("truncation keeps EOS last", padded("a " * 200)[76] == eos and padded("a " * 200)[75] == vocab["a</w>"]),
        ("--max-len 2 is BOS EOS", padded("a cat", ["--max-len", "2"]) == [bos, eos]),
        ("U+0345 is dropped", raw("a\u0345b") == raw("a b")),
    ]
    return ["fact failed: " + name for name, ok in facts if not ok]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: test_tokenizer.py SD_TOKENIZE_BIN WORKDIR")
    binary, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    vocab_dir = os.path.join(work, "vocab")
    subprocess.run([sys.executable, os.path.join(HERE, "make_vocab.py"), vocab_dir], check=True)
    ref = ClipTokenizerRef(vocab_dir)
    with open(os.path.join(vocab_dir, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)

    failures = self_check(binary, vocab_dir, ref)
    if failures:  # a comparison that cannot fail proves nothing
        print("\n".join(failures))
        print("test_tokenizer: FAILED (self-check)")
        return 1

    fuzz = random_prompts(400, seed=1234)
    runs = [  # label, folder, flags, prompts, ascii JSON
        ("padded", vocab_dir, [], PROMPTS, True),
        ("padded, raw UTF-8 input", vocab_dir, [], PROMPTS, False),
        ("raw", vocab_dir, ["--raw"], PROMPTS, True),
        ("max-len 8", vocab_dir, ["--max-len", "8"], PROMPTS, True),
        ("max-len 2", vocab_dir, ["--max-len", "2"], PROMPTS[:10], True),
        ("weighted", vocab_dir, ["--weighted"], WEIGHTED + PROMPTS, True),
        ("weighted max-len 10", vocab_dir, ["--weighted", "--max-len", "10"], WEIGHTED, True),
        ("fuzz raw", vocab_dir, ["--raw"], fuzz, True),
        ("fuzz weighted", vocab_dir, ["--weighted"], fuzz, True),
    ]
    variants = make_variants(vocab_dir, work)
    for name, d in variants.items():
        runs.append(("folder " + name, d, [], PROMPTS + fuzz[:100], True))
    refs = {d: ClipTokenizerRef(d) for d in set(r[1] for r in runs)}

    checked = 0
    for label, folder, flags, prompts, ascii_json in runs:
        rc, got, err = run(binary, folder, flags, prompts, ascii_json)
        if rc != 0:
            failures.append("%s: exit %d: %s" % (label, rc, err.strip()))
            continue
        failures += compare(label, prompts, expect(refs[folder], prompts, flags), got)
        checked += len(prompts)

    # The variants must differ from the original exactly where intended.
    base = expect(ref, PROMPTS, [])
    if expect(refs[variants["escaped"]], PROMPTS, []) != base:
        failures.append("the escaped/CRLF folder tokenizes differently from the original")
    if refs[variants["pad_bang"]].pad != 0 or refs[variants["config_only"]].pad != 0:
        failures.append("pad '!' should have id 0")
    if expect(refs[variants["holes"]], PROMPTS, []) == base:
        failures.append("the holes folder should produce unk ids somewhere")

    failures += absolute_facts(binary, vocab_dir, vocab)
    failures += check_bad_folders(binary, vocab_dir, work)

    for f in failures[:40]:
        print(f)
    if len(failures) > 40:
        print("... %d more" % (len(failures) - 40))
    print("test_tokenizer: %d prompt lines compared in %d runs, %d bad-input cases, %d failures"
          % (checked, len(runs), len(BAD_FOLDERS) + 6, len(failures)))
    print("test_tokenizer: %s" % ("FAILED" if failures else "PASSED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
