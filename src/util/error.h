// Errors carry the CLI exit code they map to and a message with its context
// (file, node, op type, opset). They are thrown by the loader, the shape rules and the
// lowering, and caught once, at the API/CLI boundary.
#pragma once
#include <stdexcept>
#include <string>

namespace onnx2ggml::core {

enum ExitCode : int {
    kExitOk = 0,
    kExitMismatch = 1,     // numbers differ from the reference
    kExitBadInput = 2,     // bad usage, malformed model, bad input file
    kExitUnsupported = 3,  // valid model that onnx2ggml cannot compile
    kExitInternal = 4,     // a bug of ours
};

struct Error : std::runtime_error {
    int code;
    std::string detail;  // the message without its file/node context (for grouped reports)
    Error(int c, const std::string& msg, const std::string& d = "") : std::runtime_error(msg), code(c), detail(d) {}
};

// An op needs the host value of a runtime value (e.g. Reshape's shape fed by a graph input).
struct NeedsConstant : Error {
    std::string value;
    NeedsConstant(const std::string& msg, const std::string& d, const std::string& v) : Error(3, msg, d), value(v) {}
};

// Memory the process would hold above --max-memory (util/limits.h check_memory): exit 2. A session that
// caches specializations makes room by dropping its least recently used ones first.
struct MemoryLimit : Error {
    explicit MemoryLimit(const std::string& msg) : Error(kExitBadInput, msg) {}
};

// A limit that a value exceeds (a Loop's trip count past what is unrolled): exit 3 for a model's
// own constants; SpecializingSession turns it into exit 2 when a run's control input decides it.
struct LimitExceeded : Error {
    LimitExceeded(const std::string& msg, const std::string& d) : Error(3, msg, d) {}
};

[[noreturn]] inline void fail(int code, const std::string& msg) { throw Error(code, msg); }
[[noreturn]] inline void bad_input(const std::string& msg) { throw Error(kExitBadInput, msg); }
[[noreturn]] inline void unsupported(const std::string& msg) { throw Error(kExitUnsupported, msg); }
[[noreturn]] inline void internal_error(const std::string& msg) {
    throw Error(kExitInternal, "internal error: " + msg);
}

}  // namespace onnx2ggml::core
