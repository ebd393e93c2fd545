/* onnx2ggml's C API, for C programs and foreign-function interfaces (Rust, C#, Go, Node): the
 * operations of the C++ API (onnx2ggml.hpp) on opaque handles.
 *
 *     o2g_model* model;  o2g_session* session;  o2g_tensor* out;
 *     if (o2g_model_load("resnet18.onnx", &model) != O2G_OK) { puts(o2g_last_error()); return 1; }
 *     o2g_session_create(model, NULL, &session);          (NULL options: the defaults)
 *     int64_t shape[4] = {1, 3, 224, 224};
 *     o2g_tensor_ref in = {NULL, O2G_FLOAT, 4, shape, pixels};
 *     o2g_session_run(session, &in, 1, &out, 1);
 *     const float* logits = (const float*)o2g_tensor_data(out);
 *     o2g_tensor_free(out); o2g_session_free(session); o2g_model_free(model);
 *
 * Every function that can fail returns an o2g_status (the CLI's exit codes) and, on failure, keeps
 * its message (file, node, op, opset) for o2g_last_error() on the calling thread. Handles follow the
 * C++ API's rules: a model may be shared by sessions on any threads and freed before them; a
 * session runs one call at a time. Strings returned by the library live as long as their handle.
 */
#ifndef ONNX2GGML_H
#define ONNX2GGML_H
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define O2G_API __declspec(dllexport)
#else
#define O2G_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum o2g_status {
    O2G_OK = 0,
    O2G_MISMATCH = 1,    /* numbers differ from a reference */
    O2G_BAD_INPUT = 2,   /* bad argument, malformed model, wrong input name, dtype or shape */
    O2G_UNSUPPORTED = 3, /* a valid model that onnx2ggml cannot run */
    O2G_INTERNAL = 4     /* a bug of onnx2ggml's */
} o2g_status;

/* Element types: the values of onnx.TensorProto.DataType. */
enum {
    O2G_FLOAT = 1,
    O2G_UINT8 = 2,
    O2G_INT8 = 3,
    O2G_UINT16 = 4,
    O2G_INT16 = 5,
    O2G_INT32 = 6,
    O2G_INT64 = 7,
    O2G_STRING = 8, /* data: an array of NUL-terminated UTF-8 strings (inputs only) */
    O2G_BOOL = 9,
    O2G_FLOAT16 = 10,
    O2G_DOUBLE = 11,
    O2G_UINT32 = 12,
    O2G_UINT64 = 13,
    O2G_BFLOAT16 = 16
};

typedef struct o2g_model o2g_model;
typedef struct o2g_options o2g_options;
typedef struct o2g_session o2g_session;
typedef struct o2g_tensor o2g_tensor;

/* An input in the caller's memory (dense, row-major), read in place during o2g_session_run. */
typedef struct o2g_tensor_ref {
    const char* name; /* NULL: the inputs are given in the model's order */
    int dtype;
    size_t rank;
    const int64_t* shape;
    const void* data;
} o2g_tensor_ref;

O2G_API const char* o2g_version(void);
O2G_API const char* o2g_last_error(void); /* "" when the calling thread's latest call succeeded */

O2G_API o2g_status o2g_model_load(const char* path, o2g_model** out);
O2G_API o2g_status o2g_model_load_bytes(const void* data, size_t size, const char* base_dir, o2g_model** out);
O2G_API void o2g_model_free(o2g_model* model); /* NULL is ignored */
O2G_API size_t o2g_model_input_count(const o2g_model* model);
O2G_API size_t o2g_model_output_count(const o2g_model* model);
/* Input/output i: its name, dtype, rank and dims (-1 where dynamic); any out pointer may be NULL. */
O2G_API o2g_status o2g_model_input(const o2g_model* model, size_t i, const char** name, int* dtype, size_t* rank,
                                   const int64_t** dims);
O2G_API o2g_status o2g_model_output(const o2g_model* model, size_t i, const char** name, int* dtype, size_t* rank,
                                    const int64_t** dims);
/* The name of dynamic dim d of input i ("" when static or unnamed; NULL when out of range). */
O2G_API const char* o2g_model_input_dim_name(const o2g_model* model, size_t i, size_t d);

/* Session options as key/value text: "backend" (auto, cpu, a ggml device), "threads", "weights"
 * (f32, f16, q8_0, ...), "weight_rule" (REGEX=TYPE, appends), "gguf" (a file), "max_memory" (bytes,
 * or 4G), "optimize" (0/1), "disable_pass" (appends), "max_specializations", "release_host_weights"
 * (0/1: free the host copy of the weights once uploaded when no other signature can come; see the C++
 * SessionOptions), "verbose" (0/1: a line on stderr per run). */
O2G_API o2g_options* o2g_options_create(void);
O2G_API void o2g_options_free(o2g_options* options);
O2G_API o2g_status o2g_options_set(o2g_options* options, const char* key, const char* value);

O2G_API o2g_status o2g_session_create(const o2g_model* model, const o2g_options* options, o2g_session** out);
/* Loads the model itself and holds its only copy (with "release_host_weights" its host weights are then
 * freed once uploaded); o2g_session_model gives its inputs and outputs (valid while the session lives). */
O2G_API o2g_status o2g_session_load(const char* path, const o2g_options* options, o2g_session** out);
O2G_API const o2g_model* o2g_session_model(const o2g_session* session);
O2G_API void o2g_session_free(o2g_session* session);
/* Runs on n_inputs inputs (all named, or all unnamed in the model's order) and writes the model's
 * outputs, in its order, to outputs[0 .. n_outputs) (n_outputs: o2g_model_output_count); each one
 * is then the caller's, to free with o2g_tensor_free. On failure nothing is written. */
O2G_API o2g_status o2g_session_run(o2g_session* session, const o2g_tensor_ref* inputs, size_t n_inputs,
                                   o2g_tensor** outputs, size_t n_outputs);
/* Specialization cache counters: runs, hits (signatures found cached) and misses. */
O2G_API o2g_status o2g_session_stats(const o2g_session* session, uint64_t* runs, uint64_t* hits, uint64_t* misses);

/* `onnx2ggml compile`: writes the standalone ggml program of the model at model_path into out_dir. Dynamic
 * dims are bound by shapes[0 .. n_shapes) (name, rank and shape of each; dtype and data unused); the
 * options' "weights", "weight_rule", "gguf", "max_memory", "optimize" and "disable_pass" apply (options
 * may be NULL). */
O2G_API o2g_status o2g_compile(const char* model_path, const char* out_dir, const o2g_tensor_ref* shapes,
                               size_t n_shapes, const o2g_options* options);

/* `onnx2ggml quantize`: the model's weights as the options' "weights"/"weight_rule" store them, into a GGUF
 * that the "gguf" option takes; shapes as for o2g_compile. */
O2G_API o2g_status o2g_quantize(const char* model_path, const char* out_gguf, const o2g_tensor_ref* shapes,
                                size_t n_shapes, const o2g_options* options);

/* numpy .npy files (every numeric dtype, bool, str), and an owned copy of a tensor in the caller's memory
 * (named by ref->name when given). Tensors made here are the caller's, to free with o2g_tensor_free. */
O2G_API o2g_status o2g_tensor_load_npy(const char* path, o2g_tensor** out);
O2G_API o2g_status o2g_tensor_save_npy(const char* path, const o2g_tensor* t);
O2G_API o2g_status o2g_tensor_copy(const o2g_tensor_ref* ref, o2g_tensor** out);

O2G_API const char* o2g_tensor_name(const o2g_tensor* t);
O2G_API int o2g_tensor_dtype(const o2g_tensor* t);
O2G_API size_t o2g_tensor_rank(const o2g_tensor* t);
O2G_API const int64_t* o2g_tensor_shape(const o2g_tensor* t);
O2G_API const void* o2g_tensor_data(const o2g_tensor* t); /* NULL for a string tensor: o2g_tensor_string */
O2G_API size_t o2g_tensor_nbytes(const o2g_tensor* t);
O2G_API const char* o2g_tensor_string(const o2g_tensor* t, size_t i); /* element i of a string tensor */
O2G_API void o2g_tensor_free(o2g_tensor* t);

#ifdef __cplusplus
}
#endif
#endif /* ONNX2GGML_H */
