// The onnx2ggml command: inspect / run / compile / check / bench / compare / quantize / ops / rpc-server.
// Exit codes: 0 ok, 1 numeric mismatch, 2 bad usage or bad input, 3 unsupported model, 4 internal error.
// Written on the public C++ API only, as an application would be (cli.h says which file holds what).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <new>

#include "cli.h"  // (the public API and the arguments: this target sees no internal header)

using namespace onnx2ggml;
using namespace onnx2ggml::cli;

namespace {

// `onnx2ggml rpc-server`: one of this build's devices served to other processes by ggml's RPC server
// (clients: --backend rpc:HOST:PORT[,...]). Serves until killed.
int cmd_rpc_server(int argc, char** argv) {
    std::string host = "127.0.0.1", backend = "cpu";
    long port = 50052, threads = 0;
    for (int i = 2; i < argc; ++i) {
        std::string s = argv[i];
        if (i + 1 >= argc) bad("rpc-server: missing value after " + s);
        std::string v = argv[++i];
        auto number = [&](long lo, long hi) {
            if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos ||
                std::stol(v) < lo || std::stol(v) > hi)
                bad("rpc-server: bad " + s + " '" + v + "'");
            return std::stol(v);
        };
        if (s == "--host") host = v;
        else if (s == "--port") port = number(1, 65535);
        else if (s == "--backend") backend = v;
        else if (s == "--threads") threads = number(0, 4096);
        else bad("rpc-server: unknown option " + s + " (--host, --port, --backend, --threads)");
    }
    std::string ep = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
    bool loopback = host == "127.0.0.1" || host == "localhost" || host == "::1";
    fprintf(stderr,
            "WARNING: ggml RPC has no authentication and no encryption: whoever can connect to %s can read and write "
            "this process's memory through it. Serve on a trusted network only%s.\n",
            ep.c_str(), loopback ? "" : " (this is NOT the loopback address)");
    serve_rpc(host, int(port), backend, int(threads));
    return int(ErrorCategory::BadInput);  // (serve_rpc returns only by throwing)
}

}  // namespace

int main(int argc, char** argv) {
    exit_on_ggml_abort();  // an RPC server gone: exit 2, not a core dump
    try {
        if (argc >= 2 && std::strcmp(argv[1], "rpc-server") == 0) return cmd_rpc_server(argc, argv);
        Args a = parse(argc, argv);
        if (a.cmd == "ops") {
            for (auto& op : supported_operators()) std::cout << op << "\n";
            return 0;
        }
        if (a.cmd == "-h" || a.cmd == "--help" || a.cmd == "help") {
            std::cout << kUsage;
            return 0;
        }
        if (a.cmd == "--version" || a.cmd == "version") {
            std::cout << "onnx2ggml " << version() << "\n" << build_info();
            return 0;
        }
        if (a.model.empty()) bad("missing MODEL\n" + std::string(kUsage));
        if (a.max_memory) set_max_memory(a.max_memory);
        if (a.cmd == "run") return cmd_run(a);
        if (a.cmd == "compile") return cmd_compile(a);
        if (a.cmd == "bench") return cmd_bench(a);
        if (a.cmd == "check") return std::filesystem::is_directory(a.model) ? cmd_check_dir(a) : cmd_check_model(a);
        if (a.cmd == "inspect") return cmd_inspect(a);
        if (a.cmd == "quantize") return cmd_quantize(a);
        if (a.cmd == "compare") return cmd_compare(a);
        bad("unknown command '" + a.cmd + "'\n" + kUsage);
    } catch (const Error& e) {
        std::cerr << "error: " << e.what() << "\n";
        return e.exit_code();
    } catch (const std::bad_alloc&) {
        std::cerr << "error: out of memory\n";
        return int(ErrorCategory::BadInput);
    } catch (const std::exception& e) {
        std::cerr << "internal error: " << e.what() << "\n";
        return int(ErrorCategory::Internal);
    }
}
