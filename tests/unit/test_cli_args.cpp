// The command line's parser (src/cli/args.cpp), on its own: what it takes and what it refuses (exit 2).
#include <gtest/gtest.h>

#include "cli.h"

using onnx2ggml::cli::parse_dim_spec;

TEST(CliArgs, DimSpecsAreRangesOrLists) {
    EXPECT_EQ(parse_dim_spec("batch=1:4").second, (std::vector<int64_t>{1, 2, 3, 4}));
    EXPECT_EQ(parse_dim_spec("h=64:256:64").second, (std::vector<int64_t>{64, 128, 192, 256}));
    EXPECT_EQ(parse_dim_spec("s=8,2,8,4").second, (std::vector<int64_t>{2, 4, 8}));
    EXPECT_EQ(parse_dim_spec("a=b=3").first, "a=b");
    for (const char* bad : {"n", "n=", "n=0:4", "n=4:1", "n=1:2:3:4", "n=x", "n=1:1000", "=4"}) {
        try {
            parse_dim_spec(bad);
            ADD_FAILURE() << bad << " was taken";
        } catch (const onnx2ggml::Error& e) { EXPECT_EQ(e.category(), onnx2ggml::ErrorCategory::BadInput) << bad; }
    }
}

TEST(CliArgs, OptionsAreCheckedBeforeAnyWork) {
    auto parse = [](std::vector<std::string> v) {
        std::vector<char*> argv;
        for (auto& s : v) argv.push_back(s.data());
        return onnx2ggml::cli::parse(int(argv.size()), argv.data());
    };
    auto a = parse({"onnx2ggml", "run", "m.onnx", "--input", "x=a.npy", "--then", "--input", "x=b.npy", "--weights",
                    "q8_0", "--max-memory", "2G", "--dim", "n=1,2"});
    EXPECT_EQ(a.model, "m.onnx");
    ASSERT_EQ(a.sets.size(), 2u);
    EXPECT_EQ(a.sets[1].inputs[0].second, "b.npy");
    EXPECT_EQ(a.max_memory, uint64_t(2) << 30);
    EXPECT_EQ(a.dims["n"], (std::vector<int64_t>{1, 2}));
    for (std::vector<std::string> bad : {std::vector<std::string>{"onnx2ggml", "run", "m.onnx", "--weights", "q9"},
                                         {"onnx2ggml", "run", "m.onnx", "--weights-rule", "x=q9"},
                                         {"onnx2ggml", "run", "m.onnx", "--weights-rule", "(=f16"},
                                         {"onnx2ggml", "run", "m.onnx", "--max-memory", "lots"},
                                         {"onnx2ggml", "run", "m.onnx", "--input-shape", "x=1xax3"},
                                         {"onnx2ggml", "run", "m.onnx", "--bogus"}})
        EXPECT_THROW(parse(bad), onnx2ggml::Error) << bad.back();
}
