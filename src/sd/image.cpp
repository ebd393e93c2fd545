#include "image.h"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>

namespace onnx2ggml::sd {

namespace {

// libpng reports errors by longjmp to png_jmpbuf (its C frames cannot pass a C++ exception). Every
// object the functions below change after setjmp lives behind a pointer made before it (so its value
// is in memory, not in a register that longjmp restores); the exception is thrown after the jump.
struct PngState {
    FILE* f = nullptr;
    std::string path, error;
    Image img;
    std::vector<png_bytep> rows;
    std::vector<png_text> chunks;
    std::vector<std::pair<std::string, std::string>> text;
    ~PngState() {
        if (f) fclose(f);
    }
};

void png_fail(png_structp png, png_const_charp msg) {
    static_cast<PngState*>(png_get_error_ptr(png))->error = msg;
    png_longjmp(png, 1);
}
void png_warn(png_structp, png_const_charp) {}

}  // namespace

void write_png(const std::string& path, const Image& img, const std::vector<std::pair<std::string, std::string>>& text) {
    auto st = std::make_unique<PngState>();
    st->path = path;
    st->f = fopen(path.c_str(), "wb");
    if (!st->f) throw std::runtime_error(path + ": cannot write");
    st->rows.resize(size_t(img.height));
    for (int y = 0; y < img.height; ++y)
        st->rows[size_t(y)] = const_cast<png_bytep>(img.rgb.data() + size_t(y) * size_t(img.width) * 3);
    st->chunks.resize(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        st->chunks[i] = png_text{};
        st->chunks[i].compression = PNG_TEXT_COMPRESSION_NONE;
        st->chunks[i].key = const_cast<char*>(text[i].first.c_str());
        st->chunks[i].text = const_cast<char*>(text[i].second.c_str());
        st->chunks[i].text_length = text[i].second.size();
    }
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, st.get(), png_fail, png_warn);
    png_infop info = png ? png_create_info_struct(png) : nullptr;
    if (!info) {
        png_destroy_write_struct(&png, nullptr);
        throw std::runtime_error(path + ": out of memory");
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        throw std::runtime_error(st->path + ": " + st->error);
    }
    png_init_io(png, st->f);
    png_set_IHDR(png, info, png_uint_32(img.width), png_uint_32(img.height), 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (!st->chunks.empty()) png_set_text(png, info, st->chunks.data(), int(st->chunks.size()));
    png_write_info(png, info);
    png_write_image(png, st->rows.data());
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    if (fflush(st->f) != 0) throw std::runtime_error(path + ": write failed");
}

static Image read_png_impl(const std::string& path, std::vector<std::pair<std::string, std::string>>* text) {
    auto st = std::make_unique<PngState>();
    st->path = path;
    st->f = fopen(path.c_str(), "rb");
    if (!st->f) throw std::runtime_error(path + ": cannot open");
    unsigned char sig[8];
    if (fread(sig, 1, 8, st->f) != 8 || png_sig_cmp(sig, 0, 8) != 0) throw std::runtime_error(path + ": not a PNG file");
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, st.get(), png_fail, png_warn);
    png_infop info = png ? png_create_info_struct(png) : nullptr;
    if (!info) {
        png_destroy_read_struct(&png, nullptr, nullptr);
        throw std::runtime_error(path + ": out of memory");
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, nullptr);
        throw std::runtime_error(st->path + ": " + st->error);
    }
    png_init_io(png, st->f);
    png_set_sig_bytes(png, 8);
    png_read_info(png, info);
    // whatever the PNG holds -> 8-bit RGB
    png_set_expand(png);
    png_set_strip_16(png);
    png_set_strip_alpha(png);
    png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    st->img.width = int(png_get_image_width(png, info));
    st->img.height = int(png_get_image_height(png, info));
    if (png_get_rowbytes(png, info) != size_t(st->img.width) * 3) png_error(png, "unexpected PNG layout");
    st->img.rgb.resize(size_t(st->img.width) * size_t(st->img.height) * 3);
    st->rows.resize(size_t(st->img.height));
    for (int y = 0; y < st->img.height; ++y) st->rows[size_t(y)] = st->img.rgb.data() + size_t(y) * size_t(st->img.width) * 3;
    png_read_image(png, st->rows.data());
    png_read_end(png, info);
    png_textp t = nullptr;
    int n = 0;
    png_get_text(png, info, &t, &n);
    for (int i = 0; i < n; ++i) st->text.emplace_back(t[i].key, std::string(t[i].text, t[i].text_length));
    png_destroy_read_struct(&png, &info, nullptr);
    if (text) *text = std::move(st->text);
    return std::move(st->img);
}

Image read_png(const std::string& path) { return read_png_impl(path, nullptr); }

std::vector<std::pair<std::string, std::string>> read_png_text(const std::string& path) {
    std::vector<std::pair<std::string, std::string>> text;
    read_png_impl(path, &text);
    return text;
}

Image image_from_planar(const float* chw, int width, int height) {
    Image img{width, height, std::vector<uint8_t>(size_t(width) * size_t(height) * 3)};
    const size_t plane = size_t(width) * size_t(height);
    for (size_t p = 0; p < plane; ++p)
        for (size_t c = 0; c < 3; ++c) {
            const float v = std::clamp(chw[c * plane + p] / 2.0f + 0.5f, 0.0f, 1.0f);
            img.rgb[p * 3 + c] = uint8_t(std::nearbyint(v * 255.0f));
        }
    return img;
}

std::vector<float> planar_from_image(const Image& img) {
    const size_t plane = size_t(img.width) * size_t(img.height);
    std::vector<float> out(plane * 3);
    for (size_t p = 0; p < plane; ++p)
        for (size_t c = 0; c < 3; ++c) out[c * plane + p] = img.rgb[p * 3 + c] / 255.0f * 2.0f - 1.0f;
    return out;
}

Image resize_bilinear(const Image& img, int width, int height) {
    if (img.width == width && img.height == height) return img;
    Image out{width, height, std::vector<uint8_t>(size_t(width) * size_t(height) * 3)};
    // half-pixel centers (align_corners false), as PIL and torch's bilinear without antialiasing
    for (int y = 0; y < height; ++y) {
        const double sy = std::clamp((y + 0.5) * img.height / height - 0.5, 0.0, img.height - 1.0);
        const int y0 = int(sy), y1 = std::min(y0 + 1, img.height - 1);
        const double fy = sy - y0;
        for (int x = 0; x < width; ++x) {
            const double sx = std::clamp((x + 0.5) * img.width / width - 0.5, 0.0, img.width - 1.0);
            const int x0 = int(sx), x1 = std::min(x0 + 1, img.width - 1);
            const double fx = sx - x0;
            for (int c = 0; c < 3; ++c) {
                auto at = [&](int yy, int xx) { return double(img.rgb[(size_t(yy) * size_t(img.width) + size_t(xx)) * 3 + size_t(c)]); };
                const double v = (1 - fy) * ((1 - fx) * at(y0, x0) + fx * at(y0, x1)) + fy * ((1 - fx) * at(y1, x0) + fx * at(y1, x1));
                out.rgb[(size_t(y) * size_t(width) + size_t(x)) * 3 + size_t(c)] = uint8_t(std::lround(v));
            }
        }
    }
    return out;
}

}  // namespace onnx2ggml::sd
