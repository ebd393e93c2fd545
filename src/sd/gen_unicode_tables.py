#!/usr/bin/env python3
"""Writes o2g_unicode_tables.inc, the Unicode and HTML data that src/sd/clip_tokenizer.cpp needs.

Usage: gen_unicode_tables.py OUT.inc

Everything comes from this Python's standard library (unicodedata, str.lower, html.entities), so the C++
tokenizer classifies, lower-cases and unescapes exactly as the Python that CLIP's reference tokenizer runs on.
Run at build time (CMake, ${ONNX2GGML_PYTHON}); the output is not committed.

Tables (sorted, inclusive code-point ranges unless said otherwise):
  kLetter          \\p{L}: general category L*
  kNumber          \\p{N}: general category N*
  kWhiteSpace      the `regex` module's \\s (Unicode White_Space): str.isspace() minus U+001C..U+001F
  kPySpace         str.isspace(), what str.strip() removes
  kSplitSkip       non-letters whose case partner is a letter, number or space (U+0345): CLIP's case-insensitive
                   pattern matches them with no alternative (see clip_tokenizer.cpp), so they are dropped
  kCased, kCaseIgnorable   the properties str.lower() consults for the final sigma, measured by probing str.lower()
  kLowerSimple     (code point, lower-case) pairs where str.lower() maps one code point to one other
  kLowerMulti      code points that str.lower() maps to several (U+0130 -> i + U+0307)
  kHtmlEntities    html.entities.html5 (name -> UTF-8), sorted by name
  kHtmlCharrefFix  html.unescape's numeric references that are replaced (&#128; -> U+20AC, &#0; -> U+FFFD ...)
  kHtmlDropped     numeric references html.unescape drops (control characters, non-characters)
"""
import html
import html.entities
import os
import sys
import unicodedata

MAX_CP = 0x10FFFF


def ranges(pred):
    """Inclusive [lo, hi] runs of code points where pred holds."""
    out, start = [], None
    for cp in range(MAX_CP + 2):
        hit = cp <= MAX_CP and pred(cp)
        if hit and start is None:
            start = cp
        elif not hit and start is not None:
            out.append((start, cp - 1))
            start = None
    return out


def c_string(s):
    """A C string literal holding the UTF-8 of s (octal escapes for anything but plain ASCII)."""
    body = []
    for b in s.encode("utf-8"):
        ch = chr(b)
        body.append(ch if 0x20 <= b < 0x7F and ch not in '"\\?' else "\\%03o" % b)
    return '"' + "".join(body) + '"'


def emit_ranges(out, name, rs, comment):
    if not rs:
        rs = [(MAX_CP + 1, MAX_CP + 1)]  # C++ has no empty arrays; this range matches no code point
    out.append("// %s (%d ranges)" % (comment, len(rs)))
    out.append("constexpr CpRange %s[] = {" % name)
    line = ""
    for lo, hi in rs:
        item = "{0x%X, 0x%X}, " % (lo, hi)
        if len(line) + len(item) > 110:
            out.append("    " + line.rstrip())
            line = ""
        line += item
    if line:
        out.append("    " + line.rstrip())
    out.append("};")
    out.append("")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_unicode_tables.py OUT.inc")
    cat = [unicodedata.category(chr(cp)) for cp in range(MAX_CP + 1)]
    assigned = [c not in ("Cn", "Co", "Cs") for c in cat]

    letter = lambda cp: cat[cp][0] == "L"
    number = lambda cp: cat[cp][0] == "N"
    py_space = lambda cp: chr(cp).isspace()
    white_space = lambda cp: py_space(cp) and not 0x1C <= cp <= 0x1F

    # kSplitSkip: not a letter, number or space, but a case partner (lower, upper, case fold: what the `regex`
    # module's IGNORECASE relates) is one, so [^\s\p{L}\p{N}] rejects it too.
    def split_skip(cp):
        if letter(cp) or number(cp) or white_space(cp) or not assigned[cp]:
            return False
        c = chr(cp)
        return any(len(v) == 1 and (letter(ord(v)) or number(ord(v)) or white_space(ord(v)))
                   for v in (c.lower(), c.upper(), c.casefold()))

    # str.lower() lowers U+03A3 to final sigma U+03C2 when a cased letter precedes it (skipping case-ignorable
    # ones) and none follows. Python does not expose Cased / Case_Ignorable, so read them off str.lower():
    #   'A' + c + 'Σ' ends in ς  <=>  c is case-ignorable, or cased
    #   'AΣ' + c     keeps ς     <=>  c is case-ignorable, or not cased
    #   c + 'Σ'      ends in ς  <=>  c is cased and not case-ignorable
    def ignorable(cp):
        if not assigned[cp]:
            return False
        c = chr(cp)
        return ("A" + c + "\u03a3").lower()[-1] == "\u03c2" and ("A\u03a3" + c).lower()[1] == "\u03c2"

    def cased(cp):
        return assigned[cp] and (chr(cp) + "\u03a3").lower()[-1] == "\u03c2"

    lower_simple, lower_multi = [], []
    for cp in range(MAX_CP + 1):
        if not assigned[cp]:
            continue
        low = chr(cp).lower()
        if low == chr(cp):
            continue
        if len(low) == 1:
            lower_simple.append((cp, ord(low)))
        else:
            if len(low) > 3:
                sys.exit("gen_unicode_tables.py: lower-case of U+%04X has %d code points" % (cp, len(low)))
            lower_multi.append((cp, [ord(x) for x in low]))

    # html.unescape's private tables for numeric references (stable since Python 3.4).
    fixes = getattr(html, "_invalid_charrefs", None)
    dropped = getattr(html, "_invalid_codepoints", None)
    if fixes is None or dropped is None:
        sys.exit("gen_unicode_tables.py: this Python's html module lacks _invalid_charrefs/_invalid_codepoints")
    entities = sorted(html.entities.html5.items())

    out = [
        "// Generated by src/sd/gen_unicode_tables.py from Python %s (Unicode %s). Do not edit."
        % (sys.version.split()[0], unicodedata.unidata_version),
        "#pragma once",
        "#include <cstdint>",
        "",
        "namespace o2g_unicode {",
        "",
        'constexpr const char kUnicodeVersion[] = "%s";' % unicodedata.unidata_version,
        "",
        "struct CpRange { char32_t lo, hi; };",
        "struct CpPair { char32_t cp, lower; };",
        "struct CpMulti { char32_t cp; char32_t lower[3]; };",
        "struct HtmlEntity { const char* name; const char* utf8; };",
        "struct HtmlCharref { uint32_t number; const char* utf8; };",
        "",
    ]
    emit_ranges(out, "kLetter", ranges(letter), "\\p{L}")
    emit_ranges(out, "kNumber", ranges(number), "\\p{N}")
    emit_ranges(out, "kWhiteSpace", ranges(white_space), "regex's \\s = Unicode White_Space")
    emit_ranges(out, "kPySpace", ranges(py_space), "str.isspace()")
    emit_ranges(out, "kSplitSkip", ranges(split_skip), "others whose case partner is a letter, number or space")
    emit_ranges(out, "kCased", ranges(cased), "Cased (and not Case_Ignorable), as str.lower() sees it")
    emit_ranges(out, "kCaseIgnorable", ranges(ignorable), "Case_Ignorable, as str.lower() sees it")

    out.append("// str.lower(), one code point to one (%d pairs, sorted)" % len(lower_simple))
    out.append("constexpr CpPair kLowerSimple[] = {")
    for i in range(0, len(lower_simple), 6):
        out.append("    " + " ".join("{0x%X, 0x%X}," % p for p in lower_simple[i:i + 6]))
    out.append("};")
    out.append("")
    out.append("// str.lower(), one code point to several (zero-padded)")
    out.append("constexpr CpMulti kLowerMulti[] = {")
    for cp, low in lower_multi or [(MAX_CP + 1, [0])]:  # never empty (see emit_ranges)
        low = low + [0] * (3 - len(low))
        out.append("    {0x%X, {0x%X, 0x%X, 0x%X}}," % (cp, *low))
    out.append("};")
    out.append("")

    out.append("// html.entities.html5 (%d names, sorted; names with and without ';')" % len(entities))
    out.append("constexpr HtmlEntity kHtmlEntities[] = {")
    for name, value in entities:
        out.append("    {%s, %s}," % (c_string(name), c_string(value)))
    out.append("};")
    out.append("")
    out.append("// html.unescape: numeric references replaced by another character")
    out.append("constexpr HtmlCharref kHtmlCharrefFix[] = {")
    for num, value in sorted(fixes.items()):
        out.append("    {0x%X, %s}," % (num, c_string(value)))
    out.append("};")
    out.append("")
    dropped_set = set(dropped)
    emit_ranges(out, "kHtmlDropped", ranges(lambda cp: cp in dropped_set),
                "html.unescape: numeric references that become nothing")
    out.append("}  // namespace o2g_unicode")
    out.append("")

    tmp = sys.argv[1] + ".tmp"  # written whole, then renamed: an interrupted run leaves no half table behind
    with open(tmp, "w", encoding="ascii", newline="\n") as f:
        f.write("\n".join(out))
    os.replace(tmp, sys.argv[1])


if __name__ == "__main__":
    main()
