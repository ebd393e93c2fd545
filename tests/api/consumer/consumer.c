/* consumer_c MODEL OUT.bin: consumer.cpp with the C API. */
#include <onnx2ggml/onnx2ggml.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
    o2g_model* model = NULL;
    o2g_session* session = NULL;
    o2g_options* options = o2g_options_create();
    o2g_tensor* out = NULL;
    size_t rank = 0, i;
    const int64_t* dims = NULL;
    int64_t n = 1;
    float* x;
    FILE* f;
    if (argc != 3) return 2;
    o2g_options_set(options, "threads", "2");
    if (o2g_model_load(argv[1], &model) != O2G_OK || o2g_model_input(model, 0, NULL, NULL, &rank, &dims) != O2G_OK ||
        o2g_session_create(model, options, &session) != O2G_OK) {
        fprintf(stderr, "error: %s\n", o2g_last_error());
        return 2;
    }
    for (i = 0; i < rank; ++i) n *= dims[i];
    x = malloc(sizeof(float) * (size_t)n);
    for (i = 0; i < (size_t)n; ++i) x[i] = 1.0f;
    {
        o2g_tensor_ref in = {NULL, O2G_FLOAT, rank, dims, x};
        if (o2g_session_run(session, &in, 1, &out, 1) != O2G_OK) {
            fprintf(stderr, "error: %s\n", o2g_last_error());
            return 2;
        }
    }
    f = fopen(argv[2], "wb");
    fwrite(o2g_tensor_data(out), 1, o2g_tensor_nbytes(out), f);
    fclose(f);
    printf("%s %s: %zu bytes\n", o2g_version(), o2g_tensor_name(out), o2g_tensor_nbytes(out));
    o2g_tensor_free(out);
    o2g_session_free(session);
    o2g_model_free(model);
    o2g_options_free(options);
    free(x);
    return 0;
}
