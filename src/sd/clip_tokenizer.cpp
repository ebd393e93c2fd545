// CLIP's BPE tokenizer. The rules, in order (OpenAI CLIP simple_tokenizer.py, which HF's CLIPTokenizer copies):
//
//  1. html.unescape(html.unescape(text)).strip(): Python's html.unescape exactly: &#NN; &#xNN; (the ';' optional,
//     Windows-1252 fixes for &#128;..&#159;, U+FFFD for surrogates / > U+10FFFF / &#0;, control characters and
//     non-characters dropped) and all HTML5 named references (2231), with and without ';', including the
//     longest-known-prefix rule ("&notit;" -> "¬it;"). The tables come from Python's html module at build time.
//  2. regex.sub(r'\s+', ' ', text).strip(): runs of Unicode White_Space (the `regex` module's \s) become one space;
//     str.strip() removes str.isspace() characters at both ends. The two differ on U+001C..U+001F (isspace, not
//     White_Space): kept inside the text, stripped at its ends, as in Python.
//  3. str.lower(): full Unicode lower-casing (every script, U+0130 -> "i\u0307") including Python's final-sigma rule
//     (U+03A3 -> U+03C2 at the end of a word), from this Python's Unicode tables.
//  4. Split with re.findall over the pattern, compiled with the `regex` module and re.IGNORECASE:
//        <\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+
//     At each position the first alternative that matches wins; where none does, the scan moves one character on.
//     IGNORECASE matters after lower() in two places: U+017F (long s) matches 's' in the literals ("'ſ" is a
//     contraction token), and U+0345 (a mark whose upper case is a letter) matches no alternative: `regex` checks
//     the single property [\p{L}] on the character alone but the set [^\s\p{L}\p{N}] on all its case partners.
//     So U+0345 is dropped like a space.
//  5. Each piece's UTF-8 bytes map to CLIP's printable byte symbols (bytes_to_unicode); "<|startoftext|>" and
//     "<|endoftext|>" map straight to their ids. BPE: the word's symbols, "</w>" appended to the last one; merge
//     the adjacent pair with the lowest merges.txt rank, all its occurrences left to right, until no pair has a
//     rank. Symbols missing from vocab.json become unk_id (HF's rule; OpenAI's code would raise).
//
// Not reproduced: ftfy.fix_text, which OpenAI's tokenizer runs first (mojibake repair, NFC, curly quotes ->
// straight, full-width -> ASCII, ...). HF's tokenizers differ from OpenAI's in this pre-cleaning too (ftfy or BERT's
// basic cleaner, NFC in the fast one, no html.unescape of their own); all agree on ordinary text. The Unicode data
// is the build Python's (unicodedata.unidata_version), which may be older or newer than the `regex` module's.
// A1111's "BREAK" keyword is not supported (it is ordinary text here).
#include "clip_tokenizer.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "o2g_unicode_tables.inc"

namespace onnx2ggml::sd {
namespace {

namespace uc = o2g_unicode;
using U32 = std::u32string;

// ---- Unicode classes -----------------------------------------------------------------------------------------------

template <size_t N>
bool in_table(const uc::CpRange (&t)[N], char32_t c) {
    size_t lo = 0, hi = N;  // first range whose hi >= c
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t[mid].hi < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < N && t[lo].lo <= c;
}

bool is_letter(char32_t c) { return c < 0x80 ? ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') : in_table(uc::kLetter, c); }
bool is_number(char32_t c) { return c < 0x80 ? (c >= '0' && c <= '9') : in_table(uc::kNumber, c); }
bool is_white_space(char32_t c) { return in_table(uc::kWhiteSpace, c); }  // regex's \s
bool is_py_space(char32_t c) { return in_table(uc::kPySpace, c); }        // str.isspace()
// [^\s\p{L}\p{N}] under IGNORECASE (see rule 4)
bool is_other(char32_t c) {
    return !is_white_space(c) && !is_letter(c) && !is_number(c) && !in_table(uc::kSplitSkip, c);
}

// Python's final-sigma condition for the U+03A3 at s[i]:
//     \p{cased} \p{case-ignorable}* HERE !(\p{case-ignorable}* \p{cased})
bool final_sigma(const U32& s, size_t i) {
    size_t j = i;
    while (j > 0 && in_table(uc::kCaseIgnorable, s[j - 1])) --j;
    if (j == 0 || !in_table(uc::kCased, s[j - 1])) return false;
    size_t k = i + 1;
    while (k < s.size() && in_table(uc::kCaseIgnorable, s[k])) ++k;
    return k == s.size() || !in_table(uc::kCased, s[k]);
}

// str.lower()
U32 lower(const U32& s) {
    U32 out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        char32_t c = s[i];
        if (c < 0x80) {
            out += (c >= 'A' && c <= 'Z') ? c + 32 : c;
        } else if (c == 0x3A3) {
            out += final_sigma(s, i) ? char32_t(0x3C2) : char32_t(0x3C3);
        } else {
            auto it = std::lower_bound(std::begin(uc::kLowerSimple), std::end(uc::kLowerSimple), c,
                                       [](const uc::CpPair& p, char32_t v) { return p.cp < v; });
            if (it != std::end(uc::kLowerSimple) && it->cp == c) {
                out += it->lower;
                continue;
            }
            bool multi = false;
            for (const auto& m : uc::kLowerMulti) {
                if (m.cp != c) continue;
                for (char32_t l : m.lower)
                    if (l) out += l;
                multi = true;
            }
            if (!multi) out += c;
        }
    }
    return out;
}

// ---- UTF-8 ---------------------------------------------------------------------------------------------------------

// The code point at byte offset i of s and its length in bytes. Invalid sequences (stray or truncated
// continuation bytes, overlong forms, surrogates, > U+10FFFF) read as U+FFFD, one per offending byte.
char32_t decode_at(const std::string& s, size_t i, size_t& len) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    unsigned b = p[i];
    len = 1;
    if (b < 0x80) return char32_t(b);
    size_t need = b >= 0xF0 && b <= 0xF4 ? 4 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xC2 && b <= 0xDF ? 2 : 0;
    if (need == 0 || i + need > s.size()) return 0xFFFD;
    char32_t cp = need == 2 ? (b & 0x1F) : need == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t k = 1; k < need; ++k) {
        if ((p[i + k] & 0xC0) != 0x80) return 0xFFFD;
        cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((need == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (need == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0xFFFD;
    len = need;
    return cp;
}

U32 utf8_decode(const std::string& s) {
    U32 out;
    out.reserve(s.size());
    for (size_t i = 0, len = 0; i < s.size(); i += len) out += decode_at(s, i, len);
    return out;
}

void utf8_append(std::string& out, char32_t c) {
    if (c < 0x80) {
        out += char(c);
    } else if (c < 0x800) {
        out += char(0xC0 | (c >> 6));
        out += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += char(0xE0 | (c >> 12));
        out += char(0x80 | ((c >> 6) & 0x3F));
        out += char(0x80 | (c & 0x3F));
    } else {
        out += char(0xF0 | (c >> 18));
        out += char(0x80 | ((c >> 12) & 0x3F));
        out += char(0x80 | ((c >> 6) & 0x3F));
        out += char(0x80 | (c & 0x3F));
    }
}

std::string utf8_encode(const char32_t* s, size_t n) {
    std::string out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) utf8_append(out, s[i]);
    return out;
}

// ---- html.unescape -------------------------------------------------------------------------------------------------

const char* find_entity(const std::string& name) {
    auto it = std::lower_bound(
        std::begin(uc::kHtmlEntities), std::end(uc::kHtmlEntities), name,
        [](const uc::HtmlEntity& e, const std::string& v) { return std::strcmp(e.name, v.c_str()) < 0; });
    return it != std::end(uc::kHtmlEntities) && name == it->name ? it->utf8 : nullptr;
}

// The character(s) html.unescape puts for a numeric reference; num is saturated at 0x110000.
void append_charref(uint32_t num, U32& out) {
    for (const auto& f : uc::kHtmlCharrefFix)
        if (f.number == num) {
            out += utf8_decode(f.utf8);
            return;
        }
    if ((num >= 0xD800 && num <= 0xDFFF) || num > 0x10FFFF) out += char32_t(0xFFFD);
    else if (!in_table(uc::kHtmlDropped, num)) out += char32_t(num);
}

int hex_value(char32_t c) {
    if (c >= '0' && c <= '9') return int(c - '0');
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return int((c | 0x20) - 'a' + 10);
    return -1;
}

// Python's html.unescape: every match of &(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?) is replaced;
// an '&' where none matches stays. Lengths count code points, as in Python.
U32 html_unescape(const U32& s) {
    if (s.find(U'&') == U32::npos) return s;
    U32 out;
    size_t n = s.size(), i = 0;
    while (i < n) {
        if (s[i] != U'&') {
            out += s[i++];
            continue;
        }
        size_t p = i + 1;
        if (p < n && s[p] == U'#') {
            bool hex = p + 1 < n && (s[p + 1] == U'x' || s[p + 1] == U'X');
            size_t q = hex ? p + 2 : p + 1, start = q;
            uint32_t num = 0;
            for (; q < n && (hex ? hex_value(s[q]) >= 0 : (s[q] >= U'0' && s[q] <= U'9')); ++q)
                num = std::min<uint32_t>(num * (hex ? 16 : 10) + uint32_t(hex_value(s[q])), 0x110000);
            if (q == start) {  // "&#" or "&#x" without digits: no alternative matches ('#' ends a name)
                out += s[i++];
                continue;
            }
            if (q < n && s[q] == U';') ++q;
            append_charref(num, out);
            i = q;
            continue;
        }
        size_t q = p;
        auto name_char = [](char32_t c) {
            return !(c == '\t' || c == '\n' || c == '\f' || c == ' ' || c == '<' || c == '&' || c == '#' || c == ';');
        };
        while (q < n && q - p < 32 && name_char(s[q])) ++q;
        if (q == p) {
            out += s[i++];
            continue;
        }
        if (q < n && s[q] == U';') ++q;
        U32 name = s.substr(p, q - p);  // with its ';', if any
        i = q;
        // Entity names are ASCII: a name with other characters can only match through an ASCII prefix.
        size_t ascii = 0;
        while (ascii < name.size() && name[ascii] < 0x80) ++ascii;
        auto ascii_prefix = [&](size_t len) { return std::string(name.begin(), name.begin() + len); };
        const char* value = ascii == name.size() ? find_entity(ascii_prefix(name.size())) : nullptr;
        if (value) {
            out += utf8_decode(value);
            continue;
        }
        // The longest prefix (at least 2 characters, shorter than the name) that is a known name.
        size_t len = std::min(ascii, name.size() - 1);
        for (; len >= 2; --len)
            if ((value = find_entity(ascii_prefix(len)))) break;
        if (value) {
            out += utf8_decode(value);
            out += name.substr(len);
        } else {
            out += U'&';
            out += name;
        }
    }
    return out;
}

// ---- cleaning and splitting ----------------------------------------------------------------------------------------

U32 strip_py(const U32& s) {
    size_t b = 0, e = s.size();
    while (b < e && is_py_space(s[b])) ++b;
    while (e > b && is_py_space(s[e - 1])) --e;
    return s.substr(b, e - b);
}

// Rules 1-3.
U32 clean(const std::string& text) {
    U32 t = strip_py(html_unescape(html_unescape(utf8_decode(text))));
    U32 collapsed;
    collapsed.reserve(t.size());
    for (size_t i = 0; i < t.size();) {
        if (is_white_space(t[i])) {
            collapsed += U' ';
            while (i < t.size() && is_white_space(t[i])) ++i;
        } else {
            collapsed += t[i++];
        }
    }
    return lower(strip_py(collapsed));
}

// A pattern character against a text character under IGNORECASE (the text is already lower-cased, so only
// U+017F, whose simple case folding is 's', needs more than equality).
bool same_ignoring_case(char32_t t, char p) { return t == char32_t(p) || (p == 's' && t == 0x17F); }

size_t match_literal(const U32& t, size_t i, const char* lit) {
    size_t k = 0;
    for (; lit[k]; ++k)
        if (i + k >= t.size() || !same_ignoring_case(t[i + k], lit[k])) return 0;
    return k;
}

// Rule 4: [begin, end) of each piece, in order.
std::vector<std::pair<size_t, size_t>> split(const U32& t) {
    static const char* const kSpecials[] = {"<|startoftext|>", "<|endoftext|>"};
    static const char* const kContractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    std::vector<std::pair<size_t, size_t>> pieces;
    size_t n = t.size(), i = 0;
    while (i < n) {
        size_t len = 0;
        for (const char* lit : kSpecials)
            if (!len) len = match_literal(t, i, lit);
        for (const char* lit : kContractions)
            if (!len) len = match_literal(t, i, lit);
        if (!len && is_letter(t[i]))
            for (len = 1; i + len < n && is_letter(t[i + len]);) ++len;
        if (!len && is_number(t[i])) len = 1;
        if (!len && is_other(t[i]))
            for (len = 1; i + len < n && is_other(t[i + len]);) ++len;
        if (len) pieces.emplace_back(i, i + len);
        i += len ? len : 1;  // no alternative matches: white space, U+0345
    }
    return pieces;
}

// CLIP's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the others for U+0100 + their rank.
char32_t byte_char(unsigned b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return char32_t(b);
    unsigned rank = 0;
    for (unsigned x = 0; x < b; ++x)
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) ++rank;
    return char32_t(0x100 + rank);
}

// ---- a small JSON reader (what vocab.json, special_tokens_map.json and the driver's input need) -------------------

class JsonReader {
public:
    JsonReader(const std::string& text, std::string what, bool columns_only = false)
        : s_(text), what_(std::move(what)), columns_only_(columns_only) {}

    [[noreturn]] void fail(const std::string& msg) const {
        size_t line = 1, col = 1;
        for (size_t k = 0; k < pos_ && k < s_.size(); ++k) {
            if (s_[k] == '\n') ++line, col = 1;
            else ++col;
        }
        if (columns_only_) throw std::runtime_error(what_ + ", column " + std::to_string(col) + ": " + msg);
        throw std::runtime_error(what_ + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + msg);
    }
    void ws() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
            ++pos_;
    }
    bool at_end() {
        ws();
        return pos_ >= s_.size();
    }
    char peek() {
        ws();
        if (pos_ >= s_.size()) fail("unexpected end of JSON");
        return s_[pos_];
    }
    bool eat(char c) {
        if (peek() != c) return false;
        ++pos_;
        return true;
    }
    void expect(char c) {
        if (!eat(c)) fail(std::string("expected '") + c + "'");
    }

    std::string string() {
        expect('"');
        std::string out;
        for (;;) {
            if (pos_ >= s_.size()) fail("unterminated string");
            unsigned char c = static_cast<unsigned char>(s_[pos_++]);
            if (c == '"') return out;
            if (c < 0x20) fail("control character in string");
            if (c != '\\') {
                out += char(c);
                continue;
            }
            if (pos_ >= s_.size()) fail("unterminated string");
            char e = s_[pos_++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    char32_t cp = hex4();
                    if (cp >= 0xD800 && cp <= 0xDBFF) {  // a surrogate pair
                        if (s_.compare(pos_, 2, "\\u") != 0) fail("lone surrogate in \\u escape");
                        pos_ += 2;
                        char32_t lo = hex4();
                        if (lo < 0xDC00 || lo > 0xDFFF) fail("lone surrogate in \\u escape");
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                        fail("lone surrogate in \\u escape");
                    }
                    utf8_append(out, cp);
                    break;
                }
                default: --pos_, fail(std::string("bad escape '\\") + e + "'");
            }
        }
    }

    // A non-negative JSON integer that fits an int.
    int id() {
        if (peek() == '-') fail("expected a non-negative integer id");
        size_t start = pos_;
        long long v = 0;
        while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
            v = v * 10 + (s_[pos_++] - '0');
            if (v > std::numeric_limits<int>::max()) fail("id out of range");
        }
        if (pos_ == start || (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E')))
            pos_ = start, fail("expected an integer id");
        return int(v);
    }

    // Skips any JSON value (nesting bounded so that a hostile file cannot exhaust the stack).
    void skip(int depth = 0) {
        if (depth > 256) fail("JSON nested too deeply");
        char c = peek();
        if (c == '"') {
            string();
        } else if (c == '{' || c == '[') {
            ++pos_;
            char close = c == '{' ? '}' : ']';
            if (eat(close)) return;
            do {
                if (c == '{') {
                    string();
                    expect(':');
                }
                skip(depth + 1);
            } while (eat(','));
            expect(close);
        } else {  // number, true, false, null
            size_t start = pos_;
            auto word_char = [](char c) {
                return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
            };
            while (pos_ < s_.size() && word_char(s_[pos_])) ++pos_;
            std::string word = s_.substr(start, pos_ - start);
            bool number = !word.empty() && (word[0] == '-' || (word[0] >= '0' && word[0] <= '9'));
            if (!(number || word == "true" || word == "false" || word == "null"))
                pos_ = start, fail("expected a JSON value");
        }
    }

    bool null() {
        if (s_.compare(pos_, 4, "null") != 0) return false;
        pos_ += 4;
        return true;
    }

private:
    char32_t hex4() {
        char32_t v = 0;
        for (int k = 0; k < 4; ++k) {
            int h = pos_ < s_.size() ? hex_value(char32_t(static_cast<unsigned char>(s_[pos_]))) : -1;
            if (h < 0) fail("bad \\u escape");
            v = v * 16 + char32_t(h);
            ++pos_;
        }
        return v;
    }

    const std::string& s_;
    std::string what_;
    bool columns_only_;
    size_t pos_ = 0;
};

// The whole file, without a UTF-8 byte-order mark (so that merges.txt's "#version" line is still recognised).
bool read_file(const std::string& path, std::string& out) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    std::ostringstream ss;
    ss << f.rdbuf();
    out = ss.str();
    if (out.compare(0, 3, "\xEF\xBB\xBF") == 0) out.erase(0, 3);
    return true;
}

std::string read_required(const std::string& path) {
    std::string text;
    if (!read_file(path, text)) throw std::runtime_error(path + ": cannot open");
    return text;
}

// pad_token / unk_token of special_tokens_map.json or tokenizer_config.json: a string, {"content": "...", ...} or
// null (absent). Other keys are skipped.
void read_special_tokens(const std::string& path, const std::string& text, std::string& pad, std::string& unk) {
    JsonReader r(text, path);
    r.expect('{');
    if (r.eat('}')) return;
    do {
        std::string key = r.string();
        r.expect(':');
        if (key != "pad_token" && key != "unk_token") {
            r.skip();
            continue;
        }
        std::string value;
        char c = r.peek();
        if (c == '"') {
            value = r.string();
        } else if (c == '{') {
            r.expect('{');
            if (!r.eat('}')) {
                do {
                    std::string k = r.string();
                    r.expect(':');
                    if (k == "content" && r.peek() == '"') value = r.string();
                    else r.skip();
                } while (r.eat(','));
                r.expect('}');
            }
            if (value.empty()) r.fail("\"" + key + "\" has no \"content\" string");
        } else if (r.null()) {
            continue;
        } else {
            r.fail("\"" + key + "\" must be a string or an object with \"content\"");
        }
        (key == "pad_token" ? pad : unk) = value;
    } while (r.eat(','));
    r.expect('}');
    if (!r.at_end()) r.fail("trailing characters after the JSON object");
}

}  // namespace

// ---- loading -------------------------------------------------------------------------------------------------------

int ClipTokenizer::intern(const std::string& s) {
    auto [it, added] = sym_index_.emplace(s, int(sym_vocab_id_.size()));
    if (added) sym_vocab_id_.push_back(-1);
    return it->second;
}

int ClipTokenizer::symbol(const std::string& s) const {
    auto it = sym_index_.find(s);
    return it == sym_index_.end() ? -1 : it->second;
}

ClipTokenizer ClipTokenizer::load(const std::string& dir) {
    ClipTokenizer tok;
    std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";

    // vocab.json: {"symbol": id, ...}; a repeated key keeps its last id, as Python's json does.
    std::string vocab_path = base + "vocab.json";
    std::string text = read_required(vocab_path);
    JsonReader r(text, vocab_path);
    r.expect('{');
    if (!r.eat('}')) {
        do {
            std::string key = r.string();
            r.expect(':');
            int id = r.id();
            tok.sym_vocab_id_[size_t(tok.intern(key))] = id;
        } while (r.eat(','));
        r.expect('}');
    }
    if (!r.at_end()) r.fail("trailing characters after the JSON object");
    tok.vocab_size_ = tok.sym_index_.size();

    // merges.txt: an optional "#version" first line, then one "left right" pair per line, rank = order.
    std::string merges_path = base + "merges.txt";
    text = read_required(merges_path);
    std::istringstream lines(text);
    std::string line;
    int rank = 0;
    for (size_t line_no = 1; std::getline(lines, line); ++line_no) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if ((line_no == 1 && line.rfind("#version", 0) == 0) || line.empty()) continue;
        size_t sp = line.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() || line.find(' ', sp + 1) != std::string::npos)
            throw std::runtime_error(merges_path + ":" + std::to_string(line_no) +
                                     ": expected two symbols separated by one space, got \"" + line + "\"");
        std::string left = line.substr(0, sp), right = line.substr(sp + 1);
        int a = tok.intern(left), b = tok.intern(right), merged = tok.intern(left + right);
        // A repeated pair keeps its last rank, like dict(zip(merges, range(len(merges)))).
        tok.merges_[(uint64_t(uint32_t(a)) << 32) | uint32_t(b)] = {rank++, merged};
    }

    for (unsigned b = 0; b < 256; ++b) {
        std::string ch;
        utf8_append(ch, byte_char(b));
        tok.byte_sym_[b] = tok.symbol(ch);
        tok.byte_end_sym_[b] = tok.symbol(ch + "</w>");
    }

    auto vocab_id = [&](const std::string& token, const std::string& from) {
        int s = tok.symbol(token);
        int id = s < 0 ? -1 : tok.sym_vocab_id_[size_t(s)];
        if (id < 0) throw std::runtime_error(from + ": token \"" + token + "\" is not in " + vocab_path);
        return id;
    };
    tok.bos_id = vocab_id("<|startoftext|>", vocab_path);
    tok.eos_id = vocab_id("<|endoftext|>", vocab_path);

    // The pad and unk tokens: special_tokens_map.json wins over tokenizer_config.json, as in HF.
    std::string pad = "<|endoftext|>", unk = "<|endoftext|>", source = vocab_path;
    for (const char* name : {"special_tokens_map.json", "tokenizer_config.json"}) {
        std::string path = base + name, json;
        if (!read_file(path, json)) continue;
        read_special_tokens(path, json, pad, unk);
        source = path;
        break;
    }
    tok.pad_id = vocab_id(pad, source);
    tok.unk_id = vocab_id(unk, source);
    return tok;
}

// ---- encoding ------------------------------------------------------------------------------------------------------

// Rule 5 for one piece (its UTF-8 bytes): appends vocab ids.
void ClipTokenizer::bpe_word(const std::string& bytes, std::vector<int>& out) const {
    auto to_id = [&](int s) {
        int id = s < 0 ? -1 : sym_vocab_id_[size_t(s)];
        return id < 0 ? unk_id : id;
    };
    if (bytes == "<|startoftext|>" || bytes == "<|endoftext|>") {
        out.push_back(to_id(symbol(bytes)));
        return;
    }
    std::vector<int> word(bytes.size());
    for (size_t k = 0; k < bytes.size(); ++k) {
        auto b = static_cast<unsigned char>(bytes[k]);
        word[k] = k + 1 == bytes.size() ? byte_end_sym_[b] : byte_sym_[b];
    }
    std::vector<int> next;
    while (word.size() > 1) {
        // The lowest-ranked pair. Unknown symbols (-1) are in no merge.
        int best_rank = std::numeric_limits<int>::max(), left = -1, right = -1, merged = -1;
        for (size_t k = 0; k + 1 < word.size(); ++k) {
            if (word[k] < 0 || word[k + 1] < 0) continue;
            auto it = merges_.find((uint64_t(uint32_t(word[k])) << 32) | uint32_t(word[k + 1]));
            if (it != merges_.end() && it->second.first < best_rank) {
                best_rank = it->second.first;
                left = word[k], right = word[k + 1], merged = it->second.second;
            }
        }
        if (merged < 0) break;
        // Merge every occurrence, left to right ("a a a" with "a a" -> "aa a").
        next.clear();
        for (size_t k = 0; k < word.size();) {
            if (k + 1 < word.size() && word[k] == left && word[k + 1] == right) {
                next.push_back(merged);
                k += 2;
            } else {
                next.push_back(word[k++]);
            }
        }
        word.swap(next);
    }
    for (int s : word) out.push_back(to_id(s));
}

// Appends the ids of text to out, stopping once out holds `limit` ids or more (later pieces only add ids).
void ClipTokenizer::encode_into(const std::string& text, std::vector<int>& out, size_t limit) const {
    U32 t = clean(text);
    for (const auto& [b, e] : split(t)) {
        if (out.size() >= limit) return;
        bpe_word(utf8_encode(t.data() + b, e - b), out);
    }
}

std::vector<int> ClipTokenizer::encode(const std::string& text) const {
    std::vector<int> ids;
    encode_into(text, ids, std::numeric_limits<size_t>::max());
    return ids;
}

std::vector<int> ClipTokenizer::encode_padded(const std::string& text, int max_len) const {
    if (max_len < 2) throw std::invalid_argument("ClipTokenizer: max_len must be at least 2");
    std::vector<int> ids{bos_id};
    size_t body_end = size_t(max_len) - 1;  // BOS + at most max_len - 2 ids
    encode_into(text, ids, body_end);
    if (ids.size() > body_end) ids.resize(body_end);
    ids.push_back(eos_id);
    ids.resize(size_t(max_len), pad_id);
    return ids;
}

namespace {

// ---- A1111 prompt weights ------------------------------------------------------------------------------------------

struct Segment {
    std::string text;
    double weight;  // double, multiplied in A1111's order, so that equal weights compare equal as they do there
};

bool is_syntax(char c) { return c == '\\' || c == '(' || c == ')' || c == '[' || c == ']' || c == ':'; }

// Skips str.isspace() characters (Python re's \s) from byte offset i of UTF-8 s.
size_t skip_py_space(const std::string& s, size_t i) {
    while (i < s.size()) {
        size_t len = 0;
        if (!is_py_space(decode_at(s, i, len))) break;
        i += len;
    }
    return i;
}

// At s[i] == ':', the weight syntax ":" \s* number \s* ")" with number = [+-]?(\d+(\.\d*)?|\.\d+) (ASCII digits).
// A1111's pattern takes [+-]?[.\d]+ and then fails (raises) on what float() rejects, such as "1.2.3"; here such
// text does not match, so its ':' is an ordinary character.
bool parse_weight(const std::string& s, size_t i, size_t& end, double& weight) {
    size_t j = skip_py_space(s, i + 1);
    bool negative = j < s.size() && s[j] == '-';
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    size_t num = j, digits = 0;
    auto is_digit = [&](size_t k) { return k < s.size() && s[k] >= '0' && s[k] <= '9'; };
    while (is_digit(j)) ++j, ++digits;
    if (j < s.size() && s[j] == '.') {
        ++j;
        while (is_digit(j)) ++j, ++digits;
    }
    if (digits == 0) return false;
    size_t num_end = j;
    j = skip_py_space(s, j);
    if (j >= s.size() || s[j] != ')') return false;
    auto [ptr, ec] = std::from_chars(s.data() + num, s.data() + num_end, weight);  // locale-independent
    if (ec == std::errc::result_out_of_range) {  // as Python's float(): overflow is inf, underflow 0
        const char* dot = std::find(s.data() + num, s.data() + num_end, '.');
        bool big = std::any_of(s.data() + num, dot, [](char d) { return d != '0'; });  // integer part > 0
        weight = big ? std::numeric_limits<double>::infinity() : 0.0;
    } else if (ec != std::errc() || ptr != s.data() + num_end) {
        return false;
    }
    if (negative) weight = -weight;
    end = j + 1;
    return true;
}

// A1111's parse_prompt_attention without BREAK: the text as runs with their weights, equal neighbours merged.
std::vector<Segment> parse_attention(const std::string& s) {
    const double kRound = 1.1, kSquare = 1 / 1.1;  // a "[...]" multiplies by 1/1.1, as A1111 does
    std::vector<Segment> segs;
    std::vector<size_t> round, square;  // where each open bracket's text starts
    auto scale = [&](size_t from, double m) {
        for (size_t k = from; k < segs.size(); ++k) segs[k].weight *= m;
    };
    for (size_t i = 0, n = s.size(); i < n;) {
        char c = s[i];
        size_t end = 0;
        double w = 0;
        if (c == '\\') {
            char e = i + 1 < n ? s[i + 1] : 0;
            bool escape = e == '(' || e == ')' || e == '[' || e == ']' || e == '\\';
            segs.push_back({escape ? std::string(1, e) : std::string(), 1.0});  // a lone '\' vanishes, as in A1111
            i += escape ? 2 : 1;
        } else if (c == '(') {
            round.push_back(segs.size()), ++i;
        } else if (c == '[') {
            square.push_back(segs.size()), ++i;
        } else if (c == ':' && parse_weight(s, i, end, w)) {
            if (round.empty()) segs.push_back({s.substr(i, end - i), 1.0});  // nothing to close: plain text
            else scale(round.back(), w), round.pop_back();
            i = end;
        } else if (c == ')' && !round.empty()) {
            scale(round.back(), kRound), round.pop_back(), ++i;
        } else if (c == ']' && !square.empty()) {
            scale(square.back(), kSquare), square.pop_back(), ++i;
        } else if (is_syntax(c)) {  // ':', or an unmatched ')' / ']'
            segs.push_back({std::string(1, c), 1.0}), ++i;
        } else {
            size_t j = i;
            while (j < n && !is_syntax(s[j])) ++j;
            segs.push_back({s.substr(i, j - i), 1.0});
            i = j;
        }
    }
    // Brackets left open apply to the end, round ones first, each in opening order.
    for (size_t p : round) scale(p, kRound);
    for (size_t p : square) scale(p, kSquare);
    std::vector<Segment> merged;
    for (auto& sg : segs) {
        if (!merged.empty() && merged.back().weight == sg.weight) merged.back().text += sg.text;
        else merged.push_back(std::move(sg));
    }
    return merged;
}

}  // namespace

std::pair<std::vector<int>, std::vector<float>> ClipTokenizer::encode_weighted(const std::string& text,
                                                                               int max_len) const {
    if (max_len < 2) throw std::invalid_argument("ClipTokenizer: max_len must be at least 2");
    std::vector<int> ids{bos_id};
    std::vector<float> weights{1.0f};
    size_t body_end = size_t(max_len) - 1;
    for (const auto& sg : parse_attention(text)) {
        if (ids.size() >= body_end) break;
        encode_into(sg.text, ids, body_end);  // each run on its own, as A1111 tokenizes them
        weights.resize(ids.size(), float(sg.weight));
    }
    if (ids.size() > body_end) ids.resize(body_end), weights.resize(body_end);
    ids.push_back(eos_id);
    weights.push_back(1.0f);
    ids.resize(size_t(max_len), pad_id);
    weights.resize(size_t(max_len), 1.0f);
    return {std::move(ids), std::move(weights)};
}

std::string parse_json_string_literal(const std::string& text, const std::string& what) {
    JsonReader r(text, what, /*columns_only=*/true);
    if (r.at_end() || r.peek() != '"') r.fail("expected a JSON string");
    std::string value = r.string();
    if (!r.at_end()) r.fail("trailing characters after the JSON string");
    return value;
}

}  // namespace onnx2ggml::sd
