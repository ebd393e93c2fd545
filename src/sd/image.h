// 8-bit RGB images for onnx2ggml-sd: PNG in and out (libpng), the generation parameters in a tEXt
// chunk ("parameters", as other Stable Diffusion tools write them), and the conversions to and from
// the VAE's [-1, 1] planar float layout.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace onnx2ggml::sd {

struct Image {
    int width = 0, height = 0;
    std::vector<uint8_t> rgb;  // height rows of width pixels, 3 bytes each
};

// Throws std::runtime_error naming the file.
void write_png(const std::string& path, const Image& img, const std::vector<std::pair<std::string, std::string>>& text);
Image read_png(const std::string& path);  // any PNG libpng reads: converted to 8-bit RGB
std::vector<std::pair<std::string, std::string>> read_png_text(const std::string& path);

// NCHW floats of one image (3 x H x W) in [-1, 1] <-> pixels: round(clamp(x / 2 + 0.5, 0, 1) * 255)
Image image_from_planar(const float* chw, int width, int height);
std::vector<float> planar_from_image(const Image& img);
Image resize_bilinear(const Image& img, int width, int height);

}  // namespace onnx2ggml::sd
