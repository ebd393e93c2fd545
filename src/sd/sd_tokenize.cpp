// sd_tokenize: runs the CLIP tokenizer on prompts read from stdin, for tests and for looking at token ids.
//
//   sd_tokenize --tokenizer DIR [--max-len N] [--raw] [--weighted] < prompts
//
// Each input line is one JSON string literal (so a prompt may hold any character, newlines and tabs included).
// Each output line holds the prompt's ids, space-separated: encode_padded() by default, encode() with --raw; with
// --weighted, encode_weighted()'s ids, " | ", then its weights (%.6g). Exit 2 on bad usage, tokenizer files or input.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>

#include "clip_tokenizer.h"

namespace {

int usage(const char* why) {
    std::fprintf(stderr,
                 "sd_tokenize: %s\nusage: sd_tokenize --tokenizer DIR [--max-len N] [--raw] [--weighted] < prompts\n"
                 "  each stdin line is a JSON string; prints the ids of each (padded to N = 77 unless --raw)\n",
                 why);
    return 2;
}

std::string join(const std::vector<int>& ids) {
    std::string out;
    for (size_t k = 0; k < ids.size(); ++k) out += (k ? " " : "") + std::to_string(ids[k]);
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    std::string dir;
    int max_len = 77;
    bool raw = false, weighted = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--tokenizer" && i + 1 < argc) {
            dir = argv[++i];
        } else if (a == "--max-len" && i + 1 < argc) {
            char* end = nullptr;
            long v = std::strtol(argv[++i], &end, 10);
            if (*end || v < 2 || v > 1000000) return usage("--max-len needs an integer >= 2");
            max_len = int(v);
        } else if (a == "--raw") {
            raw = true;
        } else if (a == "--weighted") {
            weighted = true;
        } else {
            return usage(("unknown or incomplete argument " + a).c_str());
        }
    }
    if (dir.empty()) return usage("--tokenizer DIR is required");
    if (raw && weighted) return usage("--raw and --weighted exclude each other");

    try {
        auto tok = onnx2ggml::sd::ClipTokenizer::load(dir);
        std::string line;
        for (size_t line_no = 1; std::getline(std::cin, line); ++line_no) {
            if (!line.empty() && line.back() == '\r') line.pop_back();
            std::string prompt =
                onnx2ggml::sd::parse_json_string_literal(line, "stdin line " + std::to_string(line_no));
            std::string out;
            if (weighted) {
                auto [ids, weights] = tok.encode_weighted(prompt, max_len);
                out = join(ids) + " |";
                char buf[32];
                for (float w : weights) {
                    std::snprintf(buf, sizeof buf, " %.6g", double(w));
                    out += buf;
                }
            } else {
                out = join(raw ? tok.encode(prompt) : tok.encode_padded(prompt, max_len));
            }
            out += '\n';
            std::fwrite(out.data(), 1, out.size(), stdout);
        }
    } catch (const std::exception& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "sd_tokenize: %s\n", e.what());
        return 2;
    }
    return std::fflush(stdout) == 0 ? 0 : 2;
}
