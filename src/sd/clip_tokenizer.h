// CLIP's byte-level BPE tokenizer for onnx2ggml-sd: the text -> token-id step of Stable Diffusion's text encoder.
//
// It follows OpenAI CLIP's simple_tokenizer.py (which HF's CLIPTokenizer copies): html-unescape twice, collapse
// white space, lower-case, split with CLIP's pattern, map bytes to printable symbols, then BPE by merge rank with
// "</w>" marking the end of each word. clip_tokenizer.cpp lists the rules and where they deviate (ftfy).
// A folder holds vocab.json and merges.txt as HF writes them (the "tokenizer" folder of an SD checkpoint), plus
// optionally special_tokens_map.json / tokenizer_config.json, which name the pad token ("<|endoftext|>" for SD 1.x,
// "!" for SD 2.x).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace onnx2ggml::sd {

struct ClipTokenizer {
    // Reads dir/vocab.json and dir/merges.txt (and dir/special_tokens_map.json, else dir/tokenizer_config.json,
    // when present). Throws std::runtime_error naming the file (and the line for merges.txt) on missing or
    // malformed files.
    static ClipTokenizer load(const std::string& dir);

    // BPE ids of the text: no BOS/EOS, no padding, no truncation. Text is UTF-8 (invalid bytes read as U+FFFD).
    std::vector<int> encode(const std::string& text) const;

    // HF CLIPTokenizer(padding="max_length", truncation=True, max_length=max_len): BOS, the ids truncated to
    // max_len - 2, EOS, then pad_id up to max_len. max_len < 2 throws std::invalid_argument.
    std::vector<int> encode_padded(const std::string& text, int max_len = 77) const;

    // encode_padded with AUTOMATIC1111's prompt-weight syntax: "(a)" x1.1, "((a))" x1.21, "[a]" x(1/1.1),
    // "(a:1.3)" x1.3, "\(" "\)" "\[" "\]" "\\" literal characters. Returns the ids and one weight per id
    // (BOS, EOS and padding weigh 1.0). Each run of equally weighted text is tokenized on its own.
    std::pair<std::vector<int>, std::vector<float>> encode_weighted(const std::string& text, int max_len = 77) const;

    size_t vocab_size() const { return vocab_size_; }

    int bos_id = -1;  // "<|startoftext|>"
    int eos_id = -1;  // "<|endoftext|>"
    int pad_id = -1;  // pad_token of special_tokens_map.json / tokenizer_config.json, default "<|endoftext|>"
    int unk_id = -1;  // unk_token of the same files, default "<|endoftext|>": the id of symbols not in vocab.json

private:
    // Symbols are interned: every vocab.json key and every merge's parts and result gets an index.
    std::vector<int> sym_vocab_id_;                             // symbol index -> vocab id, -1 if not in vocab.json
    std::unordered_map<std::string, int> sym_index_;            // symbol text (UTF-8) -> symbol index
    std::unordered_map<uint64_t, std::pair<int, int>> merges_;  // (left, right) -> (rank, merged symbol)
    int byte_sym_[256] = {};      // byte -> symbol index of its printable character, -1 if unknown
    int byte_end_sym_[256] = {};  // the same with "</w>" appended (a word's last symbol)
    size_t vocab_size_ = 0;

    int intern(const std::string& s);
    int symbol(const std::string& s) const;
    void bpe_word(const std::string& bytes, std::vector<int>& out) const;
    void encode_into(const std::string& text, std::vector<int>& out, size_t limit) const;
};

// Parses text that holds exactly one JSON string literal (surrounding white space allowed) and returns its UTF-8
// value. Errors throw std::runtime_error starting with `what` (e.g. "stdin line 3").
std::string parse_json_string_literal(const std::string& text, const std::string& what);

}  // namespace onnx2ggml::sd
